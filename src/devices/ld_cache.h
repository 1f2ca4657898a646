// The host's /etc/ld.so.cache, parsed without the host's loader: the glibc
// "glibc-ld.so.cache1.1" format, alone or after the old "ld.so-1.7.0" table
// (older ldconfig wrote both; the old-only format is read too).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace berth {

struct LdCacheEntry {
  std::string name;   ///< the key: a soname such as "libcuda.so.1"
  std::string path;   ///< the absolute path ldconfig recorded (in the host's namespace)
  int32_t flags = 0;  ///< FLAG_ELF_LIBC6 (3) | arch bits (0x0300 = x86-64, 0 = i386, ...)
};

/// Cache flag bits as glibc's ldconfig writes them.
inline constexpr int32_t kLdCacheElfLibc6 = 0x0003;
inline constexpr int32_t kLdCacheX8664Lib64 = 0x0300;

/// Parses the bytes of an ld.so.cache; `what` names it in errors. Entries keep
/// the file's order. A file that is neither format is an error naming `what`.
Result<std::vector<LdCacheEntry>> parse_ld_cache(std::string_view data, const std::string& what);

}  // namespace berth

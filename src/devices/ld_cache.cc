#include "devices/ld_cache.h"

#include <cstring>

namespace berth {
namespace {

// Layouts, as glibc's ldconfig writes them (little-endian on the hosts Berth supports).
constexpr std::string_view kOldMagic = "ld.so-1.7.0";
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";
constexpr size_t kOldHeader = 16;  // magic[11], pad, uint32 nlibs
constexpr size_t kOldEntry = 12;   // int32 flags, uint32 key, uint32 value
constexpr size_t kNewHeader =
    48;                           // magic+version[20], nlibs, len_strings, flags[4], ext, unused[3]
constexpr size_t kNewEntry = 24;  // flags, key, value, osversion, uint64 hwcap

uint32_t u32(std::string_view d, size_t off) {
  uint32_t v;
  std::memcpy(&v, d.data() + off, 4);
  return v;
}

/// The NUL-terminated string at `off` within `strings`, or an empty view when out of range.
bool string_at(std::string_view strings, uint32_t off, std::string* out) {
  if (off >= strings.size()) return false;
  size_t end = strings.find('\0', off);
  if (end == std::string_view::npos) return false;
  out->assign(strings.substr(off, end - off));
  return true;
}

Result<std::vector<LdCacheEntry>> parse_entries(std::string_view d, size_t first, uint32_t n,
                                                size_t entry_size, std::string_view strings,
                                                const std::string& what) {
  std::vector<LdCacheEntry> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    size_t at = first + size_t{i} * entry_size;
    LdCacheEntry e;
    e.flags = static_cast<int32_t>(u32(d, at));
    if (!string_at(strings, u32(d, at + 4), &e.name) ||
        !string_at(strings, u32(d, at + 8), &e.path))
      return make_error("parse ld.so.cache", what,
                        "entry " + std::to_string(i) + " points outside the string table");
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<LdCacheEntry>> parse_new(std::string_view d, const std::string& what) {
  if (d.size() < kNewHeader) return make_error("parse ld.so.cache", what, "truncated header");
  uint32_t n = u32(d, 20);
  if ((d.size() - kNewHeader) / kNewEntry < n)
    return make_error("parse ld.so.cache", what, "entry table is larger than the file");
  // String offsets in the new format count from the start of its header.
  return parse_entries(d, kNewHeader, n, kNewEntry, d, what);
}

}  // namespace

Result<std::vector<LdCacheEntry>> parse_ld_cache(std::string_view d, const std::string& what) {
  if (d.substr(0, kNewMagic.size()) == kNewMagic) return parse_new(d, what);
  if (d.substr(0, kOldMagic.size()) != kOldMagic || d.size() < kOldHeader)
    return make_error("parse ld.so.cache", what, "not a glibc ld.so.cache");
  uint32_t n = u32(d, 12);
  if ((d.size() - kOldHeader) / kOldEntry < n)
    return make_error("parse ld.so.cache", what, "entry table is larger than the file");
  size_t end_old = kOldHeader + size_t{n} * kOldEntry;
  // A new-format table may follow, aligned to 8 bytes; it has the richer data.
  size_t new_at = (end_old + 7) & ~size_t{7};
  if (new_at < d.size() && d.substr(new_at, kNewMagic.size()) == kNewMagic)
    return parse_new(d.substr(new_at), what);
  // Old format alone: offsets count from the end of the entry table.
  return parse_entries(d, kOldHeader, n, kOldEntry, d.substr(end_old), what);
}

}  // namespace berth

// Shared by the libFuzzer targets: a private scratch folder per process and a way to hand an
// input to a parser that reads a file.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/fs.h"

namespace berth::fuzz {

/// A folder made once per fuzzing process and removed at exit: under $BERTH_FUZZ_TMPDIR, else
/// /dev/shm (a tmpfs: rewriting a file on ext4 waits for its writeback, 5 ms an input), else /tmp.
inline const std::string& scratch() {
  static const std::string dir = [] {
    const char* t = std::getenv("BERTH_FUZZ_TMPDIR");
    std::string base = t && *t ? t : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/berth-fuzz.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();  // nothing can run without it
    static std::string for_exit = tmpl;
    std::atexit([] { (void)remove_tree(for_exit); });  // best effort: litter at worst
    return tmpl;
  }();
  return dir;
}

/// Writes `data` to `path` (replacing it); aborts when it cannot, as no input is at fault then.
inline void put_file(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) std::abort();
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

/// The input as text.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace berth::fuzz

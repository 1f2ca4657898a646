// Writing a whole buffer to a file descriptor: write(2) again after a signal (EINTR) and after a
// short count, as pipes, sockets and a full disk give them. Header-only and allocation-free, so
// that a child between clone and exec, the static Slurm client (slurm/client_main.cc) and the
// SPANK plugin, which link none of Berth's libraries, use it too; core/fs.h write_all() is the
// same with a Berth error.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace berth {

/// Writes all `size` bytes of `data` to `fd`; false with errno set when a write fails (EIO when
/// one writes nothing).
inline bool write_fully(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace berth

#include "runtime/root_path.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace berth {

int open_in_root(int root_fd, const char* path, int flags, mode_t mode) {
  struct open_how how;
  std::memset(&how, 0, sizeof how);
  how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC);
  if (flags & O_CREAT) how.mode = mode;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  while (*path == '/') ++path;
  if (*path == '\0') path = ".";
  for (;;) {
    long fd = ::syscall(SYS_openat2, root_fd, path, &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EAGAIN && errno != EINTR) return -1;  // EAGAIN: a concurrent rename; retry
  }
}

int make_path_in_root(int root_fd, const char* path, bool last_is_file, mode_t dir_mode) {
  char buf[PATH_MAX];
  size_t len = std::strlen(path);
  if (len >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(buf, path, len + 1);
  // Walk the components: buf[0..end) is the prefix made so far.
  size_t pos = 0;
  while (pos < len) {
    while (pos < len && buf[pos] == '/') ++pos;
    if (pos >= len) break;
    size_t end = pos;
    while (end < len && buf[end] != '/') ++end;
    bool last = end >= len;
    // Split the prefix into parent dir (opened in the root) and this name.
    char saved = buf[pos - 1 + (pos == 0)];
    if (pos > 0) buf[pos - 1] = '\0';
    int parent = open_in_root(root_fd, pos > 0 ? buf : ".", O_PATH | O_DIRECTORY);
    if (pos > 0) buf[pos - 1] = saved;
    if (parent < 0) return -1;
    char name[NAME_MAX + 1];
    size_t n = end - pos;
    if (n > NAME_MAX) {
      ::close(parent);
      errno = ENAMETOOLONG;
      return -1;
    }
    std::memcpy(name, buf + pos, n);
    name[n] = '\0';
    int rc;
    if (last && last_is_file) {
      rc = ::mknodat(parent, name, S_IFREG | 0644, 0);
    } else {
      rc = ::mkdirat(parent, name, dir_mode);
    }
    int err = errno;
    ::close(parent);
    if (rc != 0 && err != EEXIST) {
      errno = err;
      return -1;
    }
    pos = end;
  }
  return 0;
}

}  // namespace berth

#include "core/root_path.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
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

namespace {

int make_path(int root_fd, const char* path, bool last_is_file, mode_t dir_mode, int depth);

/// Component `name` of `buf` (which ends at `end`) exists as a symlink whose
/// target is missing: re-walk with the link's text in its place, so that
/// the directories it names are made inside the root (as runc does).
/// Returns 1 when it was not such a link, else 0 or -1 from the re-walk.
int follow_dangling(int root_fd, int parent, const char* name, const char* buf, size_t pos,
                    size_t end, bool last_is_file, mode_t dir_mode, int depth) {
  struct stat st;
  if (::fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode)) return 1;
  char through[PATH_MAX];
  std::snprintf(through, sizeof through, "%.*s", static_cast<int>(end), buf);
  int fd = open_in_root(root_fd, through, O_PATH);
  if (fd >= 0) {
    ::close(fd);
    return 1;  // the link leads somewhere that exists: nothing to make here
  }
  if (errno != ENOENT) return -1;
  if (depth >= 40) {
    errno = ELOOP;
    return -1;
  }
  char link[PATH_MAX];
  ssize_t n = ::readlinkat(parent, name, link, sizeof link - 1);
  if (n < 0) return -1;
  link[n] = '\0';
  char next[PATH_MAX];
  int len;
  if (link[0] == '/')
    len = std::snprintf(next, sizeof next, "%s%s", link, buf + end);
  else
    len = std::snprintf(next, sizeof next, "%.*s%s%s", static_cast<int>(pos), buf, link, buf + end);
  if (len < 0 || static_cast<size_t>(len) >= sizeof next) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return make_path(root_fd, next, last_is_file, dir_mode, depth + 1);
}

int make_path(int root_fd, const char* path, bool last_is_file, mode_t dir_mode, int depth) {
  char buf[PATH_MAX];
  size_t len = std::strlen(path);
  if (len >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(buf, path, len + 1);
  // Walk the components: buf[0..pos) is the prefix made so far.
  size_t pos = 0;
  while (pos < len) {
    while (pos < len && buf[pos] == '/') ++pos;
    if (pos >= len) break;
    size_t end = pos;
    while (end < len && buf[end] != '/') ++end;
    bool last = end >= len;
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
    int rc = last && last_is_file ? ::mknodat(parent, name, S_IFREG | 0644, 0)
                                  : ::mkdirat(parent, name, dir_mode);
    int err = errno;
    if (rc != 0 && err == EEXIST) {
      int followed =
          follow_dangling(root_fd, parent, name, buf, pos, end, last_is_file, dir_mode, depth);
      if (followed != 1) {
        err = errno;
        ::close(parent);
        errno = err;
        return followed;
      }
    }
    ::close(parent);
    if (rc != 0 && err != EEXIST) {
      errno = err;
      return -1;
    }
    pos = end;
  }
  return 0;
}

/// The common case in one step: the parent of `path` exists and its last component does not
/// (a device node in a fresh /dev). Returns 0 when it made it, 1 when the walk must decide
/// (the parent is missing, the entry exists and may be a dangling link, any other error).
int make_last(int root_fd, const char* path, bool last_is_file, mode_t dir_mode) {
  size_t len = std::strlen(path);
  while (len > 0 && path[len - 1] == '/') --len;
  size_t slash = len;
  while (slash > 0 && path[slash - 1] != '/') --slash;
  size_t n = len - slash;
  if (n == 0 || n > NAME_MAX || slash >= PATH_MAX) return 1;
  char dir[PATH_MAX];
  std::memcpy(dir, path, slash);
  dir[slash] = '\0';
  char name[NAME_MAX + 1];
  std::memcpy(name, path + slash, n);
  name[n] = '\0';
  int parent = open_in_root(root_fd, dir, O_PATH | O_DIRECTORY);
  if (parent < 0) return 1;
  int rc =
      last_is_file ? ::mknodat(parent, name, S_IFREG | 0644, 0) : ::mkdirat(parent, name, dir_mode);
  ::close(parent);
  return rc == 0 ? 0 : 1;
}

}  // namespace

int make_path_in_root(int root_fd, const char* path, bool last_is_file, mode_t dir_mode) {
  // Three system calls instead of four per component of a walk from the root; this runs for
  // every entry of the minimal /dev on every container start.
  if (make_last(root_fd, path, last_is_file, dir_mode) == 0) return 0;
  return make_path(root_fd, path, last_is_file, dir_mode, 0);
}

Result<std::string> read_file_in_root(int root_fd, const char* path) {
  constexpr off_t kMaxSize = 16 << 20;
  // O_NONBLOCK: opening a FIFO without a writer would wait for one forever.
  int fd = open_in_root(root_fd, path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return sys_error("open", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return sys_error("stat", path, err);
  }
  if (!S_ISREG(st.st_mode) || st.st_size > kMaxSize) {
    ::close(fd);
    return make_error("read", path,
                      S_ISREG(st.st_mode) ? "file too large (" + std::to_string(st.st_size) +
                                                " bytes; at most 16 MiB)"
                                          : std::string("not a regular file"));
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || out.size() > (16u << 20)) {
      int err = errno;
      ::close(fd);
      if (n < 0) return sys_error("read", path, err);
      if (n > 0) return make_error("read", path, "file too large");
      return out;
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace berth

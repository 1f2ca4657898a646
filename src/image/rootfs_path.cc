#include "image/rootfs_path.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <vector>

#include "core/dir.h"
#include "core/fs.h"
#include "core/strings.h"

namespace berth {

EntryName normalize_entry_name(std::string_view raw, std::string& out) {
  out.clear();
  // "/" (umoci insert writes it), "//", "/." name the root itself, as "./" does: GNU tar, umoci
  // and Podman apply them as the root's metadata. Any other absolute name is refused.
  if (!raw.empty() && raw.front() == '/') {
    bool root_only = raw.find_first_not_of("/.") == std::string_view::npos &&
                     raw.find("..") == std::string_view::npos;
    return root_only ? EntryName::kRoot : EntryName::kEscapes;
  }
  for (std::string_view comp : split(raw, '/')) {
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") return EntryName::kEscapes;
    if (!out.empty()) out += '/';
    out += comp;
  }
  return out.empty() ? EntryName::kRoot : EntryName::kPath;
}

namespace {

// Set once when the kernel (or a seccomp filter) refuses openat2.
std::atomic<bool> g_no_openat2{false};

constexpr int kMaxSymlinks = 40;  // the kernel's own limit

/// Pushes the components of `path` onto `work` so that the first is at the back.
void push_components(std::string_view path, std::vector<std::string>& work) {
  size_t end = path.size();
  while (end > 0) {
    size_t slash = path.rfind('/', end - 1);
    size_t begin = slash == std::string_view::npos ? 0 : slash + 1;
    if (end > begin) work.emplace_back(path.substr(begin, end - begin));
    if (slash == std::string_view::npos) break;
    end = slash;
  }
}

}  // namespace

int open_beneath_walk(int root_fd, const std::string& path) {
  std::vector<UniqueFd> stack;  // directories below the root, innermost last
  std::vector<std::string> work;
  push_components(path, work);
  int links = 0;
  while (!work.empty()) {
    std::string comp = std::move(work.back());
    work.pop_back();
    if (comp == ".") continue;
    if (comp == "..") {
      if (stack.empty()) {
        errno = EXDEV;
        return -1;
      }
      stack.pop_back();
      continue;
    }
    int cur = stack.empty() ? root_fd : stack.back().get();
    int fd = ::openat(cur, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      stack.emplace_back(fd);
      continue;
    }
    if (errno != ENOTDIR && errno != ELOOP) return -1;
    struct stat st;
    if (::fstatat(cur, comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
    if (!S_ISLNK(st.st_mode)) {
      errno = ENOTDIR;
      return -1;
    }
    if (++links > kMaxSymlinks) {
      errno = ELOOP;
      return -1;
    }
    char buf[4096];
    ssize_t n = ::readlinkat(cur, comp.c_str(), buf, sizeof buf);
    if (n < 0) return -1;
    if (n == static_cast<ssize_t>(sizeof buf)) {
      errno = ENAMETOOLONG;
      return -1;
    }
    std::string_view target(buf, static_cast<size_t>(n));
    if (target.empty() || target.front() == '/') {
      errno = EXDEV;  // absolute targets leave the root, as RESOLVE_BENEATH says
      return -1;
    }
    push_components(target, work);
  }
  if (!stack.empty()) return stack.back().release();
  return ::openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

int open_beneath(int root_fd, const std::string& path) {
  if (!g_no_openat2.load(std::memory_order_relaxed)) {
    struct open_how how = {};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    const char* p = path.empty() ? "." : path.c_str();
    for (;;) {
      long fd = ::syscall(SYS_openat2, root_fd, p, &how, sizeof how);
      if (fd >= 0) return static_cast<int>(fd);
      if (errno == EAGAIN || errno == EINTR) continue;  // a concurrent rename; retry
      if (errno != ENOSYS && errno != EPERM) return -1;
      g_no_openat2.store(true, std::memory_order_relaxed);  // old kernel or seccomp
      break;
    }
  }
  return open_beneath_walk(root_fd, path);
}

int remove_at(int dirfd, const char* name) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return 0;
  if (errno != EISDIR) return errno;
  UniqueFd dir(::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.valid()) return errno;
  std::vector<DirEntry> children;
  if (int err = list_dir_at(dir.get(), children)) return err;
  for (const DirEntry& child : children) {
    if (int err = remove_at(dir.get(), child.name.c_str())) return err;
  }
  if (::unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) return errno;
  return 0;
}

int clear_dir_except(int dirfd, const std::string& dir_path,
                     const std::unordered_set<std::string>& keep) {
  std::vector<DirEntry> children;
  if (int err = list_dir_at(dirfd, children)) return err;
  std::string child_path;
  for (const auto& [child, type] : children) {
    child_path = dir_path;  // one buffer for every child
    if (!child_path.empty()) child_path += '/';
    child_path += child;
    if (!keep.contains(child_path)) {
      if (int err = remove_at(dirfd, child.c_str())) return err;
      continue;
    }
    bool is_dir = type == DT_DIR;
    if (type == DT_UNKNOWN) {
      struct stat st;
      if (::fstatat(dirfd, child.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
      is_dir = S_ISDIR(st.st_mode);
    }
    if (!is_dir) continue;
    UniqueFd sub(::openat(dirfd, child.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub.valid()) return errno;
    if (int err = clear_dir_except(sub.get(), child_path, keep)) return err;
  }
  return 0;
}

}  // namespace berth

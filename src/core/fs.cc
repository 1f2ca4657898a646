#include "core/fs.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/sendfile.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "core/dir.h"
#include "core/write_fully.h"

namespace berth {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

UniqueFd::~UniqueFd() {
  reset();
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close errors on read-only or already-synced fds carry nothing
  fd_ = fd;
}

Result<UniqueFd> open_file(const std::string& path, int flags, int mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return sys_error("open", path);
  return UniqueFd(fd);
}

Result<std::string> read_file(const std::string& path) {
  UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
  return read_fd(fd.get(), path);
}

Result<std::string> read_fd(int fd, const std::string& what) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read", what);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status write_all(int fd, std::string_view data, const std::string& what) {
  if (!write_fully(fd, data.data(), data.size())) return sys_error("write", what);
  return {};
}

Status write_file_atomic(const std::string& path, std::string_view data, int mode,
                         Durability durability) {
  static std::atomic<unsigned> counter{0};
  std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  {
    UniqueFd fd = BERTH_TRY(open_file(tmp, O_WRONLY | O_CREAT | O_EXCL, mode));
    Status st = write_all(fd.get(), data, tmp);
    if (st.ok() && durability == Durability::kSynced && ::fsync(fd.get()) != 0)
      st = sys_error("fsync", tmp);
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return st;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = sys_error("rename", tmp + " -> " + path);
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

Status make_dirs(const std::string& path, int mode) {
  if (path.empty()) return {};
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return sys_error("mkdir", path, ENOTDIR);
  }
  auto slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) BERTH_CHECK(make_dirs(path.substr(0, slash), mode));
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return sys_error("mkdir", path);
  return {};
}

Status make_own_dir(const std::string& dir, Op op, std::string_view what) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return sys_error("mkdir", dir);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return sys_error("stat", dir);
  if (!S_ISDIR(st.st_mode))
    return make_error(op, dir, fmt::format("the {} is a file or a symlink, not a folder", what),
                      ErrorCode::kPermission);
  if (st.st_uid != ::getuid())
    return make_error(op, dir, fmt::format("the {} belongs to another user", what),
                      ErrorCode::kPermission);
  return {};
}

Status remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return sys_error("remove", path, ec.value());
  return {};
}

int open_readable_at(int dirfd, const char* name, const struct stat& st) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 || errno != EACCES || st.st_uid != ::geteuid()) return fd;
  if (::fchmodat(dirfd, name, (st.st_mode & 07777) | S_IRUSR, 0) != 0) return -1;
  fd = ::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  int err = errno;
  (void)::fchmodat(dirfd, name, st.st_mode & 07777, 0);  // best effort: the copy is what matters
  errno = err;
  return fd;
}

namespace {

/// What a copy needs across the whole tree: the first copy of each multi-link file.
struct TreeCopy {
  std::map<std::pair<dev_t, ino_t>, std::string> links;  // -> the copy's path
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
};

/// Gives the copy of `name` in `dfd` the owner of the original when that is another ID: a
/// copy made as root (or as root of a user namespace with subordinate IDs mapped) keeps them.
/// Before the mode is set (a chown clears set-ID bits). Best effort: rootless with one ID, the
/// copy is the user's, as every file of the tree was.
void keep_owner(const TreeCopy& tc, int dfd, const char* name, const struct stat& st) {
  if (st.st_uid != tc.uid || st.st_gid != tc.gid)
    (void)::fchownat(dfd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
}

/// `size` bytes from `in` to `out` (both at their starts), in the kernel where it can.
Status copy_bytes(int in, int out, off_t size, const std::string& path) {
  for (off_t left = size; left > 0;) {
    ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, static_cast<size_t>(left), 0);
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL))
      n = ::sendfile(out, in, nullptr, static_cast<size_t>(left));
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("copy", path);
    }
    if (n == 0) break;  // the file shrank meanwhile
    left -= n;
  }
  return {};
}

Status copy_file_at(const TreeCopy& tc, int sfd, int dfd, const char* name, const struct stat& st,
                    const std::string& path) {
  UniqueFd in(open_readable_at(sfd, name, st));
  if (!in.valid()) return sys_error("open", path);
  UniqueFd out(::openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out.valid()) return sys_error("create", path);
  BERTH_CHECK(copy_bytes(in.get(), out.get(), st.st_size, path));
  keep_owner(tc, dfd, name, st);
  if (::fchmod(out.get(), st.st_mode & 07777) != 0) return sys_error("chmod", path);
  struct timespec ts[2] = {st.st_atim, st.st_mtim};
  (void)::futimens(out.get(), ts);  // times are cosmetic
  return {};
}

/// Copies directory `sfd` (at `path`) into `dfd` (at `dpath`, a directory this copy made).
Status copy_dir(TreeCopy& tc, int sfd, int dfd, const std::string& path, const std::string& dpath) {
  std::vector<DirEntry> entries;
  if (int err = list_dir_at(sfd, entries)) return sys_error("opendir", path, err);
  for (const DirEntry& e : entries) {
    const std::string& n = e.name;
    std::string p = path_join(path, n);
    struct stat st;
    if (::fstatat(sfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return sys_error("stat", p);
    if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(dfd, n.c_str(), 0700) != 0) return sys_error("mkdir", p);
      UniqueFd s(::openat(sfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      UniqueFd t(::openat(dfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!s.valid() || !t.valid()) return sys_error("open", p);
      BERTH_CHECK(copy_dir(tc, s.get(), t.get(), p, path_join(dpath, n)));
      keep_owner(tc, dfd, n.c_str(), st);
      if (::fchmod(t.get(), st.st_mode & 07777) != 0) return sys_error("chmod", p);
      struct timespec ts[2] = {st.st_atim, st.st_mtim};
      (void)::futimens(t.get(), ts);  // times are cosmetic
    } else if (S_ISLNK(st.st_mode)) {
      std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
      ssize_t len = ::readlinkat(sfd, n.c_str(), target.data(), target.size());
      if (len < 0) return sys_error("readlink", p);
      target.resize(static_cast<size_t>(len));
      if (::symlinkat(target.c_str(), dfd, n.c_str()) != 0) return sys_error("symlink", p);
      keep_owner(tc, dfd, n.c_str(), st);
      struct timespec ts[2] = {st.st_atim, st.st_mtim};
      (void)::utimensat(dfd, n.c_str(), ts, AT_SYMLINK_NOFOLLOW);  // cosmetic
    } else if (S_ISREG(st.st_mode)) {
      if (st.st_nlink > 1) {
        auto key = std::make_pair(st.st_dev, st.st_ino);
        if (auto it = tc.links.find(key); it != tc.links.end()) {
          // Every directory on the copy's path was made by this copy: no symlink on the way.
          if (::linkat(AT_FDCWD, it->second.c_str(), dfd, n.c_str(), 0) != 0)
            return sys_error("link", p);
          continue;
        }
        tc.links[key] = path_join(dpath, n);
      }
      BERTH_CHECK(copy_file_at(tc, sfd, dfd, n.c_str(), st, p));
    } else if (S_ISFIFO(st.st_mode)) {
      if (::mknodat(dfd, n.c_str(), S_IFIFO | (st.st_mode & 07777), 0) != 0)
        return sys_error("mkfifo", p);
      keep_owner(tc, dfd, n.c_str(), st);
    }
    // Device nodes and sockets: a rootless tree holds none worth copying.
  }
  return {};
}

}  // namespace

Status copy_entry_at(int sfd, const char* name, int dfd, const char* dname, const std::string& from,
                     const std::string& to) {
  struct stat st;
  if (::fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return sys_error("stat", from);
  TreeCopy tc;
  if (S_ISDIR(st.st_mode)) {
    if (::mkdirat(dfd, dname, 0700) != 0) return sys_error("mkdir", to);
    UniqueFd s(::openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    UniqueFd t(::openat(dfd, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!s.valid()) return sys_error("open", from);
    if (!t.valid()) return sys_error("open", to);
    // Hard links inside the copy are made through the new folder's descriptor: its path may
    // lie where a symlink of another tree could redirect a path name.
    BERTH_CHECK(copy_dir(tc, s.get(), t.get(), from, "/proc/self/fd/" + std::to_string(t.get())));
    if (::fchmod(t.get(), st.st_mode & 07777) != 0) return sys_error("chmod", to);
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    (void)::futimens(t.get(), ts);  // times are cosmetic
    return {};
  }
  if (S_ISLNK(st.st_mode)) {
    std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
    ssize_t len = ::readlinkat(sfd, name, target.data(), target.size());
    if (len < 0) return sys_error("readlink", from);
    target.resize(static_cast<size_t>(len));
    if (::symlinkat(target.c_str(), dfd, dname) != 0) return sys_error("symlink", to);
    return {};
  }
  if (!S_ISREG(st.st_mode))
    return make_error("copy", from, "not a regular file, folder or symbolic link");
  UniqueFd in(open_readable_at(sfd, name, st));
  if (!in.valid()) return sys_error("open", from);
  UniqueFd out(::openat(dfd, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out.valid()) return sys_error("create", to);
  BERTH_CHECK(copy_bytes(in.get(), out.get(), st.st_size, from));
  if (::fchmod(out.get(), st.st_mode & 07777) != 0) return sys_error("chmod", to);
  struct timespec ts[2] = {st.st_atim, st.st_mtim};
  (void)::futimens(out.get(), ts);
  return {};
}

Status copy_tree(const std::string& from, const std::string& to) {
  UniqueFd src = BERTH_TRY(open_file(from, O_RDONLY | O_DIRECTORY));
  struct stat st;
  if (::fstat(src.get(), &st) != 0) return sys_error("stat", from);
  if (::mkdir(to.c_str(), 0700) != 0) return sys_error("mkdir", to);
  TreeCopy tc;
  Status s = [&]() -> Status {
    UniqueFd dst = BERTH_TRY(open_file(to, O_RDONLY | O_DIRECTORY));
    BERTH_CHECK(copy_dir(tc, src.get(), dst.get(), from, to));
    if (::fchmod(dst.get(), st.st_mode & 07777) != 0) return sys_error("chmod", to);
    return {};
  }();
  if (!s.ok()) (void)remove_tree(to);  // best effort: the copy's own error is the one to report
  return s;
}

namespace {
using InodeSet = std::set<std::pair<dev_t, ino_t>>;

/// The files of folder `dirfd` (its entries' sizes, sub-folders recursively).
int64_t dir_size(int dirfd, InodeSet& seen) {
  std::vector<DirEntry> entries;
  if (list_dir_at(dirfd, entries) != 0) return 0;  // best effort: unreadable counts as empty
  int64_t total = 0;
  for (const DirEntry& e : entries) {
    struct stat st;
    if (::fstatat(dirfd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      if (st.st_nlink > 1 && !seen.insert({st.st_dev, st.st_ino}).second) continue;
      total += st.st_size;
    } else if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(
          ::openat(dirfd, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub.valid()) total += dir_size(sub.get(), seen);
    }
  }
  return total;
}
}  // namespace

int64_t tree_size(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return 0;
  if (S_ISREG(st.st_mode)) return st.st_size;
  if (!S_ISDIR(st.st_mode)) return 0;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return 0;
  InodeSet seen;
  return dir_size(fd.get(), seen);
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string path_join(std::string_view a, std::string_view b) {
  std::string out(a);
  while (!out.empty() && out.back() == '/') out.pop_back();
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  out += '/';
  out += b;
  return out;
}

namespace {
/// Opens `path` into `out` and flocks it; with wait=false a busy lock leaves `out` empty.
///
/// A lock file may be unlinked by whoever holds it (a published blob's, an abandoned staging
/// folder's, `berth gc`): once the lock is ours, the path must still name the file we locked,
/// else the lock guards nothing (a newcomer creates and locks a fresh file) and we start over.
/// This is what makes unlinking a lock file under its lock safe.
Status lock_impl(const std::string& path, FileLock::Mode mode, bool wait, UniqueFd& out) {
  int op = (mode == FileLock::Mode::kShared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB);
  for (;;) {
    out = BERTH_TRY(open_file(path, O_RDWR | O_CREAT, 0644));
    bool locked = false;
    while (!locked) {
      if (::flock(out.get(), op) == 0) {
        locked = true;
      } else if (errno != EINTR) {
        if (!wait && errno == EWOULDBLOCK) {
          out.reset();
          return {};
        }
        return sys_error("flock", path);
      }
    }
    struct stat held, now;
    if (::fstat(out.get(), &held) != 0) return sys_error("stat", path);
    if (::stat(path.c_str(), &now) == 0 && now.st_dev == held.st_dev && now.st_ino == held.st_ino)
      return {};
    // Unlinked (or replaced) while we waited: lock the file the path names now.
  }
}
}  // namespace

Result<FileLock> FileLock::acquire(const std::string& path, Mode mode) {
  FileLock l;
  BERTH_CHECK(lock_impl(path, mode, true, l.fd_));
  return l;
}

Result<FileLock> FileLock::try_acquire(const std::string& path, Mode mode) {
  FileLock l;
  BERTH_CHECK(lock_impl(path, mode, false, l.fd_));
  return l;
}

}  // namespace berth

// Applying a MountPlan inside the child: no allocation, no exceptions.
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/root_path.h"
#include "core/strings.h"
#include "core/write_fully.h"
#include "runtime/child.h"

namespace berth {

ChildStep step_failed(ChildFailure& f, int exit_code, int err, Op op, const char* subject,
                      const char* detail) {
  f.exit_code = exit_code;
  f.err = err;
  f.op = op;
  std::snprintf(f.subject, sizeof f.subject, "%s", subject);
  std::snprintf(f.detail, sizeof f.detail, "%s", detail);
  return ChildStep(false);
}

int remount_read_only(const char* path) {
  return remount_with(path, MS_RDONLY);
}

int remount_with(const char* path, unsigned long add) {
  struct statvfs sv;
  if (::statvfs(path, &sv) != 0) return -1;
  // Flags locked by the user namespace must be repeated or the remount fails.
  unsigned long flags = MS_BIND | MS_REMOUNT | add;
  if (sv.f_flag & ST_RDONLY) flags |= MS_RDONLY;
  if (sv.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return ::mount(nullptr, path, nullptr, flags, nullptr);
}

namespace {

/// "/proc/self/fd/N" for an fd, so mount(2) acts on exactly what was resolved.
void fd_path(char (&buf)[64], int fd) {
  std::snprintf(buf, sizeof buf, "/proc/self/fd/%d", fd);
}

/// Where mount(2) is to act on the file `fd` names, exactly as it was resolved: "." once the
/// directory is the working directory, or its /proc/self/fd path (a file, or a kernel that
/// refuses the fchdir). "." is looked up with no walk at all; the /proc path walks proc's
/// directories and then the magic link, about 3.5 us of every mount on the development VM. Only
/// the file targets in the image's own tree (resolv.conf, hosts, file volumes) keep the /proc
/// path.
const char* mount_point(int fd, char (&buf)[64]) {
  if (::fchdir(fd) == 0) return ".";
  fd_path(buf, fd);
  return buf;
}

/// Splits absolute `path` into its parent (in `dir`) and last component (returned).
const char* split_parent(const char* path, char (&dir)[PATH_MAX]) {
  std::snprintf(dir, sizeof dir, "%s", path);
  char* slash = std::strrchr(dir, '/');
  if (slash == nullptr) {
    dir[0] = '/';
    dir[1] = '\0';
    return path;
  }
  const char* name = path + (slash - dir) + 1;
  if (slash == dir)
    slash[1] = '\0';
  else
    *slash = '\0';
  return name;
}

/// Creates a symlink entry; -1 with errno on failure. An existing entry is kept.
int make_symlink(int root_fd, const MountEntry& e) {
  char dir[PATH_MAX];
  const char* name = split_parent(e.target.c_str(), dir);
  int dfd = open_in_root(root_fd, dir, O_PATH | O_DIRECTORY);
  if (dfd < 0 && errno == ENOENT) {  // made only when missing: /dev's links need no walk
    if (make_path_in_root(root_fd, dir, false) != 0) return -1;
    dfd = open_in_root(root_fd, dir, O_PATH | O_DIRECTORY);
  }
  if (dfd < 0) return -1;
  int rc = ::symlinkat(e.source.c_str(), dfd, name);
  int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EEXIST) {
    errno = err;
    return -1;
  }
  return 0;
}

/// Creates a new file holding e.data; -1 with errno on failure.
int write_new_file(int root_fd, const MountEntry& e) {
  if (make_path_in_root(root_fd, e.target.c_str(), true) != 0) return -1;
  int fd = open_in_root(root_fd, e.target.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW);
  if (fd < 0) return -1;
  if (!write_fully(fd, e.data.data(), e.data.size())) {
    int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return ::close(fd);
}

/// A file system this plan mounted a moment ago (the /dev and /tmp tmpfs, devpts): empty but
/// for what the plan itself put there, and out of the image's reach. Entries directly inside it
/// skip the path walks beneath the root: the name is made with one call on the directory's fd
/// and mounted on through it. Without that, /dev's dozen entries cost about forty openat2
/// calls of every start (three per device node).
struct FreshDir {
  const char* target = nullptr;  ///< the mount point, as in the plan
  size_t len = 0;
  int fd = -1;  ///< the new file system's root
};

/// Fresh directories, and their retirement once a later mount covers one.
class FreshDirs {
 public:
  ~FreshDirs() {
    for (FreshDir& d : dirs_)
      if (d.fd >= 0) ::close(d.fd);
  }
  FreshDirs() = default;
  FreshDirs(const FreshDirs&) = delete;
  FreshDirs& operator=(const FreshDirs&) = delete;

  /// The fresh directory that `target` is directly inside, and its last component in `name`.
  const FreshDir* parent_of(const std::string& target, const char** name) const {
    for (const FreshDir& d : dirs_) {
      if (d.fd < 0 || !is_under(target, std::string_view(d.target, d.len))) continue;
      if (target.find('/', d.len + 1) != std::string::npos) continue;
      *name = target.c_str() + d.len + 1;
      return &d;
    }
    return nullptr;
  }
  /// A mount on `target` hides whatever fresh directory it is on or above.
  void covered(const std::string& target) {
    for (FreshDir& d : dirs_) {
      if (d.fd < 0) continue;
      if (target == "/" || is_at_or_under(std::string_view(d.target, d.len), target)) {
        ::close(d.fd);
        d.fd = -1;
      }
    }
  }
  /// Remembers `target`, just mounted; best effort (the slow path works without it).
  void add(int root_fd, const MountEntry& e) {
    for (FreshDir& d : dirs_) {
      if (d.fd >= 0) continue;
      d.fd = open_in_root(root_fd, e.target.c_str(), O_PATH | O_DIRECTORY);
      d.target = e.target.c_str();
      d.len = e.target.size();
      return;
    }
  }

 private:
  FreshDir dirs_[4];
};

/// A mount of `e` that failed with `err`: "mount SOURCE on TARGET".
ChildStep mount_failed(ChildFailure& f, int err, const MountEntry& e) {
  const char* what = e.kind == MountKind::kFs ? e.fstype.c_str() : e.source.c_str();
  char subject[sizeof f.subject];
  std::snprintf(subject, sizeof subject, "%s on %s", what, e.target.c_str());
  return step_failed(f, 125, err, "mount", subject);
}

/// The fast path for an entry directly inside a fresh directory: -1 with errno on failure.
int mount_in_fresh(const FreshDir& dir, const char* name, const MountEntry& e) {
  if (e.kind == MountKind::kSymlink) {
    int rc = ::symlinkat(e.source.c_str(), dir.fd, name);
    return rc != 0 && errno == EEXIST ? 0 : rc;
  }
  int rc = e.target_kind == TargetKind::kFile ? ::mknodat(dir.fd, name, S_IFREG | 0644, 0)
                                              : ::mkdirat(dir.fd, name, 0755);
  if (rc != 0 && errno != EEXIST) return -1;
  // The name was made a moment ago in a file system only this process has seen: looked up
  // from its directory, it is exactly what mknodat made.
  char dir_buf[64];
  char path[PATH_MAX];
  std::snprintf(path, sizeof path, "%s/%s", mount_point(dir.fd, dir_buf), name);
  if (e.kind == MountKind::kFs)
    return ::mount(e.source.c_str(), path, e.fstype.c_str(), e.flags,
                   e.data.empty() ? nullptr : e.data.c_str());
  unsigned long flags = MS_BIND | (e.kind == MountKind::kRbind ? MS_REC : 0);
  return ::mount(e.source.c_str(), path, nullptr, flags, nullptr);
}

/// Applies one entry; failed with `f` filled on failure.
ChildStep apply_entry(int root_fd, const MountEntry& e, FreshDirs& fresh, ChildFailure& f) {
  const char* target = e.target.c_str();
  if (e.kind != MountKind::kSymlink && e.kind != MountKind::kWriteFile) fresh.covered(e.target);
  const char* fresh_name = nullptr;
  bool bind = e.kind == MountKind::kBind || e.kind == MountKind::kRbind;
  // Flags and propagation set after a bind (-v ...:nosuid,rslave), on the bound mount.
  unsigned long bind_flags = bind ? e.flags & (MS_NOSUID | MS_NODEV | MS_NOEXEC) : 0;
  bool after = e.read_only || bind_flags != 0 || (bind && e.propagation != 0);
  const FreshDir* fresh_dir = after || e.source_in_root || e.kind == MountKind::kWriteFile
                                  ? nullptr
                                  : fresh.parent_of(e.target, &fresh_name);
  if (fresh_dir != nullptr) {
    if (mount_in_fresh(*fresh_dir, fresh_name, e) == 0) {
      if (is_tmpfs_mount(e)) fresh.add(root_fd, e);
      return ChildStep::done();
    }
    if (e.kind == MountKind::kSymlink) return step_failed(f, 125, errno, "symlink", target);
    return mount_failed(f, errno, e);
  }
  if (e.kind == MountKind::kSymlink) {
    if (make_symlink(root_fd, e) == 0) return ChildStep::done();
    return step_failed(f, 125, errno, "symlink", target);
  }
  if (e.kind == MountKind::kWriteFile) {
    if (write_new_file(root_fd, e) == 0) return ChildStep::done();
    return step_failed(f, 125, errno, "write", target);
  }
  // A source inside the container is resolved beneath its root, never through the host's.
  int src_fd = -1;
  char src_path[64];
  const char* source = e.source.c_str();
  if (e.source_in_root) {
    src_fd = open_in_root(root_fd, source, O_PATH);
    if (src_fd < 0) return step_failed(f, 125, errno, "open bind source", source);
    fd_path(src_path, src_fd);
    source = src_path;
  }
  struct SourceCloser {
    int fd;
    ~SourceCloser() {
      if (fd >= 0) ::close(fd);
    }
  } closer{src_fd};
  int fd = open_in_root(root_fd, target, O_PATH);
  if (fd < 0 && errno == ENOENT) {
    if (make_path_in_root(root_fd, target, e.target_kind == TargetKind::kFile) != 0)
      return step_failed(f, 125, errno, "create mount target", target);
    fd = open_in_root(root_fd, target, O_PATH);
  }
  if (fd < 0) return step_failed(f, 125, errno, "open mount target", target);
  char path_buf[64];
  const char* path = mount_point(fd, path_buf);
  int rc;
  if (e.kind == MountKind::kFs) {
    rc = ::mount(e.source.c_str(), path, e.fstype.c_str(), e.flags,
                 e.data.empty() ? nullptr : e.data.c_str());
  } else {
    unsigned long flags = MS_BIND | (e.kind == MountKind::kRbind ? MS_REC : 0);
    rc = ::mount(source, path, nullptr, flags, nullptr);
  }
  int err = errno;
  ::close(fd);
  if (rc != 0) return mount_failed(f, err, e);
  if (is_tmpfs_mount(e) && !e.read_only) fresh.add(root_fd, e);
  if (!after) return ChildStep::done();
  // Reopen: the fd from before the mount names the directory under it.
  fd = open_in_root(root_fd, target, O_PATH);
  if (fd < 0) return step_failed(f, 125, errno, "open mount", target);
  path = mount_point(fd, path_buf);
  if (bind && e.propagation != 0 && ::mount(nullptr, path, nullptr, e.propagation, nullptr) != 0) {
    err = errno;
    ::close(fd);
    return step_failed(f, 125, err, "mount", target, "cannot set the mount's propagation");
  }
  if (!e.read_only && bind_flags == 0) {
    ::close(fd);
    return ChildStep::done();
  }
  // mount_setattr (Linux 5.12) makes the mount read-only in one call, with its submounts for
  // an rbind; without it, a remount does the top, which needs the locked flags read first.
  struct mount_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.attr_set = (e.read_only ? MOUNT_ATTR_RDONLY : 0) |
                  (bind_flags & MS_NOSUID ? MOUNT_ATTR_NOSUID : 0) |
                  (bind_flags & MS_NODEV ? MOUNT_ATTR_NODEV : 0) |
                  (bind_flags & MS_NOEXEC ? MOUNT_ATTR_NOEXEC : 0);
  unsigned int at = AT_EMPTY_PATH | (e.kind == MountKind::kRbind ? AT_RECURSIVE : 0);
  rc = static_cast<int>(::syscall(SYS_mount_setattr, fd, "", at, &attr, sizeof attr));
  err = errno;
  if (rc != 0 && err == ENOSYS) {
    rc = remount_with(path, (e.read_only ? MS_RDONLY : 0) | bind_flags);
    err = errno;
  }
  if (rc != 0) {
    // Never leave a mount meant to be read-only writable, even an optional one.
    (void)::umount2(path, MNT_DETACH);  // best effort: the failure is reported below
  }
  ::close(fd);
  if (rc != 0 && e.read_only) return step_failed(f, 125, err, "remount read-only", target);
  if (rc != 0) return step_failed(f, 125, err, "mount", target, "cannot set the mount's flags");
  return ChildStep::done();
}

}  // namespace

ChildStep apply_mount_plan(const MountPlan& plan, int root_fd, ChildFailure& f) {
  FreshDirs fresh;
  for (const MountEntry& e : plan.entries) {
    ChildStep applied = apply_entry(root_fd, e, fresh, f);
    if (applied) continue;
    if (e.required) return applied;
    // Optional entry (a device node, /sys, resolv.conf): the container goes without it.
  }
  // The entries moved the working directory onto their mount points: back to the root.
  if (::fchdir(root_fd) != 0) return step_failed(f, 125, errno, "chdir", "the container's root");
  return ChildStep::done();
}

}  // namespace berth

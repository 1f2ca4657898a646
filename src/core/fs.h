// File-system helpers: an owning fd, whole-file reads, atomic writes,
// directory creation and advisory locks. Paths inside a container root are
// resolved against the root's fd elsewhere (core/root_path.h, image/rootfs_path.h); these
// helpers are for Berth's own files.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace berth {

/// An owning file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// Opens a file with open(2); O_CLOEXEC is always added.
Result<UniqueFd> open_file(const std::string& path, int flags, int mode = 0644);
/// Reads a whole file into a string.
Result<std::string> read_file(const std::string& path);
/// Reads `fd` from where it stands to its end; `what` names it in errors.
Result<std::string> read_fd(int fd, const std::string& what);
/// Writes all bytes to fd, retrying on short writes and EINTR (core/write_fully.h).
Status write_all(int fd, std::string_view data, const std::string& what);
/// How much a write must survive.
enum class Durability {
  kSynced,       ///< fsync before the rename: survives a crash of the machine
  kProcessSafe,  ///< no fsync: readers see the old or the new file whole, never a mix
};
/// Writes a file atomically: a temporary beside it, fsync (unless kProcessSafe), rename over.
Status write_file_atomic(const std::string& path, std::string_view data, int mode = 0644,
                         Durability durability = Durability::kSynced);
/// Creates a directory and its parents (like mkdir -p).
Status make_dirs(const std::string& path, int mode = 0755);
/// Makes `dir` (its parent must exist) a 0700 folder of this user's for run-time state, or
/// checks the one there: a symlink, a non-directory or another user's folder is refused
/// (`op` names the operation, `what` the folder, in that one-line error).
Status make_own_dir(const std::string& dir, Op op, std::string_view what);
/// Removes a file or directory tree; a missing path is not an error.
Status remove_tree(const std::string& path);
/// Opens `name` in `dirfd` for reading without following a symlink. A file of ours whose
/// mode denies reading (CentOS's 0000 /etc/shadow, unpacked rootless) is made readable for
/// the open and its mode put back. Returns -1 with errno on failure.
int open_readable_at(int dirfd, const char* name, const struct stat& st);
/// Copies the directory tree `from` to `to` (which must not exist), as `cp -a` would for
/// its own files: regular files (hard links kept), directories, symlinks (never followed),
/// FIFOs, with modes and times; owners are not changed. Device nodes and sockets are left
/// out. On failure the partial copy is removed.
Status copy_tree(const std::string& from, const std::string& to);
/// Copies entry `name` of the folder open at `sfd` (a file, a folder and everything in it, or
/// a symlink, never followed) to `dname` in the folder open at `dfd`, which must not exist:
/// modes and times kept, owners not (the copy is the caller's). `from`/`to` name the two in
/// errors. A partial copy is left for the caller to remove.
Status copy_entry_at(int sfd, const char* name, int dfd, const char* dname, const std::string& from,
                     const std::string& to);
/// The bytes the regular files at or under `path` hold (st_size, the apparent size, as
/// `du -b` counts file contents), each hard-linked file once; symlinks are not followed.
/// Best effort: a missing path, or a folder that cannot be read, counts as what it shows.
int64_t tree_size(const std::string& path);
/// True when the path exists (lstat succeeds).
bool path_exists(const std::string& path);
/// Joins two path pieces with exactly one slash between them.
std::string path_join(std::string_view a, std::string_view b);

/// An exclusive or shared flock(2) on a lock file, released on destruction
/// or when the process dies (which is what lets a killed pull be retried).
class FileLock {
 public:
  enum class Mode { kShared, kExclusive };
  /// Blocks until the lock on `path` (created if missing) is held.
  static Result<FileLock> acquire(const std::string& path, Mode mode = Mode::kExclusive);
  /// Takes the lock only if it is free now; held() is false when it was busy.
  static Result<FileLock> try_acquire(const std::string& path, Mode mode = Mode::kExclusive);
  bool held() const { return fd_.valid(); }
  /// The locked file's descriptor (-1 when not held).
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
};

}  // namespace berth

#include "image/unpack.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "core/fs.h"
#include "core/sha256.h"
#include "image/archive_api.h"
#include "image/layer_stream.h"
#include "image/rootfs_path.h"

namespace berth {
namespace {

const ArchiveApi& api() {
  return archive_api();
}

using ArchivePtr = ArchiveReader;

/// Applies the entries of one layer onto a root directory.
class LayerApplier {
 public:
  LayerApplier(int root_fd, const std::string& layer, const UnpackOptions& opts)
      : root_fd_(root_fd),
        layer_(layer),
        chown_(opts.keep_ownership && ::geteuid() == 0),
        strip_setid_(!opts.keep_ownership) {}

  /// Applies every entry `stream` yields (which checks the bytes; see CheckedStream).
  Status run(CheckedStream& stream);
  Status apply_all(CheckedStream& stream);
  const UnpackStats& stats() const { return stats_; }

 private:
  Status apply_entry(archive_entry* e, std::string_view raw);
  Status apply_whiteout(std::string_view raw, std::string_view parent, const char* base);
  Status write_file(archive_entry* e, std::string_view raw, int pfd, const char* base);
  Status make_dir(archive_entry* e, std::string_view raw, int pfd, const char* base);
  Status make_hardlink(std::string_view raw, const char* target, int pfd, const char* base);
  /// Opens (and caches) the parent directory; with create=false a missing one gives -1.
  Result<int> parent_fd(std::string_view raw, std::string_view parent, bool create);
  Result<int> create_parents(std::string_view raw, const std::string& parent);
  void mark_created_ancestors(const std::string& parent);
  void set_owner(int pfd, const char* base, archive_entry* e, int fd = -1);
  void set_dir_times();

  Error archive_err(std::string_view raw = {}) const;
  Error entry_err(std::string_view raw, std::string_view what, int err) const;
  Error refuse(std::string detail) const { return make_error("unpack", layer_, std::move(detail)); }
  Error resolve_err(std::string_view raw, std::string_view what, int err) const;

  int root_fd_;
  const std::string& layer_;
  bool chown_;
  bool strip_setid_;
  archive* ar_ = nullptr;
  const CheckedStream* stream_ = nullptr;
  UnpackStats stats_;
  std::string name_;  // the current entry's normalised name
  std::string cached_parent_;
  UniqueFd cached_fd_;
  bool cached_marked_ = false;               // cached parent recorded in created_
  std::unordered_set<std::string> created_;  // paths this layer made or wrote into
  std::vector<std::pair<std::string, struct timespec>> dir_times_;
};

Error LayerApplier::archive_err(std::string_view raw) const {
  // When the stream below the tar reader failed, its words say more than the reader's.
  const Error* below = stream_->failure();
  if (below && below->sys_errno != 0) return *below;
  std::string msg = below ? below->detail : archive_message(ar_);
  if (raw.empty()) return make_error("unpack", layer_, msg);
  return make_error("unpack", layer_, fmt::format("entry \"{}\": {}", raw, msg));
}

Error LayerApplier::entry_err(std::string_view raw, std::string_view what, int err) const {
  Error e = sys_error("unpack", layer_, err);
  e.detail = fmt::format("entry \"{}\": {}", raw, what);
  return e;
}

Error LayerApplier::resolve_err(std::string_view raw, std::string_view what, int err) const {
  if (err == EXDEV)
    return refuse(fmt::format("entry \"{}\" escapes the root: it {} a symlink outside", raw, what));
  if (err == ELOOP) return refuse(fmt::format("entry \"{}\" {} too many symlinks", raw, what));
  return entry_err(raw, "open parent directory", err);
}

Status LayerApplier::run(CheckedStream& stream) {
  Status st = apply_all(stream);
  if (!st.ok()) {
    Status file = stream.check_file();
    return file.ok() ? st : file;
  }
  return stream.finish();
}

Status LayerApplier::apply_all(CheckedStream& stream) {
  stream_ = &stream;
  ArchivePtr a = BERTH_TRY(stream.open_tar());
  ar_ = a.get();
  for (;;) {
    archive_entry* e = nullptr;
    int r = api().read_next_header(ar_, &e);
    if (r == ARCHIVE_EOF) break;
    if (r == ARCHIVE_RETRY) continue;
    if (r < ARCHIVE_WARN) return archive_err();  // ARCHIVE_WARN: e.g. charset, harmless
    const char* raw = api().entry_pathname(e);
    if (raw == nullptr) return refuse("entry without a name");
    ++stats_.entries;
    BERTH_CHECK(apply_entry(e, raw));
  }
  set_dir_times();
  return {};
}

Status LayerApplier::apply_entry(archive_entry* e, std::string_view raw) {
  EntryName kind = normalize_entry_name(raw, name_);
  if (kind == EntryName::kEscapes) return refuse(fmt::format("entry \"{}\" escapes the root", raw));
  mode_t type = api().entry_filetype(e);
  const char* hardlink = api().entry_hardlink(e);
  if (kind == EntryName::kRoot) {
    // The root itself: only its mode applies, and the owner keeps full access.
    if (type == AE_IFDIR && hardlink == nullptr &&
        ::fchmod(root_fd_, (api().entry_perm(e) & 07777) | 0700) != 0) {
      return entry_err(raw, "chmod", errno);
    }
    return {};
  }
  size_t slash = name_.rfind('/');
  std::string_view parent =
      slash == std::string::npos ? std::string_view() : std::string_view(name_).substr(0, slash);
  const char* base = name_.c_str() + (slash == std::string::npos ? 0 : slash + 1);
  if (std::string_view(base).starts_with(".wh.")) return apply_whiteout(raw, parent, base);

  if (hardlink == nullptr && (type == AE_IFCHR || type == AE_IFBLK)) {
    ++stats_.skipped_devices;  // rootless: device nodes cannot be made; the runtime binds host ones
    return {};
  }
  if (hardlink == nullptr && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK &&
      type != AE_IFIFO) {
    return {};  // sockets and unknown types carry nothing worth restoring
  }
  int pfd = BERTH_TRY(parent_fd(raw, parent, true));
  if (hardlink != nullptr) {
    BERTH_CHECK(make_hardlink(raw, hardlink, pfd, base));
  } else if (type == AE_IFREG) {
    BERTH_CHECK(write_file(e, raw, pfd, base));
  } else if (type == AE_IFDIR) {
    BERTH_CHECK(make_dir(e, raw, pfd, base));
  } else if (type == AE_IFLNK) {
    const char* target = api().entry_symlink(e);
    if (target == nullptr)
      return refuse(fmt::format("entry \"{}\" is a symlink without a target", raw));
    // The target is stored verbatim: it is harmless until something goes through
    // it, and parent resolution refuses any path through it that leaves the root.
    while (::symlinkat(target, pfd, base) != 0) {
      if (errno != EEXIST) return entry_err(raw, "symlink", errno);
      if (int err = remove_at(pfd, base)) return entry_err(raw, "remove existing", err);
    }
    set_owner(pfd, base, e);
    struct timespec ts[2] = {api().entry_mtime_is_set(e)
                                 ? timespec{api().entry_mtime(e), api().entry_mtime_nsec(e)}
                                 : timespec{0, UTIME_OMIT},
                             {}};
    ts[1] = ts[0];
    ::utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);  // times are cosmetic; ignore failure
  } else {                                            // FIFO
    mode_t perm = api().entry_perm(e) & 0777;
    while (::mknodat(pfd, base, S_IFIFO | 0600, 0) != 0) {
      if (errno != EEXIST) return entry_err(raw, "mkfifo", errno);
      if (int err = remove_at(pfd, base)) return entry_err(raw, "remove existing", err);
    }
    set_owner(pfd, base, e);
    if (::fchmodat(pfd, base, perm, 0) != 0) return entry_err(raw, "chmod", errno);
  }
  created_.insert(name_);
  return {};
}

Status LayerApplier::apply_whiteout(std::string_view raw, std::string_view parent,
                                    const char* base) {
  std::string_view b(base);
  bool opaque = b == ".wh..wh..opq";
  if (!opaque && b.starts_with(".wh..wh.")) return {};  // other aufs metadata: nothing to apply
  std::string_view victim = b.substr(4);
  if (!opaque && (victim.empty() || victim == "." || victim == "..")) {
    return refuse(fmt::format("entry \"{}\" is an invalid whiteout", raw));
  }
  int pfd = BERTH_TRY(parent_fd(raw, parent, false));
  if (pfd < 0) return {};  // nothing below to hide
  int err =
      opaque ? clear_dir_except(pfd, cached_parent_, created_) : remove_at(pfd, victim.data());
  if (err != 0) return entry_err(raw, "whiteout", err);
  return {};
}

Status LayerApplier::write_file(archive_entry* e, std::string_view raw, int pfd, const char* base) {
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(::openat(pfd, base, flags, 0600));
  while (!fd.valid()) {
    if (errno != EEXIST) return entry_err(raw, "create", errno);
    if (int err = remove_at(pfd, base)) return entry_err(raw, "remove existing", err);
    fd.reset(::openat(pfd, base, flags, 0600));
  }
  int64_t end = 0;
  auto write_block = [&](const char* p, size_t size, int64_t offset) -> Status {
    size_t left = size;
    int64_t at = offset;  // sparse archives give offsets with holes between blocks
    while (left > 0) {
      ssize_t n = ::pwrite(fd.get(), p, left, at);
      if (n < 0) {
        if (errno == EINTR) continue;
        return entry_err(raw, "write", errno);
      }
      p += n;
      left -= static_cast<size_t>(n);
      at += n;
    }
    stats_.bytes += size;
    end = offset + static_cast<int64_t>(size);
    return {};
  };
  BERTH_CHECK(read_data_blocks(ar_, write_block, [&] { return archive_err(raw); }));
  int64_t want = api().entry_size(e);
  if (end < want && ::ftruncate(fd.get(), want) != 0) return entry_err(raw, "truncate", errno);
  set_owner(pfd, base, e, fd.get());
  mode_t perm = api().entry_perm(e) & 07777;
  if (strip_setid_) perm &= ~mode_t{S_ISUID | S_ISGID};
  // After chown (which clears set-id bits), and always: the create mode went through umask.
  if (::fchmod(fd.get(), perm) != 0) return entry_err(raw, "chmod", errno);
  if (api().entry_mtime_is_set(e)) {
    struct timespec ts[2] = {{api().entry_mtime(e), api().entry_mtime_nsec(e)}, {}};
    ts[1] = ts[0];
    ::futimens(fd.get(), ts);  // times are cosmetic; ignore failure
  }
  return {};
}

Status LayerApplier::make_dir(archive_entry* e, std::string_view raw, int pfd, const char* base) {
  while (::mkdirat(pfd, base, 0700) != 0) {
    if (errno != EEXIST) return entry_err(raw, "mkdir", errno);
    struct stat st;
    if (::fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) break;  // merge
    if (int err = remove_at(pfd, base)) return entry_err(raw, "remove existing", err);
  }
  set_owner(pfd, base, e);
  mode_t perm = api().entry_perm(e) & 07777;
  if (strip_setid_) perm &= ~mode_t{S_ISUID | S_ISGID};
  // Rootless: the owner keeps rwx so later layers (and rm) can still work inside.
  if (::fchmodat(pfd, base, perm | 0700, 0) != 0) return entry_err(raw, "chmod", errno);
  if (api().entry_mtime_is_set(e)) {
    dir_times_.emplace_back(name_, timespec{api().entry_mtime(e), api().entry_mtime_nsec(e)});
  }
  return {};
}

Status LayerApplier::make_hardlink(std::string_view raw, const char* target, int pfd,
                                   const char* base) {
  std::string tname;
  if (normalize_entry_name(target, tname) != EntryName::kPath) {
    return refuse(fmt::format("entry \"{}\" escapes the root: it links to \"{}\"", raw, target));
  }
  if (tname == name_) return {};  // a link to itself: the file is already there
  size_t slash = tname.rfind('/');
  std::string tparent = slash == std::string::npos ? std::string() : tname.substr(0, slash);
  const char* tbase = tname.c_str() + (slash == std::string::npos ? 0 : slash + 1);
  UniqueFd tfd(open_beneath(root_fd_, tparent));
  if (!tfd.valid()) {
    int err = errno;
    if (err == EXDEV) {
      return refuse(
          fmt::format("entry \"{}\" escapes the root: it links to \"{}\" through a symlink outside",
                      raw, target));
    }
    return entry_err(raw, fmt::format("link to \"{}\"", target), err);
  }
  // linkat without AT_SYMLINK_FOLLOW links a symlink itself, never what it points to.
  while (::linkat(tfd.get(), tbase, pfd, base, 0) != 0) {
    if (errno != EEXIST) return entry_err(raw, fmt::format("link to \"{}\"", target), errno);
    if (int err = remove_at(pfd, base)) return entry_err(raw, "remove existing", err);
  }
  return {};
}

Result<int> LayerApplier::parent_fd(std::string_view raw, std::string_view parent, bool create) {
  if (cached_fd_.valid() && parent == cached_parent_) {
    if (create && !cached_marked_) mark_created_ancestors(cached_parent_);
    return cached_fd_.get();
  }
  cached_fd_.reset();
  cached_marked_ = false;
  cached_parent_.assign(parent);
  int fd = open_beneath(root_fd_, cached_parent_);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT && create) return create_parents(raw, cached_parent_);
    if (err == ENOENT) return -1;
    return resolve_err(raw, "goes through", err);
  }
  cached_fd_.reset(fd);
  if (create) mark_created_ancestors(cached_parent_);
  return fd;
}

Result<int> LayerApplier::create_parents(std::string_view raw, const std::string& parent) {
  // Like tar: make missing directories, resolving each prefix beneath the root again.
  UniqueFd cur(open_beneath(root_fd_, ""));
  if (!cur.valid()) return entry_err(raw, "open root", errno);
  std::string prefix;
  size_t pos = 0;
  while (pos <= parent.size()) {
    size_t slash = parent.find('/', pos);
    if (slash == std::string::npos) slash = parent.size();
    std::string comp = parent.substr(pos, slash - pos);
    prefix = parent.substr(0, slash);
    pos = slash + 1;
    int fd = open_beneath(root_fd_, prefix);
    if (fd < 0 && errno == ENOENT) {
      if (::mkdirat(cur.get(), comp.c_str(), 0755) != 0 && errno != EEXIST) {
        return entry_err(raw, fmt::format("mkdir \"{}\"", prefix), errno);
      }
      fd = open_beneath(root_fd_, prefix);
    }
    if (fd < 0) return resolve_err(raw, "goes through", errno);
    cur.reset(fd);
  }
  cached_fd_ = std::move(cur);
  mark_created_ancestors(cached_parent_);
  return cached_fd_.get();
}

void LayerApplier::mark_created_ancestors(const std::string& parent) {
  // Directories this layer writes into keep their place under an opaque whiteout.
  cached_marked_ = true;
  std::string p = parent;
  while (!p.empty() && created_.insert(p).second) {
    size_t slash = p.rfind('/');
    p.resize(slash == std::string::npos ? 0 : slash);
  }
}

void LayerApplier::set_owner(int pfd, const char* base, archive_entry* e, int fd) {
  if (!chown_) return;
  uid_t uid = static_cast<uid_t>(api().entry_uid(e));
  gid_t gid = static_cast<gid_t>(api().entry_gid(e));
  // Ownership that cannot be set (unmapped ids) is ignored, as the contract says.
  if (fd >= 0) {
    (void)::fchown(fd, uid, gid);
  } else {
    (void)::fchownat(pfd, base, uid, gid, AT_SYMLINK_NOFOLLOW);
  }
}

void LayerApplier::set_dir_times() {
  // After the whole layer: creating files inside a directory moves its mtime.
  for (const auto& [path, mtime] : dir_times_) {
    size_t slash = path.rfind('/');
    std::string_view parent =
        slash == std::string::npos ? std::string_view() : std::string_view(path).substr(0, slash);
    const char* base = path.c_str() + (slash == std::string::npos ? 0 : slash + 1);
    auto pfd = parent_fd(path, parent, false);
    if (!pfd.ok() || *pfd < 0) continue;  // removed later in the layer: nothing to date
    struct timespec ts[2] = {mtime, mtime};
    ::utimensat(*pfd, base, ts, AT_SYMLINK_NOFOLLOW);  // cosmetic; ignore failure
  }
}

/// True when `path` is a directory with no entries.
bool is_empty_dir(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return false;
  bool empty = true;
  while (struct dirent* de = ::readdir(d)) {
    std::string_view n(de->d_name);
    if (n != "." && n != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

}  // namespace

Result<UnpackStats> apply_layer(const std::string& root, const LayerInput& layer,
                                const UnpackOptions& opts) {
  UniqueFd root_fd = BERTH_TRY(open_file(root, O_RDONLY | O_DIRECTORY));
  UniqueFd layer_fd = BERTH_TRY(open_file(layer.path, O_RDONLY));
  CheckedStream stream(layer_fd.get(), layer);
  LayerApplier applier(root_fd.get(), layer.path, opts);
  BERTH_CHECK(applier.run(stream));
  return applier.stats();
}

Result<UnpackStats> unpack_layers(const std::vector<LayerInput>& layer_paths,
                                  const std::string& target, const UnpackOptions& opts) {
  if (path_exists(target) && !is_empty_dir(target)) {
    return make_error("unpack", target, "target exists and is not an empty directory");
  }
  BERTH_CHECK(make_dirs(target));
  UnpackStats total;
  for (const LayerInput& layer : layer_paths) {
    auto r = apply_layer(target, layer, opts);
    if (!r.ok()) {
      (void)remove_tree(target);  // best effort: the layer's own error is the one to report
      return std::move(r).error();
    }
    total.entries += r->entries;
    total.bytes += r->bytes;
    total.skipped_devices += r->skipped_devices;
  }
  return total;
}

}  // namespace berth

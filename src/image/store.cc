// The blob half of the store: opening the layout, reading and publishing
// blobs, and resumable locked downloads (BlobWriter). The image index lives
// in image_index.cc.
#include "image/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "image/image_config.h"

namespace berth {

namespace {

constexpr int kLayoutVersion = 1;
/// read_blob() is for manifests and configs; anything bigger is a layer.
constexpr int64_t kMaxReadBlob = 16 << 20;

/// Checks the layout version file, writing it when the store is new (unless `read_only`).
Status check_layout_version(const std::string& root, bool read_only = false) {
  std::string path = path_join(root, "version");
  auto text = read_file(path);
  if (!text.ok()) {
    if (text.error().sys_errno != ENOENT || read_only) return std::move(text).error();
    // Concurrent first opens both write the same bytes; the rename is atomic.
    nlohmann::json j = {{"version", kLayoutVersion}};
    return write_file_atomic(path, to_text(j) + "\n");
  }
  int version = 0;
  auto j = parse_json(*text, path);
  if (!j) return make_error("open store", path, "unreadable layout version: " + j.error().detail);
  if (auto v = j->find("version"); v != j->end() && v->is_number_integer())
    version = v->get<int>();
  else
    return make_error("open store", path, "unreadable layout version: no integer \"version\"");
  if (version != kLayoutVersion)
    return make_error("open store", root,
                      "layout version " + std::to_string(version) +
                          " is not supported (this berth knows version " +
                          std::to_string(kLayoutVersion) + ")")
        .with_hint("use the berth release that created this store, or choose another BERTH_HOME");
  return {};
}

Error mismatch_error(std::string_view expected, const std::string& actual) {
  return make_error("verify", std::string(expected), "digest mismatch: got " + actual,
                    ErrorCode::kIntegrity);
}

/// fsync on a directory so a rename in it survives a crash; best-effort
/// because some file systems (and some network ones on clusters) refuse it.
void sync_dir(const std::string& dir) {
  auto fd = open_file(dir, O_RDONLY | O_DIRECTORY);
  if (fd.ok()) (void)::fsync(fd->get());  // deliberately ignored: durability hint only
}

}  // namespace

std::string ImageRecord::short_id() const {
  return std::string(digest_hex(config_digest).substr(0, 12));
}

Status check_private_dir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return sys_error("stat", dir);
  // Blobs are verified when unpacked, but a store others can write lets them swap names,
  // records and containers' root filesystems: containerd keeps its root 0711 for this reason.
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return make_error(
               "open store", dir,
               fmt::format("writable by {} (mode {:04o}): another user could change its "
                           "images and containers",
                           (st.st_mode & S_IWOTH) ? "others" : "its group", st.st_mode & 07777))
        .with_hint("make it private: chmod go-w " + dir);
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return make_error("open store", dir,
                      "owned by user " + std::to_string(st.st_uid) + ", not by this user")
        .with_hint("use a store of your own (BERTH_HOME or --home)");
  return {};
}

Result<Store> Store::open(std::string root) {
  if (root.empty()) return make_error("open store", root, "empty store path");
  BERTH_CHECK(make_dirs(root, 0755));
  BERTH_CHECK(make_dirs(path_join(root, "blobs/sha256"), 0755));
  BERTH_CHECK(make_dirs(path_join(root, "tmp"), 0755));
  for (const char* dir : {"", "blobs", "blobs/sha256", "tmp"})
    BERTH_CHECK(check_private_dir(*dir ? path_join(root, dir) : root));
  BERTH_CHECK(check_layout_version(root));
  Store s;
  s.root_ = std::move(root);
  return s;
}

Result<Store> Store::open_shared(std::string root) {
  if (root.empty() || root.front() != '/')
    return make_error("central store", root, "not an absolute path");
  char real[PATH_MAX];
  if (::realpath(root.c_str(), real) == nullptr) return sys_error("central store", root);
  struct stat st;
  if (::stat(real, &st) != 0) return sys_error("central store", root);
  if (!S_ISDIR(st.st_mode)) return make_error("central store", root, "not a directory");
  Store s;
  s.root_ = real;
  s.shared_owner_ = st.st_uid;
  // Whoever can write a folder above could put another store in its place.
  std::string dir = real;
  BERTH_CHECK(s.check_shared(dir, st));
  while (dir != "/") {
    dir = dir.substr(0, dir.rfind('/'));
    if (dir.empty()) dir = "/";
    struct stat up;
    if (::stat(dir.c_str(), &up) != 0) return sys_error("central store", dir);
    if (up.st_mode & S_ISVTX) up.st_mode &= ~(S_IWGRP | S_IWOTH);  // /tmp: names stay theirs
    BERTH_CHECK(s.check_shared(dir, up).with_context("central store " + s.root_));
  }
  for (const char* name : {"blobs", "blobs/sha256", "version"}) {
    std::string path = path_join(s.root_, name);
    if (::lstat(path.c_str(), &st) != 0) return sys_error("central store", path);
    BERTH_CHECK(s.check_shared(path, st));
  }
  BERTH_CHECK(check_layout_version(s.root_, true));
  return s;
}

Status Store::check_shared(const std::string& path, const struct stat& st) const {
  if (!shared_owner_) return {};
  uid_t owner = *shared_owner_;
  auto refuse = [&](const std::string& why) {
    return make_error("central store", path, "refused: " + why, ErrorCode::kPermission)
        .with_hint(
            "the central store's files and every folder above it must be owned by root "
            "(or the store's owner) and not writable by group or others");
  };
  if (st.st_uid != 0 && st.st_uid != owner)
    return refuse(fmt::format("owned by uid {}, not root{}", st.st_uid,
                              owner == 0 ? "" : " or uid " + std::to_string(owner)));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) return refuse("writable by group or others");
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return refuse("not a regular file or folder");
  return {};
}

Error squashed_image_error(Op op, const ImageRecord& image) {
  return make_error(op, image.name,
                    "the image is stored as one squashfs file (pull --squash), without its "
                    "layers",
                    ErrorCode::kUnsupported)
      .with_hint("run it as it is (berth run " + image.name +
                 "), or pull its layers: berth pull --no-squash " + image.name);
}

std::string Store::blob_path(std::string_view digest) const {
  return path_join(root_, "blobs/sha256/" + std::string(digest_hex(digest)));
}

bool Store::has_blob(std::string_view digest) const {
  return path_exists(blob_path(digest));
}

Result<std::string> Store::read_blob(std::string_view digest) const {
  BERTH_CHECK(validate_digest(digest));
  std::string path = blob_path(digest);
  UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return sys_error("stat", path);
  BERTH_CHECK(check_shared(path, st));
  if (st.st_size > kMaxReadBlob)
    return make_error(
        "read blob", std::string(digest),
        "too large to read whole (" + std::to_string(st.st_size) + " bytes, limit 16 MiB)");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read", path);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  // The store trusts nothing it did not verify: a blob changed since it was stored is refused.
  if (std::string actual = sha256_digest(out); actual != digest)
    return mismatch_error(digest, actual).with_hint("pull the image again");
  return out;
}

Result<std::vector<LayerInput>> Store::layer_inputs(const ImageRecord& image, Op op) const {
  if (image.squashed()) return squashed_image_error(op, image);
  for (const std::string& l : image.layers)
    if (!has_blob(l))
      return make_error(op, image.name, "layer " + l + " is missing from the store")
          .with_hint("pull the image again");
  std::string config = BERTH_TRY(read_blob(image.config_digest));
  ImageConfig parsed = BERTH_TRY(parse_image_config(config, image.config_digest)
                                     .with_context(fmt::format("{} {}", op.word(), image.name)));
  const std::vector<std::string>& diff_ids = parsed.diff_ids;
  if (diff_ids.size() != image.layers.size())
    return make_error(op, image.name,
                      "the image config lists " + std::to_string(diff_ids.size()) +
                          " diff_ids for " + std::to_string(image.layers.size()) + " layers");
  std::vector<LayerInput> out;
  for (size_t i = 0; i < image.layers.size(); ++i) {
    out.emplace_back(blob_path(image.layers[i]), image.layers[i], diff_ids[i]);
    // A store of one's own is private (check_private_dir()): only its owner can write a blob
    // or the record on it (setting a user attribute takes write access to the 0444 file, as
    // changing its bytes does), and the record is believed only for bytes that hash to the
    // blob's digest in the read that unpacks them, so a blob changed or swapped after the
    // pull is still refused. A shared store's records are not used: its files' attributes
    // were never part of what open_shared() checks.
    out.back().use_diff_id_record = !shared();
  }
  return out;
}

Status Store::put_blob(std::string_view digest, std::string_view data) {
  BERTH_CHECK(validate_digest(digest));
  std::string actual = sha256_digest(data);
  if (actual != digest) return mismatch_error(digest, actual);
  auto w = BERTH_TRY(begin_blob(digest, static_cast<int64_t>(data.size())));
  if (!w) return {};  // already stored
  // A stale partial cannot help: we hold every byte, so start clean.
  if (w->offset() != 0) BERTH_CHECK(w->restart());
  BERTH_CHECK(w->write(data.data(), data.size()));
  return w->commit();
}

Status Store::adopt_blob(std::string_view digest, const std::string& path) {
  BERTH_CHECK(validate_digest(digest));
  std::string hex(digest_hex(digest));
  std::string lock_path = path_join(path_join(root_, "tmp"), hex + ".lock");
  // The same lock a download of this blob takes: never two writers of one blob at once.
  FileLock lock = BERTH_TRY(FileLock::acquire(lock_path));
  std::string final_path = blob_path(digest);
  if (path_exists(final_path)) {
    (void)::unlink(path.c_str());  // best effort: the staging folder goes away anyway
  } else {
    UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
    if (::fsync(fd.get()) != 0) return sys_error("fsync", path);
    if (::fchmod(fd.get(), 0444) != 0) return sys_error("chmod", path);
    if (::rename(path.c_str(), final_path.c_str()) != 0)
      return sys_error("rename", path + " -> " + final_path);
    sync_dir(final_path.substr(0, final_path.rfind('/')));
  }
  (void)::unlink(lock_path.c_str());  // as BlobWriter::drop_lock_file: only clutter otherwise
  return {};
}

Result<std::optional<BlobWriter>> Store::begin_blob(std::string_view digest,
                                                    int64_t expected_size) {
  BERTH_CHECK(validate_digest(digest));
  std::string hex(digest_hex(digest));
  std::string tmp = path_join(root_, "tmp");
  BlobWriter w;
  w.lock_path_ = path_join(tmp, hex + ".lock");
  w.lock_ = BERTH_TRY(FileLock::acquire(w.lock_path_));
  w.digest_ = std::string(digest);
  w.final_path_ = blob_path(digest);
  // Whoever held the lock before us may have published the blob meanwhile.
  if (path_exists(w.final_path_)) {
    w.drop_lock_file();
    return std::optional<BlobWriter>();
  }
  w.partial_path_ = path_join(tmp, hex + ".partial");
  w.expected_size_ = expected_size;
  w.fd_ = BERTH_TRY(open_file(w.partial_path_, O_RDWR | O_CREAT, 0644));

  struct stat st;
  if (::fstat(w.fd_.get(), &st) != 0) return sys_error("stat", w.partial_path_);
  if (expected_size >= 0 && st.st_size > expected_size) {
    BERTH_CHECK(w.restart());
  } else {
    // Resume: hash what an interrupted download left behind.
    std::string buf(1 << 20, '\0');
    for (;;) {
      ssize_t n = ::read(w.fd_.get(), buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return sys_error("read", w.partial_path_);
      }
      if (n == 0) break;
      w.hash_.update(buf.data(), static_cast<size_t>(n));
      w.offset_ += static_cast<uint64_t>(n);
    }
    if (::lseek(w.fd_.get(), static_cast<off_t>(w.offset_), SEEK_SET) < 0)
      return sys_error("seek", w.partial_path_);
  }
  return std::optional<BlobWriter>(std::move(w));
}

Status BlobWriter::write(const char* data, size_t len) {
  if (!fd_.valid()) return make_error("write blob", digest_, "writer is closed");
  if (expected_size_ >= 0 && offset_ + len > static_cast<uint64_t>(expected_size_))
    return make_error("write blob", digest_, "blob larger than the manifest says",
                      ErrorCode::kIntegrity);
  Status st = write_all(fd_.get(), std::string_view(data, len), partial_path_);
  if (!st.ok()) {
    // Cut back to what was hashed so the file and the hash stay in step.
    if (::ftruncate(fd_.get(), static_cast<off_t>(offset_)) == 0)
      (void)::lseek(fd_.get(), static_cast<off_t>(offset_), SEEK_SET);  // commit re-checks anyway
    return st;
  }
  hash_.update(data, len);
  offset_ += len;
  return {};
}

Status BlobWriter::restart() {
  if (!fd_.valid()) return make_error("restart blob", digest_, "writer is closed");
  if (::ftruncate(fd_.get(), 0) != 0) return sys_error("truncate", partial_path_);
  if (::lseek(fd_.get(), 0, SEEK_SET) < 0) return sys_error("seek", partial_path_);
  hash_ = Sha256();
  offset_ = 0;
  diff_id_.clear();
  return {};
}

Status BlobWriter::replay(const std::function<void(const char*, size_t)>& fn) const {
  std::string buf(1 << 20, '\0');
  for (uint64_t at = 0; at < offset_;) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), offset_ - at));
    ssize_t n = ::pread(fd_.get(), buf.data(), want, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("read", partial_path_);
    if (n == 0) return make_error("read", partial_path_, "shorter than the bytes hashed");
    fn(buf.data(), static_cast<size_t>(n));
    at += static_cast<uint64_t>(n);
  }
  return {};
}

Status BlobWriter::commit() {
  if (!fd_.valid()) return make_error("commit blob", digest_, "writer is closed");
  if (expected_size_ >= 0 && offset_ != static_cast<uint64_t>(expected_size_)) {
    // Too short: keep the partial so the next attempt resumes from it.
    return make_error("commit blob", digest_,
                      "size mismatch: expected " + std::to_string(expected_size_) + " bytes, got " +
                          std::to_string(offset_),
                      ErrorCode::kIntegrity);
  }
  std::string actual = hash_.digest();
  if (actual != digest_) {
    fd_.reset();
    ::unlink(partial_path_.c_str());  // bad bytes must not be resumed from
    return mismatch_error(digest_, actual);
  }
  // The hasher is finalised now, so the writer is closed whatever happens;
  // the verified partial stays for the next attempt if a step below fails.
  UniqueFd fd = std::move(fd_);
  // Deliberately unchecked: a file system without user attributes (some NFS, older tmpfs)
  // keeps no record, and unpacking then hashes the decompressed layer itself.
  if (!diff_id_.empty())
    (void)::fsetxattr(fd.get(), kDiffIdRecordAttr, diff_id_.data(), diff_id_.size(), 0);
  if (::fsync(fd.get()) != 0) return sys_error("fsync", partial_path_);
  if (::fchmod(fd.get(), 0444) != 0) return sys_error("chmod", partial_path_);
  if (::rename(partial_path_.c_str(), final_path_.c_str()) != 0) {
    Error e = sys_error("rename", partial_path_ + " -> " + final_path_);
    (void)::fchmod(fd.get(), 0644);  // best-effort: keep the partial writable for a resume
    return e;
  }
  sync_dir(final_path_.substr(0, final_path_.rfind('/')));
  drop_lock_file();
  return {};
}

void BlobWriter::drop_lock_file() {
  // Safe once the blob is published: whoever takes this lock (on the unlinked
  // file) or a new one (on a fresh file) sees the blob present and writes
  // nothing, and rmi cannot delete the blob while a pull is pinned.
  (void)::unlink(lock_path_.c_str());  // best effort: a leftover lock file is only clutter
}

}  // namespace berth

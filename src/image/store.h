// The content-addressed image store under $BERTH_HOME.
//
//   blobs/sha256/<hex>       verified blobs (manifests, configs, layers), read-only; a layer
//                            pulled carries its diff_id as an attribute (kDiffIdRecordAttr)
//   tmp/<hex>.partial        a download in progress, resumable
//   tmp/<hex>.lock           held (flock) by whoever downloads <hex>; removed once published
//   images.json              the image index, rewritten atomically
//   lock                     flock held while images.json is read-modify-written
//   gc.lock                  flock: shared (pin()) by every pull, import, load and create
//                            while it relies on blobs no record may yet name; exclusive
//                            (sweep_lock()) while blobs are deleted: rmi, image prune, gc
//   version                  {"version":1}: the layout version, checked by open()
//   central-verified/<key>   the site's central store files hashed already (site/central_store.h)
//
// A squashed image (`berth pull --squash`, store_format = "squashfs") keeps its layers as one
// squashfs file, itself a blob (ImageRecord::squash): its record names the manifest, config
// and that file, not the layer blobs, so gc, rmi and prune drop the layers no other record
// uses, and the store holds one big file per image (plus its small manifest and config).
//
// A shared store (open_shared(): the site's central_store) is only read: nothing is created,
// locked or written there, and every file read from it must be owned by root or by the
// store directory's owner and be writable by nobody else.
//
// Many processes (a job array on one node) may pull the same image at once:
// the per-blob lock makes one of them download each blob while the others
// wait and then find it present; every blob becomes visible only by rename
// after its digest and size were checked, so a killed pull never leaves a
// half-written blob visible and the next pull resumes from the .partial file.
//
// Lifetimes (docs/architecture.md, "Locks and leftovers"): whatever a killed command leaves
// is either unreferenced (a blob no record names) or under a lock nobody holds (a .partial,
// a staging folder); `berth gc` (image/gc.h) removes both, taking each thing's own lock
// without waiting and gc.lock exclusively for the blobs.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/sha256.h"
#include "image/platform.h"
#include "image/unpack.h"

namespace berth {

/// One image in the index.
struct ImageRecord {
  std::string name;             ///< fully qualified reference, "127.0.0.1:5000/app:1" form
  std::string manifest_digest;  ///< the image manifest (not the index)
  std::string index_digest;     ///< the index/list it was selected from, or empty
  std::string config_digest;    ///< the image ID
  std::string manifest_media_type;
  Platform platform;
  std::vector<std::string> layers;  ///< layer digests, bottom first
  int64_t size = 0;                 ///< sum of layer sizes (compressed)
  std::string pulled;               ///< RFC 3339 UTC time of the pull (or import, load)
  /// The registry the image was pulled from (its reference's, also through a mirror; kept by
  /// `tag`), "" for an image imported or loaded, nullopt in records older than the field.
  std::optional<std::string> registry;
  bool is_protected = false;  ///< `berth protect`: rmi refuses it
  /// The squashfs file holding the merged layers (a blob digest), or "" for an image kept as
  /// layers. A squashed record's `layers` still lists the manifest's layers, but it does not
  /// use their blobs (image_blobs()), and `size` is the squashfs file's.
  std::string squash;

  bool squashed() const { return !squash.empty(); }

  /// The first 12 hex digits of the config digest, as `docker images` shows.
  std::string short_id() const;
};

/// Every blob a record uses: manifest, index (when set), config, then the layers (repeats
/// kept), or for a squashed image its squashfs file instead of the layers.
std::vector<std::string> image_blobs(const ImageRecord& r);

class Store;

/// A blob being written. Bytes are hashed as they are appended; commit()
/// checks digest and size and renames the file into place.
class BlobWriter {
 public:
  /// Bytes already present (from an interrupted earlier download).
  uint64_t offset() const { return offset_; }
  Status write(const char* data, size_t len);
  /// Drops what was written so far (the registry ignored a Range request).
  Status restart();
  /// Hands the bytes already present (offset() of them, from an interrupted download) to
  /// `fn` in chunks, so that what hashes a download's stream sees it from its first byte.
  Status replay(const std::function<void(const char*, size_t)>& fn) const;
  /// Records the diff_id the bytes were found to decompress to (kDiffIdRecordAttr), set on
  /// the file by commit() before it is published, so that record and blob appear together.
  void record_diff_id(std::string diff_id) { diff_id_ = std::move(diff_id); }
  /// Verifies and publishes the blob. On mismatch the partial file is
  /// deleted and the error names expected and actual digests.
  Status commit();

 private:
  friend class Store;
  /// Removes the lock file once the blob is published, so tmp/ does not fill up.
  void drop_lock_file();
  std::string digest_, partial_path_, final_path_, lock_path_;
  std::string diff_id_;  // to record on the file, when set
  int64_t expected_size_ = -1;
  uint64_t offset_ = 0;
  UniqueFd fd_;
  Sha256 hash_;
  FileLock lock_;
};

struct VerifyProblem {
  std::string digest;
  std::string what;  ///< "missing", "digest mismatch: got sha256:..."
};

struct RemovedImages {
  std::vector<std::string> names;  ///< image names untagged, sorted
  size_t blobs_deleted = 0;        ///< blobs no remaining image used
};

/// Refuses a store directory that others could change: writable by group or others, or owned
/// by another user (root excepted). One line naming the directory, its mode and the fix.
/// (A deliberately shared read-only store is the site layer's, not this check's.)
Status check_private_dir(const std::string& dir);

class Store {
 public:
  /// Opens (creating when missing) the store at `root`.
  static Result<Store> open(std::string root);
  /// Opens the shared store at `root` (the site's central_store) for reading only: `root`,
  /// every folder above it and its layout must be owned by root or by `root`'s owner and not
  /// writable by group or others (a sticky folder above, such as /tmp, may be); nothing is
  /// created or locked. Every file it reads later is checked the same way (check_shared()).
  static Result<Store> open_shared(std::string root);

  /// Whether this store was opened by open_shared().
  bool shared() const { return shared_owner_.has_value(); }
  /// For a shared store: refuses the file or folder `path` whose status is `st` unless it is
  /// owned by root or the store's owner and not writable by group or others. Always fine for
  /// a store of one's own.
  Status check_shared(const std::string& path, const struct stat& st) const;

  const std::string& root() const { return root_; }
  std::string blob_path(std::string_view digest) const;
  bool has_blob(std::string_view digest) const;
  /// Reads a whole (small) blob, manifests and configs, checking that it hashes to `digest`.
  Result<std::string> read_blob(std::string_view digest) const;
  /// `image`'s layers bottom first, as unpack_layers() takes them: each blob's path with its
  /// digest and the image config's diff_id to check while unpacking (by the blob's diff_id
  /// record, in a store of one's own). A missing blob, or a
  /// config without one diff_id per layer, is an error naming `op` and the image.
  /// A squashed image has no layers to give: a one-line kUnsupported error naming `op`.
  Result<std::vector<LayerInput>> layer_inputs(const ImageRecord& image, Op op) const;
  /// Stores bytes after checking they hash to `digest`.
  Status put_blob(std::string_view digest, std::string_view data);
  /// Starts or resumes writing a blob; waits while another process downloads
  /// the same blob. Returns nullopt when the blob is (now) present.
  /// `expected_size` < 0 means unknown.
  Result<std::optional<BlobWriter>> begin_blob(std::string_view digest, int64_t expected_size);

  Result<std::vector<ImageRecord>> list_images() const;
  /// Finds an image by full or short name ("alpine" = docker.io/library/alpine:latest),
  /// by image ID or a unique prefix of it (>= 4 hex digits), or by manifest digest.
  Result<ImageRecord> find_image(std::string_view name_or_id) const;
  /// Adds or replaces (by name) an image record; a replaced record's protection stays, and a
  /// protected record is not replaced by another image (import, load, pull refuse it). The
  /// record replaced, if any, goes to `*replaced`: its blobs are the caller's to release
  /// (release_blobs()) once it no longer holds pin().
  Status add_image(const ImageRecord& rec, std::optional<ImageRecord>* replaced = nullptr);
  /// Records the image `source` designates under the reference `target` as well (Docker's
  /// tag: an existing `target` is replaced). Returns the new record.
  Result<ImageRecord> tag_image(std::string_view source, const std::string& target);
  /// Marks (or unmarks) the record(s) `name_or_id` designates as protected from rmi;
  /// returns the names changed.
  Result<std::vector<std::string>> set_protected(std::string_view name_or_id, bool on);
  /// Publishes a file under tmp/ whose bytes the caller hashed to `digest` (see
  /// image/staging.h), by rename; when the blob is already present the file is removed.
  Status adopt_blob(std::string_view digest, const std::string& path);
  /// Removes the record(s) `name_or_id` designates and every blob no other
  /// record uses; refuses when one of them is protected. Waits for pulls in progress
  /// (see pin()), unless the caller holds sweep_lock() already and passes it.
  Result<RemovedImages> remove_image(std::string_view name_or_id,
                                     const FileLock* held_sweep_lock = nullptr);
  /// Held (shared) by a pull from its first blob check until its record is
  /// added (by import and load while they publish, by create while it unpacks), so that
  /// nothing deletes a blob they found present.
  Result<FileLock> pin() const;
  /// gc.lock exclusively: no pin() is held, so every blob a command relies on is named by a
  /// record. Blocks when `wait`; otherwise held() is false when the store is busy.
  Result<FileLock> sweep_lock(bool wait) const;
  /// Deletes the blobs of `replaced` (records add_image() replaced) that no record uses now,
  /// as rmi would. Never waits: when pulls or imports hold the store, the blobs stay for
  /// `berth gc`. Returns how many were deleted. Call it without holding pin().
  Result<size_t> release_blobs(const std::vector<ImageRecord>& replaced);
  /// Re-hashes every blob an image uses (manifest, index, config, layers).
  Result<std::vector<VerifyProblem>> verify(const ImageRecord& rec) const;

 private:
  std::string root_;
  std::optional<uid_t> shared_owner_;  ///< set by open_shared(): the owner files may have
};

/// The one-line refusal of `op` for a squashed image that needs layers (create, unpack, save).
Error squashed_image_error(Op op, const ImageRecord& image);

}  // namespace berth

// Housekeeping of the image store: what killed or refused commands leave behind, found and
// removed safely while other berth processes run (`berth gc`, `image prune`, `system df`).
//
// Nothing here waits on a lock but the sweep lock (Store::sweep_lock()): every leftover has an
// owner's lock, taken without waiting, and a leftover whose lock is held is in use, never
// touched. docs/architecture.md ("Locks and leftovers") has the whole scheme.
//
//   tmp/<hex>.partial, .lock   a download; its owner holds <hex>.lock while it writes
//   tmp/stage-*/               an import or load; its owner holds stage-*/lock
//   tmp/.new-*/                a staging folder not yet locked: removed once a minute old
//   images.json.tmp.*          a rewrite of the index; written only under <root>/lock
//   version.tmp.*              the layout version of a new store, written without a lock and
//                              renamed at once: removed once a minute old
//   blobs/sha256/<hex>         unused when no record names it; deleted under the sweep lock
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "image/store.h"

namespace berth {

/// What a leftover is; containers' kinds are found by ContainerStore::sweep().
enum class LeftoverKind : uint8_t {
  kBlob,       ///< a blob no image record names
  kDownload,   ///< an interrupted download (tmp/<hex>.partial and its lock file)
  kStaging,    ///< an import's or load's staging folder
  kContainer,  ///< a container half created or half removed (containers/.tmp-<id>)
  kTempFile,   ///< a temporary of an atomic rewrite (images.json.tmp.*, version.tmp.*,
               ///< container.json.tmp.*)
  kName,       ///< a container name whose container is gone
  kVerdict,    ///< a central store file's verdict (central-verified/) for a file version gone
};

/// The kind as a word for people and JSON ("blob", "download", "staging", ...).
std::string_view leftover_kind_word(LeftoverKind k);

/// One thing a sweep found.
struct Leftover {
  LeftoverKind kind = LeftoverKind::kBlob;
  std::string path;     ///< absolute
  std::string digest;   ///< kBlob and kDownload: the blob's digest
  int64_t bytes = 0;    ///< the bytes its files hold (core/fs.h tree_size)
  bool in_use = false;  ///< its owner runs (holds its lock): left alone, never removed
};

/// The digests in `stored` that no record of `images` uses (manifest, index, config, layers),
/// sorted. Pure: the reference computation of gc.
std::vector<std::string> unreferenced_blobs(const std::vector<std::string>& stored,
                                            const std::vector<ImageRecord>& images);

/// The records `image prune` removes: neither protected nor used by a container (their image
/// ID in `used_ids`); without `all`, only the dangling ones, recorded by digest alone (pulled
/// as REPO@sha256:..., TAG <none>), as Docker counts an image without a tag dangling. Pure.
std::vector<ImageRecord> prune_candidates(const std::vector<ImageRecord>& images,
                                          const std::set<std::string>& used_ids, bool all);

/// The staging folders under tmp/ (stage-*, .new-*); those whose import or load is gone are
/// removed unless `dry_run`. Every new staging area runs it (image/staging.h) as gc does.
Result<std::vector<Leftover>> sweep_staging(const Store& store, bool dry_run);

/// Every download, staging folder and index temporary in the store; those whose owner is
/// gone are removed unless `dry_run` (each under its own lock, taken without waiting).
Result<std::vector<Leftover>> sweep_tmp(const Store& store, bool dry_run);

/// The files under blobs/sha256 that no record names, sorted by path. Only a caller holding
/// the sweep lock may take them for garbage: without it they may be a pull's, not yet recorded.
Result<std::vector<Leftover>> unreferenced_blob_files(const Store& store);

/// Deletes `blobs` (from unreferenced_blob_files()); `sweep_lock` must be held.
Status remove_blobs(const std::vector<Leftover>& blobs, const FileLock& sweep_lock);

/// Releases the blobs of records add_image() replaced (Store::release_blobs()), best effort:
/// a failure is a warning, and what stays is `berth gc`'s. For import, load and pull.
void release_replaced(Store& store, const std::vector<ImageRecord>& replaced);

}  // namespace berth

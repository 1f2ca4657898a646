#include "image/gc.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "core/dir.h"
#include "core/log.h"
#include "core/strings.h"
#include "image/reference.h"

namespace berth {

namespace {

/// A `.new-*` folder is locked a moment after mkdtemp made it (image/staging.cc); one older
/// than this lost its process between the two steps.
constexpr time_t kUnlockedGraceSeconds = 60;

/// The lock of a leftover, taken without waiting. A lock file this probe had to create is
/// unlinked again (under the lock) when the leftover stays: a dry run leaves no trace.
struct Probe {
  FileLock lock;
  std::string path;
  bool created = false;

  static Result<Probe> take(const std::string& path) {
    Probe p;
    p.path = path;
    p.created = !path_exists(path);
    p.lock = BERTH_TRY(FileLock::try_acquire(path));
    return p;
  }
  bool free() const { return lock.held(); }
  /// Unlinks the lock file while it is held (safe: see core/fs.cc lock_impl).
  void drop() {
    if (lock.held()) (void)::unlink(path.c_str());  // best effort: an empty lock file is clutter
  }
  void undo() {
    if (created) drop();
  }
};

bool is_blob_hex(std::string_view name) {
  return name.size() == 64 && is_lower_hex(name);
}

time_t mtime_of(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mtime : 0;
}

/// Downloads: tmp/<hex>.partial with tmp/<hex>.lock, or a lock file alone.
Status sweep_downloads(const Store& store, bool dry_run, std::vector<Leftover>& out) {
  std::string tmp = path_join(store.root(), "tmp");
  std::set<std::string> hexes;
  for (const std::string& n : list_dir(tmp)) {
    for (std::string_view ext : {".partial", ".lock"})
      if (n.ends_with(ext) && is_blob_hex(std::string_view(n).substr(0, n.size() - ext.size())))
        hexes.insert(n.substr(0, n.size() - ext.size()));
  }
  for (const std::string& hex : hexes) {
    std::string partial = path_join(tmp, hex + ".partial");
    Leftover l;
    l.kind = LeftoverKind::kDownload;
    l.digest = "sha256:" + hex;
    l.path = path_exists(partial) ? partial : path_join(tmp, hex + ".lock");
    l.bytes = tree_size(partial);
    auto probe = Probe::take(path_join(tmp, hex + ".lock"));
    if (!probe.ok()) continue;  // best effort: looked at again next time
    l.in_use = !probe->free();
    if (!l.in_use && !dry_run) {
      if (::unlink(partial.c_str()) != 0 && errno != ENOENT) return sys_error("remove", partial);
      probe->drop();
    } else {
      probe->undo();
    }
    out.push_back(std::move(l));
  }
  return {};
}

/// images.json.tmp.*: write_file_atomic's temporaries of a killed index rewrite. The index is
/// rewritten only under <root>/lock (image/image_index.cc), so while gc holds that lock, every
/// one of them is a dead process's.
Status sweep_index_temporaries(const Store& store, bool dry_run, std::vector<Leftover>& out) {
  std::vector<std::string> found;
  for (const std::string& n : list_dir(store.root()))
    if (n.starts_with("images.json.tmp.")) found.push_back(path_join(store.root(), n));
  if (found.empty()) return {};
  auto lock = BERTH_TRY(FileLock::try_acquire(path_join(store.root(), "lock")));
  for (const std::string& path : found) {
    Leftover l{LeftoverKind::kTempFile, path, "", tree_size(path), !lock.held()};
    if (!l.in_use && !dry_run && ::unlink(path.c_str()) != 0 && errno != ENOENT)
      return sys_error("remove", path);
    out.push_back(std::move(l));
  }
  return {};
}

/// version.tmp.*: write_file_atomic's temporaries of the layout version, written without a lock
/// by the first opens of a new store (image/store.cc) and renamed at once: one a minute old
/// lost its process between the two steps.
Status sweep_version_temporaries(const Store& store, bool dry_run, std::vector<Leftover>& out) {
  time_t now = ::time(nullptr);
  for (const std::string& n : list_dir(store.root())) {
    if (!n.starts_with("version.tmp.")) continue;
    std::string path = path_join(store.root(), n);
    Leftover l{LeftoverKind::kTempFile, path, "", tree_size(path),
               now - mtime_of(path) < kUnlockedGraceSeconds};
    if (!l.in_use && !dry_run && ::unlink(path.c_str()) != 0 && errno != ENOENT)
      return sys_error("remove", path);
    out.push_back(std::move(l));
  }
  return {};
}

}  // namespace

std::string_view leftover_kind_word(LeftoverKind k) {
  switch (k) {
    case LeftoverKind::kBlob:
      return "blob";
    case LeftoverKind::kDownload:
      return "download";
    case LeftoverKind::kStaging:
      return "staging";
    case LeftoverKind::kContainer:
      return "container";
    case LeftoverKind::kTempFile:
      return "temporary";
    case LeftoverKind::kName:
      return "name";
    case LeftoverKind::kVerdict:
      return "verdict";
  }
  return "?";
}

std::vector<std::string> unreferenced_blobs(const std::vector<std::string>& stored,
                                            const std::vector<ImageRecord>& images) {
  std::set<std::string> used;
  for (const ImageRecord& r : images)
    for (std::string& d : image_blobs(r)) used.insert(std::move(d));
  std::vector<std::string> out;
  for (const std::string& d : stored)
    if (!used.count(d)) out.push_back(d);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<ImageRecord> prune_candidates(const std::vector<ImageRecord>& images,
                                          const std::set<std::string>& used_ids, bool all) {
  std::vector<ImageRecord> out;
  for (const ImageRecord& r : images) {
    if (r.is_protected || used_ids.count(r.config_digest)) continue;
    if (!all) {
      auto ref = parse_reference(r.name);
      if (!ref.ok() || !ref->tag.empty() || ref->digest.empty()) continue;
    }
    out.push_back(r);
  }
  return out;
}

Result<std::vector<Leftover>> sweep_staging(const Store& store, bool dry_run) {
  std::string tmp = path_join(store.root(), "tmp");
  std::vector<Leftover> out;
  time_t now = std::time(nullptr);
  for (const std::string& n : list_dir(tmp)) {  // no tmp/ yet lists empty: nothing abandoned
    bool fresh = n.starts_with(".new-");
    if (!n.starts_with("stage-") && !fresh) continue;
    std::string dir = path_join(tmp, n);
    Leftover l{LeftoverKind::kStaging, dir, "", tree_size(dir), true};
    // A .new-* folder is not locked yet for a moment after it is made: young ones are in use.
    if (!fresh || now - mtime_of(dir) > kUnlockedGraceSeconds) {
      auto probe = Probe::take(path_join(dir, "lock"));
      if (!probe.ok()) continue;  // removed meanwhile, or unreadable: looked at next time
      l.in_use = !probe->free();
      if (!l.in_use && !dry_run)
        (void)remove_tree(dir);  // best effort: a folder that stays is tried again next time
      else
        probe->undo();
    }
    out.push_back(std::move(l));
  }
  return out;
}

Result<std::vector<Leftover>> sweep_tmp(const Store& store, bool dry_run) {
  std::vector<Leftover> out = BERTH_TRY(sweep_staging(store, dry_run));
  BERTH_CHECK(sweep_downloads(store, dry_run, out));
  BERTH_CHECK(sweep_index_temporaries(store, dry_run, out));
  BERTH_CHECK(sweep_version_temporaries(store, dry_run, out));
  return out;
}

Result<std::vector<Leftover>> unreferenced_blob_files(const Store& store) {
  std::vector<std::string> stored;
  for (const std::string& n : list_dir(path_join(store.root(), "blobs/sha256")))
    if (is_blob_hex(n)) stored.push_back("sha256:" + n);  // strangers are not ours to delete
  std::vector<ImageRecord> images = BERTH_TRY(store.list_images());
  std::vector<Leftover> out;
  for (const std::string& d : unreferenced_blobs(stored, images)) {
    std::string path = store.blob_path(d);
    out.push_back({LeftoverKind::kBlob, path, d, tree_size(path), false});
  }
  return out;
}

Status remove_blobs(const std::vector<Leftover>& blobs, const FileLock& sweep_lock) {
  if (!sweep_lock.held())
    return make_error("gc", "", "blobs may be deleted only under the store's sweep lock");
  for (const Leftover& b : blobs)
    if (::unlink(b.path.c_str()) != 0 && errno != ENOENT) return sys_error("remove", b.path);
  return {};
}

void release_replaced(Store& store, const std::vector<ImageRecord>& replaced) {
  auto released = store.release_blobs(replaced);
  if (!released.ok())
    log::warn("{}; 'berth gc' will remove the replaced image's blobs", released.error().message());
  else if (*released > 0)
    log::debug("released {} blobs of the replaced image", *released);
}

}  // namespace berth

// The image half of the store: images.json (list, find, add, remove) and
// verification of an image's blobs. Every read-modify-write of the index
// holds <root>/lock; readers need no lock because writers replace the file
// by rename.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json.h"
#include "core/strings.h"
#include "image/reference.h"
#include "image/store.h"

namespace berth {

namespace {

using nlohmann::json;

constexpr int kIndexVersion = 1;

std::string index_path(const std::string& root) {
  return path_join(root, "images.json");
}

json to_json(const ImageRecord& r) {
  json j{{"name", r.name},
         {"manifest_digest", r.manifest_digest},
         {"index_digest", r.index_digest},
         {"config_digest", r.config_digest},
         {"manifest_media_type", r.manifest_media_type},
         {"platform",
          {{"os", r.platform.os},
           {"architecture", r.platform.architecture},
           {"variant", r.platform.variant}}},
         {"layers", r.layers},
         {"size", r.size},
         {"pulled", r.pulled},
         {"protected", r.is_protected},
         {"squash", r.squash}};
  if (r.registry) j["registry"] = *r.registry;
  return j;
}

/// Throws nlohmann exceptions on a malformed record; the caller converts them.
ImageRecord from_json(const json& j) {
  ImageRecord r;
  r.name = j.at("name").get<std::string>();
  r.manifest_digest = j.at("manifest_digest").get<std::string>();
  r.index_digest = j.value("index_digest", "");
  r.config_digest = j.at("config_digest").get<std::string>();
  r.manifest_media_type = j.value("manifest_media_type", "");
  if (j.contains("platform")) {
    const json& p = j.at("platform");
    r.platform.os = p.value("os", "");
    r.platform.architecture = p.value("architecture", "");
    r.platform.variant = p.value("variant", "");
  }
  r.layers = j.at("layers").get<std::vector<std::string>>();
  r.size = j.value("size", int64_t{0});
  r.pulled = j.value("pulled", "");
  r.is_protected = j.value("protected", false);
  if (j.contains("registry")) r.registry = j.at("registry").get<std::string>();
  r.squash = j.value("squash", "");
  return r;
}

/// Digests are turned into paths (and deleted by remove_image), so a record
/// with anything but a well-formed digest is refused.
Status check_record(const ImageRecord& r) {
  if (r.name.empty()) return make_error("check image record", "", "empty name");
  for (const auto& d : image_blobs(r))
    BERTH_CHECK(validate_digest(d).with_context("image " + r.name));
  if (r.squashed())  // its layers are only listed, but listed right
    for (const auto& d : r.layers) BERTH_CHECK(validate_digest(d).with_context("image " + r.name));
  return {};
}

/// Reads images.json; for a shared store, only a file it trusts (Store::check_shared()).
Result<std::vector<ImageRecord>> load_index(const Store& store) {
  std::string path = index_path(store.root());
  auto fd = open_file(path, O_RDONLY);
  if (!fd.ok()) {
    if (fd.error().sys_errno == ENOENT) return std::vector<ImageRecord>{};
    return std::move(fd).error();
  }
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return sys_error("stat", path);
  BERTH_CHECK(store.check_shared(path, st));
  auto text = read_fd(fd->get(), path);
  if (!text.ok()) return std::move(text).error();
  std::vector<ImageRecord> out;
  auto parsed = parse_json(*text, path);
  if (!parsed)
    return make_error("read image index", path, "corrupt: " + parsed.error().detail)
        .with_hint("restore or delete the file; blobs stay under blobs/sha256");
  try {
    const json& j = *parsed;
    int version = j.at("version").get<int>();
    if (version != kIndexVersion)
      return make_error("read image index", path,
                        "version " + std::to_string(version) + " is not supported");
    for (const auto& item : j.at("images")) out.push_back(from_json(item));
  } catch (const json::exception& e) {
    return make_error("read image index", path, "corrupt: " + json_error_text(e))
        .with_hint("restore or delete the file; blobs stay under blobs/sha256");
  }
  for (const auto& r : out) BERTH_CHECK(check_record(r).with_context("read image index " + path));
  return out;
}

Status save_index(const std::string& root, const std::vector<ImageRecord>& recs) {
  json images = json::array();
  for (const auto& r : recs) images.push_back(to_json(r));
  json j = {{"version", kIndexVersion}, {"images", std::move(images)}};
  return write_file_atomic(index_path(root), to_text(j, 2) + "\n");
}

Result<FileLock> lock_index(const std::string& root) {
  return FileLock::acquire(path_join(root, "lock"));
}

/// What a user's string designated: records by index into `recs`.
struct Match {
  std::vector<size_t> which;
  bool by_name = false;
};

Result<Match> resolve(const std::vector<ImageRecord>& recs, std::string_view s) {
  Match m;
  auto by_name = [&](std::string_view name) {
    for (size_t i = 0; i < recs.size(); ++i)
      if (recs[i].name == name) m.which.push_back(i);
    m.by_name = !m.which.empty();
    return m.by_name;
  };
  if (by_name(s)) return m;
  if (auto ref = parse_reference(s); ref.ok() && by_name(ref->str())) return m;

  // Image ID: the full config digest, or a prefix of its hex of 4+ digits.
  std::string_view want = s;
  bool full = s.substr(0, 7) == "sha256:";
  if (full) want = s.substr(7);
  if (want.size() >= 4 && want.size() <= 64 && is_lower_hex(want) && (!full || want.size() == 64)) {
    std::set<std::string> ids;
    for (size_t i = 0; i < recs.size(); ++i) {
      if (digest_hex(recs[i].config_digest).substr(0, want.size()) == want) {
        m.which.push_back(i);
        ids.insert(recs[i].config_digest);
      }
    }
    if (ids.size() > 1)
      return make_error("find image", std::string(s),
                        "image ID prefix " + std::string(want) + " is ambiguous")
          .with_hint("give more digits of the ID");
    if (!m.which.empty()) return m;
  }

  // Manifest digest (or the index it was chosen from, as `pull` prints).
  for (size_t i = 0; i < recs.size(); ++i)
    if (recs[i].manifest_digest == s ||
        (!recs[i].index_digest.empty() && recs[i].index_digest == s))
      m.which.push_back(i);
  if (!m.which.empty()) return m;
  return make_error("find image", std::string(s), "no such image", ErrorCode::kNotFound)
      .with_hint("see 'berth images'");
}

/// Deletes the blobs of `doomed` that no record of `kept` uses; the caller holds the sweep
/// lock. Returns how many files it deleted.
Result<size_t> delete_unused(const Store& store, const std::vector<ImageRecord>& doomed,
                             const std::vector<ImageRecord>& kept) {
  std::set<std::string> in_use;
  for (const auto& r : kept)
    for (auto& d : image_blobs(r)) in_use.insert(std::move(d));
  size_t deleted = 0;
  std::set<std::string> done;
  for (const auto& r : doomed) {
    for (const auto& d : image_blobs(r)) {
      if (in_use.count(d) || !done.insert(d).second) continue;
      std::string path = store.blob_path(d);
      if (::unlink(path.c_str()) == 0)
        ++deleted;
      else if (errno != ENOENT)
        return sys_error("remove", path);
    }
  }
  return deleted;
}

}  // namespace

std::vector<std::string> image_blobs(const ImageRecord& r) {
  std::vector<std::string> out{r.manifest_digest};
  if (!r.index_digest.empty()) out.push_back(r.index_digest);
  out.push_back(r.config_digest);
  if (r.squashed())
    out.push_back(r.squash);
  else
    out.insert(out.end(), r.layers.begin(), r.layers.end());
  return out;
}

Result<std::vector<ImageRecord>> Store::list_images() const {
  auto recs = BERTH_TRY(load_index(*this));
  std::stable_sort(recs.begin(), recs.end(),
                   [](const ImageRecord& a, const ImageRecord& b) { return a.name < b.name; });
  return recs;
}

Result<ImageRecord> Store::find_image(std::string_view name_or_id) const {
  auto recs = BERTH_TRY(list_images());
  Match m = BERTH_TRY(resolve(recs, name_or_id));
  return recs[m.which.front()];  // sorted by name, so several tags of one ID give the first
}

Status Store::add_image(const ImageRecord& rec, std::optional<ImageRecord>* replaced) {
  BERTH_CHECK(check_record(rec));
  FileLock lock = BERTH_TRY(lock_index(root_));
  auto recs = BERTH_TRY(load_index(*this));
  auto it = std::find_if(recs.begin(), recs.end(),
                         [&](const ImageRecord& r) { return r.name == rec.name; });
  if (it != recs.end()) {
    if (it->is_protected && it->config_digest != rec.config_digest)
      return make_error("replace image", rec.name, "image " + rec.name + " is protected")
          .with_hint("run 'berth unprotect " + rec.name + "' first");
    bool was_protected = it->is_protected;
    if (replaced) *replaced = *it;
    *it = rec;
    it->is_protected = it->is_protected || was_protected;
  } else
    recs.push_back(rec);
  return save_index(root_, recs);
}

Result<ImageRecord> Store::tag_image(std::string_view source, const std::string& target) {
  Reference ref = BERTH_TRY(parse_reference(target).with_context("tag " + target));
  if (!ref.digest.empty())
    return make_error("tag", target, "a tag cannot carry a digest").with_hint("use REPO[:TAG]");
  FileLock lock = BERTH_TRY(lock_index(root_));
  auto recs = BERTH_TRY(load_index(*this));
  Match m = BERTH_TRY(resolve(recs, source));
  ImageRecord rec = recs[m.which.front()];
  if (!rec.registry) {  // an older record: where it came from goes by the name it had
    auto from = parse_reference(rec.name);
    if (from.ok()) rec.registry = from->registry;
  }
  rec.name = ref.str();
  rec.is_protected = false;
  auto it = std::find_if(recs.begin(), recs.end(),
                         [&](const ImageRecord& r) { return r.name == rec.name; });
  if (it != recs.end()) {
    if (it->is_protected && it->config_digest != rec.config_digest)
      return make_error("tag", rec.name, "image " + rec.name + " is protected")
          .with_hint("run 'berth unprotect " + rec.name + "' first");
    rec.is_protected = it->is_protected;
    *it = rec;
  } else {
    recs.push_back(rec);
  }
  BERTH_CHECK(save_index(root_, recs));
  return rec;
}

Result<std::vector<std::string>> Store::set_protected(std::string_view name_or_id, bool on) {
  FileLock lock = BERTH_TRY(lock_index(root_));
  auto recs = BERTH_TRY(load_index(*this));
  Match m = BERTH_TRY(resolve(recs, name_or_id));
  std::vector<std::string> names;
  for (size_t i : m.which) {
    recs[i].is_protected = on;
    names.push_back(recs[i].name);
  }
  BERTH_CHECK(save_index(root_, recs));
  std::sort(names.begin(), names.end());
  return names;
}

Result<FileLock> Store::pin() const {
  return FileLock::acquire(path_join(root_, "gc.lock"), FileLock::Mode::kShared);
}

Result<FileLock> Store::sweep_lock(bool wait) const {
  std::string path = path_join(root_, "gc.lock");
  return wait ? FileLock::acquire(path) : FileLock::try_acquire(path);
}

Result<size_t> Store::release_blobs(const std::vector<ImageRecord>& replaced) {
  if (replaced.empty()) return size_t{0};
  FileLock gc = BERTH_TRY(sweep_lock(false));
  // Busy: a pull may have found one of these blobs present and rely on it. gc reclaims them.
  if (!gc.held()) return size_t{0};
  auto recs = BERTH_TRY(load_index(*this));  // read whole by rename: no index lock needed
  return delete_unused(*this, replaced, recs);
}

Result<RemovedImages> Store::remove_image(std::string_view name_or_id,
                                          const FileLock* held_sweep_lock) {
  FileLock gc;
  if (!held_sweep_lock) gc = BERTH_TRY(sweep_lock(true));
  FileLock lock = BERTH_TRY(lock_index(root_));
  auto recs = BERTH_TRY(load_index(*this));
  Match m = BERTH_TRY(resolve(recs, name_or_id));
  for (size_t i : m.which)
    if (recs[i].is_protected)
      return make_error("rmi", std::string(name_or_id), "image " + recs[i].name + " is protected")
          .with_hint("run 'berth unprotect " + recs[i].name + "' first");

  std::vector<ImageRecord> removed, kept;
  for (size_t i = 0; i < recs.size(); ++i) {
    bool hit = std::find(m.which.begin(), m.which.end(), i) != m.which.end();
    (hit ? removed : kept).push_back(std::move(recs[i]));
  }
  // Index first: a crash in between leaves unused blobs, never a record
  // pointing at deleted ones.
  BERTH_CHECK(save_index(root_, kept));

  RemovedImages out;
  for (const auto& r : removed) out.names.push_back(r.name);
  out.blobs_deleted = BERTH_TRY(delete_unused(*this, removed, kept));
  std::sort(out.names.begin(), out.names.end());
  return out;
}

Result<std::vector<VerifyProblem>> Store::verify(const ImageRecord& rec) const {
  std::vector<VerifyProblem> problems;
  std::set<std::string> seen;  // images may repeat a layer (empty layers often are)
  for (const auto& d : image_blobs(rec)) {
    if (!seen.insert(d).second) continue;
    if (!validate_digest(d).ok()) {
      problems.push_back({d, "invalid digest"});
      continue;
    }
    std::string path = blob_path(d);
    if (!path_exists(path)) {
      problems.push_back({d, "missing"});
      continue;
    }
    auto actual = sha256_file(path);
    if (!actual.ok()) {
      problems.push_back({d, "unreadable: " + actual.error().message()});
      continue;
    }
    if (*actual != d) problems.push_back({d, "digest mismatch: got " + *actual});
  }
  return problems;
}

}  // namespace berth

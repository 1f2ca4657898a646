#include "image/load.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "core/json.h"
#include "image/archive_api.h"
#include "image/image_archive.h"
#include "image/image_config.h"
#include "image/layer_file.h"
#include "image/manifest.h"
#include "image/platform.h"
#include "image/reference.h"
#include "image/rootfs_path.h"
#include "image/staging.h"
#include "image/tar_writer.h"
#include "image/unpack.h"

namespace berth {

namespace {

using nlohmann::json;

/// The archive name a symlink entry `name` pointing at `target` designates, ".." resolved
/// lexically; "" when it leaves the archive.
std::string resolve_link(const std::string& name, const std::string& target) {
  std::vector<std::string> parts;
  std::string path =
      target.starts_with("/") ? target : name.substr(0, name.rfind('/') + 1) + target;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string comp = path.substr(i, j - i);
    i = j + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp != "..") {
      parts.push_back(comp);
    } else if (parts.empty()) {
      return "";
    } else {
      parts.pop_back();
    }
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

/// The archive's files, staged, by normalised name; links resolved to their targets.
class ArchiveFiles {
 public:
  ArchiveFiles(Staging& staging, std::string what) : staging_(staging), what_(std::move(what)) {}

  Status read(int fd);
  bool has(const std::string& name) const { return find(name) != nullptr; }
  /// A staged file by archive name; error when the archive lacks it.
  Result<StagedFile> get(const std::string& name) const;
  /// The whole (small) file as text.
  Result<std::string> text(const std::string& name) const;
  /// The JSON document in a file.
  Result<json> parse(const std::string& name) const;
  /// The blob `digest`, checked against it (and against `size` when >= 0).
  Result<StagedFile> blob(const std::string& digest, int64_t size) const;
  const std::string& what() const { return what_; }

 private:
  const StagedFile* find(std::string name) const;
  Staging& staging_;
  std::string what_;
  std::map<std::string, StagedFile> files_;
  std::map<std::string, std::string> links_;  // name -> target name
};

Status ArchiveFiles::read(int fd) {
  const ArchiveApi& a = archive_api();
  ArchiveReader ar = BERTH_TRY(open_archive_reader(fd, ArchiveFormat::kTar, "load", what_));
  auto fail = [&](const std::string& entry) -> Error {
    std::string detail = archive_message(ar.get());
    if (!entry.empty()) detail = "entry \"" + entry + "\": " + detail;
    return make_error("load", what_, detail);
  };
  for (;;) {
    archive_entry* e = nullptr;
    int r = a.read_next_header(ar.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r == ARCHIVE_RETRY) continue;
    if (r < ARCHIVE_WARN) return fail("");
    const char* raw = a.entry_pathname(e);
    std::string name;
    if (raw == nullptr || normalize_entry_name(raw, name) == EntryName::kEscapes)
      return make_error("load", what_,
                        "entry \"" + std::string(raw ? raw : "") + "\" escapes the archive");
    const char* hardlink = a.entry_hardlink(e);
    mode_t type = a.entry_filetype(e);
    if (hardlink) {
      std::string target;
      if (normalize_entry_name(hardlink, target) == EntryName::kPath) links_[name] = target;
    } else if (type == AE_IFLNK && a.entry_symlink(e) != nullptr) {
      // docker save links a layer seen twice to its first copy: "../<id>/layer.tar".
      std::string target = resolve_link(name, a.entry_symlink(e));
      if (!target.empty()) links_[name] = target;
    } else if (type == AE_IFREG) {
      StagedWriter w = BERTH_TRY(staging_.begin());
      BERTH_CHECK(read_data_blocks(
          ar.get(), [&w](const char* data, size_t size, int64_t) { return w.write(data, size); },
          [&] { return fail(name); }));
      files_[name] = BERTH_TRY(w.finish());
    }
  }
  return {};
}

const StagedFile* ArchiveFiles::find(std::string name) const {
  for (int hops = 0; hops < 8; ++hops) {
    if (auto it = files_.find(name); it != files_.end()) return &it->second;
    auto link = links_.find(name);
    if (link == links_.end()) return nullptr;
    name = link->second;
  }
  return nullptr;
}

Result<StagedFile> ArchiveFiles::get(const std::string& name) const {
  std::string n;
  normalize_entry_name(name, n);
  if (const StagedFile* f = find(n)) return *f;
  return make_error("load", what_, "the archive has no file \"" + name + "\"");
}

Result<std::string> ArchiveFiles::text(const std::string& name) const {
  StagedFile f = BERTH_TRY(get(name));
  return read_file(f.path);
}

Result<json> ArchiveFiles::parse(const std::string& name) const {
  std::string t = BERTH_TRY(text(name));
  auto j = parse_json(t, "\"" + name + "\"");
  if (!j) return make_error("load", what_, std::move(j).error().message());
  return j;
}

Result<StagedFile> ArchiveFiles::blob(const std::string& digest, int64_t size) const {
  BERTH_CHECK(validate_digest(digest).with_context("load " + what_));
  std::string name = archive_blob_name(digest);
  const StagedFile* f = find(name);
  if (!f) return make_error("load", what_, "blob " + digest + " is missing from the archive");
  if (f->digest != digest)
    return make_error("load", what_,
                      "blob " + digest + ": digest mismatch: the archive holds " + f->digest);
  if (size >= 0 && f->size != size)
    return make_error("load", what_,
                      "blob " + digest + ": size mismatch: expected " + std::to_string(size) +
                          " bytes, the archive holds " + std::to_string(f->size));
  return *f;
}

/// The platform and diff IDs the archive's image config declares.
Result<ImageConfig> config_facts(const ArchiveFiles& files, const StagedFile& config) {
  std::string text = BERTH_TRY(read_file(config.path));
  return parse_image_config(text, config.digest).with_context("load " + files.what());
}

/// Checks the layers against the config's diff IDs and unpacks them once, as `create`
/// will: a corrupt layer or an entry escaping the root is refused now.
Status check_layers(Staging& staging, const ArchiveFiles& files, const ImageConfig& facts,
                    const std::vector<StagedFile>& layers) {
  if (facts.diff_ids.size() != layers.size())
    return make_error("load", files.what(),
                      "the image config lists " + std::to_string(facts.diff_ids.size()) +
                          " layers, the manifest " + std::to_string(layers.size()));
  std::vector<LayerInput> paths;
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string layer_what = files.what() + " (layer " + std::to_string(i + 1) + ")";
    LayerFileInfo info = BERTH_TRY(
        inspect_layer_file(layers[i].path, layers[i].digest, layer_what).with_context("load"));
    if (info.diff_id != facts.diff_ids[i])
      return make_error("load", files.what(),
                        "layer " + std::to_string(i + 1) + ": digest mismatch: the config says " +
                            facts.diff_ids[i] + ", the archive holds " + info.diff_id);
    paths.push_back(layers[i].path);
  }
  std::string check = staging.new_path();
  if (auto st = unpack_layers(paths, check); !st.ok()) {
    Error e = std::move(st).error();
    for (size_t i = 0; i < paths.size(); ++i)  // the archive's layer, not the staged copy
      if (e.subject == paths[i].path)
        e.subject = files.what() + " (layer " + std::to_string(i + 1) + ")";
    return std::move(e).with_context("load");
  }
  (void)remove_tree(check);  // best effort: the staging folder goes away with it
  return {};
}

/// Adds `name` (parsed, fully qualified) to `names` unless there already.
Status add_name(std::vector<std::string>& names, const std::string& name, const std::string& what) {
  Reference ref = BERTH_TRY(parse_reference(name).with_context("load " + what));
  std::string full = ref.str();
  if (std::find(names.begin(), names.end(), full) == names.end()) names.push_back(full);
  return {};
}

/// Docker's manifest.json names, by config digest.
Result<std::map<std::string, std::vector<std::string>>> docker_tags(const ArchiveFiles& files) {
  std::map<std::string, std::vector<std::string>> out;
  if (!files.has("manifest.json")) return out;
  json m = BERTH_TRY(files.parse("manifest.json"));
  if (!m.is_array()) return out;
  for (const auto& item : m) {
    if (!item.is_object() || !item.contains("Config") || !item["Config"].is_string()) continue;
    auto config = files.get(item["Config"].get<std::string>());
    if (!config.ok()) continue;
    for (const auto& t : item.value("RepoTags", json::array()))
      if (t.is_string()) out[config->digest].push_back(t.get<std::string>());
  }
  return out;
}

Result<std::vector<StagedImage>> read_oci_layout(Staging& staging, const ArchiveFiles& files) {
  json index_json = BERTH_TRY(files.parse("index.json"));
  IndexManifest index = BERTH_TRY(
      parse_index(to_text(index_json), media::kOciIndex).with_context("load " + files.what()));
  auto tags = BERTH_TRY(docker_tags(files));
  std::vector<StagedImage> out;
  for (const Descriptor& top : index.manifests) {
    StagedImage img;
    Descriptor d = top;
    StagedFile top_file = BERTH_TRY(files.blob(top.digest, top.size));
    img.files.push_back(top_file);
    std::string body = BERTH_TRY(read_file(top_file.path));
    std::string type = d.media_type.empty() ? detect_manifest_media_type(body, "") : d.media_type;
    if (is_index_media_type(type)) {
      IndexManifest inner = BERTH_TRY(parse_index(body, type).with_context("load " + files.what()));
      d = BERTH_TRY(select_platform(inner, host_platform()).with_context("load " + files.what()));
      StagedFile f = BERTH_TRY(files.blob(d.digest, d.size));
      img.files.push_back(f);
      body = BERTH_TRY(read_file(f.path));
      type = d.media_type.empty() ? detect_manifest_media_type(body, "") : d.media_type;
      img.record.index_digest = top.digest;
    }
    ImageManifest m =
        BERTH_TRY(parse_image_manifest(body, type).with_context("load " + files.what()));
    StagedFile config = BERTH_TRY(files.blob(m.config.digest, m.config.size));
    img.files.push_back(config);
    std::vector<StagedFile> layers;
    for (const Descriptor& l : m.layers) {
      BERTH_TRY(layer_compression(l.media_type).with_context("load " + files.what()));
      layers.push_back(BERTH_TRY(files.blob(l.digest, l.size)));
      img.record.layers.push_back(l.digest);
      img.record.size += l.size;
    }
    ImageConfig facts = BERTH_TRY(config_facts(files, config));
    BERTH_CHECK(check_layers(staging, files, facts, layers));
    img.files.insert(img.files.end(), layers.begin(), layers.end());
    img.record.manifest_digest = d.digest;
    img.record.manifest_media_type = m.media_type;
    img.record.config_digest = m.config.digest;
    img.record.platform = facts.platform;

    // The entry's own name; Docker's manifest.json only for an entry without one.
    std::string name = name_from_annotations(top.annotations);
    if (!name.empty())
      BERTH_CHECK(add_name(img.names, name, files.what()));
    else
      for (const std::string& t : tags[m.config.digest])
        BERTH_CHECK(add_name(img.names, t, files.what()));
    if (img.names.empty()) {
      std::string tag =
          top.annotations.is_object() ? top.annotations.value(kRefNameAnnotation, "") : "";
      BERTH_CHECK(add_name(img.names, unnamed_image_name(m.config.digest, tag), files.what()));
    }
    out.push_back(std::move(img));
  }
  return out;
}

Result<std::vector<StagedImage>> read_docker_save(Staging& staging, const ArchiveFiles& files) {
  json manifest = BERTH_TRY(files.parse("manifest.json"));
  if (!manifest.is_array())
    return make_error("load", files.what(), "manifest.json is not a JSON array");
  std::vector<StagedImage> out;
  for (const auto& item : manifest) {
    if (!item.is_object() || !item.contains("Config") || !item["Config"].is_string() ||
        !item.contains("Layers") || !item["Layers"].is_array())
      return make_error("load", files.what(), "manifest.json: an entry lacks Config or Layers");
    std::string config_name = item["Config"].get<std::string>();
    StagedFile config = BERTH_TRY(files.get(config_name));
    // Docker names the config after its digest ("<hex>.json", or "blobs/sha256/<hex>").
    std::string base = config_name.substr(config_name.rfind('/') + 1);
    if (base.ends_with(".json")) base.resize(base.size() - 5);
    if (validate_digest("sha256:" + base).ok() && config.digest != "sha256:" + base)
      return make_error(
          "load", files.what(),
          "config \"" + config_name + "\": digest mismatch: the archive holds " + config.digest);
    StagedImage img;
    img.files.push_back(config);
    json layer_descs = json::array();
    std::vector<StagedFile> layers;
    for (const auto& l : item["Layers"]) {
      if (!l.is_string()) return make_error("load", files.what(), "manifest.json: bad layer path");
      std::string path = l.get<std::string>();
      StagedFile f = BERTH_TRY(files.get(path));
      std::string lb = path.substr(path.rfind('/') + 1);
      if (path.starts_with("blobs/sha256/") && f.digest != "sha256:" + lb)
        return make_error("load", files.what(),
                          "layer \"" + path + "\": digest mismatch: the archive holds " + f.digest);
      UniqueFd fd = BERTH_TRY(open_file(f.path, O_RDONLY));
      char head[8] = {};
      ssize_t n = ::read(fd.get(), head, sizeof head);
      if (n < 0) return sys_error("read", f.path);
      Compression c = BERTH_TRY(sniff_compression(std::string_view(head, n), path));
      layer_descs.push_back(
          {{"mediaType", oci_layer_media_type(c)}, {"digest", f.digest}, {"size", f.size}});
      layers.push_back(f);
      img.record.layers.push_back(f.digest);
      img.record.size += f.size;
    }
    ImageConfig facts = BERTH_TRY(config_facts(files, config));
    BERTH_CHECK(check_layers(staging, files, facts, layers));
    img.files.insert(img.files.end(), layers.begin(), layers.end());
    json m = {
        {"schemaVersion", 2},
        {"mediaType", media::kOciManifest},
        {"config",
         {{"mediaType", media::kOciConfig}, {"digest", config.digest}, {"size", config.size}}},
        {"layers", layer_descs}};
    std::string text = to_text(m);
    img.record.manifest_digest = sha256_digest(text);
    img.made.emplace_back(img.record.manifest_digest, text);
    img.record.manifest_media_type = media::kOciManifest;
    img.record.config_digest = config.digest;
    img.record.platform = facts.platform;
    for (const auto& t : item.value("RepoTags", json::array()))
      if (t.is_string()) BERTH_CHECK(add_name(img.names, t.get<std::string>(), files.what()));
    if (img.names.empty())
      BERTH_CHECK(add_name(img.names, unnamed_image_name(config.digest, ""), files.what()));
    out.push_back(std::move(img));
  }
  return out;
}

}  // namespace

std::string name_from_annotations(const json& annotations) {
  if (!annotations.is_object()) return "";
  std::string name = annotations.value(kContainerdNameAnnotation, "");
  if (!name.empty()) return name;
  name = annotations.value(kRefNameAnnotation, "");
  // A bare ref.name is a tag (skopeo, umoci, Docker's own); only a whole reference names.
  if (name.find_first_of("/:@") == std::string::npos) return "";
  return name;
}

std::string unnamed_image_name(const std::string& config_digest, const std::string& tag) {
  std::string t = tag;
  if (t.empty() || !parse_reference("localhost/x:" + t).ok()) t = "latest";
  return "localhost/" + std::string(digest_hex(config_digest).substr(0, 12)) + ":" + t;
}

Result<std::vector<ImageRecord>> load_archive(Store& store, int fd, const std::string& what) {
  Staging staging = BERTH_TRY(Staging::create(store));
  ArchiveFiles files(staging, what);
  BERTH_CHECK(files.read(fd));
  std::vector<StagedImage> images;
  if (files.has("index.json")) {
    images = BERTH_TRY(read_oci_layout(staging, files));
  } else if (files.has("manifest.json")) {
    images = BERTH_TRY(read_docker_save(staging, files));
  } else {
    return make_error("load", what,
                      "not an image archive: it has neither index.json (OCI layout) nor "
                      "manifest.json (docker save)");
  }
  if (images.empty()) return make_error("load", what, "the archive holds no image");
  std::vector<ImageRecord> out;
  for (const StagedImage& img : images) {
    auto recs = BERTH_TRY(publish_staged(store, img));
    out.insert(out.end(), recs.begin(), recs.end());
  }
  return out;
}

Result<std::vector<ImageRecord>> load_directory(Store& store, const std::string& dir) {
  // The folder goes through the very reader a piped `tar -C DIR -c .` meets (and every check
  // of it): a thread writes the tree as a tar into a pipe that load_archive() reads.
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return sys_error("pipe", dir);
  UniqueFd read_end(ends[0]);
  Status written;
  std::thread writer([&written, &dir, fd = ends[1]] {
    // A reader that stops early (a bad blob) closes its end: the writes then fail with EPIPE
    // instead of SIGPIPE killing berth (the signal goes to this thread, which blocks it).
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    written = [&]() -> Status {
      TarWriter tar = BERTH_TRY(TarWriter::open(fd, dir));
      BERTH_CHECK(tar.add_tree(dir));
      return tar.finish();
    }();
    ::close(fd);
  });
  auto loaded = load_archive(store, read_end.get(), dir);
  read_end.reset();
  writer.join();
  if (written.ok()) return loaded;
  // The folder's own error (an unreadable file) says more than the reader's "truncated"; a
  // write that failed because the reader had stopped (EPIPE) says less than the reader.
  const Error& w = written.error();
  const bool after_reader =
      w.sys_errno == EPIPE || w.message().find(std::strerror(EPIPE)) != std::string::npos;
  if (!loaded.ok() && after_reader) return loaded;
  return std::move(written).error().with_context("load");
}

}  // namespace berth

#include "image/save.h"

#include <sys/stat.h>

#include <map>
#include <set>

#include "core/json.h"
#include "image/image_archive.h"
#include "image/manifest.h"
#include "image/reference.h"
#include "image/tar_writer.h"

namespace berth {

using nlohmann::json;

json layout_index(const std::vector<ImageRecord>& images, const std::vector<int64_t>& sizes) {
  json manifests = json::array();
  for (size_t i = 0; i < images.size(); ++i) {
    const ImageRecord& r = images[i];
    json annotations = {{kContainerdNameAnnotation, r.name}};
    if (auto ref = parse_reference(r.name); ref.ok() && !ref->tag.empty())
      annotations[kRefNameAnnotation] = ref->tag;
    json d = {{"mediaType", r.manifest_media_type},
              {"digest", r.manifest_digest},
              {"size", i < sizes.size() ? sizes[i] : 0},
              {"annotations", annotations}};
    if (!r.platform.os.empty()) {
      d["platform"] = {{"os", r.platform.os}, {"architecture", r.platform.architecture}};
      if (!r.platform.variant.empty()) d["platform"]["variant"] = r.platform.variant;
    }
    manifests.push_back(d);
  }
  return {{"schemaVersion", 2}, {"mediaType", media::kOciIndex}, {"manifests", manifests}};
}

json docker_manifest(const std::vector<ImageRecord>& images) {
  json out = json::array();
  std::map<std::string, size_t> by_config;
  for (const ImageRecord& r : images) {
    std::string tag = r.name;
    if (auto ref = parse_reference(r.name); ref.ok()) tag = ref->familiar();
    if (auto it = by_config.find(r.config_digest); it != by_config.end()) {
      out[it->second]["RepoTags"].push_back(tag);
      continue;
    }
    json layers = json::array();
    for (const std::string& l : r.layers) layers.push_back(archive_blob_name(l));
    by_config[r.config_digest] = out.size();
    out.push_back({{"Config", archive_blob_name(r.config_digest)},
                   {"RepoTags", json::array({tag})},
                   {"Layers", layers}});
  }
  return out;
}

Status save_archive(const Store& store, const std::vector<ImageRecord>& images, int fd,
                    const std::string& what) {
  std::vector<int64_t> sizes;
  std::vector<std::string> blobs;
  for (const ImageRecord& r : images) {
    if (r.squashed()) return squashed_image_error("save", r);
    for (const std::string& d : r.layers) blobs.push_back(d);
    blobs.push_back(r.config_digest);
    blobs.push_back(r.manifest_digest);
    struct stat st;
    std::string path = store.blob_path(r.manifest_digest);
    if (::stat(path.c_str(), &st) != 0) return sys_error("stat", path);
    sizes.push_back(st.st_size);
  }
  TarWriter w = BERTH_TRY(TarWriter::open(fd, what));
  BERTH_CHECK(w.add_bytes("oci-layout", R"({"imageLayoutVersion":"1.0.0"})"));
  BERTH_CHECK(w.add_dir("blobs"));
  BERTH_CHECK(w.add_dir("blobs/sha256"));
  std::set<std::string> done;
  for (const std::string& d : blobs) {
    if (!done.insert(d).second) continue;
    if (!store.has_blob(d))
      return make_error("save", what, "blob " + d + " is missing from the store")
          .with_hint("pull the image again");
    BERTH_CHECK(w.add_file(archive_blob_name(d), store.blob_path(d), 0444));
  }
  BERTH_CHECK(w.add_bytes("index.json", to_text(layout_index(images, sizes))));
  BERTH_CHECK(w.add_bytes("manifest.json", to_text(docker_manifest(images))));
  return w.finish();
}

}  // namespace berth

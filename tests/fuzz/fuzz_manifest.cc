// Manifests, indexes and image configs as a registry or an archive serves them.
#include "fuzz_util.h"
#include "image/image_config.h"
#include "image/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body = berth::fuzz::as_text(data, size);
  std::string type = berth::detect_manifest_media_type(body, "");
  if (berth::is_index_media_type(type)) {
    if (auto index = berth::parse_index(body, type); index.ok()) {
      auto want = berth::parse_platform("linux/amd64");
      if (want.ok()) (void)berth::select_platform(*index, *want);
    }
  } else if (auto m = berth::parse_image_manifest(body, type); m.ok()) {
    for (const auto& l : m->layers) (void)berth::layer_compression(l.media_type);
  }
  if (auto c = berth::parse_image_config(body, "sha256:fuzz"); c.ok())
    (void)berth::parse_run_settings(c->config);
  return 0;
}

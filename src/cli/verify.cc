// berth verify IMAGE, berth unpack IMAGE DIR
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "image/unpack.h"

namespace berth::cli {

Action setup_verify(CLI::App& app, const GlobalOptions& g) {
  auto name = std::make_shared<std::string>();
  app.add_option("IMAGE", *name, "Image name, ID or digest")->required();
  return [name, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    ImageRecord rec = BERTH_TRY(store.find_image(*name));
    std::vector<VerifyProblem> problems = BERTH_TRY(store.verify(rec));
    size_t blobs = image_blobs(rec).size();  // a layer repeated counts each time, as listed
    if (problems.empty()) {
      std::printf("%s: %zu blobs verified\n", rec.name.c_str(), blobs);
      return {};
    }
    for (const auto& p : problems) std::printf("%s: %s\n", p.digest.c_str(), p.what.c_str());
    return make_error("verify", rec.name,
                      std::to_string(problems.size()) + " of " + std::to_string(blobs) +
                          " blobs failed verification")
        .with_hint("pull the image again to repair it: berth rmi " + rec.name + " && berth pull " +
                   rec.name);
  };
}

Action setup_unpack(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string image, dir;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("IMAGE", o->image, "Image name, ID or digest")->required();
  app.add_option("DIR", o->dir, "Target directory (must not exist or be empty)")->required();
  return [o, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    // Before the record is read: no rmi or gc deletes a blob of it while it is unpacked.
    FileLock pinned = BERTH_TRY(store.pin());
    ImageRecord rec = BERTH_TRY(store.find_image(o->image));
    std::vector<LayerInput> layers = BERTH_TRY(store.layer_inputs(rec, "unpack"));
    BERTH_TRY(unpack_layers(layers, o->dir).with_context("unpack " + rec.name));
    return {};
  };
}

}  // namespace berth::cli

#include "cli/container_target.h"

#include <cstdio>

#include "cli/context.h"

namespace berth::cli {

Error unknown_flag(Op command, const std::string& flag) {
  return make_error(command, flag, "unknown flag", ErrorCode::kInvalidInput)
      .with_hint("see 'berth " + std::string(command.word()) + " --help'");
}

Result<Target> find_or_create(const GlobalOptions& g, ContainerStore& cs, const std::string& what,
                              const std::string& name, bool allow_existing,
                              const std::vector<std::string>& command) {
  if (allow_existing) {
    if (auto c = cs.find(what); c.ok()) {
      if (!name.empty())
        return make_error("run", what, "--name applies to a new container, not to an existing one");
      return Target{*c, false};
    }
  }
  Store store = BERTH_TRY(open_store(g));
  auto image = store.find_image(what);
  if (!image.ok() && image.error().code != ErrorCode::kNotFound) return std::move(image).error();
  if (!image.ok()) {
    // As Docker does: an image that is not here is pulled first (progress and this line go to
    // stderr; stdout belongs to the container).
    std::fprintf(stderr, "Unable to find image '%s' locally\n", what.c_str());
    std::fflush(stderr);
    // A container needs layers, whatever store_format says (a squashed image runs as it is,
    // without a container: cli/run.cc).
    PullResult pulled = BERTH_TRY(pull_reference(g, what, "", !g.quiet, false));
    image = std::move(pulled.record);
  }
  // Its layers are gone; unpacking the squashfs file instead would keep two copies.
  if (image->squashed()) return squashed_image_error("create", *image);
  return Target{BERTH_TRY(cs.create(store, *image, name, command)), true};
}

}  // namespace berth::cli

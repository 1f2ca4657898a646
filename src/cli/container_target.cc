#include "cli/container_target.h"

#include <cstdio>

#include "cli/context.h"
#include "site/policy.h"

namespace berth::cli {

Error unknown_flag(Op command, const std::string& flag) {
  return make_error(command, flag, "unknown flag", ErrorCode::kInvalidInput)
      .with_hint("see 'berth " + std::string(command.word()) + " --help'");
}

Result<Target> find_or_create(const GlobalOptions& g, ContainerStore& cs, const std::string& what,
                              const std::string& name, bool allow_existing,
                              const std::vector<std::string>& command,
                              ContainerStore::Detail detail) {
  if (allow_existing) {
    if (auto c = cs.find(what, detail); c.ok()) {
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
    PullResult pulled = BERTH_TRY(pull_reference(g, what, "", !g.quiet));
    image = std::move(pulled.record);
  } else {
    // Stored before the policy changed, maybe: a registry it no longer allows is refused.
    const SiteConfig& site = BERTH_TRY(g.site);
    BERTH_CHECK(check_stored_image_allowed(site, *image)
                    .with_context(std::string(allow_existing ? "run " : "create ") + what));
  }
  return Target{BERTH_TRY(cs.create(store, *image, name, command)), true};
}

}  // namespace berth::cli

// berth protect, unprotect: guard an image or a container against rmi and rm.
#include <memory>

#include "cli/context.h"

namespace berth::cli {
namespace {

/// Containers first, as `inspect` looks things up.
Status set_protected(const GlobalOptions& g, const std::string& name, bool on) {
  ContainerStore cs = BERTH_TRY(open_containers(g));
  if (auto c = cs.find(name); c.ok()) return cs.set_protected(*c, on);
  Store store = BERTH_TRY(open_store(g));
  auto names = store.set_protected(name, on);
  if (!names.ok() && names.error().code == ErrorCode::kNotFound)
    return make_error(on ? Op("protect") : Op("unprotect"), name, "no such image or container",
                      ErrorCode::kNotFound);
  if (!names.ok()) return std::move(names).error();
  return {};
}

Action setup(CLI::App& app, const GlobalOptions& g, bool on) {
  auto names = std::make_shared<std::vector<std::string>>();
  app.add_option("NAME", *names, "Image or container names or IDs")->required();
  return [names, &g, on]() -> Status {
    for (const std::string& n : *names) BERTH_CHECK(set_protected(g, n, on));
    return {};
  };
}

}  // namespace

Action setup_protect(CLI::App& app, const GlobalOptions& g) {
  return setup(app, g, true);
}
Action setup_unprotect(CLI::App& app, const GlobalOptions& g) {
  return setup(app, g, false);
}

}  // namespace berth::cli

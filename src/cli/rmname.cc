// berth rmname: removes one of a container's names.
#include <memory>

#include "cli/context.h"

namespace berth::cli {

Action setup_rmname(CLI::App& app, const GlobalOptions& g) {
  auto name = std::make_shared<std::string>();
  app.add_option("NAME", *name, "The name to remove")->required();
  return [name, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    return cs.remove_name(*name);
  };
}

}  // namespace berth::cli

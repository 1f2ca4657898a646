// berth name: gives a container one more name.
#include <memory>
#include <utility>

#include "cli/context.h"

namespace berth::cli {

Action setup_name(CLI::App& app, const GlobalOptions& g) {
  auto args = std::make_shared<std::pair<std::string, std::string>>();
  app.add_option("CONTAINER", args->first, "Container name or ID")->required();
  app.add_option("NAME", args->second, "The new name")->required();
  return [args, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(args->first));
    return cs.add_name(c, args->second);
  };
}

}  // namespace berth::cli

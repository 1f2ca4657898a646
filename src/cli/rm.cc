// berth rm: removes containers.
#include <cstdio>
#include <memory>

#include "cli/context.h"

namespace berth::cli {

Action setup_rm(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::vector<std::string> names;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("-f,--force", o->force, "Remove running containers too");
  app.add_option("CONTAINER", o->names, "Container names or IDs")->required();
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    for (const std::string& n : o->names) {
      ContainerRecord c = BERTH_TRY(cs.find(n));
      BERTH_CHECK(cs.remove(c, o->force));
      std::printf("%s\n", n.c_str());
    }
    return {};
  };
}

}  // namespace berth::cli

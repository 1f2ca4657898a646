// berth rm: removes containers.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/context.h"

namespace berth::cli {

Action setup_rm(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::vector<std::string> names;
    bool force = false;
    int time = 10;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("-f,--force", o->force, "Stop and remove running containers too");
  app.add_option("-t,--time", o->time,
                 "With -f: seconds to wait after SIGTERM before SIGKILL (default 10)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("CONTAINER", o->names, "Container names or IDs")->required();
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    for (const std::string& n : o->names) {
      ContainerRecord c = BERTH_TRY(cs.find(n));
      if (o->force && !c.is_protected && c.running) {
        BERTH_CHECK(cs.stop(c, o->time));
        if (::access(cs.dir(c).c_str(), F_OK) != 0) {  // a run --rm removed it as it ended
          std::printf("%s\n", n.c_str());
          continue;
        }
      }
      BERTH_CHECK(cs.remove(c, o->force));
      std::printf("%s\n", n.c_str());
    }
    return {};
  };
}

}  // namespace berth::cli

// berth clone, rename: copying and renaming containers.
#include <cstdio>
#include <memory>

#include "cli/context.h"

namespace berth::cli {

Action setup_clone(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string container, name;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("CONTAINER", o->container, "Container name or ID")->required();
  app.add_option("--name", o->name, "Name the copy");
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(o->container));
    ContainerRecord copy = BERTH_TRY(cs.clone(c, o->name));
    std::printf("%s\n", copy.id.c_str());
    return {};
  };
}

Action setup_rename(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string container, name;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("CONTAINER", o->container, "Container name or ID")->required();
  app.add_option("NEW_NAME", o->name, "The container's new (and only) name")->required();
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(o->container));
    return cs.rename(c, o->name);
  };
}

}  // namespace berth::cli

// berth setup, and the engine choice `berth run` makes.
#include "cli/engine.h"

#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "core/log.h"
#include "runtime/engines.h"
#include "runtime/fakechroot_engine.h"

namespace berth::cli {

Result<RunOutcome> run_with_engine(ContainerStore& cs, const ContainerRecord& c,
                                   const ContainerSpec& spec, const std::string& requested) {
  std::string name = !requested.empty() ? requested : !c.engine.empty() ? c.engine : kDefaultEngine;
  std::string said;
  const Engine* engine = BERTH_TRY(choose_engine(name, &said));
  if (!said.empty()) std::fprintf(stderr, "berth: %s\n", said.c_str());
  log::debug("{}: the {} engine", c.short_id(), engine->name);
  // fakechroot leaves symlink resolution to the host kernel: absolute links must name host
  // paths while it runs the container, and image paths again for every other engine.
  std::string rootfs = cs.rootfs(c);
  std::string want = engine->host_path_links ? rootfs : "";
  if (c.link_prefix != want) {
    size_t n = BERTH_TRY(rewrite_symlinks(rootfs, c.link_prefix, want));
    log::debug("{}: {} absolute symlinks rewritten for the {} engine", c.short_id(), n, engine->name);
    BERTH_CHECK(cs.set_link_prefix(c, want));
  }
  EngineRun run;
  run.spec = &spec;
  run.engine = engine;
  run.work_dir = cs.dir(c);
  run.run_name = "berth-" + c.short_id() + "-" + std::to_string(::getpid());
  return engine->run(run);
}

Action setup_setup(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string engine, container;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("--engine", o->engine, "Default engine for the container: " + engine_names());
  app.add_option("CONTAINER", o->container, "Container name or ID")->required();
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(o->container));
    if (o->engine.empty()) {
      std::printf("%s\n", c.engine.empty() ? kDefaultEngine : c.engine.c_str());
      return {};
    }
    BERTH_CHECK(validate_engine_name(o->engine));
    // Recorded even when the engine is missing here: the container may run on another node.
    std::string said;
    if (auto e = choose_engine(o->engine, &said); !e.ok())
      log::warn("{}", e.error().message());
    return cs.set_engine(c, o->engine == kDefaultEngine ? "" : o->engine);
  };
}

}  // namespace berth::cli

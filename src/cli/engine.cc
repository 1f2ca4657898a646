// berth setup, and the engine choice `berth run` makes.
#include "cli/engine.h"

#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "cli/policy.h"
#include "cli/udocker.h"
#include "core/log.h"
#include "devices/gpu_select.h"
#include "runtime/engines.h"
#include "runtime/link_form.h"

namespace berth::cli {

EngineChoice engine_for(const ContainerRecord& c, std::optional<EngineChoice> requested,
                        const SiteConfig* site) {
  if (requested) return *requested;
  if (c.engine) return *c.engine;
  return site != nullptr ? site_default_engine(*site) : default_engine();
}

Result<RunOutcome> run_with_engine(ContainerStore& cs, const ContainerRecord& c,
                                   const ContainerSpec& spec, std::optional<EngineChoice> requested,
                                   const SiteConfig* site) {
  std::string said;
  const Engine* engine = BERTH_TRY(choose_engine(engine_for(c, requested, site), &said));
  if (site != nullptr) BERTH_CHECK(check_run_engine(*site, EngineChoice{engine, engine->name}));
  if (!said.empty()) std::fprintf(stderr, "berth: %s\n", said.c_str());
  log::debug("{}: the {} engine", c.short_id(), engine->name);
  EngineRun run;
  run.spec = &spec;
  run.engine = engine;
  run.work_dir = cs.dir(c);
  run.run_name = "berth-" + c.short_id() + "-" + std::to_string(::getpid());
  if (site != nullptr) run.runtime_dir = site->runtime_dir;
  return run_with_link_form(cs, c, run);
}

Action setup_setup(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string engine, container, gpus, link_dir;
    bool gpus_given = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("--engine", o->engine, "Default engine for the container: " + engine_names());
  app.add_option("--gpus", o->gpus,
                 "GPUs every run of the container injects unless it says --gpus (none: clear)")
      ->each([o](const std::string&) { o->gpus_given = true; });
  app.add_option("--udocker-link", o->link_dir,
                 "Make DIR/udocker, a link to this berth that takes udocker's command line");
  app.add_option("CONTAINER", o->container, "Container name or ID");
  return [o, &g]() -> Status {
    if (!o->link_dir.empty()) {
      if (!o->container.empty() || !o->engine.empty() || o->gpus_given)
        return make_error("setup", "--udocker-link", "takes no container and no other option");
      return make_udocker_link(o->link_dir);
    }
    if (o->container.empty())
      return make_error("setup", "CONTAINER", "a container is required")
          .with_hint("berth setup [--engine=NAME] [--gpus=SPEC] CONTAINER, or --udocker-link DIR");
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(o->container));
    if (o->gpus_given && o->gpus != "none") BERTH_CHECK(parse_gpus_flag(o->gpus));
    if (o->gpus_given) BERTH_CHECK(cs.set_gpus(c, o->gpus == "none" ? "" : o->gpus));
    if (o->engine.empty()) {
      if (!o->gpus_given)
        std::printf("%s\n", std::string(engine_for(c, std::nullopt, nullptr).spelled).c_str());
      return {};
    }
    EngineChoice engine = BERTH_TRY(parse_engine(o->engine));
    const SiteConfig& site = BERTH_TRY(g.site);
    if (!engine.is_auto()) BERTH_CHECK(check_run_engine(site, engine));
    // Recorded even when the engine is missing here: the container may run on another node.
    std::string said;
    if (auto e = choose_engine(engine, &said); !e.ok()) log::warn("{}", e.error().message());
    // udocker's mode label no longer says what runs: cleared. The default is recorded as none.
    std::optional<EngineChoice> recorded;
    if (engine != default_engine()) recorded = engine;
    return cs.set_udocker_mode(c, recorded, "");
  };
}

}  // namespace berth::cli

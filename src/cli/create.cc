// berth create: a container from an image, without running it.
#include <cstdio>
#include <memory>

#include "cli/container_target.h"
#include "cli/context.h"
#include "cli/run.h"
#include "core/env_list.h"

namespace berth::cli {

Action setup_create(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    RunOptions run;
    std::string name;
    std::string pull = "missing";
    std::string platform;
  };
  auto o = std::make_shared<Opts>();
  // Docker's create takes run's options; `berth start` runs with them (cli/lifecycle.cc).
  add_run_options(app, o->run, o->name, g.mentioned);
  if (g.mentioned.any("--pull"))
    app.add_option("--pull", o->pull, "Pull the image: always, missing (default) or never");
  if (g.mentioned.any("--platform"))
    app.add_option("--platform", o->platform,
                   "The image's platform, os/arch[/variant]: pulled for it when the stored one "
                   "is another");
  return [o, &g, &app]() -> Status {
    set_exit_status(kExitBerthFailed);
    const std::string& name = o->name;
    BERTH_CHECK(check_pull_policy("create", o->pull));
    std::vector<std::string> rest = app.remaining();
    if (!rest.empty() && rest.front().starts_with("-")) return unknown_flag("create", rest.front());
    if (rest.empty())
      return make_error("create", "IMAGE", "an image is required")
          .with_hint("berth create [OPTIONS] IMAGE [COMMAND [ARG...]]");
    ContainerStore cs = BERTH_TRY(open_containers(g));
    std::vector<std::string> command(rest.begin() + 1, rest.end());
    // Options that depend on the moment are resolved now, as Docker does: relative volumes,
    // --env-file's contents, -e KEY's host value.
    std::vector<std::string> host_env = current_environment();
    BERTH_CHECK(resolve_typed_options(o->run, host_env));
    nlohmann::json options = options_record(o->run, given_run_options(app), host_env);
    const auto labels = BERTH_TRY(parse_labels(o->run.labels));
    ContainerRecord c = BERTH_TRY(
        create_from_image(g, cs, rest.front(), name, "create", command, o->pull, o->platform));
    if (!options.empty()) BERTH_CHECK(cs.set_run_options(c, options));
    BERTH_CHECK(cs.add_labels(c, labels));
    std::printf("%s\n", c.id.c_str());
    set_exit_status(0);
    return {};
  };
}

}  // namespace berth::cli

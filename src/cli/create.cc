// berth create: a container from an image, without running it.
#include <cstdio>
#include <memory>

#include "cli/container_target.h"
#include "cli/context.h"

namespace berth::cli {

Action setup_create(CLI::App& app, const GlobalOptions& g) {
  auto name = std::make_shared<std::string>();
  auto pull = std::make_shared<std::string>("missing");
  app.add_option("--name", *name, "Name the container");
  app.add_option("--pull", *pull, "Pull the image: always, missing (default) or never");
  app.prefix_command();
  return [name, pull, &g, &app]() -> Status {
    set_exit_status(kExitBerthFailed);
    BERTH_CHECK(check_pull_policy("create", *pull));
    std::vector<std::string> rest = app.remaining();
    if (!rest.empty() && rest.front().starts_with("-")) return unknown_flag("create", rest.front());
    if (rest.empty())
      return make_error("create", "IMAGE", "an image is required")
          .with_hint("berth create [--name NAME] IMAGE [COMMAND [ARG...]]");
    ContainerStore cs = BERTH_TRY(open_containers(g));
    std::vector<std::string> command(rest.begin() + 1, rest.end());
    ContainerRecord c =
        BERTH_TRY(create_from_image(g, cs, rest.front(), *name, "create", command, *pull));
    std::printf("%s\n", c.id.c_str());
    set_exit_status(0);
    return {};
  };
}

}  // namespace berth::cli

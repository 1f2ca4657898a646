// berth ps: the containers, as a table, IDs only, or JSON.
#include <cstdio>
#include <memory>

#include "cli/context.h"

namespace berth::cli {
namespace {

std::string ps_status(const ContainerRecord& c) {
  if (c.running) return "Running";
  if (c.last_exit) return "Exited (" + std::to_string(*c.last_exit) + ")";
  return "Created";
}

std::string ps_command(const ContainerRecord& c) {
  std::string cmd;
  for (const std::string& a : c.last_command) cmd += (cmd.empty() ? "" : " ") + a;
  if (cmd.size() > 30) cmd = cmd.substr(0, 27) + "...";
  return "\"" + cmd + "\"";
}

}  // namespace

Action setup_ps(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    bool json = false, quiet = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("--json", o->json, "Print a JSON array");
  app.add_flag("-q,--quiet", o->quiet, "Print container IDs only");
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    std::vector<ContainerRecord> all = BERTH_TRY(cs.list());
    if (o->json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& c : all) arr.push_back(container_json(cs, c));
      print_json(arr);
      return {};
    }
    if (o->quiet) {
      for (const auto& c : all) std::printf("%s\n", c.short_id().c_str());
      return {};
    }
    std::vector<std::vector<std::string>> rows = {
        {"CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "NAMES"}};
    for (const auto& c : all) {
      std::string names;
      for (const auto& n : c.names) names += (names.empty() ? "" : ",") + n;
      rows.push_back({c.short_id(), c.image, ps_command(c), c.created, ps_status(c), names});
    }
    print_table(rows);
    return {};
  };
}

}  // namespace berth::cli

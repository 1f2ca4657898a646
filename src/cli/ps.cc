// berth ps: the containers, as a table, IDs only, JSON or a template; running ones unless -a.
#include <cstdio>
#include <ctime>
#include <memory>

#include "cli/context.h"
#include "core/clock.h"
#include "core/json.h"
#include "runtime/monitor.h"

namespace berth::cli {
namespace {

/// "Up 5 seconds", "Exited (0) 2 minutes ago", "Created", as `docker ps` says.
std::string ps_status(const ContainerRecord& c, const RunTimes& t, int64_t now_s) {
  if (c.running)
    return "Up " + (t.started_ns > 0 ? human_duration(now_s - t.started_ns / 1000000000)
                                     : std::string("Less than a second"));
  if (t.exit_code) {
    std::string s = "Exited (" + std::to_string(*t.exit_code) + ")";
    if (t.finished_ns > 0) s += " " + human_duration(now_s - t.finished_ns / 1000000000) + " ago";
    return s;
  }
  return "Created";
}

std::string ps_command(const ContainerRecord& c) {
  std::string cmd;
  for (const std::string& a : c.last_command) cmd += (cmd.empty() ? "" : " ") + a;
  if (cmd.size() > 30) cmd = cmd.substr(0, 27) + "...";
  return "\"" + cmd + "\"";
}

std::string ps_created(const ContainerRecord& c, int64_t now_s) {
  int64_t t = parse_rfc3339(c.created);
  return t < 0 ? c.created : human_duration(now_s - t) + " ago";
}

}  // namespace

Action setup_ps(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    bool json = false, quiet = false, all = false;
    std::string format;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("-a,--all", o->all, "Show every container (default: the running ones)");
  app.add_flag("--json", o->json, "Print every container as one JSON array (whatever -a says)");
  app.add_flag("-q,--quiet", o->quiet, "Print container IDs only");
  app.add_option("--format", o->format,
                 "A Go template per container ({{.ID}} {{.Status}} ...; see docs/docker.md), or "
                 "'json' for one JSON object a line");
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    std::vector<ContainerRecord> all = BERTH_TRY(cs.list());
    if (o->json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& c : all) arr.push_back(container_json(cs, c));
      print_json(arr);
      return {};
    }
    int64_t now_s = static_cast<int64_t>(std::time(nullptr));
    std::vector<std::vector<std::string>> rows = {
        {"CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "NAMES"}};
    for (const auto& c : all) {
      if (!o->all && !c.running) continue;
      if (o->quiet) {
        std::printf("%s\n", c.short_id().c_str());
        continue;
      }
      RunTimes t = run_times(cs, c);
      std::string names;
      for (const auto& n : c.names) names += (names.empty() ? "" : ",") + n;
      if (!o->format.empty()) {
        // Docker's `ps --format` fields, beside what `inspect` shows.
        nlohmann::json view = container_template_view(cs, c);
        view["ID"] = c.short_id();
        view["Image"] = c.image;
        view["Command"] = ps_command(c);
        view["CreatedAt"] = c.created;
        view["RunningFor"] = ps_created(c, now_s);
        view["Status"] = ps_status(c, t, now_s);
        view["State"] = view["status"];
        view["Names"] = names;
        if (o->format == "json") {
          nlohmann::json line = nlohmann::json::object();
          for (const char* k :
               {"ID", "Image", "Command", "CreatedAt", "RunningFor", "Status", "State", "Names"})
            line[k] = view[k];
          std::printf("%s\n", to_text(line).c_str());
        } else {
          BERTH_CHECK(print_template(o->format, view));
        }
        continue;
      }
      rows.push_back({c.short_id(), c.image, ps_command(c), ps_created(c, now_s),
                      ps_status(c, t, now_s), names});
    }
    if (!o->quiet && o->format.empty()) print_table(rows);
    return {};
  };
}

}  // namespace berth::cli

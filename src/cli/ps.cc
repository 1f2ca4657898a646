// berth ps: the containers, newest first, as a table, IDs only, JSON or a template; running
// ones unless -a, -n, -l or a status filter says otherwise.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>

#include "cli/context.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/safe_text.h"
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
  for (const std::string& a : container_command(c)) cmd += (cmd.empty() ? "" : " ") + a;
  // Cut to 20 columns as Docker's ps cuts it (its formatter.Ellipsis: 19 characters and an
  // ellipsis; a character is counted as one column, where Docker counts East Asian wide ones
  // as two), then quoted as it quotes it (Go's strconv.Quote).
  size_t chars = 0, cut = std::string::npos;
  for (size_t i = 0; i < cmd.size(); ++i) {
    if ((static_cast<unsigned char>(cmd[i]) & 0xC0) == 0x80) continue;  // inside a character
    if (++chars == 20) cut = i;
    if (chars > 20) {
      cmd = cmd.substr(0, cut) + "\u2026";
      break;
    }
  }
  return go_quote(cmd);
}

std::string ps_created(const ContainerRecord& c, int64_t now_s) {
  int64_t t = parse_rfc3339(c.created);
  return t < 0 ? c.created : human_duration(now_s - t) + " ago";
}

/// Docker's state word for a container: running, exited or created.
std::string ps_state(const ContainerRecord& c, const RunTimes& t) {
  return c.running ? "running" : t.exit_code ? "exited" : "created";
}

/// `ps --filter KEY=VALUE`, as Docker reads them: filters of one key match when any of them
/// does, filters of different keys must all match.
struct PsFilters {
  std::vector<std::string> names, ids, states;
  std::vector<std::string> labels;  ///< KEY or KEY=VALUE; each must match (as Docker's)

  /// Adds one KEY=VALUE; returns what is wrong with it, "" when nothing is.
  std::string add(const std::string& spec) {
    size_t eq = spec.find('=');
    std::string key = spec.substr(0, eq), value = eq == spec.npos ? "" : spec.substr(eq + 1);
    if (eq == spec.npos || value.empty())
      return "expected KEY=VALUE (name, id, status or label), not '" + spec + "'";
    if (key == "name") {
      names.push_back(value);
    } else if (key == "id") {
      ids.push_back(value);
    } else if (key == "status") {
      if (value != "created" && value != "running" && value != "exited")
        return "status '" + value +
               "': a status is created, running or exited (a rootless container is never "
               "paused, restarting or dead)";
      states.push_back(value);
    } else if (key == "label") {
      labels.push_back(value);
    } else {
      return "unknown filter '" + key + "': Berth filters on name, id, status and label";
    }
    return "";
  }

  bool match(const ContainerRecord& c, const std::string& state) const {
    auto any = [](const std::vector<std::string>& wanted, auto&& pred) {
      return wanted.empty() || std::any_of(wanted.begin(), wanted.end(), pred);
    };
    return any(names,
               [&](const std::string& n) {
                 return std::any_of(c.names.begin(), c.names.end(), [&](const std::string& name) {
                   return name.find(n) != std::string::npos;
                 });
               }) &&
           any(ids, [&](const std::string& i) { return c.id.starts_with(i); }) &&
           any(states, [&](const std::string& s) { return s == state; }) &&
           std::all_of(labels.begin(), labels.end(), [&](const std::string& l) {
             const nlohmann::json set = c.image_config.value("Labels", nlohmann::json::object());
             size_t eq = l.find('=');
             auto it = set.is_object() ? set.find(l.substr(0, eq)) : set.end();
             if (!set.is_object() || it == set.end()) return false;
             return eq == std::string::npos || (it->is_string() && *it == l.substr(eq + 1));
           });
  }
};

}  // namespace

Action setup_ps(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    bool json = false, quiet = false, all = false, latest = false;
    int last = -1;
    std::string format;
    std::vector<std::string> filters;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("-a,--all", o->all, "Show every container (default: the running ones)");
  app.add_option("-f,--filter", o->filters,
                 "Only containers that match KEY=VALUE: name (part of a name), id (a prefix), "
                 "status (created, running, exited), label=KEY[=VALUE]; repeatable, as docker ps "
                 "--filter")
      ->check(CLI::Validator([](std::string& v) { return PsFilters().add(v); }, "KEY=VALUE"));
  app.add_option("-n,--last", o->last, "Show the N containers created last, in any state")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("-l,--latest", o->latest, "Show the container created last, in any state");
  app.add_flag("--json", o->json, "Print every container as one JSON array (whatever -a says)");
  app.add_flag("-q,--quiet", o->quiet, "Print container IDs only");
  app.add_option("--format", o->format,
                 "A Go template per container ({{.ID}} {{.Status}} ...; see docs/docker.md), or "
                 "'json' for one JSON object a line");
  return [o, &g]() -> Status {
    PsFilters filters;
    for (const std::string& f : o->filters) filters.add(f);  // checked by the parser
    ContainerStore cs = BERTH_TRY(open_containers(g));
    std::vector<ContainerRecord> all = BERTH_TRY(cs.list());
    // Newest first, as Docker lists them; -n/-l keep the newest, whatever their state, and
    // so does a status filter (docker ps -f status=exited needs no -a).
    std::stable_sort(all.begin(), all.end(),
                     [](const ContainerRecord& a, const ContainerRecord& b) {
                       return parse_rfc3339(a.created) > parse_rfc3339(b.created);
                     });
    if (o->latest) o->last = 1;
    if (o->last >= 0 && all.size() > static_cast<size_t>(o->last)) all.resize(o->last);
    bool every = o->all || o->last >= 0 || !filters.states.empty();
    if (o->json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& c : all)
        if (filters.match(c, ps_state(c, run_times(cs, c)))) arr.push_back(container_json(cs, c));
      print_json(arr);
      return {};
    }
    int64_t now_s = static_cast<int64_t>(std::time(nullptr));
    std::vector<std::vector<std::string>> rows = {
        {"CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "NAMES"}};
    for (const auto& c : all) {
      if (!every && !c.running) continue;
      RunTimes t = run_times(cs, c);
      if (!filters.match(c, ps_state(c, t))) continue;
      if (o->quiet) {
        std::printf("%s\n", c.short_id().c_str());
        continue;
      }
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

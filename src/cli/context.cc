#include "cli/context.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "cli/engine.h"
#include "core/clock.h"
#include "core/env.h"
#include "core/fs.h"
#include "core/go_template.h"
#include "core/json.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/safe_text.h"
#include "image/reference.h"
#include "runtime/monitor.h"
#include "site/central_store.h"
#include "site/policy.h"

namespace berth::cli {

namespace {
std::string home_of(const GlobalOptions& g) {
  return g.home.empty() ? berth_home() : g.home;
}
}  // namespace

Result<Store> open_store(const GlobalOptions& g) {
  return Store::open(home_of(g));
}

Result<bool> squash_wanted(const GlobalOptions& g, std::optional<bool> flag, Op op) {
  const SiteConfig& site = BERTH_TRY(g.site);
  if (!flag) return site.squash_store();
  if (*flag != site.squash_store())
    BERTH_CHECK(check_not_locked(site, "store_format", *flag ? "--squash" : "--no-squash", op));
  return *flag;
}

Result<std::optional<FoundImage>> find_image_anywhere(const GlobalOptions& g, const Store& own,
                                                      const std::string& name) {
  auto rec = own.find_image(name);
  if (rec.ok()) return std::optional<FoundImage>(FoundImage{own, *rec, false});
  if (rec.error().code != ErrorCode::kNotFound) return std::move(rec).error();
  const SiteConfig& site = BERTH_TRY(g.site);
  std::optional<Store> central = BERTH_TRY(open_central_store(site));
  if (!central) return std::optional<FoundImage>();
  auto there = central->find_image(name);
  if (!there.ok()) {
    if (there.error().code == ErrorCode::kNotFound) return std::optional<FoundImage>();
    return std::move(there).error();
  }
  return std::optional<FoundImage>(FoundImage{std::move(*central), *there, true});
}

Result<ContainerStore> open_containers(const GlobalOptions& g) {
  return ContainerStore::open(home_of(g));
}

namespace {

nlohmann::json time_or_null(int64_t ns) {
  if (ns <= 0) return nullptr;
  return rfc3339(ns / 1000000000);
}

}  // namespace

nlohmann::json container_json(const ContainerStore& cs, const ContainerRecord& c) {
  RunTimes t = run_times(cs, c);
  nlohmann::json j = {{"id", c.id},
                      {"names", c.names},
                      {"name", c.names.empty() ? "" : c.names.front()},
                      {"image", c.image},
                      {"image_id", c.image_id},
                      {"created", c.created},
                      {"status", c.running     ? "running"
                                 : t.exit_code ? "exited"
                                               : "created"},
                      {"command", container_command(c)},
                      {"rootfs", cs.rootfs(c)},
                      {"engine", std::string(engine_for(c, std::nullopt, nullptr).spelled)},
                      {"config", c.image_config},
                      {"protected", c.is_protected}};
  j["exit_code"] = t.exit_code ? nlohmann::json(*t.exit_code) : nlohmann::json(nullptr);
  j["started_at"] = time_or_null(t.started_ns);
  j["finished_at"] = time_or_null(t.finished_ns);
  j["detached"] = t.detached;
  // The workload's pid while it runs (the Slurm plugin's holder), and why the last detached
  // run failed in Berth (what its monitor printed to the log), as Docker's State.Error.
  j["pid"] = c.running ? workload_pid(runner_pid(cs, c)) : 0;
  j["error"] = t.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.error);
  return j;
}

Status print_template(const std::string& tmpl, const nlohmann::json& data) {
  std::string out = BERTH_TRY(render_template(tmpl, data));
  std::printf("%s\n", out.c_str());
  return {};
}

std::vector<std::string> container_command(const ContainerRecord& c) {
  if (!c.last_command.empty()) return c.last_command;
  // Before the first run's end (and all through a --rm run) the record holds only what
  // create wrote: the image's Entrypoint and the Cmd, which create replaced by the command.
  std::vector<std::string> argv;
  if (!c.image_config.is_object()) return argv;
  for (const char* key : {"Entrypoint", "Cmd"}) {
    auto it = c.image_config.find(key);
    if (it == c.image_config.end() || !it->is_array()) continue;
    for (const auto& a : *it)
      if (a.is_string()) argv.push_back(a.get<std::string>());
  }
  return argv;
}

nlohmann::json docker_config_view(const nlohmann::json& config) {
  // Docker's container config type (what `docker inspect` shows as .Config), each field's zero
  // value: a template that asks for a field the image left out prints "", [] or map[].
  static const nlohmann::json zero = {
      {"Hostname", ""},
      {"Domainname", ""},
      {"User", ""},
      {"AttachStdin", false},
      {"AttachStdout", false},
      {"AttachStderr", false},
      {"Tty", false},
      {"OpenStdin", false},
      {"StdinOnce", false},
      {"Env", nlohmann::json::array()},
      {"Cmd", nlohmann::json::array()},
      {"Image", ""},
      {"Volumes", nlohmann::json::object()},
      {"WorkingDir", ""},
      {"Entrypoint", nlohmann::json::array()},
      {"OnBuild", nlohmann::json::array()},
      {"Labels", nlohmann::json::object()},
      {"ExposedPorts", nlohmann::json::object()},
      {"StopSignal", ""},
  };
  nlohmann::json view = zero;
  if (config.is_object())
    for (const auto& [k, v] : config.items())
      if (!v.is_null()) view[k] = v;
  return view;
}

nlohmann::json container_template_view(const ContainerStore& cs, const ContainerRecord& c) {
  nlohmann::json j = container_json(cs, c);
  // Docker's names for the same facts (docker inspect's), for --format templates.
  j["Id"] = c.id;
  j["Name"] = c.names.empty() ? "" : "/" + c.names.front();
  j["Created"] = c.created;
  j["Image"] = c.image_id;
  std::vector<std::string> argv = container_command(c);
  j["Path"] = argv.empty() ? "" : argv.front();
  j["Args"] = argv.empty() ? nlohmann::json::array()
                           : nlohmann::json(std::vector<std::string>(argv.begin() + 1, argv.end()));
  nlohmann::json config = docker_config_view(c.image_config);
  config["Image"] = c.image;
  j["Config"] = config;
  j["State"] = {{"Status", j["status"]},
                {"Running", c.running},
                {"Pid", j["pid"]},
                {"Error", j["error"].is_null() ? nlohmann::json("") : j["error"]},
                {"ExitCode", j["exit_code"].is_null() ? nlohmann::json(0) : j["exit_code"]},
                {"StartedAt", j["started_at"]},
                {"FinishedAt", j["finished_at"]}};
  return j;
}

Result<RegistryOptions> registry_options(const GlobalOptions& g) {
  RegistryOptions opts;
  opts.insecure = g.insecure;
  std::stringstream env(env_or("BERTH_INSECURE_REGISTRIES", ""));
  for (std::string item; std::getline(env, item, ',');)
    if (!item.empty()) opts.insecure.push_back(item);
  SiteConfig site = BERTH_TRY(g.site);
  opts.insecure.insert(opts.insecure.end(), site.insecure_registries.begin(),
                       site.insecure_registries.end());
  if (site.pull_low_speed_limit > 0) opts.low_speed_limit = site.pull_low_speed_limit;
  if (site.pull_low_speed_time > 0) opts.low_speed_time_s = site.pull_low_speed_time;
  return opts;
}

Result<RegistryOptions> registry_options_for(const GlobalOptions& g, const std::string& registry) {
  const SiteConfig& site = BERTH_TRY(g.site);
  BERTH_CHECK(check_registry_allowed(site, registry));
  return registry_options(g);
}

Result<DiscoveryOptions> discovery_options(const GlobalOptions& g) {
  SiteConfig site = BERTH_TRY(g.site);
  DiscoveryOptions configured;
  if (!site.driver_root.empty()) configured.driver_root = site.driver_root;
  configured.dev_root = site.dev_root;
  DiscoveryOptions o = BERTH_TRY(discovery_options_from_env(configured));
  // A root the site locks is not the environment's to move.
  if (site.is_locked("driver_root") && o.driver_root != configured.driver_root)
    BERTH_CHECK(check_not_locked(site, "driver_root", "BERTH_DRIVER_ROOT=" + o.driver_root));
  if (site.is_locked("dev_root") && o.dev_root != configured.dev_root)
    BERTH_CHECK(check_not_locked(site, "dev_root", "BERTH_DEV_ROOT=" + o.dev_root));
  return o;
}

Result<FileLock> wait_for_sweep_lock(const GlobalOptions& g, const Store& store, Op op,
                                     int timeout_s) {
  FileLock lock = BERTH_TRY(store.sweep_lock(false));
  if (lock.held()) return lock;
  constexpr const char* kWaiting =
      "Waiting for the commands using the store's blobs (pull, import, load, create, squash, "
      "save, unpack) to finish...";
  if (!g.quiet && ProgressMeter::stderr_is_terminal())
    std::fprintf(stderr, "%s\n", kWaiting);
  else
    log::info("{}", kWaiting);
  if (timeout_s <= 0) return store.sweep_lock(true);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    ::usleep(100 * 1000);
    lock = BERTH_TRY(store.sweep_lock(false));
    if (lock.held()) return lock;
  }
  return make_error(op, store.root(),
                    "the store is still busy after " + std::to_string(timeout_s) +
                        " s: a command using its blobs (pull, import, load, create, squash, save, "
                        "unpack) holds it",
                    ErrorCode::kBusy)
      .with_hint("try again when it has finished, or with a longer --timeout");
}

std::pair<std::string, std::string> image_repo_and_tag(const std::string& name) {
  auto ref = parse_reference(name);
  if (!ref.ok()) return {name, "<none>"};
  Reference r = *ref;
  std::string tag = r.tag.empty() ? "<none>" : r.tag;
  r.tag.clear();
  r.digest.clear();
  return {r.familiar(), tag};
}

std::string size_with_share(int64_t part, int64_t whole) {
  if (whole <= 0) return human_size(part);
  return human_size(part) + " (" + std::to_string(part * 100 / whole) + "%)";
}

void print_table(const std::vector<std::vector<std::string>>& cells) {
  std::vector<std::vector<std::string>> rows;  // names and tags may come from a registry
  for (const auto& row : cells) {
    rows.emplace_back();
    for (const auto& cell : row) rows.back().push_back(safe_text(cell));
  }
  // Widths in characters, not bytes (ps's "…" is three), each counted as one column.
  auto columns = [](const std::string& cell) {
    return static_cast<size_t>(std::count_if(cell.begin(), cell.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
  };
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], columns(row[i]));
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - columns(row[i]) + 3, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

void print_json(const nlohmann::json& j) {
  std::puts(to_text(j, 2).c_str());
}

}  // namespace berth::cli

// berth version, berth info: what this berth is, and what it finds on this host.
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "cli/context.h"
#include "cli/engine.h"
#include "cli/policy.h"
#include "core/build_info.h"
#include "core/env.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/progress.h"
#include "core/safe_text.h"
#include "devices/rdma.h"
#include "image/platform.h"
#include "runtime/container_spec.h"
#include "runtime/engines.h"
#include "runtime/root_emulation.h"
#include "runtime/subids.h"
#include "runtime/tool.h"
#include "site/policy_keys.h"

namespace berth::cli {
namespace {

/// Where an engine's tool is, found as the engine finds it, or "" when it is not here.
std::string find(const Engine& engine, const EngineTool& tool) {
  auto path = tool.find != nullptr ? tool.find(tool, engine.package)
                                   : find_tool(tool.name, tool.env_var, engine.package);
  return path.ok() ? *path : "";
}

/// Bytes the tree under `root` takes on disk (hard links once); unreadable parts are skipped.
int64_t disk_usage(const std::string& root) {
  int64_t total = 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::error_code ec;
  auto opts = std::filesystem::directory_options::skip_permission_denied;
  for (auto it = std::filesystem::recursive_directory_iterator(root, opts, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;  // removed meanwhile
    if (st.st_nlink > 1 && !seen.insert({st.st_dev, st.st_ino}).second) continue;
    total += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return total;
}

std::string kernel_release() {
  struct utsname u;
  return ::uname(&u) == 0 ? u.release : "unknown";
}

std::string compiler() {
#ifdef __clang__
  return "clang " __clang_version__;
#else
  return "gcc " __VERSION__;
#endif
}

nlohmann::json version_json() {
  std::string slurm = build_info::kSlurmRelease;
  return {{"version", BERTH_VERSION},
          {"git_commit", build_info::kGitCommit},
          // The release spank_berth.so was built for (Slurm loads it only into that major.minor).
          {"slurm_release", slurm.empty() ? nlohmann::json(nullptr) : nlohmann::json(slurm)},
          {"compiler", compiler()},
          {"cplusplus", __cplusplus},
          {"build_type", BERTH_BUILD_TYPE},
          {"platform", host_platform().str()}};
}

/// The policy in force, key by key, with where each value came from (site/policy_keys.h).
nlohmann::json policy_json(const SiteConfig& c) {
  auto file = [](const std::string& p) {
    return p.empty() ? nlohmann::json(nullptr) : nlohmann::json(p);
  };
  return {{"site_file", file(c.site_path)},
          {"user_file", file(c.user_path)},
          {"user_config_json", file(c.path)},
          {"settings", policy_settings(c)},
          {"ignored", c.ignored}};
}

/// A policy value as one line of text.
std::string policy_text(const nlohmann::json& v) {
  if (v.is_null()) return "(any)";
  if (v.is_string()) return v.get<std::string>().empty() ? "(none)" : v.get<std::string>();
  if (v.is_array() && v.empty()) return "(none)";
  if (v.is_array() &&
      std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_string(); })) {
    std::string out;
    for (const auto& e : v) out += (out.empty() ? "" : ", ") + e.get<std::string>();
    return out;
  }
  return to_text(v);
}

}  // namespace

Action setup_version(CLI::App& app, const GlobalOptions&) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON");
  return [json]() -> Status {
    nlohmann::json v = version_json();
    if (*json) {
      print_json(v);
      return {};
    }
    std::string build = v["build_type"].get<std::string>();
    std::string slurm = build_info::kSlurmRelease;
    std::printf("berth %s\n", BERTH_VERSION);
    print_table({{" Git commit:", build_info::kGitCommit},
                 {" Slurm plugin for:", slurm.empty() ? "(not built)" : "Slurm " + slurm},
                 {" Compiler:", compiler()},
                 {" Build type:", build.empty() ? "default" : build},
                 {" OS/Arch:", v["platform"].get<std::string>()}});
    return {};
  };
}

Action setup_info(CLI::App& app, const GlobalOptions& g) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON");
  return [json, &g]() -> Status {
    const SiteConfig& site = BERTH_TRY(g.site);
    Store store = BERTH_TRY(open_store(g));
    ContainerStore cs = BERTH_TRY(open_containers(g));
    size_t images = BERTH_TRY(store.list_images()).size();
    size_t containers = BERTH_TRY(cs.list()).size();
    int64_t usage = disk_usage(store.root());
    Status userns = probe_user_namespaces();
    nlohmann::json engines = nlohmann::json::array();
    std::vector<std::string> usable;                 // what `run --engine` can use here
    nlohmann::json facts = nlohmann::json::array();  // the engine table's rows
    for (const Engine& e : engine_table()) {
      bool available = e.available(e).ok();
      // A built-in engine is listed by its name, an engine with tools by each of them.
      if (e.tools.empty())
        engines.push_back({{"name", e.name}, {"found", available}, {"path", "(built in)"}});
      for (const EngineTool& t : e.tools) {
        std::string where = find(e, t);
        engines.push_back({{"name", t.name}, {"found", !where.empty()}, {"path", where}});
      }
      if (available) usable.push_back(e.name);
      facts.push_back({{"name", e.name},
                       {"package", e.package},
                       {"available", available},
                       {"root_inside", e.root_inside},
                       {"read_only_volumes", e.read_only_volumes},
                       {"devices", e.devices},
                       {"pid_namespace", e.pid_namespace},
                       {"hostname", e.hostname},
                       {"needs_user_namespaces", e.needs_user_namespaces}});
    }
    nlohmann::json j = {{"version", BERTH_VERSION},
                        {"store", store.root()},
                        {"store_bytes", usage},
                        {"images", images},
                        {"containers", containers},
                        {"kernel", kernel_release()},
                        {"platform", host_platform().str()},
                        {"user_namespaces", userns.ok()},
                        {"engines", engines},
                        {"engines_available", usable},
                        {"engine_table", facts}};
    if (!userns.ok()) j["user_namespaces_error"] = userns.error().message();
    // What a run of the userns engine does about IDs other than the user's (the policy's
    // root_emulation, or --root-emulation per run).
    // A root container user's run: auto is subids where the user has ranges and the helpers.
    RootEmulation configured = site.root_emulation;
    auto subids = subid_setup();
    auto start_failure = subid_start_failure(subid_state_path());
    RootEmulation emulation = configured;
    if (emulation == RootEmulation::kAuto)
      emulation = subids.ok() && !start_failure ? RootEmulation::kSubids : RootEmulation::kSeccomp;
    if (emulation == RootEmulation::kSeccomp && !root_emulation_supported())
      emulation = RootEmulation::kNone;
    std::string emulation_text =
        "seccomp (one mapped ID; set*id, setgroups, chown and device mknod succeed without effect)";
    if (emulation == RootEmulation::kNone)
      emulation_text = root_emulation_supported()
                           ? "none (one mapped ID; set*id and chown to other IDs fail)"
                           : "none (no filter for this architecture)";
    nlohmann::json subids_json = {{"available", subids.ok()}};
    if (subids.ok()) {
      auto range = [](const SubidRange& r) {
        return std::to_string(r.start) + "-" + std::to_string(r.start + r.count - 1);
      };
      pid_t holder = live_subid_holder(subid_state_path());
      subids_json["uids"] = range(subids->uids);
      subids_json["gids"] = range(subids->gids);
      subids_json["holder_pid"] = holder > 0 ? nlohmann::json(holder) : nlohmann::json(nullptr);
      if (start_failure) {
        subids_json["available"] = false;
        subids_json["reason"] = *start_failure;
      }
      if (emulation == RootEmulation::kSubids)
        emulation_text = "subids (root is you; IDs 1-" + std::to_string(subids->uids.count) +
                         " are your subordinate IDs " + range(subids->uids) +
                         "; set*id, setgroups and chown are real)";
    } else {
      subids_json["reason"] = subids.error().message();
      if (emulation == RootEmulation::kSubids)
        emulation_text = "subids (not available: " + subids.error().message() + ")";
    }
    j["root_emulation"] = {{"mode", std::string(root_emulation_name(emulation))},
                           {"configured", std::string(root_emulation_name(configured))},
                           {"supported", root_emulation_supported()},
                           {"filter_instructions", root_emulation_filter_length()},
                           {"subids", subids_json}};
    // The HCAs --ib can select: one sysfs listing (ib info has the details).
    std::string hcas;
    nlohmann::json hca_names = nlohmann::json::array();
    auto discovery = discovery_options(g);
    auto roots = rdma_roots_from_env(discovery.ok() ? discovery->effective_dev_root() : "/");
    if (roots.ok()) {
      if (auto rdma = discover_rdma(*roots); rdma.ok())
        for (const Hca& h : rdma->hcas) {
          hca_names.push_back(h.name);
          hcas += (hcas.empty() ? "" : ", ") + h.name;
        }
    }
    j["infiniband"] = hca_names;
    j["policy"] = policy_json(site);
    if (*json) {
      print_json(j);
      return {};
    }
    print_table(
        {{"Version:", BERTH_VERSION},
         {"Store:", store.root()},
         {"Store usage:", human_size(usage)},
         {"Images:", std::to_string(images)},
         {"Containers:", std::to_string(containers)},
         {"Kernel:", kernel_release()},
         {"Platform:", host_platform().str()},
         {"User namespaces:", userns.ok() ? "yes" : "no (" + userns.error().message() + ")"},
         {"Root emulation:", emulation_text},
         {"InfiniBand HCAs:", hcas.empty() ? "none" : hcas}});
    std::printf("Engines:\n");
    std::vector<std::vector<std::string>> rows = {{"  ENGINE", "FOUND", "PATH"}};
    for (const auto& e : engines)
      rows.push_back({"  " + e["name"].get<std::string>(), e["found"].get<bool>() ? "yes" : "no",
                      e["path"].get<std::string>()});
    print_table(rows);
    std::string list;
    for (const std::string& n : usable) list += (list.empty() ? "" : ", ") + n;
    std::printf("Engines available: %s\n", list.empty() ? "none" : list.c_str());
    const nlohmann::json& p = j["policy"];
    auto file = [](const nlohmann::json& f) {
      return f.is_null() ? std::string("none") : f.get<std::string>();
    };
    std::printf("Policy:\n");
    print_table({{"  Site file:", file(p["site_file"])},
                 {"  User file:", file(p["user_file"])},
                 {"  User config.json:", file(p["user_config_json"])}});
    std::vector<std::vector<std::string>> prows = {{"  KEY", "VALUE", "FROM"}};
    for (const auto& [key, v] : p["settings"].items())
      prows.push_back({"  " + key, policy_text(v["value"]), v["source"].get<std::string>()});
    print_table(prows);
    for (const auto& line : p["ignored"])
      std::printf("  ignored: %s\n", safe_text(line.get<std::string>()).c_str());
    return {};
  };
}

}  // namespace berth::cli

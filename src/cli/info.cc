// berth version, berth info: what this berth is, and what it finds on this host.
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "cli/context.h"
#include "core/env.h"
#include "core/fs.h"
#include "core/progress.h"
#include "image/platform.h"
#include "runtime/container_spec.h"
#include "runtime/engines.h"
#include "runtime/tool.h"

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
  return {{"version", BERTH_VERSION},
          {"compiler", compiler()},
          {"cplusplus", __cplusplus},
          {"build_type", BERTH_BUILD_TYPE},
          {"platform", host_platform().str()}};
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
    std::printf("berth %s\n", BERTH_VERSION);
    print_table({{" Compiler:", compiler()},
                 {" Build type:", build.empty() ? "default" : build},
                 {" OS/Arch:", v["platform"].get<std::string>()}});
    return {};
  };
}

Action setup_info(CLI::App& app, const GlobalOptions& g) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON");
  return [json, &g]() -> Status {
    Store store = BERTH_TRY(open_store(g));
    ContainerStore cs = BERTH_TRY(open_containers(g));
    size_t images = BERTH_TRY(store.list_images()).size();
    size_t containers = BERTH_TRY(cs.list()).size();
    int64_t usage = disk_usage(store.root());
    Status userns = probe_user_namespaces();
    nlohmann::json engines = nlohmann::json::array();
    std::vector<std::string> usable;  // what `run --engine` can use here
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
         {"User namespaces:", userns.ok() ? "yes" : "no (" + userns.error().message() + ")"}});
    std::printf("Engines:\n");
    std::vector<std::vector<std::string>> rows = {{"  ENGINE", "FOUND", "PATH"}};
    for (const auto& e : engines)
      rows.push_back({"  " + e["name"].get<std::string>(), e["found"].get<bool>() ? "yes" : "no",
                      e["path"].get<std::string>()});
    print_table(rows);
    std::string list;
    for (const std::string& n : usable) list += (list.empty() ? "" : ", ") + n;
    std::printf("Engines available: %s\n", list.empty() ? "none" : list.c_str());
    return {};
  };
}

}  // namespace berth::cli

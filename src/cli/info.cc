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

/// The tools the fallback engines use, as `info` lists them: an executable found as the
/// engines find it (runtime/tool.h), or a library in known folders.
struct ToolProbe {
  const char* name;
  const char* file;                  ///< executable or library file name
  const char* env_var;               ///< the variable that points the engine at it, or null
  std::vector<const char*> folders;  ///< library folders; empty: an executable
};

const std::vector<ToolProbe>& tool_table() {
  static const std::vector<ToolProbe> table = {
      {"proot", "proot", "BERTH_PROOT", {}},
      {"runc", "runc", "BERTH_RUNC", {}},
      {"crun", "crun", nullptr, {}},
      {"fakechroot",
       "libfakechroot.so",
       nullptr,
       {"/usr/lib/x86_64-linux-gnu/fakechroot", "/usr/lib/aarch64-linux-gnu/fakechroot",
        "/usr/lib/powerpc64le-linux-gnu/fakechroot", "/usr/lib64/fakechroot",
        "/usr/lib/fakechroot"}},
      {"apptainer", "apptainer", nullptr, {}},
      {"singularity", "singularity", nullptr, {}},
  };
  return table;
}

/// Where a tool is, or "" when it is not here.
std::string find(const ToolProbe& t) {
  if (t.folders.empty()) {
    auto path = find_tool(t.file, t.env_var, t.name);
    return path.ok() ? *path : "";
  }
  for (const char* dir : t.folders)
    if (std::string p = path_join(dir, t.file); ::access(p.c_str(), R_OK) == 0) return p;
  return "";
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
    engines.push_back({{"name", "userns"}, {"found", userns.ok()}, {"path", "(built in)"}});
    for (const ToolProbe& t : tool_table()) {
      std::string where = find(t);
      engines.push_back({{"name", t.name}, {"found", !where.empty()}, {"path", where}});
    }
    std::vector<std::string> usable;  // what `run --engine` can use here
    for (const Engine& e : engine_table())
      if (e.available().ok()) usable.push_back(e.name);
    nlohmann::json j = {{"version", BERTH_VERSION},
                        {"store", store.root()},
                        {"store_bytes", usage},
                        {"images", images},
                        {"containers", containers},
                        {"kernel", kernel_release()},
                        {"platform", host_platform().str()},
                        {"user_namespaces", userns.ok()},
                        {"engines", engines},
                        {"engines_available", usable}};
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

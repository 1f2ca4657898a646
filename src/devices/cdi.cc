#include "devices/cdi.h"

#include <set>

#include "core/fs.h"

namespace berth {
namespace {

using nlohmann::json;

json node_json(const NvidiaDriver& d, const DeviceNode& n) {
  json j = {{"path", n.path}};
  if (d.options.effective_dev_root() != "/") j["hostPath"] = n.host_path;
  return j;
}

json mount(const std::string& host, const std::string& ctr, bool ro) {
  json opts = ro ? json{"ro", "nosuid", "nodev", "bind"} : json{"nosuid", "nodev", "bind"};
  return {{"hostPath", host}, {"containerPath", ctr}, {"options", opts}};
}

std::string dirname_of(const std::string& p) {
  size_t s = p.rfind('/');
  return s == 0 || s == std::string::npos ? "/" : p.substr(0, s);
}

}  // namespace

json make_cdi_spec(const NvidiaDriver& d) {
  json devices = json::array();
  json all_nodes = json::array();
  for (const auto& g : d.gpus) {
    if (!g.has_node) continue;
    json edits = {{"deviceNodes", json::array({node_json(d, g.node)})}};
    devices.push_back({{"name", std::to_string(g.index)}, {"containerEdits", edits}});
    if (!g.uuid.empty()) devices.push_back({{"name", g.uuid}, {"containerEdits", edits}});
    all_nodes.push_back(node_json(d, g.node));
  }
  devices.push_back({{"name", "all"}, {"containerEdits", {{"deviceNodes", all_nodes}}}});

  json nodes = json::array();
  for (const auto& n : d.control_nodes) nodes.push_back(node_json(d, n));
  json mounts = json::array();
  std::set<std::string> lib_dirs;
  for (const auto& l : d.libraries) {
    if (l.lib32) continue;
    mounts.push_back(mount(l.host_path, l.path, true));
    lib_dirs.insert(dirname_of(l.path));
    std::string soname_path = path_join(dirname_of(l.path), l.soname);
    if (!l.soname.empty() && soname_path != l.path) mounts.push_back(mount(l.host_path, soname_path, true));
  }
  for (const auto* group : {&d.binaries, &d.firmware, &d.config_files})
    for (const auto& f : *group) mounts.push_back(mount(f.host_path, f.path, true));
  for (const auto& f : d.ipc) mounts.push_back(mount(f.host_path, f.path, false));

  json edits = {{"env", json::array({"NVIDIA_VISIBLE_DEVICES=void"})},
                {"deviceNodes", nodes},
                {"mounts", mounts}};
  // The loader cache of the container must learn the library folders; only
  // NVIDIA's hook binaries can do that from a CDI spec, so use one when present.
  for (const char* hook : {"/usr/bin/nvidia-cdi-hook", "/usr/bin/nvidia-ctk"}) {
    std::string host = d.options.driver_root == "/" ? hook : path_join(d.options.driver_root, hook);
    if (!path_exists(host) || lib_dirs.empty()) continue;
    json args = std::string(hook).ends_with("nvidia-ctk")
                    ? json{"nvidia-ctk", "hook", "update-ldcache"}
                    : json{"nvidia-cdi-hook", "update-ldcache"};
    for (const auto& dir : lib_dirs) {
      args.push_back("--folder");
      args.push_back(dir);
    }
    edits["hooks"] = json::array({{{"hookName", "createContainer"}, {"path", hook}, {"args", args}}});
    break;
  }
  return {{"cdiVersion", kCdiVersion}, {"kind", kCdiKind}, {"devices", devices},
          {"containerEdits", edits}};
}

}  // namespace berth

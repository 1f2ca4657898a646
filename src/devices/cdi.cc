#include "devices/cdi.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "core/fs.h"
#include "devices/gpu_select.h"
#include "devices/inject.h"
#include "devices/yaml.h"
#include "runtime/root_path.h"
#include "runtime/tool.h"

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

namespace {

bool has_suffix(const std::string& s, const char* suffix) { return s.ends_with(suffix); }

/// Whether `path` exists in the container's root (not following links out of it).
bool exists_in_root(const std::string& rootfs, const std::string& path) {
  UniqueFd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return false;
  UniqueFd fd(open_in_root(root.get(), path.c_str(), O_PATH | O_NOFOLLOW));
  return fd.valid();
}

/// The values following `flag` in a hook's args ("--folder A --folder B").
std::vector<std::string> flag_values(const std::vector<std::string>& args, const char* flag) {
  std::vector<std::string> out;
  std::string eq = std::string(flag) + "=";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) out.push_back(args[++i]);
    else if (args[i].starts_with(eq)) out.push_back(args[i].substr(eq.size()));
  }
  return out;
}

/// One containerEdits object applied to `spec`.
Status apply_edits(const nlohmann::json& edits, const std::string& where, ContainerSpec& spec,
                   std::vector<std::string>& ld_dirs, std::vector<std::string>& warnings) {
  if (!edits.is_object()) return {};
  using Kind = DeviceEdit::Kind;
  try {
    for (const auto& e : edits.value("env", nlohmann::json::array())) {
      std::string kv = e.get<std::string>();
      if (kv.find('=') == std::string::npos)
        return make_error("CDI", where, "env entry \"" + kv + "\" is not KEY=VALUE");
      set_env(spec.env, kv);
    }
    for (const auto& n : edits.value("deviceNodes", nlohmann::json::array())) {
      std::string path = n.at("path").get<std::string>();
      std::string host = n.value("hostPath", path);
      struct stat st;
      if (::stat(host.c_str(), &st) != 0)
        return sys_error("device node", host).with_context("CDI " + where);
      spec.device_edits.push_back({Kind::kBind, host, path, false, false, true});
    }
    for (const auto& m : edits.value("mounts", nlohmann::json::array())) {
      std::string host = m.at("hostPath").get<std::string>();
      std::string ctr = m.at("containerPath").get<std::string>();
      std::string type = m.value("type", "bind");
      if (type != "bind" && type != "rbind" && type != "") {
        warnings.push_back("CDI " + where + ": mount of type " + type + " on " + ctr + " skipped");
        continue;
      }
      bool ro = false;
      for (const auto& o : m.value("options", nlohmann::json::array())) ro |= o == "ro";
      struct stat st;
      if (::stat(host.c_str(), &st) != 0)
        return sys_error("mount source", host).with_context("CDI " + where);
      bool is_dir = S_ISDIR(st.st_mode);
      if (exists_in_root(spec.rootfs, ctr)) {
        spec.device_edits.push_back({Kind::kBind, host, ctr, ro, is_dir, true});
      } else {
        // Nothing there in the image: bound in the run tmpfs and linked, so the run leaves no
        // empty mount point behind.
        stage_and_link(host, ctr, ro, is_dir, spec);
      }
    }
    for (const auto& h : edits.value("hooks", nlohmann::json::array())) {
      std::vector<std::string> args = h.value("args", std::vector<std::string>{});
      std::string path = h.value("path", "");
      bool nvidia = has_suffix(path, "/nvidia-ctk") || has_suffix(path, "/nvidia-cdi-hook");
      auto has = [&args](const char* word) { return std::find(args.begin(), args.end(), word) != args.end(); };
      if (nvidia && has("update-ldcache")) {
        for (const auto& dir : flag_values(args, "--folder")) ld_dirs.push_back(dir);
      } else if (nvidia && has("create-symlinks")) {
        for (const auto& link : flag_values(args, "--link")) {
          size_t sep = link.find("::");
          if (sep == std::string::npos) continue;
          spec.device_edits.push_back(
              {Kind::kSymlink, link.substr(0, sep), link.substr(sep + 2), true, false, false});
        }
      } else {
        std::string what = path;
        for (size_t i = 1; i < args.size(); ++i) what += " " + args[i];
        warnings.push_back("CDI " + where + ": hook \"" + what + "\" skipped (hooks need a privileged runtime)");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return make_error("CDI", where, std::string("malformed containerEdits: ") + e.what());
  }
  return {};
}

}  // namespace

std::vector<std::string> cdi_spec_dirs(const std::vector<std::string>& env, const std::string& home) {
  if (auto dirs = env_lookup(env, "BERTH_CDI_SPEC_DIRS")) {
    std::vector<std::string> out = split_path(*dirs);
    std::erase(out, "");
    return out;
  }
  std::string user = env_lookup(env, "XDG_CONFIG_HOME").value_or("");
  if (user.empty()) user = home.empty() ? "" : home + "/.config";
  std::vector<std::string> out = {"/etc/cdi", "/var/run/cdi"};
  if (!user.empty()) out.push_back(user + "/cdi");
  return out;
}

Result<std::vector<CdiSpec>> load_cdi_specs(const std::vector<std::string>& dirs,
                                            std::vector<std::string>* warnings) {
  std::vector<CdiSpec> specs;
  for (const std::string& dir : dirs) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;  // a CDI directory that does not exist holds no specs
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (has_suffix(n, ".json") || has_suffix(n, ".yaml") || has_suffix(n, ".yml")) names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      std::string path = path_join(dir, n);
      auto text = read_file(path);
      if (!text) {
        warnings->push_back(text.error().message());
        continue;
      }
      nlohmann::json doc;
      if (has_suffix(n, ".json")) {
        doc = nlohmann::json::parse(*text, nullptr, false);
        if (doc.is_discarded()) {
          warnings->push_back("CDI spec " + path + ": not valid JSON; skipped");
          continue;
        }
      } else {
        auto y = parse_yaml(*text, path);
        if (!y) {
          warnings->push_back(y.error().message() + "; skipped");
          continue;
        }
        doc = std::move(*y);
      }
      if (!doc.is_object() || !doc.contains("cdiVersion") || !doc.contains("kind") ||
          !doc["kind"].is_string() || !doc.contains("devices") || !doc["devices"].is_array()) {
        warnings->push_back("CDI spec " + path + ": cdiVersion, kind or devices missing; skipped");
        continue;
      }
      specs.push_back({path, doc["kind"].get<std::string>(), std::move(doc)});
    }
  }
  return specs;
}

Result<std::vector<std::string>> apply_cdi_device(const std::vector<CdiSpec>& specs,
                                                  const std::string& name, ContainerSpec& spec) {
  size_t eq = name.find('=');
  size_t slash = name.find('/');
  if (eq == std::string::npos || slash == std::string::npos || slash > eq || slash == 0 ||
      eq + 1 == name.size() || name.find('.') > slash)
    return make_error("--device", name, "not a CDI device name")
        .with_hint("use vendor.com/class=name, e.g. nvidia.com/gpu=0, or a host device path /dev/...");
  std::string kind = name.substr(0, eq), device = name.substr(eq + 1);
  const CdiSpec* found = nullptr;
  const nlohmann::json* found_dev = nullptr;
  bool kind_known = false;
  for (const CdiSpec& s : specs) {  // later directories win
    if (s.kind != kind) continue;
    kind_known = true;
    for (const auto& d : s.doc["devices"])
      if (d.is_object() && d.value("name", "") == device) {
        found = &s;
        found_dev = &d;
      }
  }
  if (found == nullptr)
    return make_error("--device", name,
                      kind_known ? "no such device in the CDI specs of " + kind
                                 : "no CDI spec for " + kind + " found")
        .with_hint("specs are read from /etc/cdi, /var/run/cdi and ~/.config/cdi "
                   "(or $BERTH_CDI_SPEC_DIRS); `berth cdi generate` writes one for NVIDIA GPUs");
  std::vector<std::string> warnings;
  std::vector<std::string> ld_dirs;
  BERTH_CHECK(apply_edits(found->doc.value("containerEdits", nlohmann::json::object()),
                          found->path, spec, ld_dirs, warnings));
  BERTH_CHECK(apply_edits(found_dev->value("containerEdits", nlohmann::json::object()),
                          found->path + " (" + device + ")", spec, ld_dirs, warnings));
  add_library_dirs(ld_dirs, spec);
  return warnings;
}

}  // namespace berth

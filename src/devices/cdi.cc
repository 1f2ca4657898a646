#include "devices/cdi.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "core/dir.h"
#include "core/elf.h"
#include "core/env_list.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/root_path.h"
#include "core/strings.h"
#include "devices/gpu_select.h"
#include "devices/inject.h"
#include "devices/yaml.h"
#include "runtime/container_config.h"

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
    if (!l.soname.empty() && soname_path != l.path)
      mounts.push_back(mount(l.host_path, soname_path, true));
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
    std::string host = under_root(d.options.driver_root, hook);
    if (!path_exists(host) || lib_dirs.empty()) continue;
    json args = std::string(hook).ends_with("nvidia-ctk")
                    ? json{"nvidia-ctk", "hook", "update-ldcache"}
                    : json{"nvidia-cdi-hook", "update-ldcache"};
    for (const auto& dir : lib_dirs) {
      args.push_back("--folder");
      args.push_back(dir);
    }
    // The runtime runs the hook on this host: its path here, under the driver root.
    edits["hooks"] =
        json::array({{{"hookName", "createContainer"}, {"path", host}, {"args", args}}});
    break;
  }
  json spec = {
      {"cdiVersion", "0.3.0"}, {"kind", kCdiKind}, {"devices", devices}, {"containerEdits", edits}};
  spec["cdiVersion"] = cdi_required_version(spec);
  return spec;
}

namespace {

/// YAML for a JSON value at `indent`: block mappings and sequences, every string double-quoted
/// as JSON writes it (valid YAML), so nothing reads as another type.
void emit_yaml(const json& v, int indent, std::string& out) {
  std::string pad(indent, ' ');
  auto inline_value = [](const json& x) -> std::optional<std::string> {
    if (x.is_array() && x.empty()) return "[]";
    if (x.is_object() && x.empty()) return "{}";
    if (x.is_structured()) return std::nullopt;
    return x.dump();
  };
  if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      out += pad + json(key).dump() + ":";
      if (auto text = inline_value(value)) {
        out += " " + *text + "\n";
      } else {
        out += "\n";
        emit_yaml(value, value.is_array() ? indent : indent + 2, out);
      }
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (auto text = inline_value(item)) {
        out += pad + "- " + *text + "\n";
        continue;
      }
      std::string inner;
      emit_yaml(item, indent + 2, inner);
      out += pad + "- " + inner.substr(indent + 2);  // the first line goes after the dash
    }
  } else {
    out += pad + v.dump() + "\n";
  }
}

bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_alnum(char c) {
  return is_letter(c) || (c >= '0' && c <= '9');
}

/// The reference parser's rules: a vendor or class starts with a letter, ends with a letter or
/// digit, and has only letters, digits, '_', '-' and '.' between; a device name may also start
/// with a digit and contain ':'.
bool valid_name_part(const std::string& s, bool device) {
  if (s.empty() || !(device ? is_alnum(s.front()) : is_letter(s.front())) || !is_alnum(s.back()))
    return false;
  return std::all_of(s.begin(), s.end(), [device](char c) {
    return is_alnum(c) || c == '_' || c == '-' || c == '.' || (device && c == ':');
  });
}

bool valid_kind(const std::string& kind) {
  size_t slash = kind.find('/');
  return slash != std::string::npos && valid_name_part(kind.substr(0, slash), false) &&
         valid_name_part(kind.substr(slash + 1), false);
}

using Version = std::array<int, 3>;

std::optional<Version> parse_cdi_version(std::string v) {
  if (v.starts_with("v")) v.erase(0, 1);
  Version out{};
  size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    size_t end = v.find('.', at);
    if ((end == std::string::npos) != (i == 2)) return std::nullopt;
    std::string part = v.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (part.empty() || part.size() > 3 || !std::all_of(part.begin(), part.end(), ::isdigit))
      return std::nullopt;
    out[i] = std::stoi(part);
    at = end + 1;
  }
  return out;
}

// The released CDI specification versions the reference library knows (specs-go/version.go).
constexpr Version kKnownVersions[] = {{0, 1, 0}, {0, 2, 0}, {0, 3, 0}, {0, 4, 0}, {0, 5, 0},
                                      {0, 6, 0}, {0, 7, 0}, {0, 8, 0}, {1, 0, 0}, {1, 1, 0}};

/// Every containerEdits object of the spec: the spec's own and each device's.
std::vector<const json*> all_edits(const json& doc) {
  std::vector<const json*> out;
  if (auto e = doc.find("containerEdits"); e != doc.end() && e->is_object()) out.push_back(&*e);
  if (auto d = doc.find("devices"); d != doc.end() && d->is_array())
    for (const auto& dev : *d)
      if (auto e = dev.find("containerEdits"); dev.is_object() && e != dev.end() && e->is_object())
        out.push_back(&*e);
  return out;
}

bool non_empty(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && !it->is_null() && !(it->is_structured() && it->empty());
}

}  // namespace

json make_rdma_cdi_spec(const RdmaDevices& d) {
  auto node = [&d](const DeviceNode& n) {
    json j = {{"path", n.path}};
    if (d.roots.dev_root != "/") j["hostPath"] = n.host_path;
    return j;
  };
  json devices = json::array();
  json all_nodes = json::array();
  for (const Hca& h : d.hcas) {
    if (!h.has_node) continue;
    json edits = {{"deviceNodes", json::array({node(h.node)})}};
    devices.push_back({{"name", std::to_string(h.index)}, {"containerEdits", edits}});
    devices.push_back({{"name", h.name}, {"containerEdits", edits}});
    all_nodes.push_back(node(h.node));
  }
  devices.push_back({{"name", "all"}, {"containerEdits", {{"deviceNodes", all_nodes}}}});
  json spec = {{"cdiVersion", "0.3.0"}, {"kind", kRdmaCdiKind}, {"devices", devices}};
  if (d.has_rdma_cm) spec["containerEdits"] = {{"deviceNodes", json::array({node(d.rdma_cm)})}};
  spec["cdiVersion"] = cdi_required_version(spec);
  return spec;
}

std::string cdi_spec_text(const json& doc, bool yaml) {
  if (!yaml) return doc.dump(2) + "\n";
  std::string out = "---\n";
  emit_yaml(doc, 0, out);
  return out;
}

std::string cdi_required_version(const json& doc) {
  auto edits = all_edits(doc);
  auto any_edit = [&edits](auto pred) {
    return std::any_of(edits.begin(), edits.end(), [&](const json* e) { return pred(*e); });
  };
  auto list = [](const json& e, const char* key) {
    auto it = e.find(key);
    return it != e.end() && it->is_array() ? *it : json::array();
  };
  bool v110 = any_edit([](const json& e) {
    auto rdt = e.find("intelRdt");
    bool rdt_new = rdt != e.end() && rdt->is_object() &&
                   (non_empty(*rdt, "schemata") || rdt->value("enableMonitoring", false) == true);
    return rdt_new || non_empty(e, "netDevices");
  });
  if (v110) return "1.1.0";
  if (any_edit(
          [](const json& e) { return non_empty(e, "intelRdt") || non_empty(e, "additionalGids"); }))
    return "0.7.0";
  const json devices =
      doc.contains("devices") && doc["devices"].is_array() ? doc["devices"] : json::array();
  std::string kind = doc.value("kind", "");
  size_t slash = kind.find('/');
  bool dotted_class = slash != std::string::npos && kind.find('.', slash) != std::string::npos;
  bool v060 = non_empty(doc, "annotations") || dotted_class;
  for (const auto& d : devices) v060 |= d.is_object() && non_empty(d, "annotations");
  if (v060) return "0.6.0";
  bool v050 = any_edit([&list](const json& e) {
    for (const auto& n : list(e, "deviceNodes"))
      if (n.is_object() && n.value("hostPath", "") != "") return true;
    return false;
  });
  for (const auto& d : devices) {
    std::string name = d.is_object() ? d.value("name", "") : "";
    v050 |= !name.empty() && !is_letter(name[0]);
  }
  if (v050) return "0.5.0";
  bool v040 = any_edit([&list](const json& e) {
    for (const auto& m : list(e, "mounts"))
      if (m.is_object() && m.value("type", "") != "") return true;
    return false;
  });
  return v040 ? "0.4.0" : "0.3.0";
}

namespace {

std::string check_env(const json& env, const std::string& what) {
  for (const auto& e : env) {
    std::string kv = e.get<std::string>();
    if (size_t eq = kv.find('='); eq == 0 || eq == std::string::npos)
      return fmt::format("{}invalid environment variable \"{}\"", what, kv);
  }
  return "";
}

/// One containerEdits object, checked as the reference validator does.
std::string check_edits(const json& e, const std::string& where) {
  static const std::set<std::string> kHookNames = {
      "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"};
  if (auto why = check_env(e.value("env", json::array()), where); !why.empty()) return why;
  for (const auto& n : e.value("deviceNodes", json::array())) {
    std::string path = n.value("path", "");
    if (path.empty()) return where + "device node with an empty path";
    std::string type = n.value("type", "");
    if (type != "" && type != "b" && type != "c" && type != "u" && type != "p")
      return fmt::format("{}device {}: invalid type \"{}\"", where, path, type);
    std::string perms = n.value("permissions", "");
    if (perms.find_first_not_of("rwm") != std::string::npos)
      return fmt::format("{}device {}: invalid permissions \"{}\"", where, path, perms);
  }
  for (const auto& h : e.value("hooks", json::array())) {
    std::string name = h.value("hookName", "");
    if (!kHookNames.contains(name)) return fmt::format("{}invalid hook name \"{}\"", where, name);
    if (h.value("path", "").empty())
      return fmt::format("{}hook \"{}\" with an empty path", where, name);
    if (auto why =
            check_env(h.value("env", json::array()), fmt::format("{}hook \"{}\": ", where, name));
        !why.empty())
      return why;
  }
  for (const auto& m : e.value("mounts", json::array())) {
    if (m.value("hostPath", "").empty()) return where + "mount with an empty hostPath";
    if (m.value("containerPath", "").empty()) return where + "mount with an empty containerPath";
  }
  return "";
}

std::string spec_problem(const json& doc) {
  try {
    std::string version = doc.at("cdiVersion").get<std::string>();
    auto v = parse_cdi_version(version);
    if (!v || std::find(std::begin(kKnownVersions), std::end(kKnownVersions), *v) ==
                  std::end(kKnownVersions))
      return "unknown cdiVersion \"" + version + "\"";
    std::string need = cdi_required_version(doc);
    if (*v < *parse_cdi_version(need))
      return std::string("cdiVersion " + version + " is too old for the fields used; they need " +
                         need);
    std::string kind = doc.at("kind").get<std::string>();
    if (!valid_kind(kind))
      return "invalid kind \"" + kind + "\" (vendor.com/class: letters, digits, _ - .)";
    if (auto e = doc.find("containerEdits"); e != doc.end())
      if (auto why = check_edits(*e, ""); !why.empty()) return why;
    std::set<std::string> seen;
    for (const auto& d : doc.at("devices")) {
      std::string name = d.at("name").get<std::string>();
      if (!valid_name_part(name, true)) return "invalid device name \"" + name + "\"";
      if (!seen.insert(name).second) return "device \"" + name + "\" defined twice";
      const json edits = d.value("containerEdits", json::object());
      static const char* kEdits[] = {"env",      "deviceNodes", "hooks", "mounts", "additionalGids",
                                     "intelRdt", "netDevices"};
      if (std::none_of(std::begin(kEdits), std::end(kEdits),
                       [&edits](const char* k) { return non_empty(edits, k); }))
        return "device \"" + name + "\" has no containerEdits";
      if (auto why = check_edits(edits, "device \"" + name + "\": "); !why.empty()) return why;
    }
    if (seen.empty()) return "no devices";
  } catch (const json::exception& e) {
    return "malformed: " + json_error_text(e);  // the library's words, not its exception tag
  }
  return "";
}

}  // namespace

Status validate_cdi_spec(const json& doc, const std::string& path) {
  std::string why = spec_problem(doc);
  if (why.empty()) return {};
  return make_error("CDI spec", path, why);
}

namespace {

bool has_suffix(const std::string& s, const char* suffix) {
  return s.ends_with(suffix);
}

/// The values following `flag` in a hook's args ("--folder A --folder B").
std::vector<std::string> flag_values(const std::vector<std::string>& args, const char* flag) {
  std::vector<std::string> out;
  std::string eq = std::string(flag) + "=";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size())
      out.push_back(args[++i]);
    else if (args[i].starts_with(eq))
      out.push_back(args[i].substr(eq.size()));
  }
  return out;
}

/// The hooks of the edits applied so far, beyond what was done with them at once.
struct HooksSeen {
  bool cuda_compat = false;          ///< an enable-cuda-compat hook
  std::string host_driver_version;   ///< its --host-driver-version ("" when not given)
  std::vector<std::string> skipped;  ///< hooks that cannot run rootless: "path args..."
};

/// One containerEdits object applied to `spec`.
Status apply_edits(const nlohmann::json& edits, const std::string& where, ContainerSpec& spec,
                   std::vector<std::string>& ld_dirs,
                   std::vector<std::pair<std::string, std::string>>& files,
                   std::vector<std::string>& warnings, HooksSeen& hooks) {
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
      // The node is the host's, bound: its mode and owner are the host's, so a spec asking for
      // others is refused rather than silently not honoured.
      auto refuse = [&](const std::string& field, unsigned want, unsigned have, bool octal) {
        auto show = [octal](unsigned v) {
          char buf[16];
          std::snprintf(buf, sizeof buf, octal ? "%04o" : "%u", v);
          return std::string(buf);
        };
        return make_error("device node", path,
                          fmt::format("{} {} cannot be honoured rootless: the host node {} has {}",
                                      field, show(want), host, show(have)))
            .with_context("CDI " + where);
      };
      if (n.contains("fileMode") && (n["fileMode"].get<unsigned>() & 07777) != (st.st_mode & 07777))
        return refuse("fileMode", n["fileMode"].get<unsigned>() & 07777, st.st_mode & 07777, true);
      if (n.contains("uid") && n["uid"].get<unsigned>() != st.st_uid)
        return refuse("uid", n["uid"].get<unsigned>(), st.st_uid, false);
      if (n.contains("gid") && n["gid"].get<unsigned>() != st.st_gid)
        return refuse("gid", n["gid"].get<unsigned>(), st.st_gid, false);
      // permissions "r" (or "rm"): no writes through this node.
      std::string perms = n.value("permissions", "");
      bool read_only = !perms.empty() && perms.find('w') == std::string::npos;
      spec.device_edits.push_back({Kind::kBind, host, path, read_only, false, true});
    }
    for (const auto& m : edits.value("mounts", nlohmann::json::array())) {
      std::string host = m.at("hostPath").get<std::string>();
      std::string ctr = m.at("containerPath").get<std::string>();
      std::string type = m.value("type", "bind");
      bool ro = false;
      for (const auto& o : m.value("options", nlohmann::json::array())) ro |= o == "ro";
      if (type == "tmpfs") {
        // A fresh tmpfs in the run's own mount namespace, rootless: a real directory at
        // containerPath (its mount point made when the image lacks one, as Podman does), mode
        // 1777 unless the options say otherwise, with their size=, nr_inodes= and ro.
        std::string opts;
        for (const auto& o : m.value("options", nlohmann::json::array())) {
          std::string word = o.get<std::string>();
          std::string key = word.substr(0, word.find('='));
          static const std::set<std::string> kTmpfsOptions = {
              "ro",   "rw",     "nosuid", "suid", "nodev",     "dev",
              "exec", "noexec", "size",   "mode", "nr_inodes", "huge"};
          static const std::set<std::string> kPropagation = {
              "bind",    "rbind", "private", "rprivate",   "shared",
              "rshared", "slave", "rslave",  "unbindable", "runbindable"};
          if (kTmpfsOptions.contains(key)) {
            opts += (opts.empty() ? "" : ",") + word;
          } else if (!kPropagation.contains(word)) {
            // Propagation words mean nothing on a fresh tmpfs; any other is noted.
            warnings.push_back(
                fmt::format("CDI {}: tmpfs option {} on {} ignored", where, word, ctr));
          }
        }
        std::string tmpfs_text = ctr;
        if (!opts.empty()) tmpfs_text.append(":").append(opts);
        auto parsed = parse_tmpfs(tmpfs_text);
        if (!parsed)
          return make_error("CDI", where, "tmpfs on " + ctr + ": " + parsed.error().detail);
        DeviceEdit edit{Kind::kTmpfs, "", ctr, ro, true, true};
        edit.tmpfs_data = parsed->data;
        edit.tmpfs_flags = parsed->flags;
        spec.device_edits.push_back(std::move(edit));
        continue;
      }
      if (type != "bind" && type != "rbind" && type != "") {
        warnings.push_back(fmt::format("CDI {}: mount of type {} on {} skipped", where, type, ctr));
        continue;
      }
      struct stat st;
      if (::stat(host.c_str(), &st) != 0)
        return sys_error("mount source", host).with_context("CDI " + where);
      bool is_dir = S_ISDIR(st.st_mode);
      if (S_ISREG(st.st_mode)) files.emplace_back(host, ctr);
      // At containerPath itself, its mount point made when the image has none (as Podman
      // does): a program that resolves the path (realpath, a directory walk) sees the mount.
      spec.device_edits.push_back({Kind::kBind, host, ctr, ro, is_dir, true});
    }
    for (const char* field : {"netDevices", "intelRdt"})
      if (non_empty(edits, field))
        return make_error("CDI", where,
                          std::string(field) + " cannot be honoured by a rootless run");
    for (const auto& g : edits.value("additionalGids", nlohmann::json::array())) {
      // A rootless run cannot add groups; the workload keeps the caller's (unmapped, they show
      // as nobody inside but still grant access), so a group the caller has is honoured and any
      // other refused.
      gid_t gid = g.get<gid_t>();
      std::vector<gid_t> mine(NGROUPS_MAX);
      int count = ::getgroups(NGROUPS_MAX, mine.data());
      mine.resize(count < 0 ? 0 : static_cast<size_t>(count));
      mine.push_back(::getegid());
      if (std::find(mine.begin(), mine.end(), gid) == mine.end())
        return make_error("CDI", where,
                          "additionalGids " + std::to_string(gid) +
                              " cannot be honoured: the caller is not in that group and a rootless "
                              "run cannot add it");
    }
    for (const auto& h : edits.value("hooks", nlohmann::json::array())) {
      std::vector<std::string> args = h.value("args", std::vector<std::string>{});
      std::string path = h.value("path", "");
      bool nvidia = has_suffix(path, "/nvidia-ctk") || has_suffix(path, "/nvidia-cdi-hook");
      auto has = [&args](const char* word) {
        return std::find(args.begin(), args.end(), word) != args.end();
      };
      if (nvidia && has("update-ldcache")) {
        for (const auto& dir : flag_values(args, "--folder")) ld_dirs.push_back(dir);
      } else if (nvidia && has("create-symlinks")) {
        for (const auto& link : flag_values(args, "--link")) {
          size_t sep = link.find("::");
          if (sep == std::string::npos) continue;
          spec.device_edits.push_back(
              {Kind::kSymlink, link.substr(0, sep), link.substr(sep + 2), true, false, false});
        }
      } else if (nvidia && has("enable-cuda-compat")) {
        // Done natively by apply_cdi_device(): the image's compat libcuda first in the loader's
        // search when it is newer than the host driver, as --gpus does (gpu_plan.h).
        hooks.cuda_compat = true;
        auto version = flag_values(args, "--host-driver-version");
        if (!version.empty()) hooks.host_driver_version = version.back();
      } else if (nvidia && has("disable-device-node-modification")) {
        // Nothing to do rootless: the hook hides ModifyDeviceFiles from the driver's libraries
        // so that they do not create device nodes, which a process in a user namespace cannot
        // (mknod is refused) and which Berth's /dev, a tmpfs of the run, would not keep anyway.
      } else if (nvidia && has("chmod") &&
                 flag_values(args, "--mode") == std::vector<std::string>{"755"}) {
        // Berth makes every mount point's missing folders mode 0755 (mount_apply.cc): done.
      } else {
        std::string what = path;
        for (size_t i = 1; i < args.size(); ++i) what += " " + args[i];
        if (std::find(hooks.skipped.begin(), hooks.skipped.end(), what) == hooks.skipped.end())
          hooks.skipped.push_back(what);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return make_error("CDI", where, "malformed containerEdits: " + json_error_text(e));
  }
  return {};
}

/// What the ldconfig of an update-ldcache hook would add: a soname link for each library
/// mounted into one of `ld_dirs` under another name. nvidia-ctk mounts only the versioned
/// files (libcuda.so.550.54.15) and counts on that ldconfig, run in the container, for
/// libcuda.so.1; Berth builds the loader cache without writing to the image, so the links are
/// made here. Optional links: a file the image has, a mount or a hook's link there wins.
void add_soname_links(const std::vector<std::pair<std::string, std::string>>& files,
                      const std::vector<std::string>& ld_dirs, ContainerSpec& spec) {
  for (const auto& [host, ctr] : files) {
    std::string dir = dirname_of(ctr);
    if (std::find(ld_dirs.begin(), ld_dirs.end(), dir) == ld_dirs.end()) continue;
    auto elf = read_elf_info(host);
    if (!elf.ok() || elf->soname.empty() || elf->soname.find('/') != std::string::npos) continue;
    std::string link = path_join(dir, elf->soname);
    bool taken = std::any_of(spec.device_edits.begin(), spec.device_edits.end(),
                             [&link](const DeviceEdit& e) { return e.target == link; });
    if (link == ctr || taken) continue;
    spec.device_edits.push_back({DeviceEdit::Kind::kSymlink,
                                 ctr.substr(dir.size() + (dir == "/" ? 0 : 1)), link, true, false,
                                 false});
  }
}

/// A spec with no update-ldcache hook (`berth cdi generate` on a host without NVIDIA's hook
/// binaries, or one written by hand) still mounts the driver's libraries, at their host paths:
/// where those lie outside the folders a loader searches unasked (a driver under
/// /usr/local/nvidia, as GKE and the GPU operator install it), the program would not find
/// libcuda.so.1. Their folders join the loader cache as the hook's would have.
void add_mounted_library_dirs(const std::vector<std::pair<std::string, std::string>>& files,
                              std::vector<std::string>& ld_dirs) {
  static const std::set<std::string> kSearched = {"/lib",
                                                  "/usr/lib",
                                                  "/lib64",
                                                  "/usr/lib64",
                                                  "/lib/x86_64-linux-gnu",
                                                  "/usr/lib/x86_64-linux-gnu",
                                                  "/lib/aarch64-linux-gnu",
                                                  "/usr/lib/aarch64-linux-gnu"};
  for (const auto& [host, ctr] : files) {
    std::string dir = dirname_of(ctr);
    if (kSearched.contains(dir) || std::find(ld_dirs.begin(), ld_dirs.end(), dir) != ld_dirs.end())
      continue;
    auto elf = read_elf_info(host);
    if (elf.ok() && !elf->soname.empty() && elf->machine == host_elf_machine())
      ld_dirs.push_back(dir);
  }
}

/// What NVIDIA's enable-cuda-compat hook does, natively: when the image's
/// /usr/local/cuda/compat holds a libcuda of a newer driver branch than the host's (the hook's
/// --host-driver-version, else the version of the libcuda.so.<version> the spec mounts), that
/// folder goes first in the loader's search, before the host driver's folders; the decision
/// is --gpus's (use_cuda_compat()).
void add_cuda_compat(std::string host_version,
                     const std::vector<std::pair<std::string, std::string>>& files,
                     std::vector<std::string>& ld_dirs, const ContainerSpec& spec) {
  constexpr const char* kCompatDir = "/usr/local/cuda/compat";
  for (const auto& [host, ctr] : files) {
    std::string base, version;
    if (host_version.empty() && split_library_name(basename_of(ctr), &base, &version) &&
        base == "libcuda")
      host_version = version;
  }
  auto host = parse_version(host_version);
  if (!host) return;  // the host driver's version unknown: nothing to compare
  berth::Version compat = compat_libcuda_version(list_dir_in_root(spec.rootfs, kCompatDir));
  if (!use_cuda_compat(*host, compat)) return;
  std::erase(ld_dirs, std::string(kCompatDir));
  ld_dirs.insert(ld_dirs.begin(), kCompatDir);
}

}  // namespace

std::vector<std::string> cdi_spec_dirs(const std::vector<std::string>& env,
                                       const std::string& home) {
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
    size_t first = specs.size();
    // A CDI directory that does not exist lists empty: it holds no specs.
    for (const std::string& n : list_dir(dir)) {
      if (!n.ends_with(".json") && !n.ends_with(".yaml") && !n.ends_with(".yml")) continue;
      std::string path = path_join(dir, n);
      auto text = read_file(path);
      if (!text) {
        warnings->push_back(text.error().message());
        continue;
      }
      nlohmann::json doc;
      if (has_suffix(n, ".json")) {
        auto parsed = parse_json(*text, "CDI spec " + path);
        if (!parsed) {
          warnings->push_back(parsed.error().message() + "; skipped");
          continue;
        }
        doc = std::move(*parsed);
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
      CdiSpec spec{path, doc["kind"].get<std::string>(), std::move(doc), "", {}};
      if (auto valid = validate_cdi_spec(spec.doc, path); !valid.ok()) {
        spec.invalid = valid.error().message();
        warnings->push_back(spec.invalid + "; its devices are unusable");
      }
      specs.push_back(std::move(spec));
    }
    // One directory is one priority: a device two of its files define is a conflict (the
    // reference library drops it); a later directory overrides instead.
    std::map<std::string, size_t> defined;  // "kind=name" -> index in specs
    for (size_t i = first; i < specs.size(); ++i) {
      if (!specs[i].invalid.empty()) continue;
      for (const auto& d : specs[i].doc["devices"]) {
        std::string name = d.value("name", "");
        auto [it, fresh] = defined.emplace(specs[i].kind + "=" + name, i);
        if (fresh) continue;
        specs[it->second].conflicts.emplace_back(name, specs[i].path);
        specs[i].conflicts.emplace_back(name, specs[it->second].path);
      }
    }
  }
  return specs;
}

Result<std::vector<std::string>> apply_cdi_device(const std::vector<CdiSpec>& specs,
                                                  const std::string& name, ContainerSpec& spec,
                                                  std::vector<std::string>* skipped_hooks) {
  size_t eq = name.find('=');
  size_t slash = name.find('/');
  if (eq == std::string::npos || slash == std::string::npos || slash > eq || slash == 0 ||
      eq + 1 == name.size() || name.find('.') > slash)
    return make_error("--device", name, "not a CDI device name")
        .with_hint(
            "use vendor.com/class=name, e.g. nvidia.com/gpu=0, or a host device path /dev/...");
  std::string kind = name.substr(0, eq), device = name.substr(eq + 1);
  if (!valid_kind(kind) || !valid_name_part(device, true))
    return make_error("--device", name, "not a CDI device name")
        .with_hint(
            "vendor, class and device name take letters, digits, '_', '-' and '.' (':' too in "
            "the device name), starting and ending with a letter or digit");
  const CdiSpec* found = nullptr;
  const nlohmann::json* found_dev = nullptr;
  const CdiSpec* invalid = nullptr;
  bool kind_known = false;
  for (const CdiSpec& s : specs) {  // later directories win
    if (s.kind != kind) continue;
    kind_known = true;
    if (!s.invalid.empty()) {
      invalid = &s;
      continue;
    }
    for (const auto& d : s.doc["devices"])
      if (string_field(d, "name") == device) {
        found = &s;
        found_dev = &d;
      }
  }
  if (found == nullptr && invalid != nullptr)
    return make_error("--device", name, "its spec is invalid: " + invalid->invalid);
  if (found != nullptr)
    for (const auto& [dev, other] : found->conflicts)
      if (dev == device)
        return make_error("--device", name,
                          "conflicting definitions in " + std::min(found->path, other) + " and " +
                              std::max(found->path, other))
            .with_hint("a device may be defined by only one spec file of a CDI directory");
  if (found == nullptr)
    return make_error("--device", name,
                      kind_known ? "no such device in the CDI specs of " + kind
                                 : "no CDI spec for " + kind + " found")
        .with_hint(
            "specs are read from /etc/cdi, /var/run/cdi and ~/.config/cdi "
            "(or $BERTH_CDI_SPEC_DIRS); `berth cdi generate` writes one for NVIDIA GPUs");
  std::vector<std::string> warnings;
  std::vector<std::string> ld_dirs;
  std::vector<std::pair<std::string, std::string>> files;
  HooksSeen hooks;
  BERTH_CHECK(apply_edits(found->doc.value("containerEdits", nlohmann::json::object()), found->path,
                          spec, ld_dirs, files, warnings, hooks));
  BERTH_CHECK(apply_edits(found_dev->value("containerEdits", nlohmann::json::object()),
                          found->path + " (" + device + ")", spec, ld_dirs, files, warnings,
                          hooks));
  for (const std::string& what : hooks.skipped) {
    if (skipped_hooks == nullptr) {
      warnings.push_back(fmt::format(
          "CDI {}: hook \"{}\" skipped (hooks need a privileged runtime)", found->path, what));
    } else if (std::find(skipped_hooks->begin(), skipped_hooks->end(), what) ==
               skipped_hooks->end()) {
      skipped_hooks->push_back(what);
    }
  }
  if (ld_dirs.empty()) add_mounted_library_dirs(files, ld_dirs);
  if (hooks.cuda_compat) add_cuda_compat(hooks.host_driver_version, files, ld_dirs, spec);
  add_soname_links(files, ld_dirs, spec);
  add_library_dirs(ld_dirs, spec);
  return warnings;
}

}  // namespace berth

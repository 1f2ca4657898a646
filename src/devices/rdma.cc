#include "devices/rdma.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <set>

#include "core/dir.h"
#include "core/env.h"
#include "core/fs.h"
#include "core/strings.h"

namespace berth {
namespace {

constexpr const char* kIbClass = "/sys/class/infiniband";
constexpr const char* kVerbsClass = "/sys/class/infiniband_verbs";
constexpr const char* kMadClass = "/sys/class/infiniband_mad";

/// A sysfs attribute's first line, "" when it cannot be read.
std::string attribute(const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return "";
  std::string s = std::move(text).value();
  if (size_t nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

std::string link_text(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

/// `path` with every link resolved, "" when it does not lead anywhere.
std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

bool is_index(std::string_view s) {
  return !s.empty() && s.size() < 6 && s.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

Result<RdmaRoots> rdma_roots_from_env(const std::string& dev_root) {
  RdmaRoots r;
  r.sysfs_root = env_or("BERTH_SYSFS_ROOT", "/");
  if (!dev_root.empty()) r.dev_root = dev_root;
  for (const std::string* root : {&r.sysfs_root, &r.dev_root})
    if (root->empty() || (*root)[0] != '/')
      return make_error("device", *root, "a sysfs or device root must be an absolute path",
                        ErrorCode::kInvalidInput);
  return r;
}

Result<RdmaDevices> discover_rdma(const RdmaRoots& roots) {
  RdmaDevices out;
  out.roots = roots;
  std::string ib = under_root(roots.sysfs_root, kIbClass);
  for (const std::string& name : list_dir(ib)) {
    Hca h;
    h.name = name;
    std::string dir = path_join(ib, name);
    h.sys_link = link_text(dir);
    h.node_guid = attribute(path_join(dir, "node_guid"));
    h.driver = basename_of(link_text(path_join(dir, "device/driver")));
    for (const std::string& port : list_dir(path_join(dir, "ports"))) {
      if (!is_index(port)) continue;
      std::string pdir = path_join(dir, "ports/" + port);
      h.ports.push_back({std::stoi(port), attribute(path_join(pdir, "state")),
                         attribute(path_join(pdir, "link_layer")),
                         attribute(path_join(pdir, "rate"))});
    }
    std::sort(h.ports.begin(), h.ports.end(),
              [](const RdmaPort& a, const RdmaPort& b) { return a.number < b.number; });
    out.hcas.push_back(std::move(h));
  }
  // Verbs and MAD devices name their HCA in `ibdev`.
  auto owner = [&out](const std::string& cls_dir, const std::string& entry) -> Hca* {
    std::string ibdev = attribute(path_join(path_join(cls_dir, entry), "ibdev"));
    for (Hca& h : out.hcas)
      if (h.name == ibdev) return &h;
    return nullptr;
  };
  std::string verbs = under_root(roots.sysfs_root, kVerbsClass);
  for (const std::string& entry : list_dir(verbs)) {
    if (!entry.starts_with("uverbs")) continue;
    Hca* h = owner(verbs, entry);
    if (h == nullptr) continue;
    h->uverbs = entry;
    h->uverbs_link = link_text(path_join(verbs, entry));
    h->has_node = find_node(roots.dev_root, "/dev/infiniband/" + entry, &h->node);
  }
  std::string mad = under_root(roots.sysfs_root, kMadClass);
  for (const std::string& entry : list_dir(mad))
    if (Hca* h = owner(mad, entry)) h->mad.push_back(entry);
  for (size_t i = 0; i < out.hcas.size(); ++i) out.hcas[i].index = static_cast<int>(i);
  out.has_rdma_cm = find_node(roots.dev_root, "/dev/infiniband/rdma_cm", &out.rdma_cm);
  return out;
}

IbRequest parse_ib_request(std::string_view text) {
  IbRequest r;
  std::string t(trim(text));
  if (t.empty() || t == "void" || t == "none") return r;
  if (t == "all") {
    r.kind = IbRequest::Kind::kAll;
    return r;
  }
  r.kind = IbRequest::Kind::kList;
  for (std::string_view id : split(t, ',')) r.ids.emplace_back(trim(id));
  return r;
}

Result<std::vector<const Hca*>> select_hcas(const RdmaDevices& devices, const IbRequest& req,
                                            const std::string& what) {
  std::vector<const Hca*> out;
  if (req.kind == IbRequest::Kind::kNothing) return out;
  if (req.kind == IbRequest::Kind::kAll) {
    for (const Hca& h : devices.hcas) out.push_back(&h);
    return out;
  }
  std::string present;
  for (const Hca& h : devices.hcas)
    present += (present.empty() ? "" : ", ") + std::to_string(h.index) + "=" + h.name;
  for (const std::string& id : req.ids) {
    const Hca* found = nullptr;
    for (const Hca& h : devices.hcas)
      if ((is_index(id) && std::stoi(id) == h.index) || id == h.name) found = &h;
    if (found == nullptr)
      return make_error("select HCAs", what,
                        "no HCA " + (id.empty() ? std::string("\"\"") : id) +
                            " (present: " + (present.empty() ? "none" : present) + ")",
                        ErrorCode::kNotFound);
    if (std::find(out.begin(), out.end(), found) == out.end()) out.push_back(found);
  }
  return out;
}

std::vector<DeviceEdit> plan_rdma(const RdmaDevices& devices,
                                  const std::vector<const Hca*>& selected,
                                  const std::string& container_sys) {
  std::vector<DeviceEdit> edits;
  if (selected.empty()) return edits;
  using K = DeviceEdit::Kind;
  for (const Hca* h : selected)
    if (h->has_node) edits.push_back({K::kBind, h->node.host_path, h->node.path, false});
  if (devices.has_rdma_cm)
    edits.push_back({K::kBind, devices.rdma_cm.host_path, devices.rdma_cm.path, false});
  auto abi = [&edits, &devices](const char* cls) {
    std::string abi = under_root(devices.roots.sysfs_root, std::string(cls) + "/abi_version");
    if (path_exists(abi))
      edits.push_back({K::kBind, abi, std::string(cls) + "/abi_version", true, false, false});
  };
  if (!path_exists(path_join(container_sys, "class/infiniband"))) {
    // The container's /sys has no InfiniBand class (a fabricated host, the sysfs of another
    // network namespace): no mount point can be made in a sysfs, so a read-only tmpfs goes
    // over /sys/class, every other class of it is bound back, and the InfiniBand classes are
    // built there from the sysfs root: the selected HCAs' own directories bound read-only
    // (their links into /sys/devices would lead nowhere here), the others absent.
    edits.push_back({K::kTmpfs, "", "/sys/class", true, true, false});
    std::string host_classes = path_join(container_sys, "class");
    for (const std::string& cls : list_dir(host_classes)) {
      if (cls.starts_with("infiniband")) continue;
      edits.push_back(
          {K::kBind, path_join(host_classes, cls), "/sys/class/" + cls, true, true, false});
    }
    auto bind_entry = [&edits, &devices](const char* cls, const std::string& entry) {
      std::string host = real_path(under_root(devices.roots.sysfs_root, path_join(cls, entry)));
      if (!host.empty())
        edits.push_back({K::kBind, host, path_join(cls, entry), true, true, false});
    };
    edits.push_back({K::kTmpfs, "", kIbClass, true, true, false});
    abi(kIbClass);
    for (const Hca* h : selected) bind_entry(kIbClass, h->name);
    edits.push_back({K::kTmpfs, "", kVerbsClass, true, true, false});
    abi(kVerbsClass);
    for (const Hca* h : selected)
      if (!h->uverbs.empty()) bind_entry(kVerbsClass, h->uverbs);
    edits.push_back({K::kTmpfs, "", kMadClass, true, true, false});
    abi(kMadClass);  // umad/issm never: the class stays empty
    return edits;
  }
  // The classes, narrowed. The container's /sys is the kernel's own, not the sysfs root: the
  // edits name container paths; the links' texts are the host's (relative, into /sys/devices).
  auto narrow = [&edits, &abi](const char* cls) {
    edits.push_back({K::kTmpfs, "", cls, true, true, false});
    abi(cls);
  };
  narrow(kIbClass);
  for (const Hca* h : selected)
    if (!h->sys_link.empty())
      edits.push_back({K::kSymlink, h->sys_link, path_join(kIbClass, h->name), true, false, false});
  narrow(kVerbsClass);
  for (const Hca* h : selected)
    if (!h->uverbs_link.empty())
      edits.push_back(
          {K::kSymlink, h->uverbs_link, path_join(kVerbsClass, h->uverbs), true, false, false});
  narrow(kMadClass);  // umad/issm never: the class stays empty
  return edits;
}

}  // namespace berth

#include "devices/amd.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>

#include "core/dir.h"
#include "core/fs.h"

namespace berth {
namespace {

bool node_at(const std::string& dev_root, const std::string& path, DeviceNode* n) {
  std::string host = dev_root == "/" ? path : path_join(dev_root, path);
  struct stat st;
  if (stat(host.c_str(), &st) != 0) return false;
  n->path = path;
  n->host_path = host;
  n->is_char = S_ISCHR(st.st_mode);
  if (n->is_char) {
    n->major = major(st.st_rdev);
    n->minor = minor(st.st_rdev);
  }
  return true;
}

}  // namespace

AmdDevices discover_amd(const DiscoveryOptions& o) {
  AmdDevices a;
  const std::string& dev = o.effective_dev_root();
  a.found = node_at(dev, "/dev/kfd", &a.kfd);
  if (!a.found) return a;
  std::string dri = dev == "/" ? "/dev/dri" : path_join(dev, "/dev/dri");
  for (const std::string& name : list_dir(dri)) {
    DeviceNode n;
    if (name.rfind("renderD", 0) == 0 && node_at(dev, "/dev/dri/" + name, &n))
      a.render_nodes.push_back(std::move(n));
  }
  std::sort(a.render_nodes.begin(), a.render_nodes.end(),
            [](const DeviceNode& x, const DeviceNode& y) { return x.path < y.path; });
  std::string vfile = o.driver_root == "/" ? "/opt/rocm/.info/version"
                                            : path_join(o.driver_root, "/opt/rocm/.info/version");
  if (path_exists(vfile)) {
    auto v = read_file(vfile);
    if (v.ok()) {
      a.rocm_version = *v;
      while (!a.rocm_version.empty() && (a.rocm_version.back() == '\n' || a.rocm_version.back() == ' '))
        a.rocm_version.pop_back();
    }
  }
  return a;
}

}  // namespace berth

#include "devices/amd.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>

#include "core/dir.h"
#include "core/fs.h"

namespace berth {
AmdDevices discover_amd(const DiscoveryOptions& o) {
  AmdDevices a;
  const std::string& dev = o.effective_dev_root();
  a.found = find_node(dev, "/dev/kfd", &a.kfd);
  if (!a.found) return a;
  std::string dri = dev == "/" ? "/dev/dri" : path_join(dev, "/dev/dri");
  for (const std::string& name : list_dir(dri)) {
    DeviceNode n;
    if (name.rfind("renderD", 0) == 0 && find_node(dev, "/dev/dri/" + name, &n))
      a.render_nodes.push_back(std::move(n));
  }
  std::sort(a.render_nodes.begin(), a.render_nodes.end(),
            [](const DeviceNode& x, const DeviceNode& y) { return x.path < y.path; });
  std::string vfile = under_root(o.driver_root, "/opt/rocm/.info/version");
  if (path_exists(vfile)) {
    auto v = read_file(vfile);
    if (v.ok()) {
      a.rocm_version = *v;
      while (!a.rocm_version.empty() &&
             (a.rocm_version.back() == '\n' || a.rocm_version.back() == ' '))
        a.rocm_version.pop_back();
    }
  }
  return a;
}

}  // namespace berth

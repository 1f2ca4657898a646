#include "devices/inject.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "core/env_list.h"
#include "core/fs.h"
#include "core/root_path.h"
#include "runtime/library_path.h"

namespace berth {
namespace {

using Kind = DeviceEdit::Kind;

DeviceEdit host_bind(const std::string& host, const std::string& target, bool read_only,
                     bool is_dir, bool required = true) {
  return DeviceEdit{Kind::kBind, host, target, read_only, is_dir, required};
}

}  // namespace

void ensure_run_dir(ContainerSpec& spec) {
  for (const DeviceEdit& d : spec.device_edits)
    if (d.kind == Kind::kTmpfs && d.target == kBerthRunDir) return;
  spec.device_edits.insert(spec.device_edits.begin(),
                           DeviceEdit{Kind::kTmpfs, "", kBerthRunDir, false, true, true});
}

void stage_and_link(const std::string& host, const std::string& container, bool read_only,
                    bool is_dir, ContainerSpec& spec) {
  ensure_run_dir(spec);
  std::string staged = std::string(kBerthRunDir) + "/host" + container;
  spec.device_edits.push_back(host_bind(host, staged, read_only, is_dir));
  spec.device_edits.push_back(DeviceEdit{Kind::kSymlink, staged, container, true, false, false});
}

void inject_gpu_plan(const GpuPlan& plan, ContainerSpec& spec) {
  if (!plan.inject) return;
  ensure_run_dir(spec);
  auto& out = spec.device_edits;
  // /dev is the container's own tmpfs (or the host's, with --host-dev): nodes leave nothing.
  for (const DeviceNode& n : plan.devices)
    out.push_back(host_bind(n.host_path, n.path, false, false));
  for (const GpuBind& b : plan.libraries)
    out.push_back(host_bind(b.host, b.container, true, false));
  for (const GpuLink& l : plan.links) out.push_back(DeviceEdit{Kind::kSymlink, l.target, l.path});
  for (const auto* group : {&plan.binaries, &plan.files})
    for (const GpuBind& b : *group)
      stage_and_link(b.host, b.container, b.read_only, b.is_dir, spec);
  // /proc/driver/nvidia exists only where the driver is loaded (not on a fabricated host):
  // those edits are optional.
  if (!plan.proc_mask.empty()) {
    out.push_back(DeviceEdit{Kind::kTmpfs, "", plan.proc_mask, true, true, false});
    for (const GpuBind& b : plan.proc_gpus)
      out.push_back(host_bind(b.host, b.container, true, true, false));
  }
  for (const GpuFile& g : plan.generated)
    out.push_back(DeviceEdit{Kind::kFile, g.content, g.container, true, false, false});
  add_library_dirs(plan.library_dirs, spec);
  for (const auto& kv : plan.env) set_env(spec.env, kv);
}

void add_library_dirs(const std::vector<std::string>& dirs, ContainerSpec& spec) {
  if (dirs.empty()) return;
  if (std::string ldconfig = find_image_ldconfig(spec.rootfs); !ldconfig.empty()) {
    spec.ldconfig_path = ldconfig;
    spec.ld_library_dirs.insert(spec.ld_library_dirs.end(), dirs.begin(), dirs.end());
    // The loader searches LD_LIBRARY_PATH before its cache: an image that sets one gets the
    // dirs in front of it too, so that its libraries never win over the host driver's.
    if (env_lookup(spec.env, "LD_LIBRARY_PATH")) put_library_dirs_first(spec.env, dirs);
    return;
  }
  put_library_dirs_first(spec.env, dirs);  // the same order every engine gives
}

std::string find_image_ldconfig(const std::string& rootfs) {
  UniqueFd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return "";
  for (const char* p : {"/sbin/ldconfig", "/usr/sbin/ldconfig"}) {
    UniqueFd fd(open_in_root(root.get(), p, O_PATH));
    struct stat st;
    if (fd.valid() && ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111))
      return p;
  }
  return "";
}

}  // namespace berth

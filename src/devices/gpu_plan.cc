#include "devices/gpu_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/env_list.h"
#include "core/fs.h"
#include "core/strings.h"

namespace berth {
namespace {

/// Libraries that also get an unversioned "<base>.so" link (what build systems and
/// some dlopen calls look for), and extra aliases some loaders expect.
const char* const kDevLinks[] = {"libcuda", "libnvidia-ml", "libnvcuvid", "libnvidia-encode",
                                 "libnvidia-opticalflow"};
struct Alias {
  const char* base;
  const char* alias;
};
const Alias kAliases[] = {{"libGLX_nvidia", "libGLX_indirect.so.0"}};

const char* const kCompatDir = "/usr/local/cuda/compat";

std::string describe(const GpuPlanInput& in) {
  if (in.gpus_flag) return "--gpus " + *in.gpus_flag;
  auto v = env_lookup(in.container_env, "NVIDIA_VISIBLE_DEVICES");
  return "NVIDIA_VISIBLE_DEVICES=" + v.value_or("");
}

/// /proc/driver/nvidia/params with ModifyDeviceFiles off, so the driver
/// libraries inside do not try to create device nodes (they cannot, rootless).
std::string params_without_modify(const std::string& params) {
  std::string out;
  for (std::string_view line : split_lines(params)) {
    if (line.starts_with("ModifyDeviceFiles:")) line = "ModifyDeviceFiles: 0";
    out.append(line) += '\n';
  }
  return out;
}

}  // namespace

Result<GpuPlan> plan_gpus(const NvidiaDriver& driver, const GpuPlanInput& in) {
  const auto& env = in.container_env;
  GpuRequest req =
      in.gpus_flag ? BERTH_TRY(parse_gpus_flag(*in.gpus_flag))
                   : BERTH_TRY(parse_visible_devices(env_lookup(env, "NVIDIA_VISIBLE_DEVICES")));
  GpuPlan plan;
  if (req.kind == GpuRequest::Kind::kNothing) return plan;
  if (!driver.found)
    return make_error("inject GPUs", describe(in),
                      "no NVIDIA driver found under " + driver.options.driver_root)
        .with_hint(
            "run on a node with an NVIDIA GPU, or point BERTH_DRIVER_ROOT at the driver's tree");
  plan.inject = true;
  plan.caps = req.caps
                  ? *req.caps
                  : BERTH_TRY(parse_capabilities(env_lookup(env, "NVIDIA_DRIVER_CAPABILITIES")));
  auto allowed = parse_cuda_visible_devices(in.host_cuda_visible_devices, driver.gpus);
  plan.gpus = BERTH_TRY(select_gpus(req, driver.gpus, allowed));

  Version compat = compat_libcuda_version(in.image_compat_files);
  plan.use_compat = (plan.caps & kCapCompute) && use_cuda_compat(driver.version, compat);

  HostFacts facts;
  facts.driver = driver.version;
  // With the compat libcuda, the CUDA version is the image's own; it is not probed.
  if (!plan.use_compat) facts.cuda = driver.cuda_version;
  BERTH_CHECK(check_requirements(env, facts));
  if (!facts.cuda.known() && !plan.use_compat &&
      (env_lookup(env, "NVIDIA_REQUIRE_CUDA") || env_lookup(env, "CUDA_VERSION")))
    plan.warnings.push_back("the host's CUDA version is unknown (" + driver.cuda_version_note +
                            "): cuda requirements were not checked");

  // Device nodes: control nodes by capability, then one per selected GPU.
  for (const auto& n : driver.control_nodes) {
    CapabilitySet need = 0;
    if (n.path == "/dev/nvidia-uvm" || n.path == "/dev/nvidia-uvm-tools") need = kCapCompute;
    if (n.path == "/dev/nvidia-modeset") need = kCapGraphics | kCapDisplay;
    if (need == 0 || (plan.caps & need)) plan.devices.push_back(n);
  }
  for (int idx : plan.gpus) {
    const NvidiaGpu& g = driver.gpus[static_cast<size_t>(idx)];
    if (!g.has_node)
      return make_error("inject GPUs", "/dev/nvidia" + std::to_string(g.minor),
                        "the device node of GPU " + std::to_string(g.index) + " (" + g.uuid +
                            ") is missing under " + driver.options.effective_dev_root());
    plan.devices.push_back(g.node);
    plan.proc_gpus.push_back({g.proc_host_path, g.proc_dir, true, true});
  }

  // Libraries whose compat twin replaces them: "libcuda" -> "libcuda.so.<compat>".
  std::map<std::string, std::string> compat_by_base;
  if (plan.use_compat)
    for (const auto& name : in.image_compat_files) {
      std::string base, ver;
      if (split_library_name(name, &base, &ver) && ver == compat.str() &&
          library_capabilities(base))
        compat_by_base[base] = name;
    }
  bool any32 = false;
  for (const auto& lib : driver.libraries) {
    if (!(lib.caps & plan.caps) || (lib.lib32 && !(plan.caps & kCapCompat32))) continue;
    const std::string dir = lib.lib32 ? kGpuLib32Dir : kGpuLibDir;
    const std::string name = basename_of(lib.path);
    std::string base, ver;
    split_library_name(name, &base, &ver);
    auto compat_it = lib.lib32 ? compat_by_base.end() : compat_by_base.find(base);
    const std::string soname = lib.soname.empty() ? name : lib.soname;
    if (compat_it != compat_by_base.end()) {
      plan.links.push_back({path_join(dir, soname), path_join(kCompatDir, compat_it->second)});
    } else {
      plan.libraries.push_back({lib.host_path, path_join(dir, name), true, false});
      if (soname != name) plan.links.push_back({path_join(dir, soname), name});
    }
    any32 |= lib.lib32;
    for (const char* d : kDevLinks)
      if (base == d) plan.links.push_back({path_join(dir, base + ".so"), soname});
    for (const auto& a : kAliases)
      if (base == a.base) plan.links.push_back({path_join(dir, a.alias), soname});
  }

  for (const auto& b : driver.binaries)
    if (b.caps & plan.caps)
      plan.binaries.push_back({b.host_path, "/usr/bin/" + basename_of(b.path), true, false});
  for (const auto& f : driver.firmware) plan.files.push_back({f.host_path, f.path, true, false});
  for (const auto& f : driver.config_files)
    if (f.caps & plan.caps) plan.files.push_back({f.host_path, f.path, true, false});
  // Sockets and the MPS pipes are written to: bound read-write. The MPS directories keep
  // their host paths, and CUDA inside is told them, whatever the image says.
  for (const auto& f : driver.ipc) {
    if (!(f.caps & plan.caps)) continue;
    plan.files.push_back({f.host_path, f.path, false, f.is_dir});
    if (f.is_dir && f.path == driver.options.mps_pipe_dir)
      plan.env.push_back("CUDA_MPS_PIPE_DIRECTORY=" + f.path);
    else if (f.is_dir && f.path == driver.options.mps_log_dir)
      plan.env.push_back("CUDA_MPS_LOG_DIRECTORY=" + f.path);
  }

  if (!plan.libraries.empty() || !plan.links.empty()) {
    plan.library_dirs.push_back(kGpuLibDir);
    if (any32) plan.library_dirs.push_back(kGpuLib32Dir);
  }
  if (!driver.proc_params.empty())
    plan.generated.push_back(
        {"/proc/driver/nvidia/params", params_without_modify(driver.proc_params)});

  std::string uuids;
  for (int idx : plan.gpus)
    uuids += (uuids.empty() ? "" : ",") + driver.gpus[static_cast<size_t>(idx)].uuid;
  plan.env.push_back("NVIDIA_VISIBLE_DEVICES=" + (plan.gpus.empty() ? std::string("none") : uuids));
  plan.env.push_back("NVIDIA_DRIVER_CAPABILITIES=" + capabilities_str(plan.caps));
  if (in.host_cuda_visible_devices) {
    // Inside, only the selected GPUs exist, numbered from 0.
    std::string renumbered;
    for (size_t i = 0; i < plan.gpus.size(); ++i) renumbered += (i ? "," : "") + std::to_string(i);
    plan.env.push_back("CUDA_VISIBLE_DEVICES=" + renumbered);
  }
  return plan;
}

}  // namespace berth

#include "devices/run_devices.h"

#include <sys/stat.h>

#include "core/dir.h"
#include "core/env.h"
#include "core/env_list.h"
#include "core/fs.h"
#include "core/log.h"
#include "devices/amd.h"
#include "devices/cdi.h"
#include "devices/gpu_plan.h"
#include "devices/inject.h"
#include "devices/rdma.h"

namespace berth {
namespace {

bool sets(const std::vector<std::string>& vars, std::string_view key) {
  for (const auto& v : vars)
    if (v.size() >= key.size() && v.compare(0, key.size(), key) == 0 &&
        (v.size() == key.size() || v[key.size()] == '='))
      return true;
  return false;
}

/// AMD: the KFD node and the render nodes; --gpus selects through ROCR_VISIBLE_DEVICES.
Status add_amd(const AmdDevices& amd, const std::string& gpus_flag, ContainerSpec& spec) {
  GpuRequest req = BERTH_TRY(parse_gpus_flag(gpus_flag));
  if (req.kind == GpuRequest::Kind::kNothing) return {};
  spec.device_edits.push_back({DeviceEdit::Kind::kBind, amd.kfd.host_path, amd.kfd.path, false});
  for (const auto& n : amd.render_nodes)
    spec.device_edits.push_back({DeviceEdit::Kind::kBind, n.host_path, n.path, false});
  std::string visible;
  int n = static_cast<int>(amd.render_nodes.size());
  if (req.kind == GpuRequest::Kind::kCount) {
    if (req.count > n)
      return make_error(
          "inject GPUs", "--gpus " + gpus_flag,
          std::to_string(req.count) + " GPUs requested, " + std::to_string(n) + " present");
    for (int i = 0; i < req.count; ++i) visible += (i ? "," : "") + std::to_string(i);
  } else if (req.kind == GpuRequest::Kind::kList) {
    for (const auto& d : req.devices) visible += (visible.empty() ? "" : ",") + d;
  }
  if (!visible.empty()) set_env(spec.env, "ROCR_VISIBLE_DEVICES=" + visible);
  return {};
}

/// Docker's --device HOST[:CONTAINER[:PERMISSIONS]]: a host device node bound in.
Status add_host_device(const std::string& value, ContainerSpec& spec) {
  std::string host = value, ctr, perms;
  if (size_t c = value.find(':'); c != std::string::npos) {
    host = value.substr(0, c);
    ctr = value.substr(c + 1);
    if (size_t c2 = ctr.find(':'); c2 != std::string::npos) {
      perms = ctr.substr(c2 + 1);
      ctr = ctr.substr(0, c2);
    }
  }
  if (ctr.empty()) ctr = host;
  if (perms.find_first_not_of("rwm") != std::string::npos)
    return make_error("--device", value, "permissions must be made of r, w and m");
  struct stat st;
  if (::stat(host.c_str(), &st) != 0) return sys_error("--device", host);
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode) && !S_ISDIR(st.st_mode))
    return make_error("--device", host, "not a device node");
  bool read_only = !perms.empty() && perms.find('w') == std::string::npos;
  spec.device_edits.push_back({DeviceEdit::Kind::kBind, host, ctr, read_only, S_ISDIR(st.st_mode)});
  return {};
}

/// InfiniBand/RDMA (devices/rdma.h): --ib, else MELLANOX_VISIBLE_DEVICES, else the site's
/// default. Asked by the caller (--ib, -e, --env-file), a host without HCAs is an error; from
/// the image or the site, HCAs are injected where there are some. Nothing is read otherwise.
Status add_rdma(const RunOptions& opts, const Result<DiscoveryOptions>& discovery,
                ContainerSpec& spec) {
  constexpr std::string_view kVar = "MELLANOX_VISIBLE_DEVICES";
  std::string text, what;
  bool asked = false;
  if (opts.ib) {
    text = *opts.ib;
    what = "--ib " + text;
    asked = true;
  } else if (auto v = env_lookup(spec.env, kVar)) {
    text = *v;
    what = std::string(kVar) + "=" + text;
    asked = sets(opts.env, kVar) || sets(opts.file_env, kVar);
  } else {
    text = opts.ib_site_default;
    what = "the site policy's ib = " + text;
  }
  IbRequest req = parse_ib_request(text);
  if (req.kind == IbRequest::Kind::kNothing) return {};
  std::string dev_root = discovery.ok() ? discovery->effective_dev_root() : "/";
  RdmaRoots roots = BERTH_TRY(rdma_roots_from_env(dev_root));
  RdmaDevices devices = BERTH_TRY(discover_rdma(roots));
  if (!devices.found()) {
    if (!asked) return {};
    return make_error("select HCAs", what,
                      "no InfiniBand/RDMA device under " +
                          path_join(roots.sysfs_root, "sys/class/infiniband"),
                      ErrorCode::kNotFound)
        .with_hint("set BERTH_SYSFS_ROOT if the host's sysfs is elsewhere, or leave out --ib");
  }
  std::vector<const Hca*> selected = BERTH_TRY(select_hcas(devices, req, what));
  // The container's /sys is the host's (or, with --network none, a sysfs of the same kernel).
  for (DeviceEdit& e : plan_rdma(devices, selected, "/sys"))
    spec.device_edits.push_back(std::move(e));
  return {};
}

}  // namespace

Status add_run_devices(const RunOptions& opts, const HostContext& host,
                       const Result<DiscoveryOptions>& discovery, ContainerSpec& spec) {
  bool asked = opts.gpus.has_value() || sets(opts.env, "NVIDIA_VISIBLE_DEVICES") ||
               sets(opts.file_env, "NVIDIA_VISIBLE_DEVICES");
  if (asked || env_lookup(spec.env, "NVIDIA_VISIBLE_DEVICES")) {
    DiscoveryOptions dopts = BERTH_TRY(discovery);
    NvidiaDriver driver = BERTH_TRY(discover_nvidia(dopts));
    if (!driver.found && opts.gpus) {
      if (AmdDevices amd = discover_amd(dopts); amd.found) return add_amd(amd, *opts.gpus, spec);
    }
    if (driver.found || asked) {
      GpuPlanInput in;
      in.gpus_flag = opts.gpus;
      in.container_env = spec.env;
      in.host_cuda_visible_devices = env_lookup(host.environ, "CUDA_VISIBLE_DEVICES");
      in.image_compat_files = list_dir_in_root(spec.rootfs, "/usr/local/cuda/compat");
      GpuPlan plan = BERTH_TRY(plan_gpus(driver, in));
      for (const auto& w : plan.warnings) log::warn("{}", w);
      inject_gpu_plan(plan, spec);
    } else {
      log::debug("the image asks for GPUs (NVIDIA_VISIBLE_DEVICES) but there is no driver under {}",
                 dopts.driver_root);
    }
  }
  BERTH_CHECK(add_rdma(opts, discovery, spec));
  std::vector<CdiSpec> cdi;
  bool cdi_loaded = false;
  std::vector<std::string> skipped_hooks;  // of every CDI device: one warning for the run
  for (const auto& name : opts.devices) {
    if (name.starts_with("/")) {
      BERTH_CHECK(add_host_device(name, spec));
      continue;
    }
    if (!cdi_loaded) {
      std::vector<std::string> warnings;
      cdi = BERTH_TRY(load_cdi_specs(cdi_spec_dirs(host.environ, host.home), &warnings));
      for (const auto& w : warnings) log::warn("{}", w);
      cdi_loaded = true;
    }
    for (const auto& w : BERTH_TRY(apply_cdi_device(cdi, name, spec, &skipped_hooks)))
      log::warn("{}", w);
  }
  if (!skipped_hooks.empty()) {
    std::string list;
    for (const auto& h : skipped_hooks) list += (list.empty() ? "\"" : ", \"") + h + "\"";
    log::warn("CDI: {} {} skipped (hooks need a privileged runtime)",
              skipped_hooks.size() == 1 ? "hook" : "hooks", list);
  }
  return {};
}

}  // namespace berth

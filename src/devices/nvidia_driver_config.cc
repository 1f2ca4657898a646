#include "devices/nvidia_driver_config.h"

#include "core/env.h"

namespace berth {

Result<DiscoveryOptions> discovery_options_from_env(DiscoveryOptions configured) {
  DiscoveryOptions o = std::move(configured);
  o.driver_root = env_or("BERTH_DRIVER_ROOT", o.driver_root);
  o.dev_root = env_or("BERTH_DEV_ROOT", o.dev_root);
  o.mps_pipe_dir = env_or("CUDA_MPS_PIPE_DIRECTORY", o.mps_pipe_dir);
  o.mps_log_dir = env_or("CUDA_MPS_LOG_DIRECTORY", o.mps_log_dir);
  std::string probe = env_or("BERTH_CUDA_PROBE", "auto");
  if (probe == "never")
    o.cuda_probe = CudaProbe::kNever;
  else if (probe == "always")
    o.cuda_probe = CudaProbe::kAlways;
  else if (probe != "auto")
    return make_error("read environment", "BERTH_CUDA_PROBE",
                      "'" + probe + "' is not one of auto, never, always");
  for (const std::string* r : {&o.driver_root, &o.dev_root})
    if (!r->empty() && (*r)[0] != '/')
      return make_error("read config", *r, "driver and device roots must be absolute paths");
  for (auto [name, dir] : {std::pair{"CUDA_MPS_PIPE_DIRECTORY", &o.mps_pipe_dir},
                           std::pair{"CUDA_MPS_LOG_DIRECTORY", &o.mps_log_dir}})
    if (dir->empty() || (*dir)[0] != '/')
      return make_error("read environment", name, "'" + *dir + "' is not an absolute path");
  return o;
}

}  // namespace berth

#include "devices/nvidia_driver_config.h"

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/fs.h"

namespace berth {

Result<DiscoveryOptions> discovery_options_from_env(const std::string& config_path) {
  DiscoveryOptions o;
  if (path_exists(config_path)) {
    std::string text = BERTH_TRY(read_file(config_path));
    try {
      auto j = nlohmann::json::parse(text);
      if (j.contains("driver_root")) o.driver_root = j.at("driver_root").get<std::string>();
      if (j.contains("dev_root")) o.dev_root = j.at("dev_root").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      return make_error("read config", config_path, e.what());
    }
  }
  o.driver_root = env_or("BERTH_DRIVER_ROOT", o.driver_root);
  o.dev_root = env_or("BERTH_DEV_ROOT", o.dev_root);
  o.mps_pipe_dir = env_or("CUDA_MPS_PIPE_DIRECTORY", o.mps_pipe_dir);
  std::string probe = env_or("BERTH_CUDA_PROBE", "auto");
  if (probe == "never") o.cuda_probe = CudaProbe::kNever;
  else if (probe == "always") o.cuda_probe = CudaProbe::kAlways;
  else if (probe != "auto")
    return make_error("read environment", "BERTH_CUDA_PROBE",
                      "'" + probe + "' is not one of auto, never, always");
  for (const std::string* r : {&o.driver_root, &o.dev_root})
    if (!r->empty() && (*r)[0] != '/')
      return make_error("read config", *r, "driver and device roots must be absolute paths");
  return o;
}

}  // namespace berth

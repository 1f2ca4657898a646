// Where discovery looks for the NVIDIA driver (driver root, device root) and whether it may
// probe libcuda: from the configuration file's roots and the environment.
#pragma once

#include <string>

#include "core/error.h"

namespace berth {

/// Whether discovery may dlopen the found libcuda to ask cuDriverGetVersion.
enum class CudaProbe {
  kAuto,    ///< under any driver root (the library containers will load anyway), in a forked child
  kNever,   ///< the CUDA version is derived from the driver branch instead
  kAlways,  ///< as kAuto (kept: it was needed under a driver root before)
};

struct DiscoveryOptions {
  std::string driver_root = "/";  ///< BERTH_DRIVER_ROOT / config driver_root
  std::string dev_root;           ///< BERTH_DEV_ROOT / config dev_root; empty: the driver root
  CudaProbe cuda_probe = CudaProbe::kAuto;
  std::string mps_pipe_dir = "/tmp/nvidia-mps";     ///< CUDA_MPS_PIPE_DIRECTORY
  std::string mps_log_dir = "/var/log/nvidia-mps";  ///< CUDA_MPS_LOG_DIRECTORY

  const std::string& effective_dev_root() const {
    return dev_root.empty() ? driver_root : dev_root;
  }
};

/// `configured` (the roots the configuration file gives, site/config.h) overridden by
/// BERTH_DRIVER_ROOT, BERTH_DEV_ROOT, BERTH_CUDA_PROBE (auto|never|always),
/// CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY. Both roots and both MPS directories must
/// be absolute.
Result<DiscoveryOptions> discovery_options_from_env(DiscoveryOptions configured);

}  // namespace berth

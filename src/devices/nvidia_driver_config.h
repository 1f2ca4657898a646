// Where discovery looks for the NVIDIA driver (driver root, device root) and whether it may
// probe libcuda: from the environment and Berth's JSON config.
#pragma once

#include <string>

#include "core/error.h"

namespace berth {

/// Whether discovery may dlopen the found libcuda to ask cuDriverGetVersion.
enum class CudaProbe {
  kAuto,    ///< only when the driver root is "/" (the library the container will load anyway)
  kNever,
  kAlways,  ///< also under another driver root: the caller trusts that tree's code
};

struct DiscoveryOptions {
  std::string driver_root = "/";  ///< BERTH_DRIVER_ROOT / config driver_root
  std::string dev_root;           ///< BERTH_DEV_ROOT / config dev_root; empty: the driver root
  CudaProbe cuda_probe = CudaProbe::kAuto;
  std::string mps_pipe_dir = "/tmp/nvidia-mps";  ///< CUDA_MPS_PIPE_DIRECTORY

  const std::string& effective_dev_root() const { return dev_root.empty() ? driver_root : dev_root; }
};

/// Options from BERTH_DRIVER_ROOT, BERTH_DEV_ROOT, BERTH_CUDA_PROBE (auto|never|always),
/// CUDA_MPS_PIPE_DIRECTORY, then "driver_root" / "dev_root" in the JSON config at
/// `config_path` (a missing file is fine). Environment wins over the file.
Result<DiscoveryOptions> discovery_options_from_env(const std::string& config_path);

}  // namespace berth

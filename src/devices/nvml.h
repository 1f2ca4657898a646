// The GPUs' state as NVML (the driver's libnvidia-ml) reports it, as nvidia-smi shows it:
// utilisation, memory, temperature, power and the compute processes of each GPU. What
// `berth gpu stats` prints and what idle-GPU reclaim reads (docs/gpu.md).
//
// The library is the one driver discovery found under the driver root (nvidia_discover.h),
// loaded with dlopen in a forked child, never in Berth's own process: NVML can hang on a broken
// driver (the child is killed after a time limit) and leaves threads and open device files
// behind. The child sends its readings back over a pipe, one JSON line per sample. Each NVML
// function is looked up by name: a missing optional one leaves its field unknown, as do
// NVML_ERROR_NOT_SUPPORTED and any other error of that one call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "devices/nvidia_discover.h"

namespace berth {

/// A compute process on a GPU.
struct NvmlProcess {
  unsigned pid = 0;  ///< in the PID namespace NVML was asked from (the host's, for berth)
  std::optional<uint64_t>
      used_memory_mib;  ///< unknown when NVML cannot say (NVML_VALUE_NOT_AVAILABLE)
};

/// One GPU at one instant. Empty strings and optionals: NVML could not say.
struct NvmlGpuReading {
  int index = 0;       ///< NVML's index (PCI bus order, as nvidia-smi numbers GPUs)
  std::string uuid;    ///< "GPU-..."
  std::string name;    ///< "NVIDIA H100 80GB HBM3"
  std::string bus_id;  ///< "0000:07:00.0", as /proc/driver/nvidia and `gpu info` write it
  /// CUDA compute capability "MAJOR.MINOR" ("9.0"), nvmlDeviceGetCudaComputeCapability's
  std::string compute_capability;
  std::optional<unsigned> utilization_gpu;     ///< % of time a kernel ran, over NVML's last period
  std::optional<unsigned> utilization_memory;  ///< % of time memory was read or written
  std::optional<uint64_t> memory_total_mib;
  std::optional<uint64_t> memory_used_mib;
  std::optional<unsigned> temperature_c;
  std::optional<double> power_w;
  std::optional<std::vector<NvmlProcess>> processes;  ///< unknown: NVML cannot list them
  std::string error;  ///< not empty: this GPU could not be read at all (nvmlErrorString)
};

/// Every selected GPU at one instant.
struct NvmlSample {
  int64_t unix_ms = 0;  ///< when it was taken (wall clock)
  std::vector<NvmlGpuReading> gpus;
};

struct NvmlOptions {
  int samples = 1;  ///< how many readings, `interval_ms` apart
  int interval_ms = 1000;
  /// How long NVML may take to start and give the first reading, and each later reading beyond
  /// its interval, before the child is killed and the read fails.
  int timeout_s = 30;
  /// Only the GPUs with these UUIDs (compared without case); nullopt: every GPU NVML lists.
  std::optional<std::vector<std::string>> uuids;
};

struct NvmlReadings {
  std::string driver_version;       ///< nvmlSystemGetDriverVersion; empty when unknown
  std::vector<NvmlSample> samples;  ///< opts.samples of them, oldest first
};

/// Takes opts.samples readings through the libnvidia-ml at `library` (a host path) in a forked
/// child. Errors, one line each: the library cannot be loaded or lacks NVML's entry points,
/// nvmlInit fails (with nvmlErrorString's words), the GPUs cannot be counted, or NVML gives no
/// answer within the time limit.
Result<NvmlReadings> read_nvml(const std::string& library, const NvmlOptions& opts);

/// The host path of the discovered driver's 64-bit libnvidia-ml; empty when it has none.
std::string nvml_library(const NvidiaDriver& driver);

/// NVML's PCI bus id ("00000000:07:00.0", 8 hex digits of domain) in the form
/// /proc/driver/nvidia and `gpu info` use ("0000:07:00.0", lower case); other text as it is.
std::string normalize_bus_id(std::string_view nvml_bus_id);

}  // namespace berth

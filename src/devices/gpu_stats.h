// What `berth gpu stats` shows: NVML's readings (nvml.h) of the selected GPUs, as of the last
// sample, with the minimum, mean and maximum of the window's samples. JSON for scripts (its
// keys are documented in docs/gpu.md and kept stable: idle-GPU reclaim reads them through
// Slurm), a table for people. Pure functions; nothing here reads the system.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "devices/gpu_process.h"
#include "devices/nvidia_discover.h"
#include "devices/nvml.h"

namespace berth {

/// One quantity over the window's samples.
struct WindowStats {
  double min = 0, mean = 0, max = 0;
};
/// Over the samples that have a value (the mean rounded to 0.001); nullopt when none has.
std::optional<WindowStats> window_of(const std::vector<std::optional<double>>& values);

/// The UUIDs of the GPUs `gpu stats` reports: `gpus_flag` (Docker's --gpus syntax, as `run`
/// takes it) within the caller's CUDA_VISIBLE_DEVICES (a Slurm job's GPUs, numbered as in the
/// job), matched against the discovered GPUs. nullopt: no flag and no CUDA_VISIBLE_DEVICES,
/// every GPU NVML lists.
Result<std::optional<std::vector<std::string>>> stats_selection(
    std::optional<std::string_view> gpus_flag, std::optional<std::string_view> cuda_visible_devices,
    const std::vector<NvidiaGpu>& gpus);

/// What the host adds to NVML's readings: where they were taken, and who each process is.
struct GpuStatsHost {
  std::string node;  ///< the Slurm node name (SLURMD_NODENAME) or host name; "" unknown
  std::map<unsigned, GpuProcessOwner> owners;  ///< by pid; a pid not here is unknown
};

/// {"node", "driver_version", "time", "samples", "interval_ms", "gpus": [...]}: see
/// docs/gpu.md.
nlohmann::json gpu_stats_json(const NvmlReadings& r, const NvmlOptions& o,
                              const GpuStatsHost& host = {});
/// The same as a table: a header line, one row per GPU, then the processes (with their user,
/// Slurm job and command where `host` knows them).
std::string gpu_stats_text(const NvmlReadings& r, const NvmlOptions& o,
                           const GpuStatsHost& host = {});

}  // namespace berth

// What `berth gpu info` shows: the discovered driver, GPUs and, per
// capability, the files a container would get. Text for people, JSON for scripts.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "devices/amd.h"
#include "devices/nvidia_discover.h"

namespace berth {

/// {"driver_root", "dev_root", "nvidia": {...}, "amd": {...}}; stable keys for scripts.
nlohmann::json gpu_info_json(const NvidiaDriver& nv, const AmdDevices& amd);
/// The same for a terminal: a header line, a GPU table, files per capability.
std::string gpu_info_text(const NvidiaDriver& nv, const AmdDevices& amd);
/// The one-line error of a GPU command (`op`) on a host without an NVIDIA driver under
/// `driver_root`, with a hint.
Error no_nvidia_driver_error(Op op, const std::string& driver_root);

}  // namespace berth

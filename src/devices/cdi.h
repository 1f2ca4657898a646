// A Container Device Interface (CDI) spec for the discovered NVIDIA driver,
// so Podman, containerd, CRI-O or Kubernetes can inject the same GPUs that
// `berth run --gpus` would.
#pragma once

#include <nlohmann/json.hpp>

#include "devices/nvidia.h"

namespace berth {

inline constexpr const char* kCdiVersion = "0.6.0";
inline constexpr const char* kCdiKind = "nvidia.com/gpu";

/// The spec: a device per GPU index and per UUID, plus "all"; common edits with
/// the control nodes, every version-matched 64-bit library (at its host path, and
/// again at its soname path so no symlink hook is needed), binaries, firmware,
/// ICD files, IPC endpoints and NVIDIA_VISIBLE_DEVICES=void. When the host has
/// nvidia-cdi-hook or nvidia-ctk, an update-ldcache hook is added for the
/// library folders. Device nodes name their hostPath when the device root is not "/".
nlohmann::json make_cdi_spec(const NvidiaDriver& driver);

}  // namespace berth

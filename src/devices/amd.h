// AMD ROCm devices: a second, small discovery beside NVIDIA's. ROCm needs no
// driver libraries from the host (images carry the user-space stack); it
// needs /dev/kfd and the DRM render nodes.
#pragma once

#include <string>
#include <vector>

#include "devices/nvidia_discover.h"

namespace berth {

struct AmdDevices {
  bool found = false;  ///< /dev/kfd exists under the device root
  DeviceNode kfd;
  std::vector<DeviceNode> render_nodes;  ///< /dev/dri/renderD*, sorted
  std::string rocm_version;              ///< <driver root>/opt/rocm/.info/version, may be empty
};

/// Looks for /dev/kfd and /dev/dri/renderD* under the options' device root.
AmdDevices discover_amd(const DiscoveryOptions& opts);

}  // namespace berth

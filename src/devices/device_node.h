// Device nodes as discovery finds them under a device root, for any vendor's devices (NVIDIA's
// GPUs, AMD's /dev/kfd and render nodes, InfiniBand's uverbs): what the container names a node,
// where it is on the host, and its device numbers.
#pragma once

#include <string>
#include <string_view>

namespace berth {

/// A device node: `path` as the container (and the host's /dev) names it,
/// `host_path` where it is under the device root.
struct DeviceNode {
  std::string path;       ///< "/dev/nvidia0"
  std::string host_path;  ///< "<dev root>/dev/nvidia0"
  bool is_char = false;   ///< a real character device (stand-ins in tests are not)
  unsigned major = 0, minor = 0;
};

/// `path` (absolute, as the host names it) under the prefix `root` ("/" or a test's stand-in);
/// `path` itself when `root` is "/".
std::string under_root(const std::string& root, std::string_view path);

/// Fills `node` when `path` ("/dev/kfd") exists under `dev_root` ("/" or a test's stand-in);
/// false when it does not.
bool find_node(const std::string& dev_root, const std::string& path, DeviceNode* node);

}  // namespace berth

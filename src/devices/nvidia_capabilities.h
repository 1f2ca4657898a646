// NVIDIA driver capabilities (the names of NVIDIA_DRIVER_CAPABILITIES) and which driver
// libraries each one needs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace berth {

/// Driver capabilities, the names of NVIDIA_DRIVER_CAPABILITIES.
enum Capability : unsigned {
  kCapUtility = 1u << 0,
  kCapCompute = 1u << 1,
  kCapVideo = 1u << 2,
  kCapGraphics = 1u << 3,
  kCapDisplay = 1u << 4,
  kCapNgx = 1u << 5,
  kCapCompat32 = 1u << 6,
};
using CapabilitySet = unsigned;
inline constexpr CapabilitySet kCapAll = (1u << 7) - 1;
inline constexpr CapabilitySet kCapDefault = kCapUtility | kCapCompute;

/// One capability's name and bit, in the order `all` expands to.
struct CapabilityName {
  const char* name;
  Capability cap;
};
/// Every capability, in the order `all` expands to.
const std::vector<CapabilityName>& capability_names();
/// "utility,compute" for a set, in table order.
std::string capabilities_str(CapabilitySet caps);

/// The capabilities a driver library's base name ("libcuda") belongs to; 0 when it is not one.
CapabilitySet library_capabilities(std::string_view base);

}  // namespace berth

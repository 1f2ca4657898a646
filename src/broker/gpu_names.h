// GPU model names as users type them and as sites publish them, brought to one canonical
// spelling and matched without the confusions that hurt a user: L4 is not L40 nor L40S, A10
// is not A100, V100 is not V10, H200 is not H100, an A100-80GB is not an A100-40GB. Names
// follow SkyPilot's canonical list where it has one (../shared/research/broker.md 4.1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "broker/model.h"

namespace berth::broker {

/// The canonical name of a GPU model as a user or a site spells it: case folded, vendor and
/// family words dropped ("NVIDIA", "Tesla", "GeForce", "AMD Instinct"), form factors dropped
/// ("SXM4", "PCIe", "HBM3"), a memory variant kept as a suffix ("A100-80GB"), e.g.
/// "NVIDIA A100-SXM4-80GB" -> "A100-80GB", "h100" -> "H100", "Tesla V100-PCIE-16GB" ->
/// "V100-16GB", "AMD Instinct MI250X" -> "MI250X". "" for an empty name.
std::string canonical_gpu_name(std::string_view name);

/// The vendor a canonical model belongs to ("nvidia", "amd", "intel"), "" when not known.
std::string gpu_vendor_of(std::string_view canonical);

/// Whether GPU class `c` (its published model, else its GRES type) is the canonical model
/// `wanted`: the same model, and where `wanted` names a memory variant, that variant (a
/// model without one matches every variant: "A100" matches "A100-80GB" and "A100-40GB").
bool gpu_model_matches(std::string_view wanted, const NodeClass& c);

/// The least memory a GPU may report and still count as `mib`: a card is sold by a round size
/// and NVML reports up to 7 % less (an L40S's 48 GB is 46068 MiB, an H100's 80 GB is 81559),
/// so that "48GB" asks for an L40S and not for the next size up.
inline int64_t gpu_memory_floor(int64_t mib) {
  return mib - mib * 7 / 100;
}

}  // namespace berth::broker

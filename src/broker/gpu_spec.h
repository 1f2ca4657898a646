// The GPU shorthand of dstack and SkyPilot (../shared/research/broker.md 4.1, 4.2):
// `[vendor:]name[,name...][:memory[..max]][:count]`, e.g. "A100:80GB:2", "H100,A100-80GB:4",
// "nvidia:L40S:1", "24GB..48GB:2", "2", "A100:0.5" (a share of one GPU), "16GB..:1". The parts
// are told apart by their form, so their order is free ("MI300X:amd"), and each kind comes once.
// Memory is per GPU; GB is GiB (1024 MiB), MB and TB are read too; a bare number in a range
// with a unit takes GB ("16GB..32").
#pragma once

#include <string>
#include <string_view>

#include "broker/model.h"
#include "core/error.h"

namespace berth::broker {

/// A shorthand read: what the GPUs must be, and how many.
struct GpuSpec {
  GpuRequirement gpu;  ///< vendor (given or inferred from the models), models, memory range
  int count = 1;       ///< GPUs; 1 when the spec names none; 0 with a share
  double share = 0;    ///< 0 < share < 1 for a fractional count ("A100:0.5"); else 0
  bool operator==(const GpuSpec&) const = default;
};

/// Settles `gpu.vendor` against its models: when empty, the vendor of the models if they all
/// have the same known one (gpu_vendor_of); when given, "" if no model is another vendor's,
/// else the sentence saying which is ("H100 is an nvidia GPU, not amd").
std::string settle_gpu_vendor(GpuRequirement& gpu);

/// Reads a GPU shorthand. Model names come back canonical (broker/gpu_names.h); the vendor,
/// when the spec gives none, is that of the models when they all have the same one. Errors
/// are one line naming the spec: `parse gpu spec "A100:0": a count must be at least 1`.
Result<GpuSpec> parse_gpu_spec(std::string_view spec);

}  // namespace berth::broker

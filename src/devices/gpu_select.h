// GPU selection and policy as pure functions: Docker's --gpus syntax,
// NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES / NVIDIA_REQUIRE_*,
// the caller's CUDA_VISIBLE_DEVICES (a Slurm job's), and the CUDA forward
// compatibility decision. Nothing here reads the system.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "devices/nvidia_discover.h"
#include "devices/version.h"

namespace berth {

/// What a container asked for.
struct GpuRequest {
  enum class Kind {
    kNothing,    ///< no driver, no devices (NVIDIA_VISIBLE_DEVICES unset, empty or "void")
    kNoDevices,  ///< the driver but no GPU ("none")
    kAll,
    kCount,  ///< the first `count` GPUs (--gpus N)
    kList,   ///< `devices`, indexes or UUIDs
  };
  Kind kind = Kind::kNothing;
  int count = 0;
  std::vector<std::string> devices;
  std::optional<CapabilitySet> caps;  ///< --gpus capabilities=..., overrides the environment
};

/// Parses Docker's --gpus value: all | N | count=N | device=0,2 | "device=GPU-uuid",
/// plus optional capabilities=... (fields separated by commas, quoted as CSV).
Result<GpuRequest> parse_gpus_flag(std::string_view value);
/// Parses NVIDIA_VISIBLE_DEVICES; nullopt means unset.
Result<GpuRequest> parse_visible_devices(std::optional<std::string_view> value);
/// Parses NVIDIA_DRIVER_CAPABILITIES; unset or empty gives utility,compute; unknown names fail.
Result<CapabilitySet> parse_capabilities(std::optional<std::string_view> value);

/// The host GPUs (indexes) the caller may use according to its CUDA_VISIBLE_DEVICES
/// (as Slurm sets it): nullopt when unset (no limit). Entries are indexes or
/// (prefixes of) UUIDs; like CUDA, the list ends at the first entry that names no GPU,
/// and "-1", "" and Slurm's "NoDevFiles" allow none.
std::optional<std::vector<int>> parse_cuda_visible_devices(std::optional<std::string_view> value,
                                                           const std::vector<NvidiaGpu>& gpus);

/// Resolves a request to host GPU indexes in container order. With `allowed`
/// set, indexes in the request count within the allowed list (as CUDA inside
/// the job numbers them) and nothing outside it can be chosen.
Result<std::vector<int>> select_gpus(const GpuRequest& req, const std::vector<NvidiaGpu>& gpus,
                                     const std::optional<std::vector<int>>& allowed);

/// One comparison of an NVIDIA_REQUIRE_* expression: key op value.
struct Constraint {
  std::string key;  ///< cuda, driver, arch, brand
  std::string op;   ///< =, >, >=, <, <=
  std::string value;
};
/// Space-separated alternatives (OR), each a comma-separated conjunction (AND).
using Requirement = std::vector<std::vector<Constraint>>;
Result<Requirement> parse_requirement(std::string_view expr);

/// What requirements are checked against; unknown values fail the constraints that need them.
struct HostFacts {
  Version driver;
  Version cuda;
  std::vector<Version> archs;       ///< compute capability per selected GPU, may be empty
  std::vector<std::string> brands;  ///< brand per selected GPU ("tesla", "geforce"), may be empty
};
/// Evaluates one requirement.
bool requirement_met(const Requirement& req, const HostFacts& facts);

/// Checks every NVIDIA_REQUIRE_* of a container environment ("K=V" entries)
/// unless NVIDIA_DISABLE_REQUIRE is true; an image with CUDA_VERSION and no
/// NVIDIA_REQUIRE_CUDA requires cuda>=major.minor. The error is one line
/// naming the requirement and the host's versions.
Status check_requirements(const std::vector<std::string>& env, const HostFacts& facts);

/// The CUDA forward-compatibility decision: use the image's compat libcuda
/// (/usr/local/cuda/compat/libcuda.so.<compat>) only when it comes from a newer
/// driver branch than the host's. Within a branch the user-mode driver must match
/// the kernel module exactly, so only a newer major version can help.
bool use_cuda_compat(const Version& host_driver, const Version& compat_driver);
/// The compat libcuda version among the file names of /usr/local/cuda/compat; unknown when none.
Version compat_libcuda_version(const std::vector<std::string>& names);

}  // namespace berth

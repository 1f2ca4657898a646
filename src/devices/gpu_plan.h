// The GPU injection plan: pure data computed from a discovered driver and a
// container's request, for the runtime to apply inside the new mount
// namespace. Planning reads nothing from the system.
//
// Where things go in the container, and why:
//  - Libraries are bound read-only one file at a time into a Berth-owned
//    directory, /usr/lib/berth/nvidia (32-bit: /usr/lib/berth/nvidia32), never
//    over the image's own files: the image's lib dirs stay as built, a driver
//    upgrade on the host cannot collide with an image file, and one directory
//    is easy to point the loader at whatever the image's distribution.
//  - The loader finds them through the image's own ldconfig, run in the
//    container over /etc/ld.so.conf plus these directories, its cache bound
//    over /etc/ld.so.cache for the run only (ContainerSpec::ld_library_dirs),
//    like the NVIDIA toolkit's update-ldcache hook but without writing to the
//    image. LD_LIBRARY_PATH is left alone because images reset it and it
//    outranks the cache for every child process; it is only the fallback for
//    images without ldconfig (musl, distroless).
//  - Binaries are named in /usr/bin, which every image's PATH has.
//  - Firmware, ICD files and IPC endpoints keep their host paths.
//  - inject.h turns the plan into a ContainerSpec's device edits: every file
//    is bound into Berth's per-run tmpfs and linked from where it is expected,
//    so a run leaves at most dangling links in the image, never empty files
//    that would shadow a later driver.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "devices/gpu_select.h"
#include "devices/nvidia_discover.h"

namespace berth {

inline constexpr const char* kGpuLibDir = "/usr/lib/berth/nvidia";
inline constexpr const char* kGpuLib32Dir = "/usr/lib/berth/nvidia32";

/// A bind mount from the host (already under the driver/device root) into the container.
struct GpuBind {
  std::string host;       ///< what to bind
  std::string container;  ///< absolute path in the container; created as file or dir
  bool read_only = true;
  bool is_dir = false;
};

/// A symlink to create in the container: `path` -> `target`.
struct GpuLink {
  std::string path;
  std::string target;
};

/// A file Berth writes itself (in its private run directory) and binds or places.
struct GpuFile {
  std::string container;  ///< absolute path in the container
  std::string content;
};

struct GpuPlan {
  bool inject = false;    ///< false: the container gets nothing (all lists empty)
  std::vector<int> gpus;  ///< host GPU indexes, in container order (container index = position)
  CapabilitySet caps = 0;
  bool use_compat = false;  ///< the image's /usr/local/cuda/compat libraries replace the host's
  std::vector<DeviceNode> devices;  ///< bind host_path -> path (nodes are never created)
  std::vector<GpuBind> libraries;   ///< read-only, into kGpuLibDir / kGpuLib32Dir
  std::vector<GpuLink> links;       ///< soname and development links in the library dirs
  std::vector<GpuBind> binaries;    ///< read-only, into /usr/bin
  std::vector<GpuBind> files;       ///< firmware, ICDs, persistenced socket, MPS pipe and log dirs
  /// Mount an empty read-only tmpfs here, then bind `proc_gpus` into it, so the
  /// container's /proc lists only its own GPUs.
  std::string proc_mask = "/proc/driver/nvidia/gpus";
  std::vector<GpuBind> proc_gpus;
  std::vector<GpuFile> generated;  ///< the /proc/driver/nvidia/params override
  std::vector<std::string> env;    ///< "K=V" to set, overriding the image's values
  /// The directories the container's loader must search (kGpuLibDir, kGpuLib32Dir).
  std::vector<std::string> library_dirs;
  std::vector<std::string> warnings;  ///< one line each, for the runtime to log
};

/// What the runtime knows about the container when it plans.
struct GpuPlanInput {
  std::optional<std::string> gpus_flag;    ///< `--gpus`, wins over NVIDIA_VISIBLE_DEVICES
  std::vector<std::string> container_env;  ///< the final container env ("K=V")
  std::optional<std::string> host_cuda_visible_devices;  ///< the caller's CUDA_VISIBLE_DEVICES
  std::vector<std::string> image_compat_files;  ///< names in the image's /usr/local/cuda/compat
};

/// Computes the plan. A container that asks for nothing gets inject == false;
/// asking for GPUs on a host without a driver, an unknown capability, a bad
/// selection or an unmet NVIDIA_REQUIRE_* is an error of one line.
Result<GpuPlan> plan_gpus(const NvidiaDriver& driver, const GpuPlanInput& in);

}  // namespace berth

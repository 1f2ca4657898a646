// From device plans to a ContainerSpec's edits: what the engines apply.
//
// A GPU plan (gpu_plan.h) and a CDI device's containerEdits (cdi.h) both end
// up as ContainerSpec::device_edits, ld_library_dirs and env, so every engine
// that can apply device edits gets GPUs and CDI devices the same way.
#pragma once

#include <string>
#include <vector>

#include "devices/gpu_plan.h"
#include "runtime/container_spec.h"

namespace berth {

/// Adds a GPU plan to `spec`: device nodes bound at their paths; libraries
/// bound into kGpuLibDir (inside Berth's run tmpfs) with their links;
/// binaries, firmware, ICD files and IPC endpoints bound into the run tmpfs
/// and linked from their expected paths; /proc/driver/nvidia narrowed to the
/// selected GPUs; the plan's env; its library directories (add_library_dirs).
void inject_gpu_plan(const GpuPlan& plan, ContainerSpec& spec);

/// Puts a kTmpfs edit on kBerthRunDir first in spec.device_edits (once): what other edits
/// stage into it, every engine can then place.
void ensure_run_dir(ContainerSpec& spec);

/// Binds host path `host` into the run tmpfs (kBerthRunDir/host<container>) and links
/// `container` to it (an optional link: an image file already there is kept), so that nothing
/// but a link is left in the image's tree once the run is over.
void stage_and_link(const std::string& host, const std::string& container, bool read_only,
                    bool is_dir, ContainerSpec& spec);

/// Makes the container's loader search `dirs` before the image's own libraries: through
/// ld_library_dirs (the image's ldconfig, run by the engine) when the image under spec.rootfs
/// has one, and first in LD_LIBRARY_PATH (put_library_dirs_first()) when it has none or the
/// image sets LD_LIBRARY_PATH.
void add_library_dirs(const std::vector<std::string>& dirs, ContainerSpec& spec);

/// The image's ldconfig as a container path ("" when it has none), looked up
/// beneath `rootfs` without following links out of it.
std::string find_image_ldconfig(const std::string& rootfs);

}  // namespace berth

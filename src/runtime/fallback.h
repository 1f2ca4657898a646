// What every fallback engine (proot, fakechroot, oci, apptainer) does before it starts its host
// process: refuse what it cannot honour, resolve the workload inside the rootfs as execvp would,
// prepare the rootfs, and put the injected library folders in the environment.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"
#include "runtime/device_binds.h"
#include "runtime/engines.h"

namespace berth {

/// What every fallback engine checks first, from its row's facts: refuses device edits when it
/// takes none and a read-only volume when it cannot make one (naming the engine and, in the
/// hint, those that can); warns that --pid-ns and --hostname are ignored where they are.
Status refuse_unsupported(const ContainerSpec& spec, const Engine& engine);

/// The spec's PATH ("PATH=..." in spec.env), else the default search path.
std::string spec_path(const ContainerSpec& spec);

/// How container paths are looked up in the rootfs.
enum class PathView {
  kInRoot,  ///< as after pivot_root: absolute symlinks stay inside the root (openat2)
  kHost,  ///< as the host kernel sees rootfs + path (fakechroot's view, whose links are host paths)
};

/// Resolves the workload's argv[0] inside the rootfs the way execvp would inside the
/// container: an absolute container path to a regular executable file, found in the rootfs or
/// bound there by one of `binds` (a host binary a device layer adds). On failure `exit_code`
/// says 127 (not found) or 126 (not executable), else 125.
Result<std::string> resolve_command(const ContainerSpec& spec, int* exit_code,
                                    PathView view = PathView::kInRoot,
                                    const std::vector<HostBind>& binds = {});

/// What every fallback engine does to the rootfs (a private copy) before a run: the working
/// directory is created when missing and, with `identity`, /etc/passwd and /etc/group gain the
/// user's entries (as the userns engine does).
Status prepare_rootfs(const ContainerSpec& spec, bool identity);

}  // namespace berth

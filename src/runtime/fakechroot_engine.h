// The fakechroot engine: Debian's libfakechroot preloaded into the image's own ELF loader. The
// symlink form it needs (absolute links in the rootfs naming host paths) is link_form.h's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"
#include "runtime/engines.h"

namespace berth {

/// What fakechroot needs to run `spec`: the program to exec on the host, its argv and envp.
struct FakechrootLaunch {
  std::vector<std::string> argv;  ///< argv[0]: the image's loader as a host path
  std::vector<std::string> env;
};

/// Builds the launch: the image's loader `loader` (container path of the workload's PT_INTERP,
/// already checked), `command` (the resolved workload), the library dirs that exist in the
/// image, and `library` (libfakechroot.so's host path). Volumes whose host and container paths
/// are equal go in FAKECHROOT_EXCLUDE_PATH with the host's /dev, /proc, /sys; others are
/// links made by prepare_fakechroot_volumes().
FakechrootLaunch fakechroot_launch(const ContainerSpec& spec, const std::string& loader,
                                   const std::string& command,
                                   const std::vector<std::string>& lib_dirs,
                                   const std::string& library);

/// libfakechroot.so on the host, for the engine table's tool column: $`tool.env_var` when set,
/// else Debian's multiarch folder; one line naming `package` when it is not installed.
Result<std::string> find_libfakechroot(const EngineTool& tool, const char* package);

/// Runs `run` with libfakechroot (engine_table() points here).
RunOutcome run_fakechroot(const EngineRun& run);

}  // namespace berth

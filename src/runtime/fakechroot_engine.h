// The fakechroot engine: Debian's libfakechroot preloaded into the image's own ELF loader, and
// the symlink form it needs (absolute links in the rootfs naming host paths).
#pragma once

#include <optional>
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

/// A symlink target rewritten between an image's absolute form ("/x") and the host-absolute
/// form fakechroot needs and writes ("<prefix>/x"): with `from` empty, absolute targets gain
/// `to` in front; otherwise a target equal to `from` or under it has `from` replaced by `to`.
/// Nothing (nullopt) when the target is left alone.
std::optional<std::string> rewrite_link_target(std::string_view target, std::string_view from,
                                               std::string_view to);

/// Rewrites every symlink beneath `rootfs` (not following any) with rewrite_link_target(),
/// each atomically (a new link renamed over the old). Returns how many changed.
Result<size_t> rewrite_symlinks(const std::string& rootfs, std::string_view from,
                                std::string_view to);

/// The ELF interpreter (PT_INTERP) of the file at `fd`: "" for a static executable; an error
/// when the file is not a 64-bit ELF for this machine (`what` names it in the error).
Result<std::string> elf_interpreter(int fd, const std::string& what);

/// libfakechroot.so on the host, for the engine table's tool column: $`tool.env_var` when set,
/// else Debian's multiarch folder; one line naming `package` when it is not installed.
Result<std::string> find_libfakechroot(const EngineTool& tool, const char* package);

/// Runs `run` with libfakechroot (engine_table() points here).
RunOutcome run_fakechroot(const EngineRun& run);

}  // namespace berth

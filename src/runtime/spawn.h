// Running a fallback engine's host process (proot, runc, the image's loader) and waiting for it,
// with the signals Berth forwards to a workload passed on.
#pragma once

#include <string>
#include <vector>

#include "runtime/container_spec.h"

namespace berth {

/// Where spawn_and_wait() sends the signals it forwards.
enum class Forward {
  kChild,  ///< to the child, which passes them on (runc) or is the workload (fakechroot)
  kGroup,  ///< to the child's own process group: the child ignores them but its workload must
           ///< get them (proot); on a foreground terminal the child stays in ours instead
};

/// Starts `argv` (argv[0] a host path) with `envp` in host folder `cwd` ("" for this one), stdin
/// from /dev/null unless spec.stdin_open; forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
/// SIGUSR2 as `forward` says and waits. Exit status as RunOutcome: the child's status, 128+N
/// for a signal. Should berth die first (even by SIGKILL), the child dies too (its parent death
/// signal), then its own process group when it has one, and `on_orphan` (a host command, e.g.
/// the OCI runtime's delete; empty: none) runs to end what the child started beyond it.
/// Descriptors above 2 are closed in the child but spec.kept_fds (a launcher's, runtime/
/// launcher.h); with `contiguous_fds` (an engine given --preserve-fds N) the gaps below the
/// highest kept one are /dev/null.
RunOutcome spawn_and_wait(const ContainerSpec& spec, const std::vector<std::string>& argv,
                          const std::vector<std::string>& envp, const std::string& cwd = "",
                          Forward forward = Forward::kChild,
                          const std::vector<std::string>& on_orphan = {},
                          bool contiguous_fds = false);

}  // namespace berth

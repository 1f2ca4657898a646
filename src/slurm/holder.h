// The step's holder from the outside: the process a step's tasks join (berth run's workload, a
// shell that stops itself: "kill -STOP $$; exit 0", options.h run_arguments), found, waited
// for and ended. Root (slurmstepd, the job's epilog) ends holders whose pids it read from a
// file the user owns, so every kill here checks first that the pid is still a holder of that
// user's.
#pragma once

#include <string>

#include "slurm/options.h"

namespace berth::slurm {

/// The state letter of `pid` ('R', 'S', 'T', 'Z', ...), or 0 when it is gone.
char process_state(long pid);

/// Whether `pid` is a holder: stopped, running the holder's shell.
bool is_holder(long pid);

/// The holder: `root` itself (a directory run execs the holder's shell in place) or one of
/// its descendants; 0 when there is none yet.
long find_holder(long root);

/// Waits until `pid` has stopped itself (the holder is inside, everything mounted), for 60 s
/// at most.
Problem wait_stopped(long pid);

/// Waits up to `ms` milliseconds for `pid` to be gone (or a zombie).
void wait_gone(long pid, int ms);

/// SIGKILLs `pid` (as root) if it is still a holder of `uid`'s.
void kill_holder(long pid, unsigned uid);

/// SIGKILLs, as root, the processes of `uid`'s in the session of `runner`, a background run
/// whose holder never came up (spawn_detached gave it a session of its own). The whole start
/// goes (berth, the container's entrypoint, what it started); a squashfs mount's keeper has a
/// session of its own and unmounts once the run is gone.
void kill_run_session(long runner, unsigned uid);

/// Whether a process other than `holder` is in the holder's mount namespace: a task of
/// another step still in a named container (true when it cannot tell).
bool namespace_in_use(long holder);

/// Whether `pid` is the slurmstepd of step `job_step` ("JOB.STEP").
bool is_stepd(long pid, const std::string& job_step);

}  // namespace berth::slurm

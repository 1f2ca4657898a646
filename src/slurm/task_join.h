// A task joining its step's container, in task_init (in the task's own process, as the user,
// after Slurm set up its I/O and before it execs the command): the holder's namespaces
// (setns) and root (chroot), its working directory, its environment merged into the task's
// as pyxis merges it, and its root emulation filter. Slurm then execs the task's command,
// which it looks up on the task's PATH: inside the container. Slurm's SPANK has no way to
// replace the task's argv, so joining in-process is the only way to keep the task (its pid,
// I/O, signals, accounting) Slurm's own.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include "slurm/options.h"

namespace berth::slurm {

/// Moves this task into the holder `pid`'s namespaces and root, as `berth exec` does.
Problem join(spank_t sp, long pid);

}  // namespace berth::slurm

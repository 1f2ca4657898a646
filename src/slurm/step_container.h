// The step's container on a node, from task_init (in each task's own process, as the user,
// before it joins): the first local task starts it, under the step's lock, with `berth run -d`
// (a holder that stops itself), restarts a stopped named one (`berth start`), or finds a
// running named one; the step record (step_state.h) tells the step's other tasks which
// holder to join, and the step's end which holder and container to end.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include "slurm/options.h"

namespace berth::slurm {

/// Under the step's lock: the holder's pid in `*pid`, starting the container when this is
/// the first local task. A failure is recorded for the step's other tasks (which then fail
/// with "the container was not started successfully by another task: ...").
Problem step_holder(spank_t sp, const StepIds& ids, long* pid);

}  // namespace berth::slurm

// The plugin in slurmstepd (Slurm's remote context), one process per step and node, root:
// the step's options read again from the job's environment, the user's step state made, each
// task into the step's container (step_container.h, task_join.h), the save after the last
// local task, and the step's end, also after scancel: an unnamed container is removed, a
// named one is stopped and kept for the next step (once no other step is inside it).
//
// Errors are returned from task_init: it is the only remote callback whose failure reaches
// srun's exit status (FIELD-NOTES). Errors found earlier are kept for it.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

namespace berth::slurm {

/// slurm_spank_init_post_opt in slurmstepd.
int slurmstepd_post_opt(spank_t sp);
/// slurm_spank_task_init: the task joins the step's container (started by the first one).
int slurmstepd_task_init(spank_t sp);
/// slurm_spank_task_exit: the last local task's --container-save.
int slurmstepd_task_exit(spank_t sp);
/// slurm_spank_exit in slurmstepd: the step's end.
int slurmstepd_exit(spank_t sp);

}  // namespace berth::slurm

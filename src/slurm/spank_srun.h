// The plugin in srun, sbatch and salloc (Slurm's local and allocator contexts): the options
// and their environment forms are checked here, so that a bad one fails before anything is
// submitted. The work happens on the nodes (spank_slurmstepd.h).
#pragma once

extern "C" {
#include <slurm/spank.h>
}

namespace berth::slurm {

/// slurm_spank_init_post_opt in srun, sbatch and salloc: the environment forms of the options
/// not given (BERTH_CONTAINER_X, PYXIS_CONTAINER_X), checked.
int srun_post_opt(spank_t sp);

}  // namespace berth::slurm

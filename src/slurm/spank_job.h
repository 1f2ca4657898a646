// The plugin at a job's end on each node (slurmd's job epilog: root, no PATH, no job
// environment): the sweep behind the steps' own ends. As the user, every container of the job
// the plugin made goes: unnamed ones a killed step left (slurm-JOB.*), and with
// container_scope=job the job's named ones (JOB_NAME), as pyxis's epilog does.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

namespace berth::slurm {

/// slurm_spank_job_epilog, with the plugstack arguments (the epilog must read its own).
int job_epilog(spank_t sp, int ac, char** av);

}  // namespace berth::slurm

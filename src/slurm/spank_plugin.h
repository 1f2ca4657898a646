// What every part of spank_berth.so shares: the plugin's state in one process (srun, sbatch,
// slurmd or one slurmstepd), the step's ids read through Slurm, the job's environment for the
// `berth` commands, where the user's step state lives, and how an error reaches the user.
//
// The plugin is split by Slurm context, as pyxis is: spank_main.cc (the SPANK entry points,
// which dispatch by context), spank_srun.h (srun, sbatch, salloc: option checks),
// spank_slurmstepd.h (a step on a node: its container, the tasks' join, the step's end),
// spank_job.h (the job's epilog on a node). What they run is `berth` (berth_command.h), read
// back as JSON (berth_output.h); what they record is step_state.h's.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "slurm/options.h"

namespace berth::slurm {

/// The plugin's state in one process.
struct State {
  PluginArgs args;
  Options opts;
  Problem deferred;     ///< an error found in slurmstepd before task_init, returned there
  unsigned exited = 0;  ///< slurmstepd: the step's local tasks that have exited so far
};
/// The one State of this process (Slurm loads the plugin once per process).
extern State g_state;

/// An error on the user's stderr: in srun and sbatch, through Slurm's log (which prints on the
/// terminal); in a task (`task`), on the task's stderr, so that it reads as Berth's own one
/// line, once (slurm_error there would print it a second time with slurmstepd's prefix).
void report(const Problem& message, bool task);

/// strerror(err) as a string.
std::string errno_text(int err);

/// The plugstack arguments as strings.
std::vector<std::string> plugin_arguments(int ac, char** av);

/// The step's ids, read through Slurm's items.
Problem step_ids(spank_t sp, StepIds* ids);

/// Whether `kv` is one of a launcher's per-rank variables, which `berth run` carries into a
/// container (runtime/launcher.h): each task keeps its own, so the step's shared container
/// must not hold the first task's (PMI_RANK=0 for every rank).
bool launcher_variable(std::string_view kv);

/// The job's environment (S_JOB_ENV), for the berth commands: HOME, BERTH_HOME, the user's
/// registries' settings. Slurm's PMI variables and descriptor are each task's, not the
/// container's, and are left out; so is the job's BERTH_SITE_CONF: a job does not choose the
/// site policy its containers run under (docs/site.md); the admin's site_conf= does.
std::vector<std::string> job_environment(spank_t sp);

/// <runtime_path>/<uid>: the user's step state (locks, step_state.h's records).
std::string user_dir(const StepIds& ids);
/// The step's record on this node (step_state.h), in user_dir.
std::string step_file(const StepIds& ids);
/// The job's record on this node (step_state.h), in user_dir.
std::string job_file(const StepIds& ids);
/// The lock a named container's look-up, start, joins and end take on this node: several
/// steps (of one job or of several) may want it at once.
std::string name_lock_file(const StepIds& ids, const std::string& name);

/// The batch step's agent folder (host_agent.h) in user_dir: its socket, bound into the batch
/// container at its path.
std::string agent_dir_name(const StepIds& ids);

/// The whole (small) file at `path`, "" when it cannot be read.
std::string read_file(const std::string& path, int flags = 0);

}  // namespace berth::slurm

// spank_berth.so: a Slurm SPANK plugin, a drop-in for pyxis (srun --container-image=...). The
// SPANK entry points, each dispatched by Slurm context as pyxis dispatches them (spank_plugin.h
// says where each context's part lives).
//
// How the work is split, and why:
// - The plugin stays thin. It parses pyxis's options (slurm/options.h), and hands every piece
//   of container work to the `berth` binary, run as the job's user: pulling, unpacking,
//   squashfs mounts, the mount plan, the site policy, GPU injection. The plugin is loaded into
//   srun and slurmstepd, which are root or long-lived: a crash or a leak there costs the node,
//   and a second implementation of runs would drift from `berth run`.
// - One container per node per step, shared by the step's local tasks, as pyxis does: the first
//   local task starts it with `berth run -d` (step_container.h), every task joins it in its own
//   process (task_join.h), and the step's end ends it (spank_slurmstepd.h).
// - The plugin reads what berth says as JSON (berth_output.h) and records what it did as JSON
//   (step_state.h); it never reads berth's text for people.
//
// C ABI surface only: the slurm_spank_* callbacks and the plugin_* symbols (see the version
// script spank_berth.map); no exception leaves a callback.

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(berth, 1)
}

#include "slurm/spank_job.h"
#include "slurm/spank_plugin.h"
#include "slurm/spank_slurmstepd.h"
#include "slurm/spank_srun.h"

namespace berth::slurm {
namespace {

int option_callback(int val, const char* optarg, int remote) {
  Problem p = apply_option(static_cast<size_t>(val), optarg, &g_state.opts);
  if (p.empty()) return 0;
  if (remote) {
    // slurmstepd: only task_init's errors reach srun; srun has checked the same value already.
    if (g_state.deferred.empty()) g_state.deferred = p;
    return 0;
  }
  report(p, false);
  return -1;
}

/// The options (options.h's table), in every context that takes them.
int register_options(spank_t sp) {
  const auto& table = option_table();
  for (size_t i = 0; i < table.size(); ++i) {
    int has_arg = table[i].arg == nullptr ? 0 : 1;
    if (table[i].optional_arg) has_arg = 2;  // SPANK's optional argument (--container-mpi)
    struct spank_option opt = {const_cast<char*>(table[i].name),
                               const_cast<char*>(table[i].arg),
                               const_cast<char*>(table[i].usage),
                               has_arg,
                               static_cast<int>(i),
                               option_callback};
    if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
      slurm_error("berth: cannot register --%s", table[i].name);
      return -1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace berth::slurm

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  using namespace berth::slurm;
  if (Problem p = parse_plugin_args(plugin_arguments(ac, av), &g_state.args); !p.empty()) {
    slurm_error("berth: %s", p.c_str());
    return -1;
  }
  switch (spank_context()) {
    case S_CTX_ALLOCATOR:
      return g_state.args.sbatch_support ? register_options(sp) : 0;
    case S_CTX_LOCAL:
    case S_CTX_REMOTE:
      return register_options(sp);
    default:
      return 0;
  }
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  using namespace berth::slurm;
  switch (spank_context()) {
    case S_CTX_REMOTE:
      return slurmstepd_post_opt(sp);
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
      return srun_post_opt(sp);
    default:
      return 0;
  }
}

int slurm_spank_task_init(spank_t sp, int, char**) {
  return spank_remote(sp) ? berth::slurm::slurmstepd_task_init(sp) : 0;
}

int slurm_spank_task_exit(spank_t sp, int, char**) {
  return spank_context() == S_CTX_REMOTE ? berth::slurm::slurmstepd_task_exit(sp) : 0;
}

int slurm_spank_exit(spank_t sp, int, char**) {
  return spank_context() == S_CTX_REMOTE ? berth::slurm::slurmstepd_exit(sp) : 0;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  return berth::slurm::job_epilog(sp, ac, av);
}

}  // extern "C"

// The site's own start estimate for POST /v1/jobs?dry_run=1 ([slurm] start_estimate,
// docs/gateway.md "Dry run"): `sbatch --test-only` with the job's resources, run as a child
// process (no shell). slurmrestd has no will-run call: sbatch is the only way to ask. It runs
// as berthd's own account, with a Slurm token berthd mints for that account (SLURM_JWT,
// auth/jwt; no MUNGE needed): slurmctld refuses a will-run whose job is another user's than
// the one authenticated, and sbatch cannot name another (its --uid is gone), so the estimate
// weighs the queue, the nodes and the partition, not the caller's own priority.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gateway/slurm_types.h"

namespace berth::gateway {

/// [slurm] start_estimate, sbatch, slurm_conf and estimate_timeout_s.
struct StartEstimateConfig {
  bool enabled = false;           ///< start_estimate = "sbatch" (else "none": null estimates)
  std::string sbatch = "sbatch";  ///< the program: a path, or a name looked up in PATH
  std::string slurm_conf;         ///< SLURM_CONF for sbatch; "" for berthd's own environment's
  int64_t timeout_s = 10;         ///< sbatch is killed after this long
};

/// sbatch's arguments asking when the job `s` would start, submitting nothing: its partition,
/// nodes, tasks, CPUs, memory, GPUs, GRES and time limit as a submission gives them (not its
/// account: berthd's own account is not in the caller's).
std::vector<std::string> test_only_args(const std::string& sbatch, const SlurmJobSpec& s);

/// The start time (Unix seconds) in what `sbatch --test-only` wrote with SLURM_TIME_FORMAT=%s:
/// "sbatch: Job 7 to start at 1764900000 using 2 processors on nodes n1 in partition gpu";
/// an error (kInvalidInput) naming the first line where it says none.
Result<int64_t> read_test_only(std::string_view text);

/// When job `s` would start, asked of Slurm with `slurm_token` (for berthd's own account, as
/// sbatch runs): an error with sbatch's own words where it cannot tell (the job could never run,
/// the controller does not answer, no sbatch).
Result<int64_t> estimate_start(const StartEstimateConfig& config, const std::string& slurm_token,
                               const SlurmJobSpec& s);

}  // namespace berth::gateway

// The job service (gateway/jobs.h).
#include "gateway/jobs.h"

#include <utility>

#include "gateway/systems.h"

namespace berth::gateway {

JobService::JobService(std::unique_ptr<JobsDb> db, SlurmRest slurm, const SlurmConfig& config,
                       LimitsConfig limits, QuotaConfig quotas, AccountingConfig accounting)
    : db_(std::move(db)),
      slurm_(std::move(slurm)),
      cluster_(config.cluster),
      sync_(*db_, slurm_),
      reads_(*db_, slurm_, sync_, job_locks_),
      outputs_(*db_, reads_, config.output_dir),
      usage_(*db_, std::move(accounting), config.share),
      admission_(*db_, slurm_, sync_, job_locks_, usage_, config, std::move(limits),
                 std::move(quotas)),
      gpu_facts_(db_.get()),
      idle_(*db_, slurm_, config.output_dir, config.reclaim_policy, gpu_facts_),
      orphans_(slurm_),
      reconciler_(*db_, slurm_, sync_, job_locks_, admission_, idle_, orphans_, config.reclaim),
      caps_(*db_, slurm_, sync_) {}

nlohmann::json JobService::system(const Account& who) {
  return describe_system(slurm_, who.user, cluster_);
}

}  // namespace berth::gateway

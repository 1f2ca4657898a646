// The job service: the one object the server's job endpoints ask (gateway/server.h). It owns
// the job database and the Slurm client, and the parts that each do one job with them:
// admission (gateway/admission.h), reads (gateway/job_reads.h), output (gateway/job_output.h),
// usage (gateway/job_usage.h), idle-GPU reclaim (gateway/reclaim.h), orphan GPU processes
// (gateway/orphans.h), reconciliation (gateway/reconcile.h) and cloud jobs cut at their time
// limit (gateway/caps.h); a request and its Slurm form
// are gateway/job_request.h's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gateway/admission.h"
#include "gateway/auth.h"
#include "gateway/caps.h"
#include "gateway/config.h"
#include "gateway/job_locks.h"
#include "gateway/job_output.h"
#include "gateway/job_reads.h"
#include "gateway/job_request.h"
#include "gateway/job_sync.h"
#include "gateway/job_usage.h"
#include "gateway/jobs_db.h"
#include "gateway/orphans.h"
#include "gateway/reclaim.h"
#include "gateway/reconcile.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

/// The job endpoints' work, shared by the server's threads: each call handed to the part that
/// does it, each part given only the configuration it needs.
class JobService {
 public:
  JobService(std::unique_ptr<JobsDb> db, SlurmRest slurm, const SlurmConfig& config,
             LimitsConfig limits = {}, QuotaConfig quotas = {}, AccountingConfig accounting = {});
  JobService(const JobService&) = delete;
  JobService& operator=(const JobService&) = delete;

  using Submitted = gateway::Submitted;
  using Output = JobOutput;
  using Usage = gateway::Usage;
  using Reconciled = gateway::Reconciled;
  using ReclaimObserver = IdleReclaim::Observer;
  using OrphanObserver = OrphanWatch::Observer;

  /// Admission::submit().
  Result<Submitted> submit(const Account& who, const std::string& idempotency_key,
                           const std::string& body_text, const JobRequest& request) {
    return admission_.submit(who, idempotency_key, body_text, request);
  }
  /// Admission::admissible().
  Status admissible(const JobRequest& r) const { return admission_.admissible(r); }
  /// Admission::dry_run().
  Result<Fit> dry_run(const Account& who, const JobRequest& r) {
    return admission_.dry_run(who, r);
  }
  /// Admission::start_estimate().
  Result<std::optional<int64_t>> start_estimate(const JobRequest& r) const {
    return admission_.start_estimate(r);
  }
  /// Admission::standing().
  Result<Standing> standing(const Account& who, int64_t now) const {
    return admission_.standing(who, now);
  }
  /// JobReads::get().
  Result<std::optional<JobRecord>> get(const Account& who, int64_t id) {
    return reads_.get(who, id);
  }
  /// JobReads::list().
  Result<std::vector<JobRecord>> list(const Account& who, const std::string& state, int64_t since) {
    return reads_.list(who, state, since);
  }
  /// JobReads::cancel().
  Result<std::optional<JobRecord>> cancel(const Account& who, int64_t id) {
    return reads_.cancel(who, id);
  }
  /// JobOutputs::output().
  Result<std::optional<Output>> output(const Account& who, int64_t id, int lines) {
    return outputs_.output(who, id, lines);
  }
  /// JobOutputs::stem().
  std::string output_stem(int64_t id) const { return outputs_.stem(id); }
  /// The cluster as `who` sees it (GET /v1/systems, gateway/systems.h).
  nlohmann::json system(const Account& who);
  /// berthd's client of slurmrestd (GET /v1/resources asks through it).
  SlurmRest& slurm() { return slurm_; }
  /// What the GPU jobs' samples measured of the nodes' GPUs (GET /v1/resources).
  const GpuFacts& gpu_facts() const { return gpu_facts_; }
  /// JobUsage::records().
  Result<std::vector<UsageRecord>> usage(const std::string& owner) const {
    return usage_.records(owner);
  }
  /// JobUsage::accounting().
  Result<Usage> accounting(const std::string& owner, int64_t since, int64_t until) const {
    return usage_.accounting(owner, since, until);
  }
  /// JobUsage::slurm_account().
  std::string slurm_account(const std::string& user) const { return usage_.slurm_account(user); }
  /// How many of the database's jobs are in each state (for /metrics).
  Result<std::map<JobState, int>> count_by_state() { return db_->count_by_state(); }
  /// IdleReclaim::flagged(), flagged_count() and set_observer().
  bool idle_flagged(int64_t id) const { return idle_.flagged(id); }
  size_t idle_flagged_count() const { return idle_.flagged_count(); }
  void set_reclaim_observer(ReclaimObserver o) { idle_.set_observer(std::move(o)); }
  /// OrphanWatch::list(), count_by_node() and set_observer().
  std::vector<GpuOrphan> orphans() const { return orphans_.list(); }
  std::map<std::string, int> orphans_by_node() const { return orphans_.count_by_node(); }
  void set_orphan_observer(OrphanObserver o) { orphans_.set_observer(std::move(o)); }
  /// Reconciler::reconcile().
  Reconciled reconcile(int64_t now, int64_t min_age_s) {
    return reconciler_.reconcile(now, min_age_s);
  }
  /// CapWatch::check(): the running cloud jobs past their time limit cut (berthd/main.cc's
  /// thread of its own, every kCapCheckIntervalS).
  int cut_at_caps(int64_t now) { return caps_.check(now); }
  /// The Slurm comment of job `id` (job_comment()).
  std::string comment(int64_t id) const { return job_comment(db_->instance(), id); }

 private:
  std::unique_ptr<JobsDb> db_;
  SlurmRest slurm_;
  std::string cluster_;  ///< [slurm] cluster, GET /v1/systems' name
  JobSync sync_;
  JobLocks job_locks_;  ///< an ACCEPTED job's submission, cancel and reconciliation
  JobReads reads_;
  JobOutputs outputs_;
  JobUsage usage_;
  Admission admission_;
  GpuFacts gpu_facts_;
  IdleReclaim idle_;
  OrphanWatch orphans_;
  Reconciler reconciler_;
  CapWatch caps_;
};

}  // namespace berth::gateway

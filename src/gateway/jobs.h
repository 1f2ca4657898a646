// Jobs: a POST /v1/jobs body checked into a JobRequest, turned into a Slurm batch job whose
// script runs the container through Berth's Slurm plugin (`srun --container-image=...`), and
// the service that records, submits, refreshes and cancels jobs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gateway/accounting.h"
#include "gateway/auth.h"
#include "gateway/config.h"
#include "gateway/jobs_db.h"
#include "gateway/limits.h"
#include "gateway/orphans.h"
#include "gateway/quotas.h"
#include "gateway/reclaim.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

/// A job request as POST /v1/jobs gives it (docs/api.md).
struct JobRequest {
  std::string name = "berthd-job";
  std::string image;                 ///< required
  std::vector<std::string> command;  ///< empty: the image's own
  std::map<std::string, std::string> env;
  std::vector<std::string> mounts;  ///< SRC:DST[:ro], checked by the site policy on the node
  std::string workdir;              ///< inside the container; "" for the image's
  int nodes = 1, tasks = 1, cpus_per_task = 1, gpus = 0;
  /// A fraction of one GPU on each node, 0 < gpu_share < 1 ("resources.gpu_share"); 0: none.
  /// Not with `gpus`; the site must enable sharing ([share], check_share()).
  double gpu_share = 0;
  int64_t memory_mb = 0, walltime_s = 0;
  std::string job_class = "batch";  ///< "batch" or "cloud"
};

/// Checks a request body: an object of the known fields with the right types; errors (code
/// kInvalidInput) name the field.
Result<JobRequest> parse_job_request(const nlohmann::json& body);

/// The request of a job as berthd stored it (JobRecord::request: the POST /v1/jobs body,
/// checked by parse_job_request() before it was recorded), read back: the one reader of a
/// stored request, for the job's answer (job_json()), its usage (JobService::usage()) and its
/// submission at reconciliation. An error (kInvalidInput) where the text is not such a body.
Result<JobRequest> read_stored_request(const std::string& text);

/// Whether the site takes request `r`'s GPU share: an error (kInvalidInput) of one line when
/// `r` asks for one and [share] is not enabled.
Status check_share(const JobRequest& r, const ShareConfig& share);

/// The GRES, per node, that GPU share `x` (0 < x < 1) asks Slurm for: "shard:N" with
/// N = ceil(x * units_per_gpu), or "mps:N" with N = round(x * units_per_gpu), N at least 1 and
/// at most one GPU's units.
std::string share_gres(double x, const ShareConfig& share);

/// The Slurm job for request `r` of berthd job `id`, with the site's settings; `comment` is
/// how reconciliation finds it again (JobService::comment()). With `slurm.output_dir`, the
/// container's stdout and stderr go to OUTPUT_DIR/`output_stem`.out and .err
/// (gateway/output.h). A GPU share becomes share_gres() with the [share] MPS directories in the
/// job's environment (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY), which Berth binds into
/// the container.
SlurmJobSpec slurm_spec(const JobRequest& r, int64_t id, const std::string& comment,
                        const SlurmConfig& slurm, const std::string& output_stem = "");

/// A job as the API shows it. A job Slurm ended at its time limit (TIMEOUT) says so in its
/// reason, naming the cap that set the limit when one did.
nlohmann::json job_json(const JobRecord& j);

/// The job endpoints' work, shared by the server's threads.
class JobService {
 public:
  JobService(std::unique_ptr<JobsDb> db, SlurmRest slurm, SlurmConfig config,
             LimitsConfig limits = {}, QuotaConfig quotas = {}, AccountingConfig accounting = {})
      : db_(std::move(db)),
        slurm_(std::move(slurm)),
        config_(std::move(config)),
        limits_(std::move(limits)),
        quotas_(std::move(quotas)),
        accounting_(std::move(accounting)) {}

  struct Submitted {
    JobRecord job;
    bool replayed = false;                   ///< an earlier request with the same Idempotency-Key
    std::optional<LimitRefusal> refused;     ///< set: nothing was recorded or sent (a 403)
    std::optional<QuotaRefusal> over_quota;  ///< set: likewise, for a GPU-hour quota (a 403)
  };
  /// Checks the request against `who`'s limits (gateway/limits.h) and, for a GPU job, its
  /// group's GPU-hour quota (gateway/quotas.h: the group is `who`'s primary group, the usage
  /// read as GET /v1/accounting reads it), records it (before anything
  /// reaches Slurm), then submits it as `who` with the walltime the limits gave it. A request
  /// whose key `who` already used gets the earlier job back, unsent and unchecked (it counts
  /// among the jobs it would otherwise be refused for); with another body, an error (kExists).
  Result<Submitted> submit(const Account& who, const std::string& idempotency_key,
                           const std::string& body_text, const JobRequest& request);
  /// The job `id` if `who` may see it (its owner, or an admin), refreshed from Slurm when not
  /// final; nullopt otherwise.
  Result<std::optional<JobRecord>> get(const Account& who, int64_t id);
  /// `who`'s jobs (all jobs for an admin), newest first; only those in the state named `state`
  /// unless it is "" (none for a word that names no state).
  Result<std::vector<JobRecord>> list(const Account& who, const std::string& state, int64_t since);
  /// Cancels job `id` as its owner; nullopt when `who` may not see it.
  Result<std::optional<JobRecord>> cancel(const Account& who, int64_t id);

  /// A job's output: the last lines of its stdout and stderr.
  struct Output {
    JobRecord job;
    std::string stdout_text, stderr_text;
    bool stdout_truncated = false, stderr_truncated = false;
  };
  /// The last `lines` lines of job `id`'s stdout and stderr (gateway/output.h), if `who` may
  /// see the job; nullopt otherwise. An error (kNotFound) when no output_dir is configured.
  Result<std::optional<Output>> output(const Account& who, int64_t id, int lines);
  /// Whether the site takes `r` (check_share() with this service's [share]).
  Status admissible(const JobRequest& r) const { return check_share(r, config_.share); }
  /// The cluster as `who` sees it (GET /v1/systems, gateway/systems.h).
  nlohmann::json system(const Account& who);
  /// berthd's client of slurmrestd (GET /v1/resources asks through it).
  SlurmRest& slurm() { return slurm_; }
  /// The jobs of `owner` ("" for all) as usage records (GET /v1/accounting without sacct): the
  /// group is the owner's primary group, the CPUs nodes x tasks x cpus_per_task of the request,
  /// the GPU model the type in Slurm's GRES detail.
  Result<std::vector<UsageRecord>> usage(const std::string& owner);
  /// Usage records and where they come from ("database" or "sacct").
  struct Usage {
    std::vector<UsageRecord> records;
    std::string source;
  };
  /// The usage of `owner` ("" for all) in [since, until), from the accounting source
  /// ([accounting] source; GET /v1/accounting and the quota check read the same). With
  /// "sacct", an error when sacct fails (code kBusy); with "auto", the database's then.
  Result<Usage> accounting(const std::string& owner, int64_t since, int64_t until);
  /// The Slurm account `user`'s jobs are charged to: its primary group with [accounting]
  /// slurm_account = "primary_group", else "" (Slurm's default account).
  std::string slurm_account(const std::string& user) const;
  /// How many of the database's jobs are in each state (for /metrics).
  Result<std::map<JobState, int>> count_by_state();
  /// Whether job `id`'s GPUs were found idle for the reclaim policy's time ([reclaim]).
  bool idle_flagged(int64_t id) const;
  size_t idle_flagged_count() const;
  /// Told of each reclaim action ("flag", "cancel") on a job, with what the job's samples
  /// showed (for /metrics and the audit log). Set before serving.
  using ReclaimObserver =
      std::function<void(const char* action, const JobRecord& job, const std::string& detail)>;
  void set_reclaim_observer(ReclaimObserver o) { reclaim_observer_ = std::move(o); }
  /// Orphan GPU processes seen in the running GPU jobs' samples ([reclaim], gateway/orphans.h).
  std::vector<GpuOrphan> orphans() const;
  std::map<std::string, int> orphans_by_node() const;
  /// Told of each orphan GPU process when it is first seen (for the audit log). Set before
  /// serving.
  using OrphanObserver = std::function<void(const GpuOrphan& orphan)>;
  void set_orphan_observer(OrphanObserver o) { orphan_observer_ = std::move(o); }
  /// The stem of job `id`'s output files (gateway/output.h's output_stem()).
  std::string output_stem(int64_t id) const;

  struct Reconciled {
    int found = 0;        ///< ACCEPTED jobs Slurm had after all (found by their comment)
    int resubmitted = 0;  ///< ACCEPTED jobs Slurm never got, submitted now
    int failed = 0;       ///< ACCEPTED jobs left for the next round (slurmrestd unreachable)
    int refreshed = 0;    ///< submitted, unfinished jobs whose state was read from Slurm
  };
  /// Settles the database with Slurm, acting as each job's owner: every ACCEPTED job at least
  /// `min_age_s` old (so never one whose submission is in flight) is looked for in Slurm by
  /// its comment and recorded, or submitted when Slurm does not have it; then
  /// every submitted, unfinished job's state is read. Run before serving with min_age_s 0,
  /// then periodically.
  Reconciled reconcile(int64_t now, int64_t min_age_s);
  /// The Slurm comment of job `id`: "berthd:INSTANCE:ID" (JobsDb::instance()).
  std::string comment(int64_t id) const {
    return "berthd:" + db_->instance() + ":" + std::to_string(id);
  }

 private:
  /// Reads the job's state from Slurm as `user` and records it when it changed.
  Status refresh(const std::string& user, JobRecord& job);
  /// Records what Slurm says of `job` (`info`) when it changed.
  Status record(JobRecord& job, SlurmJobInfo info);
  /// `user`'s running and queued jobs in the database; with `refresh`, their states are read
  /// from Slurm first (one listing of the account's jobs).
  Result<std::pair<int64_t, int64_t>> unfinished(const std::string& user, bool refresh);

  std::unique_ptr<JobsDb> db_;
  SlurmRest slurm_;
  /// Idle-GPU reclaim: the newest samples of a running GPU job read each reconciliation;
  /// nullopt when there are none (yet).
  std::optional<GpuSample> check_idle(const JobRecord& job, int64_t now);
  /// Orphans (gateway/orphans.h): the processes in the samples of `sampled` (the running GPU
  /// jobs in `inspected`, among all those in `running_gpu_jobs`), judged against `unfinished`
  /// (the state of each of berthd's unfinished jobs, by Slurm id) and, for other jobs, Slurm.
  void check_orphans(const std::vector<std::pair<JobRecord, GpuSample>>& sampled,
                     const std::set<int64_t>& inspected, const std::set<int64_t>& running_gpu_jobs,
                     const std::map<int64_t, JobState>& unfinished, int64_t now);
  void forget_idle(int64_t id);
  mutable std::mutex idle_mu_;
  IdleTracker idle_;
  OrphanTracker orphans_;
  ReclaimObserver reclaim_observer_;
  OrphanObserver orphan_observer_;
  SlurmConfig config_;
  LimitsConfig limits_;
  QuotaConfig quotas_;
  AccountingConfig accounting_;
  std::mutex admit_mu_;  ///< held from counting an account's jobs to recording its new one
};

}  // namespace berth::gateway

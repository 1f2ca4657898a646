// Idle-GPU reclaim (issue 17): a GPU job's batch script samples its GPUs with `berth gpu stats
// --json` (across nodes in a step of its own, srun --overlap), one document per node per
// period, into a file beside its output; berthd reads the samples and decides, per job, by the
// site's policy.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/gpu_facts.h"
#include "gateway/jobs_db.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

struct ReclaimPolicy {
  int64_t sample_interval_s = 60;  ///< how often the job samples its GPUs
  double idle_below_pct = 5;       ///< a GPU under this utilisation (window mean) is idle
  int64_t idle_for_s = 1800;       ///< idle this long: the job is flagged
  bool cancel = false;             ///< flagged jobs are also cancelled
};

/// A compute process on one of a job's GPUs, as the job's sampler saw it (docs/gpu.md's
/// `processes`).
struct SampledProcess {
  std::string node;   ///< the document's "node"; "" when it has none
  int gpu_index = 0;  ///< NVML's index on that node
  std::string gpu_uuid;
  unsigned pid = 0;
  bool known = false;  ///< the sampler could read its /proc entry (uid or command known)
  std::optional<uint32_t> uid;
  std::string user, command;
  std::optional<int64_t> slurm_job_id;
  std::string slurm_job_from;
};

/// What the newest samples of a job say: whether every GPU it holds was idle, when they were
/// taken, and the processes on those GPUs. nullopt when the text holds no usable sample.
struct GpuSample {
  int64_t time = 0;   ///< Unix seconds of the newest document
  int gpus = 0;       ///< GPUs reported (all nodes together)
  bool idle = false;  ///< every reported GPU's utilisation below the policy's threshold
  std::vector<SampledProcess> processes;  ///< of the newest documents (all nodes together)
  GpuFactsMap measured;                   ///< what every document read measured of the nodes' GPUs
};
std::optional<GpuSample> newest_sample(std::string_view text, double idle_below_pct);

/// The shell lines a GPU job's batch script runs before its container: a sampler in the
/// background (the batch step itself on one node; a step of one task per node, overlapping the
/// job's, on several), appending `berth gpu stats --json` documents to `samples_file`, and the
/// notice berthd leaves in `notice_file` copied once to the job's stderr file.
std::string reclaim_watch_script(const std::string& berth, const std::string& samples_file,
                                 const std::string& notice_file, const std::string& err_file,
                                 const ReclaimPolicy& p, int nodes);

/// Creates berthd's idle-GPU notice `text` at `path` (beside a job's output, in [slurm]
/// output_dir), readable by the job's owner `reader`, who is not berthd's account: the folder's
/// default ACL gives files made there to berthd alone, so the file gets an access ACL of its
/// own (owner rw, `reader` r, nobody else), or mode 0644 where the file system has no ACLs. A
/// file already at `path` (planted, or an earlier round's) is left alone: an error (kExists).
Status write_notice(const std::string& path, const std::string& text, uid_t reader);

/// Per-job idle clocks: fed each job's newest sample, says when a job has been idle for the
/// policy's time. Jobs are forgotten when they leave (forget()).
class IdleTracker {
 public:
  enum class Verdict { kBusy, kIdle, kFlag, kCancel };
  /// `job`'s newest sample. kFlag once, the first time the idle time is reached; then, where
  /// the policy cancels, kCancel once, two sample periods later if the job is still idle (so
  /// that its sampler has passed berthd's notice on to the job's output first).
  Verdict observe(int64_t job, const GpuSample& s, const ReclaimPolicy& p);
  /// `job` has ended: its clock stops; a flag stays, for its record (not counted as running).
  void forget(int64_t job) {
    since_.erase(job);
    if (auto f = flagged_.find(job); f != flagged_.end()) f->second.ended = true;
  }
  bool flagged(int64_t job) const { return flagged_.count(job) != 0; }
  /// Flagged jobs still running.
  size_t flagged_count() const {
    size_t n = 0;
    for (const auto& [job, f] : flagged_) n += f.ended ? 0 : 1;
    return n;
  }

 private:
  std::map<int64_t, int64_t> since_;  ///< job -> time of its first idle sample in a row
  struct Flag {
    int64_t at = 0;  ///< the sample time it was flagged at
    bool cancelled = false;
    bool ended = false;
  };
  std::map<int64_t, Flag> flagged_;
};

/// The reclaim policy at work on berthd's running GPU jobs: each reconciliation reads a job's
/// newest samples (check()), flags a job idle for the policy's time (a notice beside its output
/// for its sampler to pass on, and the job's reason) and, where the policy says so, cancels it.
/// Shared by the server's threads (flagged() answers GET /v1/jobs/{id}).
class IdleReclaim {
 public:
  /// `output_dir`: [slurm] output_dir, where the jobs' samples are.
  /// `facts`: where what the samples measure of the GPUs goes (GET /v1/resources).
  IdleReclaim(JobsDb& db, SlurmRest& slurm, std::string output_dir, ReclaimPolicy policy,
              GpuFacts& facts)
      : db_(db),
        slurm_(slurm),
        output_dir_(std::move(output_dir)),
        policy_(policy),
        facts_(facts) {}

  /// Told of each reclaim action ("flag", "cancel") on a job, with what the job's samples
  /// showed (for /metrics and the audit log). Set before serving.
  using Observer =
      std::function<void(const char* action, const JobRecord& job, const std::string& detail)>;
  void set_observer(Observer o) { observer_ = std::move(o); }
  /// Running GPU job `job`'s newest samples, judged by the policy (and acted on); nullopt when
  /// there are none (yet).
  std::optional<GpuSample> check(const JobRecord& job, int64_t now);
  /// Job `id` is no longer running: its idle clock stops.
  void forget(int64_t id);
  /// Whether job `id`'s GPUs were found idle for the policy's time.
  bool flagged(int64_t id) const;
  /// Flagged jobs still running.
  size_t flagged_count() const;

 private:
  JobsDb& db_;
  SlurmRest& slurm_;
  std::string output_dir_;
  ReclaimPolicy policy_;
  GpuFacts& facts_;
  mutable std::mutex mu_;
  IdleTracker idle_;
  Observer observer_;
};

}  // namespace berth::gateway

// Idle-GPU reclaim (issue 17): a GPU job's batch script samples its GPUs with `berth gpu stats
// --json` in a step of its own (srun --overlap), one document per node per period, into a file
// beside its output; berthd reads the samples and decides, per job, by the site's policy.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace berth::gateway {

struct ReclaimPolicy {
  int64_t sample_interval_s = 60;  ///< how often the job samples its GPUs
  double idle_below_pct = 5;       ///< a GPU under this utilisation (window mean) is idle
  int64_t idle_for_s = 1800;       ///< idle this long: the job is flagged
  bool cancel = false;             ///< flagged jobs are also cancelled
};

/// What the newest samples of a job say: whether every GPU it holds was idle, and when they
/// were taken. nullopt when the text holds no usable sample.
struct GpuSample {
  int64_t time = 0;  ///< Unix seconds of the newest document
  int gpus = 0;      ///< GPUs reported (all nodes together)
  bool idle = false; ///< every reported GPU's utilisation below the policy's threshold
};
std::optional<GpuSample> newest_sample(std::string_view text, double idle_below_pct);

/// The shell lines a GPU job's batch script runs before its container: a sampler step in the
/// background (one task per node, overlapping the job's steps), appending to `samples_file`,
/// and the notices berthd leaves in `notice_file` copied once to the job's stderr file.
std::string reclaim_watch_script(const std::string& berth, const std::string& samples_file,
                                 const std::string& notice_file, const std::string& err_file,
                                 const ReclaimPolicy& p);

/// Per-job idle clocks: fed each job's newest sample, says when a job has been idle for the
/// policy's time. Jobs are forgotten when they leave (forget()).
class IdleTracker {
 public:
  enum class Verdict { kBusy, kIdle, kFlag };
  /// `job`'s newest sample at `now`. kFlag once (the first time the idle time is reached).
  Verdict observe(int64_t job, const GpuSample& s, const ReclaimPolicy& p);
  void forget(int64_t job) { since_.erase(job); flagged_.erase(job); }
  bool flagged(int64_t job) const { return flagged_.count(job) != 0; }
  size_t flagged_count() const { return flagged_.size(); }

 private:
  std::map<int64_t, int64_t> since_;  ///< job -> time of its first idle sample in a row
  std::map<int64_t, bool> flagged_;
};

}  // namespace berth::gateway

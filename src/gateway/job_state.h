// A berthd job's state: berthd's own two (ACCEPTED, SUBMIT_FAILED) and the states Slurm reports,
// one enum with one table of facts. Text becomes a JobState at the edges only: the slurmrestd
// version files (gateway/slurm_v*.h) parse Slurm's answers, the job database reads its column,
// GET /v1/jobs reads its `state=` query; everything after compares enums.
//
// The names are the ones the API shows and the database keeps: Slurm's own, as slurmrestd's
// v0.0.38 (Slurm 22.05) writes `job_state`, one word chosen by Slurm's job_state_string(): a
// flag (COMPLETING, CONFIGURING, REQUEUED, ...) before the base state (PENDING, RUNNING,
// COMPLETED, ...). v0.0.41 (Slurm 24.05 to 25.05) gives the base state and the flags as a list
// (["RUNNING", "COMPLETING"]); job_state_from_slurm_list() picks the word 22.05 would have
// shown, so a job reads the same on either release.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace berth::gateway {

/// Every state a berthd job can be in. The order is the facts table's (kJobStates).
enum class JobState : uint8_t {
  kAccepted,      ///< berthd: recorded, not (known to be) in Slurm yet
  kSubmitFailed,  ///< berthd: Slurm refused the submission (the reason says why)
  // Slurm's flags, in job_state_string()'s order of precedence.
  kCompleting,
  kStageOut,
  kConfiguring,
  kResizing,
  kRequeued,
  kRequeueFed,
  kRequeueHold,
  kSpecialExit,
  kStopped,
  kRevoked,
  kResvDelHold,
  kSignaling,
  // Slurm's base states.
  kPending,
  kRunning,
  kSuspended,
  kCompleted,
  kCancelled,
  kFailed,
  kTimeout,
  kNodeFail,
  kPreempted,
  kBootFail,
  kDeadline,
  kOutOfMemory,
  /// A word Slurm reported that this table lacks (a later release's): shown as "UNKNOWN",
  /// counted as holding resources until Slurm says more.
  kUnknown,
};

/// Where a state stands in a job's life.
enum class JobPhase : uint8_t {
  kQueued,  ///< waiting: counts against max_queued_jobs
  kActive,  ///< holding (or about to hold) resources: counts against max_running_jobs
  kFinal,   ///< nothing more will change; berthd no longer asks Slurm
};

/// The facts of one state.
struct JobStateFacts {
  JobState state;
  std::string_view name;  ///< the API's and the database's word; Slurm's own for its states
  JobPhase phase;
  /// Slurm's exit code and end time are facts (false while it may still run: PENDING,
  /// RUNNING, SUSPENDED, CONFIGURING, COMPLETING).
  bool ended;
  /// Ended by the site's machinery, not by the job: a node failed, or did not boot (a broker
  /// may run such a job elsewhere).
  bool infrastructure_failure;
  bool from_slurm;  ///< a state Slurm reports (false: berthd's own)
};

/// The facts of every state, in JobState's order.
std::span<const JobStateFacts> job_states();
/// The facts of `state`.
const JobStateFacts& job_state_facts(JobState state);
/// The API's word for `state` ("PENDING", "SUBMIT_FAILED", ...).
std::string_view job_state_name(JobState state);
/// The state named `name` exactly (the API's words, as kept in the database); nullopt for any
/// other word.
std::optional<JobState> parse_job_state(std::string_view name);
/// A state slurmrestd v0.0.38 wrote (one word); kUnknown for a word that is not Slurm's.
JobState job_state_from_slurm(std::string_view word);
/// A state slurmrestd v0.0.41 wrote (the base state and its flags, in any order): the flag of
/// highest precedence, else the base state, as Slurm's job_state_string() picks for v0.0.38;
/// flags job_state_string() never shows (LAUNCH_FAILED, RECONFIG_FAIL, POWER_UP_NODE, ...) are
/// passed over; kUnknown when no word is known.
JobState job_state_from_slurm_list(std::span<const std::string> words);

/// A state in JSON is its name (nlohmann::json would otherwise write the enum's number).
void to_json(nlohmann::json& j, JobState state);

/// Whether nothing more will change (COMPLETED, FAILED, ..., SUBMIT_FAILED).
inline bool job_state_final(JobState s) {
  return job_state_facts(s).phase == JobPhase::kFinal;
}
/// Whether the job waits in a queue (ACCEPTED, PENDING, REQUEUED, REQUEUE_FED, REQUEUE_HOLD).
inline bool job_state_queued(JobState s) {
  return job_state_facts(s).phase == JobPhase::kQueued;
}

}  // namespace berth::gateway

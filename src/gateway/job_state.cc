// A job's states and their facts (gateway/job_state.h).
#include "gateway/job_state.h"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

namespace berth::gateway {
namespace {

using P = JobPhase;
using S = JobState;

// clang-format off
constexpr std::array<JobStateFacts, static_cast<size_t>(S::kUnknown) + 1> kJobStates = {{
    // state            name             phase       ended  infra  slurm
    {S::kAccepted,      "ACCEPTED",      P::kQueued, false, false, false},
    {S::kSubmitFailed,  "SUBMIT_FAILED", P::kFinal,  true,  false, false},
    {S::kCompleting,    "COMPLETING",    P::kActive, false, false, true},
    {S::kStageOut,      "STAGE_OUT",     P::kActive, true,  false, true},
    {S::kConfiguring,   "CONFIGURING",   P::kActive, false, false, true},
    {S::kResizing,      "RESIZING",      P::kActive, true,  false, true},
    {S::kRequeued,      "REQUEUED",      P::kQueued, true,  false, true},
    {S::kRequeueFed,    "REQUEUE_FED",   P::kQueued, true,  false, true},
    {S::kRequeueHold,   "REQUEUE_HOLD",  P::kQueued, true,  false, true},
    {S::kSpecialExit,   "SPECIAL_EXIT",  P::kActive, true,  false, true},
    {S::kStopped,       "STOPPED",       P::kActive, true,  false, true},
    {S::kRevoked,       "REVOKED",       P::kActive, true,  false, true},
    {S::kResvDelHold,   "RESV_DEL_HOLD", P::kActive, true,  false, true},
    {S::kSignaling,     "SIGNALING",     P::kActive, true,  false, true},
    {S::kPending,       "PENDING",       P::kQueued, false, false, true},
    {S::kRunning,       "RUNNING",       P::kActive, false, false, true},
    {S::kSuspended,     "SUSPENDED",     P::kActive, false, false, true},
    {S::kCompleted,     "COMPLETED",     P::kFinal,  true,  false, true},
    {S::kCancelled,     "CANCELLED",     P::kFinal,  true,  false, true},
    {S::kFailed,        "FAILED",        P::kFinal,  true,  false, true},
    {S::kTimeout,       "TIMEOUT",       P::kFinal,  true,  false, true},
    {S::kNodeFail,      "NODE_FAIL",     P::kFinal,  true,  true,  true},
    {S::kPreempted,     "PREEMPTED",     P::kFinal,  true,  false, true},
    {S::kBootFail,      "BOOT_FAIL",     P::kFinal,  true,  true,  true},
    {S::kDeadline,      "DEADLINE",      P::kFinal,  true,  false, true},
    {S::kOutOfMemory,   "OUT_OF_MEMORY", P::kFinal,  true,  false, true},
    {S::kUnknown,       "UNKNOWN",       P::kActive, true,  false, false},
}};
// clang-format on

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kJobStates.size(); ++i)
    if (static_cast<size_t>(kJobStates[i].state) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kJobStates must list the states in JobState's order");

}  // namespace

std::span<const JobStateFacts> job_states() {
  return kJobStates;
}

const JobStateFacts& job_state_facts(JobState state) {
  return kJobStates[static_cast<size_t>(state)];
}

std::string_view job_state_name(JobState state) {
  return job_state_facts(state).name;
}

std::optional<JobState> parse_job_state(std::string_view name) {
  for (const JobStateFacts& f : kJobStates)
    if (f.name == name) return f.state;
  return std::nullopt;
}

JobState job_state_from_slurm(std::string_view word) {
  for (const JobStateFacts& f : kJobStates)
    if (f.from_slurm && f.name == word) return f.state;
  return JobState::kUnknown;
}

JobState job_state_from_slurm_list(std::span<const std::string> words) {
  // The table lists Slurm's flags first, in job_state_string()'s order, then the base states:
  // the first row named in the list is the word v0.0.38 would have shown.
  for (const JobStateFacts& f : kJobStates)
    if (f.from_slurm && std::find(words.begin(), words.end(), f.name) != words.end())
      return f.state;
  return JobState::kUnknown;
}

void to_json(nlohmann::json& j, JobState state) {
  j = std::string(job_state_name(state));
}

}  // namespace berth::gateway

// A job's output (gateway/job_output.h).
#include "gateway/job_output.h"

#include <utility>

#include "gateway/output.h"

namespace berth::gateway {

std::string JobOutputs::stem(int64_t id) const {
  return output_stem(db_.secret(), db_.instance(), id);
}

Result<std::optional<JobOutput>> JobOutputs::output(const Account& who, int64_t id, int lines) {
  if (output_dir_.empty())
    return make_error("GET", "/v1/jobs/" + std::to_string(id) + "/output",
                      "berthd keeps no job output here ([slurm] output_dir is not set)",
                      ErrorCode::kNotFound);
  std::optional<JobRecord> job = BERTH_TRY(reads_.get(who, id));
  if (!job) return std::optional<JobOutput>();
  // The file must be the job owner's: nobody else can have written the job's output.
  auto owner = system_user_lookup()(job->owner);
  if (!owner)
    return make_error("read", job->owner, "no such account on the gateway host",
                      ErrorCode::kNotFound);
  JobOutput out{*job, "", "", false, false};
  std::string path = output_dir_ + "/" + stem(id);
  out.stdout_text = BERTH_TRY(
      read_tail(path + ".out", owner->first, lines, kMaxTailBytes, &out.stdout_truncated));
  out.stderr_text = BERTH_TRY(
      read_tail(path + ".err", owner->first, lines, kMaxTailBytes, &out.stderr_truncated));
  return std::optional<JobOutput>(std::move(out));
}

}  // namespace berth::gateway

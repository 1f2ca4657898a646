// GET /v1/jobs/{id}/output: the last lines of a job's stdout and stderr, from the files its
// batch script writes under [slurm] output_dir (gateway/output.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "gateway/auth.h"
#include "gateway/job_reads.h"
#include "gateway/jobs_db.h"

namespace berth::gateway {

/// A job's output: the last lines of its stdout and stderr.
struct JobOutput {
  JobRecord job;
  std::string stdout_text, stderr_text;
  bool stdout_truncated = false, stderr_truncated = false;
};

/// The jobs' output files under one output directory.
class JobOutputs {
 public:
  /// `output_dir`: [slurm] output_dir ("": berthd keeps no output).
  JobOutputs(const JobsDb& db, JobReads& reads, std::string output_dir)
      : db_(db), reads_(reads), output_dir_(std::move(output_dir)) {}

  /// The last `lines` lines of job `id`'s stdout and stderr, if `who` may see the job (as
  /// JobReads::get() reads it); nullopt otherwise. An error (kNotFound) when no output_dir is
  /// configured, or when the job's owner is no account here (the files must be the owner's).
  Result<std::optional<JobOutput>> output(const Account& who, int64_t id, int lines);
  /// The stem of job `id`'s output files (gateway/output.h's output_stem()).
  std::string stem(int64_t id) const;

 private:
  const JobsDb& db_;
  JobReads& reads_;
  std::string output_dir_;
};

}  // namespace berth::gateway

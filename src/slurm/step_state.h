// What the Slurm plugin records on a node about a step's container and about a job, for the
// step's other tasks, its end (slurm_spank_task_exit, slurm_spank_exit), the job's next steps
// and the job's epilog: one JSON document per file in the user's step state
// (runtime_path/UID, 0700, the user's).
//
// A record is written whole or not at all (a temporary name beside it, then rename(2)), so a
// reader never sees half of one, and it is read back strictly: a missing file is "nothing
// recorded", anything else that is not a whole record of this version (not JSON, a key missing
// or of the wrong type, a key this version does not know) is a one-line Problem naming the
// file. Root (slurmstepd, the job's epilog) reads records the user may have written by hand:
// nothing read from one is trusted beyond its type (a pid is checked before it is signalled).
//
// Pure: no Slurm header and no Berth library (nlohmann's header only, without exceptions), so
// that the plugin compiles it in and the unit tests check it without a cluster.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "slurm/options.h"

namespace berth::slurm {

/// Where a step's container stands on this node.
enum class StepPhase {
  kStarting,  ///< its first task is starting it (the holder is not up yet)
  kUp,        ///< the holder is up: the tasks join it
  kFailed,    ///< the start failed; the step's other tasks fail with `error`
};

/// What a step recorded on this node (runtime_path/UID/JOB.STEP.NODE.step).
struct StepRecord {
  StepPhase phase = StepPhase::kStarting;
  long holder = 0;        ///< the holder's pid (0 while starting)
  std::string container;  ///< the Berth container; "" for a run without a record (squashfs)
  bool owned = false;     ///< this step started the holder: its end ends it
  long runner = 0;        ///< a run without a record: its `berth run` pid (0 otherwise)
  long stepd = 0;         ///< the slurmstepd of the step that wrote it
  std::string save;       ///< --container-save's absolute path, "" for none
  std::string error;      ///< kFailed: why, one line

  friend bool operator==(const StepRecord&, const StepRecord&) = default;
};

/// What the job's epilog needs on a node (runtime_path/UID/JOB.job): it has no job
/// environment, so the variables that say where the user's Berth store is.
struct JobRecord {
  std::vector<std::string> store_env;  ///< HOME=..., BERTH_HOME=..., XDG_DATA_HOME=...

  friend bool operator==(const JobRecord&, const JobRecord&) = default;
};

/// A record as its file holds it: one line of JSON.
std::string encode(const StepRecord& r);
std::string encode(const JobRecord& r);

/// Parses a record's text; a Problem says what is wrong with it (without the file's name).
Problem decode(std::string_view text, StepRecord* out);
Problem decode(std::string_view text, JobRecord* out);

/// Writes `r` to `path` atomically: `path`.tmp.PID (created 0600, never through a link), then
/// renamed over `path`. Problem: "write step record PATH: ...".
Problem write_record(const std::string& path, const StepRecord& r);
Problem write_record(const std::string& path, const JobRecord& r);

/// Reads the record at `path` (a regular file, never through a link, at most 64 KiB):
/// nullopt in `*out` when there is none. Problem: "step record PATH: ...".
Problem read_record(const std::string& path, std::optional<StepRecord>* out);
Problem read_record(const std::string& path, std::optional<JobRecord>* out);

/// The variables of `env` (NAME=VALUE) the job's epilog needs: HOME, BERTH_HOME, XDG_DATA_HOME.
JobRecord job_record(const std::vector<std::string>& env);

/// A step record's file name in the user's step state: JOB.STEP.NODE.step (STEP "batch" for
/// the batch script).
std::string step_file_name(const StepIds& ids);
/// Whether `entry` (a file name in the user's step state) is a step record of job `job` on
/// node `node` ("" for any node); its JOB.STEP in `*job_step` when it is.
bool is_step_file(std::string_view entry, unsigned job, std::string_view node,
                  std::string* job_step = nullptr);
/// A job record's file name: JOB.job.
std::string job_file_name(unsigned job);

}  // namespace berth::slurm

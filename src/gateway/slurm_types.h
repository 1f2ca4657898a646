// What berthd asks of Slurm and reads back, in terms no slurmrestd version owns: each version
// file (gateway/slurm_v0038.h, slurm_v0041.h) turns these into its own JSON and back, and the
// table in gateway/slurm_api.h picks the file. GRES strings and node states are Slurm's own
// text, the same in every version, read here once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/job_state.h"

namespace berth::gateway {

/// A batch job as berthd asks Slurm for it, in Slurm's terms.
struct SlurmJobSpec {
  std::string name;
  std::string script;  ///< the batch script, "#!/bin/sh\n..."
  std::map<std::string, std::string> environment;
  std::string workdir;    ///< the batch script's working directory
  std::string comment;    ///< "berthd:INSTANCE:ID", how reconciliation finds the job
  std::string partition;  ///< "" for the default
  std::string account;    ///< the Slurm account charged; "" for the user's default
  /// The batch script's own stdout and stderr files; "" for Slurm's slurm-JOBID.out.
  std::string standard_output, standard_error;
  int nodes = 1;
  int tasks = 1;
  int cpus_per_task = 1;
  int64_t memory_mb = 0;       ///< per node; 0: Slurm's default
  int gpus = 0;                ///< per job
  std::string gpu_type;        ///< the GRES type of those GPUs ("a100"); "" for any
  std::string gres;            ///< per node, "shard:2"; "" for none
  int64_t time_limit_min = 0;  ///< 0: the partition's default
};

/// What berthd reads back of a Slurm job.
struct SlurmJobInfo {
  JobState state = JobState::kUnknown;
  std::string reason;
  std::optional<int> exit_code;  ///< once finished: the status, or 128+N for signal N
  std::string nodes;
  std::string partition;
  int64_t submit_time = 0, start_time = 0;  ///< 0: not yet
  int64_t end_time = 0;                     ///< 0 until the job has ended
  int gpus = 0;                             ///< GPUs allocated, all nodes together
  /// Slurm's GRES of each allocated node, in node order: "gpu:a100:2(IDX:0-1)".
  std::vector<std::string> gres_detail;
};

/// One node of GET /nodes, as GET /v1/systems counts it.
struct SlurmNode {
  std::string name;
  std::string state;  ///< "idle", "mixed", "allocated", or "unavailable" (node_availability())
  std::vector<std::string> partitions;
  int cpus = 0, alloc_cpus = 0;
  int gpus = 0, gpus_used = 0;
  int64_t memory_mb = 0;  ///< real_memory
  std::string gpu_model;  ///< the type of its gpu GRES ("a100" of "gpu:a100:4"), "" if untyped
};

/// One partition of GET /partitions.
struct SlurmPartition {
  std::string name;
  std::string state;  ///< Slurm's: UP, DOWN, DRAIN, INACTIVE
  /// Whether it is Slurm's default partition; nullopt where the version does not say
  /// (v0.0.40 to v0.0.42 have no partition flags).
  std::optional<bool> is_default;
  int nodes = 0, cpus = 0;
  int64_t max_time_s = -1;      ///< MaxTime; -1: unlimited
  int64_t default_time_s = -1;  ///< DefaultTime; -1: none
};

/// One job of GET /jobs: its id and comment, for reconciliation.
struct SlurmJobEntry {
  int64_t id = 0;
  std::string comment;
  std::string user;
  SlurmJobInfo info;
};

/// The job of `jobs` with comment `comment` (the last where several have it), or nullptr: the
/// Slurm job a berthd job became, found by its job_comment().
inline const SlurmJobEntry* job_with_comment(std::span<const SlurmJobEntry> jobs,
                                             std::string_view comment) {
  const SlurmJobEntry* found = nullptr;
  for (const SlurmJobEntry& e : jobs)
    if (e.comment == comment) found = &e;
  return found;
}

/// The number of GPUs in a GRES string of Slurm's ("gpu:a100:2(S:0-1),gpu:t4:1,nic:1" -> 3).
int gres_gpus(std::string_view gres);
/// The type of the first typed gpu GRES ("gpu:a100:4(S:0)" → "a100"), "" when untyped.
std::string gres_gpu_type(std::string_view gres);
/// The GPUs of a job's TRES request (tres_per_job, tres_per_node): "gres:gpu:2" (22.05),
/// "gres/gpu:a100:2" (24.11), other entries ("gres/shard:2", "cpu:4") not counted.
int tres_per_gpus(std::string_view tres);
/// The GPU count of a TRES string's "gres/gpu=N" ("cpu=2,gres/gpu=4,node=1" -> 4), 0 if none.
int tres_gpus(std::string_view tres);

/// A node's state as GET /v1/systems counts it, from Slurm's base state ("IDLE", "mixed", ...,
/// any case) and its flags ("DRAIN", "NOT_RESPONDING", ...): "unavailable" when a flag takes it
/// out of service or the base state is not idle, mixed or allocated, else the base state in
/// lower case (COMPLETING counts as allocated).
std::string node_availability(std::string_view base, std::span<const std::string> flags);

/// The exit code berthd shows of an ended job: the command's status, or 128+N for signal N.
inline int shown_exit_code(int status, int signal) {
  return signal != 0 ? 128 + signal : status;
}

}  // namespace berth::gateway

// slurmrestd's OpenAPI v0.0.38 (Slurm 22.05, Debian 12): the one file that knows its shapes.
// Later versions move fields (v0.0.39 makes `environment` a list of "K=V" strings, v0.0.41 moves
// `script` into `job`, exit codes become objects): a new version is a sibling of this file
// behind the same three functions, chosen by slurmrestd's version.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace berth::gateway {

/// The path prefix of this version's endpoints.
inline constexpr const char* kSlurmApiPrefix = "/slurm/v0.0.38";

/// A batch job as berthd asks Slurm for it, in Slurm's terms.
struct SlurmJobSpec {
  std::string name;
  std::string script;  ///< the batch script, "#!/bin/sh\n..."
  std::map<std::string, std::string> environment;
  std::string workdir;        ///< the batch script's working directory
  std::string comment;        ///< "berthd:INSTANCE:ID", how reconciliation finds the job
  std::string partition;      ///< "" for the default
  std::string account;        ///< the Slurm account charged; "" for the user's default
  /// The batch script's own stdout and stderr files; "" for Slurm's slurm-JOBID.out.
  std::string standard_output, standard_error;
  int nodes = 1;
  int tasks = 1;
  int cpus_per_task = 1;
  int64_t memory_mb = 0;      ///< per node; 0: Slurm's default
  int gpus = 0;               ///< per job
  std::string gres;           ///< per node, "shard:2"; "" for none
  int64_t time_limit_min = 0; ///< 0: the partition's default
};

/// What berthd reads back of a Slurm job.
struct SlurmJobInfo {
  std::string state;  ///< Slurm's job_state: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
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
  std::string state;  ///< "idle", "mixed", "allocated", or "unavailable" (down, drained, ...)
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
  bool is_default = false;
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

/// The body of POST /job/submit.
nlohmann::json submit_body_v0038(const SlurmJobSpec& spec);
/// The Slurm job id from the answer to a submission (`url` names it in errors).
Result<int64_t> parse_submit_v0038(std::string_view body, const std::string& url);
/// The job from the answer to GET /job/{id}.
Result<SlurmJobInfo> parse_job_v0038(std::string_view body, const std::string& url);
/// The jobs from the answer to GET /jobs.
Result<std::vector<SlurmJobEntry>> parse_jobs_v0038(std::string_view body, const std::string& url);
/// The nodes from the answer to GET /nodes.
Result<std::vector<SlurmNode>> parse_nodes_v0038(std::string_view body, const std::string& url);
/// The partitions from the answer to GET /partitions.
Result<std::vector<SlurmPartition>> parse_partitions_v0038(std::string_view body,
                                                           const std::string& url);
/// Whether the answer to GET /ping has a controller that answered ("ping": "UP").
Result<bool> parse_ping_v0038(std::string_view body, const std::string& url);
/// The number of GPUs in a GRES string of Slurm's ("gpu:a100:2(S:0-1),gpu:t4:1,nic:1" -> 3).
int gres_gpus(std::string_view gres);
/// The type of the first typed gpu GRES ("gpu:a100:4(S:0)" → "a100"), "" when untyped.
std::string gres_gpu_type(std::string_view gres);

/// slurmrestd's first error description in an error answer, or "" when there is none.
std::string slurm_error_v0038(std::string_view body);

}  // namespace berth::gateway

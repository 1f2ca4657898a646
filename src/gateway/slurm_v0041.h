// slurmrestd's OpenAPI v0.0.41 (Slurm 24.05 to 25.05; Debian 13's 24.11): the one file that
// knows its shapes, behind its row of gateway/slurm_api.h. Against v0.0.38: the script sits
// inside `job`, the environment is a list of "NAME=VALUE", GPUs and GRES are TRES strings
// (tres_per_job "gres/gpu:2", tres_per_node "gres/shard:2"), numbers that may be unset or
// infinite are objects {"set", "infinite", "number"} (times, limits, memory), job, node and
// partition states are lists (["RUNNING", "COMPLETING"]), exit codes are objects of return code
// and signal, a ping says "pinged", and partitions carry no Default flag.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/slurm_types.h"

namespace berth::gateway {

/// The body of POST /job/submit.
nlohmann::json submit_body_v0041(const SlurmJobSpec& spec);
/// One job object of GET /job/{id} or GET /jobs.
SlurmJobInfo job_v0041(const nlohmann::json& job);
/// A node object's state: its list, the base state first ("IDLE", "DRAIN").
std::string node_state_v0041(const nlohmann::json& node);
/// One partition object of GET /partitions (is_default unknown: nullopt).
SlurmPartition partition_v0041(const nlohmann::json& partition);
/// Whether one controller of GET /ping answered ("pinged": "UP").
bool ping_v0041(const nlohmann::json& ping);
/// slurmrestd's first error in an answer, "DESCRIPTION: ERROR" ("Batch job submission
/// failed: Invalid partition name specified"), or "" when there is none.
std::string slurm_error_v0041(std::string_view body);

}  // namespace berth::gateway

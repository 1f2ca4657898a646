// slurmrestd's OpenAPI v0.0.38 (Slurm 22.05 to 23.11; Debian 12's 22.05): the one file that
// knows its shapes, behind its row of gateway/slurm_api.h. The script sits beside `job`, the
// environment is an object, numbers are plain numbers, `job_state` is one word.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/slurm_types.h"

namespace berth::gateway {

/// The body of POST /job/submit.
nlohmann::json submit_body_v0038(const SlurmJobSpec& spec);
/// One job object of GET /job/{id} or GET /jobs.
SlurmJobInfo job_v0038(const nlohmann::json& job);
/// A node object's state: its base state ("idle", ...) and its `state_flags` ("DRAIN", ...).
std::string node_state_v0038(const nlohmann::json& node);
/// One partition object of GET /partitions (`flags` says whether it is the default).
SlurmPartition partition_v0038(const nlohmann::json& partition);
/// Whether one controller of GET /ping answered ("ping": "UP").
bool ping_v0038(const nlohmann::json& ping);
/// slurmrestd's first error description in an answer, or "" when there is none.
std::string slurm_error_v0038(std::string_view body);

}  // namespace berth::gateway

// The slurmrestd OpenAPI versions berthd speaks: one row each, naming the version, its path
// prefix and the functions of its file (gateway/slurm_v0038.h, slurm_v0041.h) that write its
// submission and read the objects of its answers; the answers' envelopes, alike in both, are
// read here once. SlurmRest (gateway/slurm_rest.h) calls through one row, the one [slurm]
// api_version names or, with "auto", the first row slurmrestd serves (its GET /openapi/v3
// lists its paths, /slurm/vX.Y.Z/...). Both versions authenticate alike (X-SLURM-USER-NAME and
// X-SLURM-USER-TOKEN): the row has no headers of its own.
//
// | version | Slurm                    | differs from the one before (docs/gateway.md)          |
// |---------|--------------------------|---------------------------------------------------------|
// | v0.0.38 | 22.05 to 23.11 (22.05)   |                                                         |
// | v0.0.41 | 24.05 to 25.05 (24.11)   | script in `job`, environment a list, numbers as objects |
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gateway/slurm_types.h"

namespace berth::gateway {

/// One slurmrestd API version: what berthd sends and how it reads the objects of the answers.
/// What every version shares (the answer's envelope, its list of errors, its lists of jobs,
/// nodes, partitions and pings) is read once, by the parse_* functions below.
struct SlurmApi {
  std::string_view version;  ///< "v0.0.41"
  std::string_view prefix;   ///< the path prefix of its endpoints, "/slurm/v0.0.41"
  /// The body of POST /job/submit.
  nlohmann::json (*submit_body)(const SlurmJobSpec& spec);
  /// One job of the answers to GET /job/{id} and GET /jobs, as Slurm gives it (what is not
  /// a fact yet, parse_job() drops).
  SlurmJobInfo (*read_job)(const nlohmann::json& job);
  /// A node's state as GET /v1/systems counts it (node_availability()).
  std::string (*read_node_state)(const nlohmann::json& node);
  /// One partition of the answer to GET /partitions.
  SlurmPartition (*read_partition)(const nlohmann::json& partition);
  /// Whether one controller of the answer to GET /ping answered.
  bool (*read_ping)(const nlohmann::json& ping);
  /// slurmrestd's first error in an answer, as one line; "" when there is none.
  std::string (*error_text)(std::string_view body);
};

/// Every version berthd speaks, the one preferred first (the newest).
std::span<const SlurmApi> slurm_apis();
/// The version named `version` ("v0.0.38"), or nullptr.
const SlurmApi* slurm_api(std::string_view version);
/// The versions berthd speaks, newest first, joined by ", " (for messages).
std::string slurm_api_names();
/// `versions` joined by ", " ("v0.0.40, v0.0.41").
std::string join_versions(const std::vector<std::string>& versions);

// Each parser takes the answer's body and the URL it came from (named in errors); an answer
// that is not a JSON object, or lists errors, is an error carrying slurmrestd's text.

/// The Slurm job id from the answer to a submission.
Result<int64_t> parse_submit(const SlurmApi& api, std::string_view body, const std::string& url);
/// The job from the answer to GET /job/{id} (an error, kNotFound, when it lists none), with
/// only facts: a pending job's start_time is Slurm's estimate and a running one's end_time
/// its time limit, and the exit code means nothing before the end, so those read 0 (nullopt)
/// until the job's state says they are facts (JobStateFacts::ended).
Result<SlurmJobInfo> parse_job(const SlurmApi& api, std::string_view body, const std::string& url);
/// The jobs, with their ids, comments and users, from the answer to GET /jobs.
Result<std::vector<SlurmJobEntry>> parse_jobs(const SlurmApi& api, std::string_view body,
                                              const std::string& url);
/// The nodes from the answer to GET /nodes.
Result<std::vector<SlurmNode>> parse_nodes(const SlurmApi& api, std::string_view body,
                                           const std::string& url);
/// The partitions from the answer to GET /partitions.
Result<std::vector<SlurmPartition>> parse_partitions(const SlurmApi& api, std::string_view body,
                                                     const std::string& url);
/// Whether the answer to GET /ping has a controller that answered.
Result<bool> parse_ping(const SlurmApi& api, std::string_view body, const std::string& url);

/// The slurmrestd API versions a GET /openapi/v3 answer lists ("v0.0.40", ...), in ascending
/// order; empty when the body is not such a document.
std::vector<std::string> offered_slurm_apis(std::string_view openapi_body);
/// The version berthd speaks to a slurmrestd offering `offered`: the first of slurm_apis()
/// among them; nullptr when there is none.
const SlurmApi* choose_slurm_api(const std::vector<std::string>& offered);

}  // namespace berth::gateway

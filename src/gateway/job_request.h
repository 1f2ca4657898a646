// A job request: a POST /v1/jobs body checked into a JobRequest, read back from the database
// (the one reader of a stored request), and turned into a Slurm batch job whose script runs the
// container through Berth's Slurm plugin (`srun --container-image=...`); and a job as the API
// shows it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gateway/config.h"
#include "gateway/jobs_db.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

/// A job request as POST /v1/jobs gives it (docs/api.md).
struct JobRequest {
  std::string name = "berthd-job";
  std::string image;                 ///< required
  std::vector<std::string> command;  ///< empty: the image's own
  std::map<std::string, std::string> env;
  std::vector<std::string> mounts;  ///< SRC:DST[:ro], checked by the site policy on the node
  std::string workdir;              ///< inside the container; "" for the image's
  int nodes = 1, tasks = 1, cpus_per_task = 1, gpus = 0;
  /// A fraction of one GPU on each node, 0 < gpu_share < 1 ("resources.gpu_share"); 0: none.
  /// Not with `gpus`; the site must enable sharing ([share], check_share()).
  double gpu_share = 0;
  /// The GPU model `gpus` must be of ("resources.gpu_model", or its other name
  /// "resources.gpu_type"): a GRES type of the site's (gpu:TYPE:N in gres.conf), which
  /// [gpu_models] must list (check_gpu_model()); "" for any.
  std::string gpu_model;
  /// The Slurm partition the job runs in ("resources.partition"), one of the site's
  /// (check_partition()); "" for [slurm] partition.
  std::string partition;
  int64_t memory_mb = 0, walltime_s = 0;
  std::string job_class = "batch";  ///< "batch" or "cloud"
  /// The caller's token group (VO) the job is accounted to ("group"); "" for berthd's choice
  /// (job_vo() in gateway/job_usage.h).
  std::string group;
};

/// Checks a request body: an object of the known fields with the right types; errors (code
/// kInvalidInput) name the field.
Result<JobRequest> parse_job_request(const nlohmann::json& body);

/// The request of a job as berthd stored it (JobRecord::request: the POST /v1/jobs body,
/// checked by parse_job_request() before it was recorded), read back: the one reader of a
/// stored request, for the job's answer (job_json()), its usage (JobUsage::records()) and its
/// submission at reconciliation. An error (kInvalidInput) where the text is not such a body.
Result<JobRequest> read_stored_request(const std::string& text);

/// Whether the site takes request `r`'s GPU share: an error (kInvalidInput) of one line when
/// `r` asks for one and [share] is not enabled.
Status check_share(const JobRequest& r, const ShareConfig& share);

/// Whether the site has request `r`'s GPU model: an error (kInvalidInput) of one line naming
/// the models of [gpu_models] (`known`) when `r` names another.
Status check_gpu_model(const JobRequest& r, const std::vector<std::string>& known);

/// Whether the site lets request `r` name its partition: an error (kInvalidInput) of
/// one line naming the partitions a request may name (`allowed`, SlurmConfig::partitions) when
/// `r` names another.
Status check_partition(const JobRequest& r, const std::vector<std::string>& allowed);

/// The GRES, per node, that GPU share `x` (0 < x < 1) asks Slurm for: "shard:N" with
/// N = ceil(x * units_per_gpu), or "mps:N" with N = round(x * units_per_gpu), N at least 1 and
/// at most one GPU's units.
std::string share_gres(double x, const ShareConfig& share);

/// The Slurm job for request `r` of berthd job `id`, with the site's settings; `comment` is
/// how reconciliation finds it again (job_comment()). With `slurm.output_dir`, the
/// container's stdout and stderr go to OUTPUT_DIR/`output_stem`.out and .err
/// (gateway/output.h). The job's partition is the request's, else [slurm] partition. A GPU
/// share becomes share_gres() with the [share] MPS directories in the
/// job's environment (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY), which Berth binds into
/// the container.
SlurmJobSpec slurm_spec(const JobRequest& r, int64_t id, const std::string& comment,
                        const SlurmConfig& slurm, const std::string& output_stem = "");

/// Appends job `j` as the API shows it, as one line of JSON text. A job Slurm ended at its time
/// limit (TIMEOUT) says so in its reason, naming the cap that set the limit when one did.
/// Written straight to text, without a JSON value: GET /v1/jobs writes up to 1000 per request.
void append_job_text(std::string& out, const JobRecord& j);

/// The same job as a JSON value (append_job_text()'s text, parsed).
nlohmann::json job_json(const JobRecord& j);

/// The Slurm comment of berthd job `id` of the database named `instance`: "berthd:INSTANCE:ID"
/// (JobsDb::instance()); how reconciliation finds the job in Slurm again.
inline std::string job_comment(const std::string& instance, int64_t id) {
  return "berthd:" + instance + ":" + std::to_string(id);
}

}  // namespace berth::gateway

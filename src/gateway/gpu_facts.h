// What NVML measured of the site's GPUs, for GET /v1/resources: each GPU job's sampler (idle-GPU
// reclaim, gateway/reclaim.h) writes `berth gpu stats --json` documents that name the node and
// each GPU's compute capability and memory, and the node's driver; berthd keeps the newest of
// each GPU here, and in its database across restarts. GLUE's ComputeCapability is published
// from these measurements only, never from the configuration: a typed value goes stale when a
// node's cards are replaced, a measured one follows the cards.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace berth::gateway {

class JobsDb;

/// One GPU as NVML measured it.
struct MeasuredGpu {
  std::string compute_capability;  ///< "9.0"; "" where NVML did not say
  int64_t memory_mib = 0;          ///< total memory; 0 where NVML did not say
  bool operator==(const MeasuredGpu&) const = default;
};

/// What the samples measured on one node: its driver and its GPUs by UUID.
struct NodeGpus {
  std::string driver_version;
  std::map<std::string, MeasuredGpu> gpus;
  bool operator==(const NodeGpus&) const = default;
};

/// By Slurm node name (the documents' "node": SLURMD_NODENAME where the sampler runs).
using GpuFactsMap = std::map<std::string, NodeGpus>;

/// The facts in one `berth gpu stats --json` document `doc`, added to `out` (a later document
/// of the same node and GPU replacing an earlier one); a document without a node or GPUs
/// without a UUID add nothing.
void add_measured_gpus(const nlohmann::json& doc, GpuFactsMap& out);

/// The measured GPUs of the site, shared by the reconciling thread (which feeds it the
/// samples) and the server's (GET /v1/resources). With a database, loaded from it when made
/// and stored in it whenever a fact changes.
class GpuFacts {
 public:
  explicit GpuFacts(JobsDb* db = nullptr);
  /// Takes in what `measured` says (each node's driver and each GPU it names, replacing what
  /// was known of them); stores the result when it differs. An error only from the store.
  Status observe(const GpuFactsMap& measured);
  GpuFactsMap nodes() const;

 private:
  JobsDb* db_;
  mutable std::mutex mu_;
  GpuFactsMap nodes_;
};

}  // namespace berth::gateway

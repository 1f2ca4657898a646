// GET /v1/resources: the site in GLUE 2.1 terms (gateway/glue.h), computed from slurmrestd's
// nodes, partitions and jobs and the configured GPU models, kept for a short while so that an
// information system polling it does not load slurmctld.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gateway/config.h"
#include "gateway/glue.h"
#include "gateway/gpu_facts.h"
#include "gateway/slurm_rest.h"

namespace berth::gateway {

/// The GLUE input for the cluster `cluster` from what slurmrestd answered: nodes by class,
/// partitions with their running (RUNNING) and waiting (PENDING) jobs.
/// Each GRES type's accelerator is what [gpu_models.TYPE] says, then what NVML measured on
/// the nodes of that type (`measured`, gateway/gpu_facts.h), which wins: the compute
/// capabilities found (the only source of ComputeCapability), the oldest driver (what an
/// image can count on on every node) and the smallest memory.
GlueSite glue_site(const std::string& cluster, const PublishConfig& publish,
                   const std::vector<SlurmNode>& nodes,
                   const std::vector<SlurmPartition>& partitions,
                   const std::vector<SlurmJobEntry>& jobs, int max_gpus_per_job,
                   const GpuFactsMap& measured = {});

class ResourcesService {
 public:
  /// `facts`: what the GPU jobs' samples measured, or nullptr (nothing measured).
  ResourcesService(std::string cluster, PublishConfig publish, const GpuFacts* facts = nullptr)
      : cluster_(std::move(cluster)), publish_(std::move(publish)), facts_(facts) {}

  /// The GLUE document, asked of slurmrestd as `user` unless one younger than the cache time
  /// is at hand. `now`: Unix seconds.
  Result<nlohmann::json> document(SlurmRest& slurm, const std::string& user, int64_t now);

  /// GPUs per model from the last document: {model: {total, used}} (for /metrics); empty
  /// before the first.
  std::map<std::string, std::pair<int, int>> gpus_by_model() const;

 private:
  std::string cluster_;
  PublishConfig publish_;
  const GpuFacts* facts_;
  mutable std::mutex mu_;
  nlohmann::json cached_;
  int64_t cached_at_ = 0;
  std::map<std::string, std::pair<int, int>> gpus_;
};

}  // namespace berth::gateway

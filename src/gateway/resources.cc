#include "gateway/resources.h"

#include <algorithm>
#include <set>

#include "core/clock.h"
#include "devices/version.h"

namespace berth::gateway {
namespace {

/// Whether driver version `a` ("535.104.05") is older than `b` (devices/version.h's
/// comparison); a version that does not parse is never older.
bool older_version(const std::string& a, const std::string& b) {
  auto x = parse_version(a), y = parse_version(b);
  return x && y && compare_versions(*x, *y) < 0;
}

}  // namespace

GlueSite glue_site(const std::string& cluster, const PublishConfig& publish,
                   const std::vector<SlurmNode>& nodes,
                   const std::vector<SlurmPartition>& partitions,
                   const std::vector<SlurmJobEntry>& jobs, int max_gpus_per_job,
                   const GpuFactsMap& measured) {
  GlueSite site;
  site.cluster = cluster;
  site.host = publish.host;
  site.validity_s = std::max<int64_t>(publish.resources_cache_s, 60);
  for (const SlurmNode& n : nodes)
    site.nodes.push_back({n.name, n.state, n.cpus, n.alloc_cpus, n.memory_mb, n.gpu_model, n.gpus,
                          n.gpus_used, n.partitions, publish.infiniband});
  site.endpoint_url = publish.url;
  for (const SlurmPartition& p : partitions) {
    // Only those a job may name, where the gateway says which (a broker names the one it chose).
    if (!publish.partitions.empty() &&
        std::find(publish.partitions.begin(), publish.partitions.end(), p.name) ==
            publish.partitions.end())
      continue;
    GluePartition g;
    g.name = p.name;
    g.max_walltime_s = p.max_time_s;
    g.default_walltime_s = p.default_time_s;
    g.up = p.state.empty() || p.state == "UP";
    g.max_gpus_per_job = max_gpus_per_job;
    for (const SlurmJobEntry& j : jobs) {
      if (j.info.partition != p.name) continue;
      if (j.info.state == JobState::kRunning)
        ++g.running_jobs;
      else if (j.info.state == JobState::kPending)
        ++g.waiting_jobs;
    }
    site.partitions.push_back(std::move(g));
  }
  for (const auto& [type, m] : publish.gpu_models)
    site.accelerators[type] = {m.vendor, m.model,          m.memory_mb,
                               {},       m.driver_version, m.cuda_version};
  struct Seen {
    std::set<std::string> compute_capability;
    std::string driver;
    long long memory_mb = 0;
  };
  std::map<std::string, Seen> seen;  // by GRES type
  for (const SlurmNode& n : nodes) {
    auto m = measured.find(n.name);
    if (n.gpus == 0 || m == measured.end()) continue;
    Seen& s = seen[n.gpu_model];
    const std::string& driver = m->second.driver_version;
    if (!driver.empty() && (s.driver.empty() || older_version(driver, s.driver))) s.driver = driver;
    for (const auto& [uuid, g] : m->second.gpus) {
      if (!g.compute_capability.empty()) s.compute_capability.insert(g.compute_capability);
      // NVML counts MiB; GLUE's Memory is in MB.
      long long mb = g.memory_mib * 1048576 / 1000000;
      if (mb > 0 && (s.memory_mb == 0 || mb < s.memory_mb)) s.memory_mb = mb;
    }
  }
  for (const auto& [type, s] : seen) {
    GlueAccelerator& a = site.accelerators[type];
    a.compute_capability.assign(s.compute_capability.begin(), s.compute_capability.end());
    if (!s.driver.empty()) a.driver_version = s.driver;
    if (s.memory_mb > 0) a.memory_mb = s.memory_mb;
  }
  return site;
}

Result<nlohmann::json> ResourcesService::document(SlurmRest& slurm, const std::string& user,
                                                  int64_t now) {
  {
    std::lock_guard lock(mu_);
    if (!cached_.is_null() && now - cached_at_ < publish_.resources_cache_s) return cached_;
  }
  auto nodes = BERTH_TRY(slurm.nodes(user));
  auto partitions = BERTH_TRY(slurm.partitions(user));
  auto jobs = BERTH_TRY(slurm.jobs(user));
  GlueSite site = glue_site(cluster_, publish_, nodes, partitions, jobs, publish_.max_gpus_per_job,
                            facts_ != nullptr ? facts_->nodes() : GpuFactsMap{});
  site.creation_time = rfc3339(now);
  nlohmann::json doc = glue_document(site);
  std::map<std::string, std::pair<int, int>> gpus;
  for (const SlurmNode& n : nodes) {
    if (n.gpus == 0) continue;
    auto& [total, used] = gpus[n.gpu_model.empty() ? "gpu" : n.gpu_model];
    total += n.gpus;
    used += n.gpus_used;
  }
  std::lock_guard lock(mu_);
  cached_ = doc;
  cached_at_ = now;
  gpus_ = std::move(gpus);
  return doc;
}

std::map<std::string, std::pair<int, int>> ResourcesService::gpus_by_model() const {
  std::lock_guard lock(mu_);
  return gpus_;
}

}  // namespace berth::gateway

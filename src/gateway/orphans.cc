#include "gateway/orphans.h"

namespace berth::gateway {

GpuProcessVerdict classify_gpu_process(const SampledProcess& p, int64_t holder,
                                       const std::function<std::optional<bool>(int64_t)>& running) {
  // Nothing read of it: it may have ended between NVML's list and /proc, or /proc hides other
  // users' processes (hidepid); an alarm on either would be false.
  if (!p.known) return GpuProcessVerdict::kUnknown;
  if (!p.slurm_job_id) return GpuProcessVerdict::kOrphan;
  if (*p.slurm_job_id == holder) return GpuProcessVerdict::kHolders;
  std::optional<bool> is_running = running(*p.slurm_job_id);
  if (!is_running) return GpuProcessVerdict::kUnknown;
  return *is_running ? GpuProcessVerdict::kRunning : GpuProcessVerdict::kOrphan;
}

nlohmann::json orphan_json(const GpuOrphan& o) {
  using nlohmann::json;
  const SampledProcess& p = o.process;
  auto text = [](const std::string& s) { return s.empty() ? json() : json(s); };
  return {{"node", text(p.node)},
          {"gpu_index", p.gpu_index},
          {"gpu_uuid", text(p.gpu_uuid)},
          {"pid", p.pid},
          {"uid", p.uid ? json(*p.uid) : json()},
          {"user", text(p.user)},
          {"command", text(p.command)},
          {"slurm_job_id", p.slurm_job_id ? json(*p.slurm_job_id) : json()},
          {"slurm_job_from", text(p.slurm_job_from)},
          {"reason", o.reason},
          {"first_seen", o.first_seen},
          {"last_seen", o.last_seen},
          {"seen_by", {{"id", std::to_string(o.seen_by)}, {"slurm_job_id", o.seen_by_slurm_job}}}};
}

std::vector<GpuOrphan> OrphanTracker::update(std::vector<GpuOrphan> seen,
                                             const std::set<int64_t>& inspected,
                                             const std::set<int64_t>& running, int64_t now) {
  std::map<Key, GpuOrphan> next;
  // Those of running jobs whose samples could not be read this time stay as they were.
  for (auto& [key, o] : orphans_)
    if (!inspected.contains(o.seen_by) && running.contains(o.seen_by)) next.emplace(key, o);
  std::vector<GpuOrphan> fresh;
  for (GpuOrphan& o : seen) {
    Key key{o.process.node, o.process.gpu_uuid, o.process.pid};
    if (next.contains(key)) continue;  // seen by two jobs' samples (two jobs on one GPU)
    auto before = orphans_.find(key);
    // The same pid with another command is another process.
    if (before != orphans_.end() && before->second.process.command == o.process.command) {
      o.first_seen = before->second.first_seen;
    } else {
      o.first_seen = now;
      fresh.push_back(o);
    }
    o.last_seen = now;
    nodes_.insert(o.process.node);
    next.emplace(key, std::move(o));
  }
  orphans_ = std::move(next);
  return fresh;
}

std::vector<GpuOrphan> OrphanTracker::list() const {
  std::vector<GpuOrphan> out;
  for (const auto& [key, o] : orphans_) out.push_back(o);
  return out;
}

std::map<std::string, int> OrphanTracker::count_by_node() const {
  std::map<std::string, int> out;
  for (const std::string& node : nodes_) out[node] = 0;
  for (const auto& [key, o] : orphans_) ++out[o.process.node];
  return out;
}

std::vector<GpuOrphan> OrphanWatch::list() const {
  std::lock_guard lock(mu_);
  return orphans_.list();
}

std::map<std::string, int> OrphanWatch::count_by_node() const {
  std::lock_guard lock(mu_);
  return orphans_.count_by_node();
}

void OrphanWatch::check(const std::vector<std::pair<JobRecord, GpuSample>>& sampled,
                        const std::set<int64_t>& inspected,
                        const std::set<int64_t>& running_gpu_jobs,
                        const std::map<int64_t, JobState>& unfinished, int64_t now) {
  // A process attributed to a job berthd does not know (submitted to Slurm directly) is asked
  // of Slurm: one listing per owner and round, made only when needed; unreachable, nothing is
  // decided about such processes this round.
  std::map<std::string, std::optional<std::map<int64_t, JobState>>> listed;
  std::vector<GpuOrphan> seen;
  for (const auto& [job, sample] : sampled) {
    auto running = [&, &owner = job.owner](int64_t slurm_id) -> std::optional<bool> {
      if (auto it = unfinished.find(slurm_id); it != unfinished.end())
        return !job_state_queued(it->second);
      auto [l, fresh] = listed.try_emplace(owner);
      if (fresh)
        if (auto jobs = slurm_.jobs(owner); jobs.ok()) {
          l->second.emplace();
          for (const SlurmJobEntry& e : *jobs) (*l->second)[e.id] = e.info.state;
        }
      if (!l->second) return std::nullopt;
      auto it = l->second->find(slurm_id);
      return it != l->second->end() && !job_state_final(it->second) &&
             !job_state_queued(it->second);
    };
    for (const SampledProcess& p : sample.processes) {
      if (classify_gpu_process(p, job.slurm_job_id, running) != GpuProcessVerdict::kOrphan)
        continue;
      GpuOrphan o;
      o.process = p;
      if (o.process.node.empty()) o.process.node = job.nodes;  // a document without "node"
      o.seen_by = job.id;
      o.seen_by_slurm_job = job.slurm_job_id;
      o.reason = p.slurm_job_id ? "Slurm job " + std::to_string(*p.slurm_job_id) + " is not running"
                                : std::string("no Slurm job");
      seen.push_back(std::move(o));
    }
  }
  std::vector<GpuOrphan> fresh;
  {
    std::lock_guard lock(mu_);
    fresh = orphans_.update(std::move(seen), inspected, running_gpu_jobs, now);
  }
  if (observer_)
    for (const GpuOrphan& o : fresh) observer_(o);
}

}  // namespace berth::gateway

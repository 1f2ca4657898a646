// The systems berthd fronts (gateway/systems.h).
#include "gateway/systems.h"

#include <map>

namespace berth::gateway {

nlohmann::json system_json(const std::string& name, const std::string& problem, bool controller_up,
                           const std::vector<SlurmNode>& nodes,
                           const std::vector<SlurmPartition>& partitions,
                           const std::string& slurm_api) {
  std::map<std::string, int> by_state = {
      {"idle", 0}, {"mixed", 0}, {"allocated", 0}, {"unavailable", 0}};
  int cpus = 0, alloc_cpus = 0, gpus = 0, gpus_used = 0;
  std::map<std::string, int> partition_gpus;
  for (const SlurmNode& n : nodes) {
    ++by_state[n.state];
    cpus += n.cpus;
    alloc_cpus += n.alloc_cpus;
    gpus += n.gpus;
    gpus_used += n.gpus_used;
    for (const std::string& p : n.partitions) partition_gpus[p] += n.gpus;
  }
  nlohmann::json parts = nlohmann::json::array();
  bool partition_down = false;
  for (const SlurmPartition& p : partitions) {
    partition_down = partition_down || p.state != "UP";
    parts.push_back({{"name", p.name},
                     {"state", p.state},
                     {"default", p.is_default ? nlohmann::json(*p.is_default) : nullptr},
                     {"nodes", p.nodes},
                     {"cpus", p.cpus},
                     {"gpus", partition_gpus[p.name]}});
  }
  int usable = static_cast<int>(nodes.size()) - by_state["unavailable"];
  std::string state = "up", reason;
  if (!problem.empty()) {
    state = "down";
    reason = problem;
  } else if (!controller_up) {
    state = "down";
    reason = "slurmctld does not answer";
  } else if (usable == 0) {
    state = "down";
    reason = "no node is available";
  } else if (by_state["unavailable"] > 0) {
    state = "degraded";
    reason = std::to_string(by_state["unavailable"]) + " of " + std::to_string(nodes.size()) +
             " nodes unavailable";
  } else if (partition_down) {
    state = "degraded";
    reason = "a partition is not UP";
  }
  return {{"name", name},
          {"kind", "slurm"},
          {"slurm_api", slurm_api.empty() ? nlohmann::json(nullptr) : nlohmann::json(slurm_api)},
          {"state", state},
          {"reason", reason},
          {"nodes",
           {{"total", nodes.size()},
            {"idle", by_state["idle"]},
            {"mixed", by_state["mixed"]},
            {"allocated", by_state["allocated"]},
            {"unavailable", by_state["unavailable"]}}},
          {"cpus", {{"total", cpus}, {"allocated", alloc_cpus}}},
          {"gpus", {{"total", gpus}, {"allocated", gpus_used}}},
          {"partitions", parts}};
}

nlohmann::json describe_system(SlurmRest& slurm, const std::string& user, const std::string& name) {
  auto up = slurm.ping(user);
  if (!up.ok()) return system_json(name, up.error().message(), false, {}, {}, slurm.api_version());
  auto nodes = slurm.nodes(user);
  if (!nodes.ok())
    return system_json(name, nodes.error().message(), *up, {}, {}, slurm.api_version());
  auto partitions = slurm.partitions(user);
  if (!partitions.ok())
    return system_json(name, partitions.error().message(), *up, {}, {}, slurm.api_version());
  return system_json(name, "", *up, *nodes, *partitions, slurm.api_version());
}

}  // namespace berth::gateway

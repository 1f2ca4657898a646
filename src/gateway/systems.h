// GET /v1/systems: the clusters this gateway fronts (one, its [slurm]) and their state, read
// from slurmrestd as the caller: ping, nodes and partitions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/slurm_rest.h"
#include "gateway/slurm_v0038.h"

namespace berth::gateway {

/// One system as GET /v1/systems shows it (docs/api.md): `problem` is why slurmrestd could not
/// tell ("" when it answered), `controller_up` whether slurmctld answered its ping. The state
/// is "down" when either failed or no node is usable, "degraded" when a node is unavailable or
/// a partition is not UP, else "up".
nlohmann::json system_json(const std::string& name, const std::string& problem, bool controller_up,
                           const std::vector<SlurmNode>& nodes,
                           const std::vector<SlurmPartition>& partitions);

/// Asks slurmrestd, as `user`, and describes the cluster `name` (system_json).
nlohmann::json describe_system(SlurmRest& slurm, const std::string& user, const std::string& name);

}  // namespace berth::gateway

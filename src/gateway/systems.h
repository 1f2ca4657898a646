// GET /v1/systems: the clusters this gateway fronts (one, its [slurm]) and their state, read
// from slurmrestd as the caller: ping, nodes and partitions, and the slurmrestd API version
// berthd speaks to it (gateway/slurm_api.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/slurm_rest.h"
#include "gateway/slurm_types.h"

namespace berth::gateway {

/// One system as GET /v1/systems shows it (docs/api.md): `problem` is why slurmrestd could not
/// tell ("" when it answered), `controller_up` whether slurmctld answered its ping. The state
/// is "down" when either failed or no node is usable, "degraded" when a node is unavailable or
/// a partition is not UP, else "up". `slurm_api` is the slurmrestd version spoken ("" while
/// none is chosen: null); a partition's `default` is null where that version does not say.
nlohmann::json system_json(const std::string& name, const std::string& problem, bool controller_up,
                           const std::vector<SlurmNode>& nodes,
                           const std::vector<SlurmPartition>& partitions,
                           const std::string& slurm_api);

/// Asks slurmrestd, as `user`, and describes the cluster `name` (system_json).
nlohmann::json describe_system(SlurmRest& slurm, const std::string& user, const std::string& name);

}  // namespace berth::gateway

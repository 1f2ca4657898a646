// The host side of Slurm's clients in the batch container (host_tools.h says why and the wire
// format): an agent forked from the batch task before it joins the container, as the job's
// user, that runs the host's srun/sbatch/... for berth-slurm-client and returns their status.
#pragma once

#include <string>

namespace berth::slurm {

/// The agent's process name (its comm, as ps shows it).
inline constexpr const char* kAgentProcessName = "berth-slurm-agt";

/// Listens on `socket_path` (replacing a stale socket there) and forks the agent, which serves
/// each connection in a child of its own until the calling process exits (it dies with it:
/// PR_SET_PDEATHSIG). Returns an error of one line, or "".
std::string start_host_agent(const std::string& socket_path);

}  // namespace berth::slurm

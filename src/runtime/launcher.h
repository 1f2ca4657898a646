// What a parallel launcher (MPICH's hydra, `srun --mpi=pmi2`, Open MPI's mpirun, a PMIx
// server) hands the process it starts, and how a run passes it on to the workload.
//
// A launcher starts `berth run IMAGE APP` (or `berth exec NAME APP`) as a rank and gives it
// a descriptor (PMI_FD: the socket to the process manager) and variables (PMI_RANK, PMI_SIZE,
// PMIX_NAMESPACE, OMPI_*...). Berth closes every descriptor above 2 before exec and starts
// the workload with the image's environment, so both would be lost and MPI_Init fails with
// "Bad file descriptor". Two rules, both cheap enough for every run (a scan of the caller's
// environment, nothing probed):
//  - the caller's launcher variables (kLauncherEnvPrefixes) are carried into the container,
//    under -e and --env-file, over the image's; Sarus and enroot's PMI hooks do the same;
//  - the descriptor the container's PMI_FD names is kept open across exec, and so are
//    3 .. 2+N for `--preserve-fds N`, with runc's and crun's meaning (for launchers that hand
//    other descriptors: LISTEN_FDS-style socket activation, a PMIx fd). Descriptors are kept
//    at their numbers: no engine in between renumbers them, so PMI_FD stays right.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace berth {

/// Prefixes of the variables a launcher hands its ranks.
inline constexpr std::string_view kLauncherEnvPrefixes[] = {"PMI_", "PMIX_", "OMPI_"};

/// The caller's launcher variables ("K=V", those whose name starts with a kLauncherEnvPrefixes
/// entry), in the caller's order.
std::vector<std::string> launcher_env(const std::vector<std::string>& caller_env);

/// The descriptors to keep open in the workload: 3 .. 2+`preserve_fds`, then the one PMI_FD
/// names in `container_env` (when set and not among them), sorted. A negative count, or a
/// PMI_FD that is not a descriptor number, is an error of one line.
Result<std::vector<int>> kept_fds(int preserve_fds, const std::vector<std::string>& container_env);

/// Fails with EBADF naming the first of `fds` that is not open in this process: a launcher's
/// descriptor that did not reach Berth, or a count larger than what the caller passed.
Status check_fds_open(const std::vector<int>& fds);

/// Clears close-on-exec on `fds` (after close_range marked everything above 2): async-signal
/// safe, for the child between clone and exec; a descriptor that is not open is skipped.
void keep_across_exec(const std::vector<int>& fds);

/// For an engine handed `--preserve-fds N` (runc, crun: they pass 3 .. 2+N, every one): each
/// descriptor from 3 to the highest of `fds` (sorted) that is not among them is made /dev/null,
/// so that a gap holds neither berth's nor the caller's file. Async-signal safe, for a child
/// after keep_across_exec.
void fill_kept_gaps(const std::vector<int>& fds);

}  // namespace berth

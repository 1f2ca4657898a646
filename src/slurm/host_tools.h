// Slurm's clients inside an `sbatch --container-image` batch container.
//
// The batch script runs in the image (pyxis's behaviour), where Slurm's clients are not: an
// `srun` in the script would be "not found", or an image's own srun of another release. So the
// batch step's container gets `berth-slurm-client` (a static program, runnable in any image)
// bound at /usr/local/bin/srun and the other names below; it hands its argv, environment,
// working directory and standard descriptors over a unix socket to an agent the plugin left
// on the host (forked from the batch task before it joined the container), which runs the
// host's own client with them and returns its exit status. Signals the client gets (SIGINT,
// SIGTERM, ...) are passed on. The inner `srun` thus is the cluster's own, and its steps take
// the image from the batch job's options (Slurm hands sbatch's SPANK options to every srun in
// the job through the environment), so they run in the same image.
//
// The wire format, one request per connection: the client sends an 8-byte length (with fds 0,
// 1 and 2 as SCM_RIGHTS), then that many bytes of NUL-terminated strings: the tool's name, the
// working directory, argc, argv[0..argc), then the environment. While the tool runs, each
// byte the client sends is a signal number to deliver to it; at its end the agent sends its
// status as a 4-byte int (the exit code, or 128 + the signal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace berth::slurm {

/// Slurm's clients the batch container reaches on the host (bound at /usr/local/bin/NAME).
inline constexpr std::string_view kHostTools[] = {"srun",   "sbatch", "scancel",
                                                  "squeue", "sinfo",  "scontrol"};

/// The variable naming the agent's socket, in the batch script's environment.
inline constexpr const char* kAgentEnv = "BERTH_SLURM_AGENT";

/// The client's file name, beside the berth binary.
inline constexpr const char* kClientName = "berth-slurm-client";

/// The status the agent answers a connection from another user with (never a tool's status).
inline constexpr int32_t kRefusedStatus = -13;

/// The largest request the agent reads (argv and environment).
inline constexpr size_t kMaxRequest = 4U << 20;

/// Whether `name` is one of kHostTools.
inline bool is_host_tool(std::string_view name) {
  for (std::string_view t : kHostTools)
    if (t == name) return true;
  return false;
}

}  // namespace berth::slurm

// Running `berth` from the plugin: as the job's user when the caller is root (slurmstepd,
// slurmd), with stdin on /dev/null, nothing else of the caller's open, and its output in
// memory files (never pipes: `run -d` leaves a monitor behind that would hold them). Every
// command is `berth --error-format=json ARGS`: a failure is read back as Berth's JSON error
// object (berth_output.h), its code told apart from the words; the arguments themselves end
// their options with "--" before any name or image the plugin passes.
#pragma once

#include <string>
#include <vector>

#include "slurm/berth_output.h"
#include "slurm/options.h"

namespace berth::slurm {

/// The outcome of one `berth` command.
struct Ran {
  int status = -1;  ///< exit status (128 + the signal that killed it), -1 when it did not end
  std::string out;  ///< stdout
  std::string err;  ///< stderr

  /// Its error, as it printed it (parse_berth_error).
  BerthError error() const { return parse_berth_error(err); }
  /// Its error's message, or, when it printed none, what became of it ("exit status N").
  Problem problem() const;
};

/// Runs `berth ARGS` with `env`, as `drop`'s user when given, and waits for it. With
/// `keep_err`, the stderr file stays open for the caller (who closes it).
Ran run_berth(const std::vector<std::string>& args, const std::vector<std::string>& env,
              const StepIds* drop, int* keep_err = nullptr);

/// Starts `berth ARGS` out of the step's process tree (setsid and a double fork), as `drop`'s
/// user when given; its stderr goes to `err_fd`. Returns its pid, or 0. Out of the tree
/// because slurmstepd's process tracking kills every process of the step at its end, the
/// plugin's own clean-up included, and because the task's command must not inherit it as a
/// child. With `status_fd`, a waiter (the berth process's parent, out of the tree too) writes
/// its exit status there (an int) when it ends. Its stdout is `out_fd` (-1: /dev/null).
long spawn_detached(const std::vector<std::string>& args, const std::vector<std::string>& env,
                    const StepIds* drop, int err_fd, int status_fd = -1, int out_fd = -1);

/// Runs `berth ARGS` with spawn_detached and waits up to `seconds` for its exit status
/// (status -1 and a Problem saying so when it is not done by then).
Ran run_berth_detached(const std::vector<std::string>& args, const std::vector<std::string>& env,
                       const StepIds* drop, int seconds);

/// `berth inspect --type=container -- NAME`: the container's facts, or `*absent` (when given)
/// set for no such container, else a Problem (Berth's message).
Problem inspect_container(const std::string& name, const std::vector<std::string>& env,
                          ContainerFacts* out, bool* absent = nullptr);

/// A memory file for a child's output, at descriptor 3 or above: slurmd's epilog runs with 0-2
/// closed, and a descriptor there would be overwritten by the child's own dup2 onto 0-2.
int output_file(const char* name);

/// pipe2(O_CLOEXEC) with both ends at 3 or above (see output_file).
int high_pipe(int fds[2]);

/// Reads a whole (small) file from the start of `fd`.
std::string read_all(int fd);

}  // namespace berth::slurm

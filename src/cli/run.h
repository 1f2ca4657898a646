// The run itself, shared by `berth run` and `berth start` (which runs a container's recorded
// command again, detached).
#pragma once

#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/policy.h"
#include "runtime/container_config.h"

namespace berth::cli {

/// How `do_run` runs: in the foreground, or detached printing the container ID (`run -d`) or
/// not (`start`).
enum class Detach { kNo, kYes, kQuietly };

/// What `run` takes beyond the run options.
struct RunExtras {
  std::string pull = "missing";  ///< --pull: always | missing | never (container_target.h)
};

/// Runs `rest` (IMAGE|CONTAINER|DIR [COMMAND...]) with `opts`; detached: under a monitor, the
/// caller returning at once (runtime/monitor.h), and the monitor returning once the run ended,
/// with `*monitor` set.
Status do_run(const GlobalOptions& g, RunOptions opts, const GivenOptions& given,
              const std::string& name, bool remove, bool writable, const std::string& engine,
              std::vector<std::string> rest, Detach detach, bool* monitor = nullptr,
              const RunExtras& extras = {});

}  // namespace berth::cli

// What the Slurm plugin reads from the `berth` commands it runs: their JSON, never their text
// for people. A container is `berth inspect --type=container -- NAME`'s document, the
// containers of the user's store `berth ps --json`'s array, and a failure the JSON error
// object `berth --error-format=json` prints on stderr instead of its "berth: error:" line
// (docs/slurm.md). Pure: no Slurm header, no Berth library, unit-tested without a cluster.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "slurm/options.h"

namespace berth::slurm {

/// A container's state, as `berth inspect` says it ("status").
enum class ContainerStatus { kCreated, kRunning, kExited };

/// The facts of one container the plugin acts on.
struct ContainerFacts {
  ContainerStatus status = ContainerStatus::kCreated;
  long pid = 0;         ///< its workload's pid (the holder), 0 when not running
  std::string rootfs;   ///< its root directory
  std::string workdir;  ///< the image config's WorkingDir, "" when it has none
  std::string error;    ///< why its last detached run failed in Berth, "" when it did not
};

/// Parses `berth inspect --type=container`'s document.
Problem parse_container(std::string_view json, ContainerFacts* out);

/// The names of the containers in `berth ps --json`'s array (each container's first name).
Problem parse_container_names(std::string_view json, std::vector<std::string>* out);

/// A failed `berth` command's error, from its stderr.
struct BerthError {
  std::string message;  ///< one line, without "berth: error: "
  std::string code;     ///< Berth's error code ("not_found", ...; core/error.h), "" unknown
};

/// The error a failed `berth --error-format=json` command printed: the last line of `stderr`
/// that is a JSON error object. A berth that could say nothing (killed, or not executed at all)
/// leaves none: then the last line that is not empty, as it is, and no code.
BerthError parse_berth_error(std::string_view stderr_text);

}  // namespace berth::slurm

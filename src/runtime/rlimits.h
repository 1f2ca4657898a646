// The workload's resource limits (`--ulimit`): checked against the caller's before anything
// starts, set in the workload's own process just before exec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"

namespace berth {

/// "unlimited" for RLIM_INFINITY, else the number.
std::string rlimit_text(uint64_t value);

/// Whether this process may start a workload with `limit`: rootless, a hard limit cannot be
/// raised above the caller's own. A one-line error naming both when it cannot.
Status check_ulimit(const ResourceLimit& limit);

/// Sets `limits` in this process (async-signal-safe: for the child between fork and exec):
/// 0, or the errno of the first that failed.
int apply_rlimits(const std::vector<ResourceLimit>& limits);

}  // namespace berth

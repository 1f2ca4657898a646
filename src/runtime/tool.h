// Finding the host tool an engine runs (proot, runc, apptainer): an environment override, then
// PATH, then the sbin folders, with a one-line error naming the Debian package to install.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace berth {

/// Finds a tool: $`env_var` when set (must be executable), else `name` in $PATH, then in
/// /usr/sbin and /sbin. Fails with "NAME is not installed" and a hint naming `package`.
Result<std::string> find_tool(const char* name, const char* env_var, const char* package);

/// A colon-separated list (PATH, LD_LIBRARY_PATH) as its entries, empty ones kept.
std::vector<std::string> split_path(std::string_view list);

}  // namespace berth

// Asking the host's libcuda which CUDA version its driver supports, without loading it into
// Berth's own process.
#pragma once

#include <string>

#include "devices/version.h"

namespace berth {

/// Asks cuDriverGetVersion of the libcuda at `host_path` in a forked child, so a
/// library that lacks the symbol, crashes or hangs (5 s) cannot harm Berth, and
/// nothing from it stays loaded in Berth's own process. Unknown on any failure;
/// `note` says why.
Version probe_cuda_driver_version(const std::string& host_path, std::string* note);

}  // namespace berth

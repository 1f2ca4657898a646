// The one library search order every engine gives a workload: Berth's injected driver folders
// first, then the image's own LD_LIBRARY_PATH. A library the image ships (an old libcuda, a
// stub) must never win over the host driver's, whose kernel module it has to match; CUDA's
// forward-compatibility libraries are chosen by links inside Berth's own folders instead.
#pragma once

#include <string>
#include <vector>

#include "runtime/container_spec.h"

namespace berth {

/// Puts `dirs` at the front of LD_LIBRARY_PATH in `env` (set when missing), each once: an
/// entry equal to one of them further back is dropped, so that a second call changes nothing.
void put_library_dirs_first(std::vector<std::string>& env, const std::vector<std::string>& dirs);

/// spec.env with spec.ld_library_dirs put first in LD_LIBRARY_PATH (put_library_dirs_first()),
/// for engines that do not regenerate the loader cache.
std::vector<std::string> env_with_library_dirs(const ContainerSpec& spec);

}  // namespace berth

// Facts fixed when Berth was configured: its version, the git commit it was built from and the
// Slurm release its plugin was built for. Defined in the build folder's build_info.cc (made
// from src/build_info.cc.in), which berth and berthd link.
#pragma once

namespace berth::build_info {

/// The project's version (CMakeLists.txt's project()).
extern const char* const kVersion;
/// The git commit built (12 hex digits, "-dirty" where the packaging says so); "unknown"
/// when the source is not a git checkout and no -DBERTH_GIT_COMMIT was given.
extern const char* const kGitCommit;
/// The Slurm release of the headers the plugin was built against (slurm_version.h, e.g.
/// "22.05.8"); empty when the plugin was not built.
extern const char* const kSlurmRelease;

}  // namespace berth::build_info

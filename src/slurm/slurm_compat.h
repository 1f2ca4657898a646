// What Slurm's C API changed between the releases the plugin is built against (22.05, the
// host's Debian 12, to 24.11, Debian 13's): one name per changed type, chosen by the release
// of the header at hand (slurm/slurm_version.h). The plugin must be built against the release
// that loads it (Slurm checks major.minor), so the choice is made at compile time.
#pragma once

extern "C" {
#include <slurm/slurm.h>
}

namespace berth::slurm {

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
/// A hostlist handle: since 23.11 `hostlist_t` is the struct and the slurm_hostlist_*
/// functions take and return `hostlist_t *`.
using Hostlist = hostlist_t*;
#else
/// A hostlist handle: before 23.11 `hostlist_t` was the pointer (`struct hostlist *`).
using Hostlist = hostlist_t;
#endif

}  // namespace berth::slurm

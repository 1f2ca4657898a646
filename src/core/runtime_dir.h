// The user's runtime folder: where Berth keeps what lives for a boot, not in the store (the
// squashfs mounts and their daemons' locks, the subordinate-ID holder's pid file).
//
// Chosen in this order: $BERTH_RUNTIME_DIR as it is; SITE/berth-UID when the site policy names
// a runtime_dir; $XDG_RUNTIME_DIR/berth where that folder exists (systemd's per-user /run/user/UID,
// which no other user can take); /tmp/berth-UID. The last two are names another user can make
// first in a shared folder: when the one chosen belongs to someone else, Berth says so once and
// uses a private folder under the user's cache instead ($XDG_CACHE_HOME or ~/.cache,
// berth/run-HOST: a home shared between nodes gets one per node).
#pragma once

#include <string>

#include "core/error.h"

namespace berth {

/// The folder chosen, without making it. A shared-folder name that exists and is not the user's
/// own folder is passed over for the private one, with one warning per process.
std::string runtime_dir_path(const std::string& site_runtime_dir = "");

/// runtime_dir_path(), made a 0700 folder of the user's when missing; an error when it is not
/// the user's folder (only $BERTH_RUNTIME_DIR or the private fallback can then be wrong).
Result<std::string> make_runtime_dir(Op op, const std::string& site_runtime_dir = "");

}  // namespace berth

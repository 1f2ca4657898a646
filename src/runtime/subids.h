// The subordinate-ID mode of the userns engine (root emulation "subids"): Podman's full mapping.
//
// Where the user has ranges in /etc/subuid and /etc/subgid and Debian's newuidmap/newgidmap
// (package uidmap) are installed, a run maps root inside to the user and IDs 1..N to the
// user's subordinate range, so that _apt, man or bob are real, distinct IDs and set*id,
// setgroups and chown do what they say.
//
// Only the setuid helpers may write a map of more than one line, from outside, and they cost
// about 3.6 ms per call pair: more than a whole run. So the helpers run once per user: a
// holder process (as Podman's pause process) owns one user namespace with the full mapping and
// sleeps; its pid and start time are in a pid file under the user's runtime folder. Each run
// opens /proc/PID/ns/user, checks that it is still that process's and the user's, setns()es into
// it and unshares its own mount (PID, UTS, network) namespaces there. A holder that is gone
// (reboot, killed) is made again, under a lock, by the first run that misses it.
//
// Files that IDs other than root write inside belong on the host to subordinate IDs: the user
// cannot read or remove them from outside. remove_tree_mapped() and in_subid_namespace() do such
// walks in a child that joined the holder's namespace, where root holds every capability over
// every mapped ID.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/fs.h"

namespace berth {

/// One subordinate range: IDs start..start+count-1 on the host.
struct SubidRange {
  uint64_t start = 0;
  uint64_t count = 0;
  bool operator==(const SubidRange&) const = default;
};

/// The first range of the user named `name` or numbered `id` in `text`, which has the
/// /etc/subuid format ("NAME:START:COUNT" lines, '#' comments); nullopt when none (or a count
/// of 0). `name` may be empty when unknown.
std::optional<SubidRange> find_subid_range(std::string_view text, std::string_view name,
                                           unsigned long id);

/// newuidmap's (newgidmap's) arguments after the helper's path for process `pid`: root inside
/// is `outer` (the user), 1..count the range.
std::vector<std::string> subid_map_args(pid_t pid, unsigned long outer, const SubidRange& r);

/// What the mode needs, found on this host.
struct SubidSetup {
  std::string newuidmap, newgidmap;
  SubidRange uids, gids;
};

/// Whether the caller can use the mode: not root, newuidmap and newgidmap installed
/// ($BERTH_NEWUIDMAP, $BERTH_NEWGIDMAP override them), a range in /etc/subuid and /etc/subgid
/// ($BERTH_SUBUID, $BERTH_SUBGID name other files, for tests). The error says what is missing.
Result<SubidSetup> subid_setup();

/// Where subid_state_dir() is, without making or checking it.
std::string subid_state_path();

/// The folder of the holder's pid file and lock: the user's runtime folder without the site's
/// runtime_dir (core/runtime_dir.h), made a 0700 folder of the user's.
Result<std::string> subid_state_dir();

/// The user namespace of this user's live holder in `dir`, or an invalid fd when none lives
/// there now: the per-run path (a read of the pid file, an open, an ioctl, a read of its stat).
UniqueFd live_subid_namespace(const std::string& dir);

/// The holder's user namespace: the live one, or one started now (under the lock in `dir`).
Result<UniqueFd> subid_namespace(const std::string& dir, const SubidSetup& setup);

/// The holder's process id when one lives in `dir`; 0 otherwise.
pid_t live_subid_holder(const std::string& dir);

/// For callers that can go on without the mode (auto): the holder's namespace when the mode is
/// available (starting the holder when needed), else an invalid fd. A holder that cannot be
/// started is a warning, once: the reason goes to subids.failed in the runtime folder, and
/// auto does not try again while that file is there (a successful start removes it).
UniqueFd subid_namespace_if_available();

/// Why the last start of a holder in `dir` failed (subids.failed), if it did.
std::optional<std::string> subid_start_failure(const std::string& dir);

/// The holder's namespace for a run that asked for the mode: live, or started now; the error
/// says why the mode is not available.
Result<UniqueFd> required_subid_namespace();

/// Runs `fn` in a child process that joined the user namespace `userns` (as root there, with
/// every capability over every mapped ID) and returns its Status. `fn` runs in a forked copy of
/// this process: what it changes in memory stays there.
Status in_subid_namespace(int userns, const std::function<Status()>& fn);

/// remove_tree(path); when that is refused (files of subordinate IDs, their 0700 folders, a
/// sticky /tmp) and the mode is available, the same again inside the holder's namespace.
Status remove_tree_mapped(const std::string& path);

/// Runs `fn` inside the holder's namespace when the mode is available, else here: the walks
/// that read a container's whole tree (export, squash, commit, clone).
Status run_mapped(const std::function<Status()>& fn);

}  // namespace berth

// One shared, reference-counted FUSE mount per squashfs image per node.
//
// Why shared: starting one FUSE daemon per container costs ~14x a directory start at
// 32 concurrent starts; one mount shared by all of them costs ~1.0-1.3x (FIELD-NOTES).
// Mounting inside each container's user namespace (enroot's way) would tie the daemon's
// lifetime to the container for free, but gives no sharing: a FUSE mount made inside a user
// namespace is visible only to that namespace's processes.
//
// Layout, under the runtime directory (core/runtime_dir.h's make_runtime_dir()), per image file
// version:
//   squashfs/<key>/create.lock  held exclusively while a start checks for a mount and makes one
//   squashfs/<key>/users.lock   each container holds it shared for its whole life
//   squashfs/<key>/mnt          the FUSE mount, in the host's mount namespace, read-only
//   squashfs/<key>/scratch      an empty directory each container mounts its own tmpfs on, in
//                               its own mount namespace (the overlay's upper and work)
//   squashfs/<key>/daemon.log   the daemon's messages, for the error when it fails
//
// Lifetime. The first start (holding create.lock, and users.lock shared) forks a keeper: a
// detached copy of berth (new session) that starts berth-squashfs (site/squashfs_fuse/main.cc,
// Berth's FUSE file system for squashfs images) in the foreground with
// PR_SET_PDEATHSIG=SIGTERM, waits for the mount, tells the start it is ready, and then blocks
// taking users.lock exclusively. It gets the lock when no container holds it any more
// -- each holder is a `berth run` process, whose workload dies with it (PR_SET_PDEATHSIG) --
// and then stops the daemon with SIGTERM, on which it unmounts (libfuse runs fusermount3 -u -z)
// and exits. When every Berth process is killed (SIGKILL included), the keeper's death sends
// the daemon the same SIGTERM: nothing is left mounted and no daemon is left.
// fusermount3's own `-o auto_unmount` is not used: Debian 12's fusermount3 (3.14) opens the
// mount point as root to decide whether to unmount, which FUSE refuses without allow_other
// (EACCES), so it never unmounts. A daemon killed by SIGKILL leaves a dead mount (ENOTCONN):
// its keeper notices (SIGCHLD), and the next start unmounts it before mounting again.
//
// A keeper only ever unmounts its own mount (same device number) or a dead one, so a keeper
// that outlives its daemon cannot take down a successor's mount.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/error.h"
#include "core/fs.h"
#include "site/squashfs.h"

namespace berth {

/// Where the daemon and its helper live.
struct SquashfsTools {
  std::string daemon;      ///< berth-squashfs (site/squashfs_fuse/main.cc)
  std::string fusermount;  ///< fusermount3, for unmounting a dead mount
};

/// Finds berth-squashfs beside the berth binary (or in ../lib/berth; $BERTH_SQUASHFS_DAEMON
/// names it explicitly) and fusermount3 on PATH; one line saying what is missing.
Result<SquashfsTools> find_squashfs_tools();

/// A container's hold on a shared mount: the mount stays while this object lives (or the
/// process holding it does).
struct SquashfsMount {
  std::string root;      ///< the mounted image (read-only, in the host's mount namespace)
  std::string scratch;   ///< the directory for the container's own tmpfs (overlay upper)
  FileLock hold;         ///< users.lock, shared
  bool started = false;  ///< this start mounted it (false: it joined an existing mount)
};

/// Joins the mount of `image` under `base` (make_runtime_dir()/squashfs), mounting it first when
/// there is none; the tools (find_squashfs_tools()) are looked for only then, not on every
/// start that joins. On failure nothing is left mounted; the error is one line (the daemon's
/// own complaint included).
Result<SquashfsMount> acquire_squashfs_mount(const SquashfsFile& image, const std::string& base);

}  // namespace berth

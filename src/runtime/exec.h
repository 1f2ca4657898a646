// `berth exec`: a command run inside a running container of the userns engine, by joining its
// namespaces (setns) rather than through a daemon. Rootless works because the user who runs
// the container owns its user namespace: joining it gives this process the capabilities that
// joining its mount (and PID, UTS) namespaces needs.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"

namespace berth {

/// What to run, and where.
struct ExecSpec {
  pid_t target = 0;               ///< a process of the container (its workload or init)
  std::vector<std::string> argv;  ///< argv[0] looked up in the env's PATH when it has no '/'
  std::vector<std::string> env;   ///< "K=V", final
  std::string cwd = "/";          ///< inside the container
  bool stdin_open = false;        ///< -i: keep stdin (otherwise /dev/null)
  bool tty = false;               ///< -t: the caller's terminal, with the command in its foreground
  std::vector<int> kept_fds;      ///< descriptors above 2 the command inherits (runtime/launcher.h)
  /// -u of a user the container's namespace does not map (a rootless container maps one): the
  /// command gets a user namespace of its own inside the container's, whose single mapping
  /// ("UID INSIDE 1", "GID INSIDE 1") makes it that user. Empty: no such namespace.
  std::string nested_uid_map, nested_gid_map;
  /// -u of a user the container's namespace maps (subordinate IDs): set directly; -1: not set.
  long uid = -1, gid = -1;
};

/// The uid inside the container that the caller's uid maps to (its user namespace's single
/// mapping), or an error when `target`'s namespace cannot be read.
Result<uid_t> mapped_uid(pid_t target);
/// The same for the caller's gid (its gid_map).
Result<gid_t> mapped_gid(pid_t target);
/// Whether `target`'s user namespace has a mapping for `uid` (a uid inside it).
bool maps_uid(pid_t target, uid_t uid);

/// Whether `target` is in a user namespace other than the caller's (false for the engines
/// without namespaces, whose processes run in the caller's).
bool in_own_user_namespace(pid_t target);

/// The environment `target` started with (/proc/PID/environ).
Result<std::vector<std::string>> process_environment(pid_t target);

/// Runs `spec` in `target`'s namespaces and waits for it; signals are forwarded as `run` does.
RunOutcome exec_in_container(const ExecSpec& spec);

}  // namespace berth

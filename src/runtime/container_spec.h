// What one container run needs, fully resolved: the seam between the CLI
// (which merges image config, container record and command-line options into
// a ContainerSpec) and the engines (which only execute it).
//
// Nothing here touches the system; engines plan mounts from it (mount_plan.h)
// and apply the plan inside new namespaces.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/root_emulation.h"

namespace berth {

/// A bind mount from the host into the container (`-v HOST:CTR[:ro]`).
struct Volume {
  std::string host;       ///< absolute host path (file or directory)
  std::string container;  ///< absolute path inside the container
  bool read_only = false;
  unsigned long flags = 0;        ///< MS_NOSUID, MS_NODEV, MS_NOEXEC, set on the bind
  unsigned long propagation = 0;  ///< 0 (private), MS_SLAVE or MS_UNBINDABLE, | MS_REC: r-forms
};

/// An empty tmpfs in the container (`--tmpfs DST[:OPTIONS]`), mounted before the volumes so
/// that a volume may land inside it.
struct TmpfsMount {
  std::string container;    ///< absolute path inside the container
  unsigned long flags = 0;  ///< MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_RDONLY
  std::string data;         ///< size=, mode=, nr_inodes= ("mode=1777" when no mode is given)
  bool operator==(const TmpfsMount&) const = default;
};

/// A resource limit the workload starts with (`--ulimit NAME=SOFT[:HARD]`), set just before
/// exec; the engines' other processes keep the caller's.
struct ResourceLimit {
  std::string name;             ///< Docker's name: nofile, nproc, core, stack, memlock, ...
  int resource = 0;             ///< RLIMIT_*
  uint64_t soft = 0, hard = 0;  ///< RLIM_INFINITY for unlimited
  bool operator==(const ResourceLimit&) const = default;
};

/// One change a device layer (GPU injection, a CDI spec) makes to the container, applied in
/// order after the volumes. Targets are absolute container paths; a missing target is created
/// (as a directory when `is_dir`, else as a file).
struct DeviceEdit {
  enum class Kind {
    kTmpfs,    ///< an empty tmpfs at target (a scratch directory that vanishes with the run)
    kBind,     ///< bind host path `source` onto target
    kSymlink,  ///< create target as a symlink whose text is `source`
    kFile,     ///< write `source` as the content of a new file at target (under a kTmpfs)
  };
  Kind kind = Kind::kBind;
  std::string source;
  std::string target;
  bool read_only = true;  ///< kBind: remount read-only (kTmpfs: mode 0555 instead of 0755)
  bool is_dir = false;    ///< kBind: the source is a directory (recursive bind)
  bool required =
      true;  ///< false: skipped when it cannot be applied (e.g. /proc/driver on a fake host)
  /// kTmpfs: mount options ("mode=1777,size=64m") and flags (MS_NOSUID...) as a CDI tmpfs
  /// asks; empty: Berth's own scratch folder (mode 0555/0755 by read_only, nosuid, nodev).
  std::string tmpfs_data;
  unsigned long tmpfs_flags = 0;

  bool operator==(const DeviceEdit&) const = default;
};

/// Where Berth's per-run scratch tmpfs goes in a container that gets device edits: injected
/// libraries (kGpuLibDir is beneath it), the generated ld.so.conf and ld.so.cache.
inline constexpr const char* kBerthRunDir = "/usr/lib/berth";

/// Everything an engine needs to start the workload.
struct ContainerSpec {
  std::string rootfs;  ///< absolute host path of the container's root filesystem
  std::vector<std::string>
      argv;  ///< argv[0] is looked up in the container's PATH when it has no '/'
  std::vector<std::string> env;  ///< "K=V", final (image Env + -e + --env-file + --hostenv)
  std::string cwd = "/";         ///< absolute, inside the container
  uid_t uid = 0;                 ///< identity inside the container
  gid_t gid = 0;
  std::vector<gid_t> extra_gids;  ///< supplementary groups inside (mapped ones only)
  std::string user_name;          ///< name for the /etc/passwd entry ("root" for 0)
  std::string home;               ///< HOME inside the container
  /// The root's /etc/passwd and /etc/group as the caller read them to resolve the user; the
  /// engine's identity step works from these instead of reading them again. Unset: it reads.
  std::optional<std::string> passwd, group;
  std::string hostname;           ///< empty: keep the host's (no UTS namespace)
  std::vector<Volume> volumes;    ///< user volumes, in command-line order (incl. --bind-home)
  std::vector<TmpfsMount> tmpfs;  ///< --tmpfs, in command-line order
  bool stdin_open = false;        ///< -i: keep stdin attached (otherwise /dev/null)
  bool tty = false;               ///< -t: the caller's terminal is passed through
  bool pid_namespace = false;     ///< --pid: new PID namespace with a minimal init
  /// Nothing is left to do once the workload runs (a directory run: no record, no --rm, no mount
  /// to hold): the userns engine makes the namespaces in this process and becomes the workload,
  /// as ch-run does, instead of cloning a child and waiting for it. A run that needs a process
  /// outside the container (a PID namespace's init, the subordinate-ID mode's join) still
  /// clones, and so does a process with threads (unshare refuses it).
  bool exec_in_place = false;
  bool host_dev = false;               ///< bind the host's /dev instead of a minimal one
  bool network_none = false;           ///< --network none: a network namespace with only lo
  bool ipc_namespace = false;          ///< --ipc private: SysV IPC and POSIX queues of its own
  bool no_new_privileges = false;      ///< --security-opt no-new-privileges: PR_SET_NO_NEW_PRIVS
  std::vector<ResourceLimit> rlimits;  ///< --ulimit, set in the workload before exec
  /// The userns engine's root emulation (runtime/root_emulation.h): the user's subordinate IDs
  /// mapped (runtime/subids.h) or a seccomp filter that makes set*id, setgroups, chown and
  /// device mknod succeed without effect, so that package managers work. --root-emulation or
  /// the policy's root_emulation; auto picks subids where available, else seccomp.
  RootEmulation root_emulation = RootEmulation::kAuto;
  bool writable_rootfs = true;  ///< the container's root is writable (it is a private copy)
  /// Not empty for a squashfs image (site/squashfs_mount.h): `rootfs` is then a read-only
  /// FUSE mount shared with other containers, and the userns engine stacks a kernel overlayfs
  /// over it in the new mount namespace, its upper and work directories on a tmpfs it mounts
  /// at this (empty) host directory. Mount targets and Berth's /etc/passwd and /etc/group
  /// lines go to the upper; with writable_rootfs false the root is made read-only once the
  /// plan is applied. Everything written is discarded with the namespace.
  std::string overlay_scratch;
  /// With overlay_scratch and a read-only root: the overlay exists only to take writes (mount
  /// targets the image lacks, Berth's /etc/passwd and /etc/group lines). When the image has
  /// every target, the lines and the working directory already, the engine binds `rootfs`
  /// read-only instead: no tmpfs, no overlay, no copy-up through FUSE.
  bool overlay_only_for_writes = false;
  /// Device layers' edits (GPU injection, CDI), applied after the volumes, in order.
  std::vector<DeviceEdit> device_edits;
  /// Library directories the container's loader must search. When not empty the engine runs
  /// the image's ldconfig (`ldconfig_path`) before the workload with a generated configuration
  /// (/etc/ld.so.conf plus these) and output in kBerthRunDir, and binds that cache over
  /// /etc/ld.so.cache for this run only: nothing is written to the image.
  std::vector<std::string> ld_library_dirs;
  std::string ldconfig_path = "/sbin/ldconfig";
  /// Descriptors above 2 the workload inherits (PMI_FD, --preserve-fds; runtime/launcher.h),
  /// sorted; every other one is closed at exec.
  std::vector<int> kept_fds;
};

/// How a run ended, for `berth run` to turn into its exit status.
struct RunOutcome {
  /// The workload's exit status, 128+N when killed by signal N; 125 when
  /// Berth failed, 126 when the command could not be executed, 127 when it
  /// was not found (Docker's conventions).
  int exit_code = 0;
  /// Set when exit_code is 125/126/127 because of Berth or exec: the one line
  /// to print. Empty when the workload itself ran and exited.
  std::optional<Error> error;
};

/// Whether unprivileged user namespaces can be used here; on failure the
/// error is one line saying why and what to do (sysctl names, fallback engines).
Status probe_user_namespaces();

/// Runs `spec` in a new user + mount namespace, rootless, and waits for it.
/// Forwards SIGTERM, SIGINT, SIGHUP (and SIGQUIT, SIGUSR1, SIGUSR2) to the workload.
RunOutcome run_userns(const ContainerSpec& spec);

}  // namespace berth

// MountPlan: every mount, device node and link a container needs, computed
// as a pure function of the ContainerSpec and what exists on the host.
//
// Nothing here touches the system: tests inspect the plan without
// privileges, and one function (mount_apply.h) applies it inside the new
// namespaces. Default mounts come from a table, each marked required or
// optional; an optional one that fails at apply time is skipped.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"

namespace berth {

/// What a host path is, as far as the plan cares.
enum class HostPathKind { kMissing, kDirectory, kFile };

/// What exists on the host; filled by probe_host() or by tests.
struct HostInfo {
  /// Host paths the plan consults (device nodes, /etc/resolv.conf, volume
  /// sources), with their kind; a path not listed counts as missing.
  std::map<std::string, HostPathKind> paths;

  /// The kind of `path`, kMissing when unknown.
  HostPathKind kind(const std::string& path) const;
};

/// Stats the host paths that plan_mounts() will ask about for `spec`.
HostInfo probe_host(const ContainerSpec& spec);

/// What one plan entry does.
enum class MountKind {
  kBind,       ///< bind `source` (host path) onto target
  kRbind,      ///< recursive bind, submounts included
  kFs,         ///< a new file system instance: `fstype` with `data`
  kSymlink,    ///< create target as a symlink to `source` (no mount)
  kWriteFile,  ///< create target as a new file holding `data` (inside a tmpfs the plan mounted)
};

/// What a missing target is created as.
enum class TargetKind { kDirectory, kFile };

/// One step of the plan; applied in order.
struct MountEntry {
  MountKind kind = MountKind::kBind;
  std::string source;       ///< host path (binds), fs source name (kFs), link text (kSymlink)
  std::string target;       ///< absolute path inside the container, normalised
  std::string fstype;       ///< kFs only: "proc", "tmpfs", "devpts"
  unsigned long flags = 0;  ///< MS_NOSUID, MS_NODEV, MS_NOEXEC ... (binds: set after the bind)
  /// Binds: the propagation set after the bind (MS_SLAVE, MS_UNBINDABLE, MS_PRIVATE, with
  /// MS_REC for a whole tree); 0 keeps what the bind got.
  unsigned long propagation = 0;
  std::string data;  ///< kFs only: mount options ("mode=755")
  TargetKind target_kind = TargetKind::kDirectory;
  bool read_only = false;  ///< remounted read-only after the bind (locked flags kept)
  bool required = true;    ///< a failure aborts the run; otherwise the entry is skipped
  /// Binds only: `source` is a path inside the container, resolved beneath its root (a
  /// file Berth wrote into its run directory), not a host path.
  bool source_in_root = false;

  bool operator==(const MountEntry&) const = default;
};

/// A tmpfs the plan mounts: empty, Berth's own, and beyond the image's reach.
inline bool is_tmpfs_mount(const MountEntry& e) {
  return e.kind == MountKind::kFs && e.fstype == "tmpfs";
}

struct MountPlan {
  std::vector<MountEntry> entries;
  /// A volume asked for slave propagation (-v ...:rslave): the container's mounts start as
  /// slaves of the host's rather than private (still nothing propagates to the host), and
  /// every other bind is made private after it is bound.
  bool slave_root = false;
};

/// Normalises an absolute container path ("/a//b/./c/" -> "/a/b/c"); fails
/// when it is relative or has a ".." component (it could leave the root).
Result<std::string> normalize_container_path(const std::string& path);

/// The configuration Berth's ldconfig run reads, and the cache it writes (kBerthRunDir).
inline constexpr const char* kBerthLdConf = "/usr/lib/berth/ld.so.conf";
inline constexpr const char* kBerthLdCache = "/usr/lib/berth/ld.so.cache";

/// Computes the mounts for `spec`: /proc, /dev, /sys, /tmp, resolv.conf and
/// hosts from the default table, then the user volumes in order.
Result<MountPlan> plan_mounts(const ContainerSpec& spec, const HostInfo& host);

/// Appends the spec's device edits to `plan` (the userns engine; fallback engines
/// translate them their own way, see engines.h device_binds()): a tmpfs on
/// kBerthRunDir first when any edit needs it, generated files written there
/// and bound from there when their target lies elsewhere.
Status plan_device_edits(const ContainerSpec& spec, MountPlan& plan);

}  // namespace berth

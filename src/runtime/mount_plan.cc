#include "runtime/mount_plan.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <string_view>

#include "core/strings.h"

namespace berth {

HostPathKind HostInfo::kind(const std::string& path) const {
  auto it = paths.find(path);
  return it == paths.end() ? HostPathKind::kMissing : it->second;
}

namespace {

/// When a default mount applies.
enum class When {
  kAlways,
  kPidNs,
  kNoPidNs,
  kMinimalDev,       ///< Berth's own small /dev (no --host-dev)
  kMinimalDevNoTty,  ///< ... without -t
  kMinimalDevTty,    ///< ... with -t
  kHostDev,
  kNetNs,  ///< --network none: a network namespace of the container's own
};

/// One row of the default-mount table.
struct DefaultMount {
  const char* target;
  MountKind kind;
  const char* source;  // host path for binds, fs source for kFs, link text for symlinks
  const char* fstype;
  unsigned long flags;
  const char* data;
  TargetKind target_kind;
  bool read_only;
  bool required;
  When when;
};

constexpr unsigned long kNoSuidDevExec = MS_NOSUID | MS_NODEV | MS_NOEXEC;
constexpr auto kDir = TargetKind::kDirectory;
constexpr auto kFile = TargetKind::kFile;

// The default mounts, in the order they are applied. A bind whose host source
// is missing is left out when optional and refused when required.
// clang-format off
constexpr DefaultMount kDefaults[] = {
  // target             kind                source              fstype    flags                       data                                        target ro     required when
  {"/proc",             MountKind::kFs,      "proc",            "proc",   kNoSuidDevExec,             "",                                         kDir,  false, true,  When::kPidNs},
  {"/proc",             MountKind::kRbind,   "/proc",           "",       0,                          "",                                         kDir,  false, true,  When::kNoPidNs},
  {"/dev",              MountKind::kRbind,   "/dev",            "",       0,                          "",                                         kDir,  false, true,  When::kHostDev},
  {"/dev",              MountKind::kFs,      "tmpfs",           "tmpfs",  MS_NOSUID | MS_STRICTATIME, "mode=755,size=65536k",                     kDir,  false, true,  When::kMinimalDev},
  {"/dev/null",         MountKind::kBind,    "/dev/null",       "",       0,                          "",                                         kFile, false, true,  When::kMinimalDev},
  {"/dev/zero",         MountKind::kBind,    "/dev/zero",       "",       0,                          "",                                         kFile, false, false, When::kMinimalDev},
  {"/dev/full",         MountKind::kBind,    "/dev/full",       "",       0,                          "",                                         kFile, false, false, When::kMinimalDev},
  {"/dev/random",       MountKind::kBind,    "/dev/random",     "",       0,                          "",                                         kFile, false, false, When::kMinimalDev},
  {"/dev/urandom",      MountKind::kBind,    "/dev/urandom",    "",       0,                          "",                                         kFile, false, false, When::kMinimalDev},
  {"/dev/tty",          MountKind::kBind,    "/dev/tty",        "",       0,                          "",                                         kFile, false, false, When::kMinimalDev},
  {"/dev/pts",          MountKind::kFs,      "devpts",          "devpts", MS_NOSUID | MS_NOEXEC,      "newinstance,ptmxmode=0666,mode=0620",      kDir,  false, false, When::kMinimalDevNoTty},
  {"/dev/ptmx",         MountKind::kSymlink, "pts/ptmx",        "",       0,                          "",                                         kFile, false, false, When::kMinimalDevNoTty},
  // -t hands the caller's terminal over: it is a pty of the host's devpts, which `tty` (ttyname)
  // must find under /dev/pts, so the host's instance is bound instead of a new one (as enroot
  // always does); ptmx then allocates there too.
  {"/dev/pts",          MountKind::kRbind,   "/dev/pts",        "",       0,                          "",                                         kDir,  false, false, When::kMinimalDevTty},
  {"/dev/ptmx",         MountKind::kBind,    "/dev/ptmx",       "",       0,                          "",                                         kFile, false, false, When::kMinimalDevTty},
  {"/dev/shm",          MountKind::kFs,      "shm",             "tmpfs",  kNoSuidDevExec,             "mode=1777,size=65536k",                    kDir,  false, false, When::kMinimalDev},
  {"/dev/fd",           MountKind::kSymlink, "/proc/self/fd",   "",       0,                          "",                                         kFile, false, false, When::kMinimalDev},
  {"/dev/stdin",        MountKind::kSymlink, "/proc/self/fd/0", "",       0,                          "",                                         kFile, false, false, When::kMinimalDev},
  {"/dev/stdout",       MountKind::kSymlink, "/proc/self/fd/1", "",       0,                          "",                                         kFile, false, false, When::kMinimalDev},
  {"/dev/stderr",       MountKind::kSymlink, "/proc/self/fd/2", "",       0,                          "",                                         kFile, false, false, When::kMinimalDev},
  {"/sys",              MountKind::kRbind,   "/sys",            "",       0,                          "",                                         kDir,  true,  false, When::kAlways},
  // In a network namespace of its own, a sysfs of that namespace over the host's, so that
  // /sys/class/net lists what `ip link` does (only lo); the host's cgroup tree again inside it.
  // Best effort: where the kernel refuses the mount, the host's /sys stays.
  {"/sys",              MountKind::kFs,      "sysfs",           "sysfs",  kNoSuidDevExec | MS_RDONLY, "",                                        kDir,  true,  false, When::kNetNs},
  {"/sys/fs/cgroup",    MountKind::kRbind,   "/sys/fs/cgroup",  "",       0,                          "",                                         kDir,  true,  false, When::kNetNs},
  {"/tmp",              MountKind::kFs,      "tmpfs",           "tmpfs",  MS_NOSUID | MS_NODEV,       "mode=1777",                                kDir,  false, true,  When::kAlways},
  {"/etc/resolv.conf",  MountKind::kBind,    "/etc/resolv.conf","",       0,                          "",                                         kFile, false, false, When::kAlways},
  {"/etc/hosts",        MountKind::kBind,    "/etc/hosts",      "",       0,                          "",                                         kFile, false, false, When::kAlways},
};
// clang-format on

bool applies(When when, const ContainerSpec& spec) {
  switch (when) {
    case When::kAlways:
      return true;
    case When::kPidNs:
      return spec.pid_namespace;
    case When::kNoPidNs:
      return !spec.pid_namespace;
    case When::kMinimalDev:
      return !spec.host_dev;
    case When::kMinimalDevNoTty:
      return !spec.host_dev && !spec.tty;
    case When::kMinimalDevTty:
      return !spec.host_dev && spec.tty;
    case When::kHostDev:
      return spec.host_dev;
    case When::kNetNs:
      return spec.network_none;
  }
  return false;
}

bool is_bind(MountKind k) {
  return k == MountKind::kBind || k == MountKind::kRbind;
}

}  // namespace

Result<std::string> normalize_container_path(const std::string& path) {
  if (path.empty() || path.front() != '/')
    return make_error("mount", path, "container path must be absolute");
  std::string out;
  for (std::string_view comp : split(path, '/')) {
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") return make_error("mount", path, "container path must not contain \"..\"");
    out += '/';
    out += comp;
  }
  if (out.empty()) out = "/";
  return out;
}

Status plan_device_edits(const ContainerSpec& spec, MountPlan& plan) {
  std::vector<MountEntry> out;
  std::vector<std::string> tmpfs_dirs;
  bool need_run_dir = !spec.ld_library_dirs.empty();
  int generated = 0;
  for (const DeviceEdit& d : spec.device_edits) {
    auto target = normalize_container_path(d.target);
    if (!target) return make_error("device edit", d.target, target.error().detail);
    if (*target == "/")
      return make_error("device edit", d.target, "cannot replace the container's root");
    if (d.kind == DeviceEdit::Kind::kTmpfs && *target == kBerthRunDir) {
      need_run_dir = true;  // mounted first, below, with the loader configuration in it
      continue;
    }
    MountEntry e;
    e.target = *target;
    e.required = d.required;
    switch (d.kind) {
      case DeviceEdit::Kind::kTmpfs:
        e.kind = MountKind::kFs;
        e.source = "tmpfs";
        e.fstype = "tmpfs";
        e.flags = MS_NOSUID | MS_NODEV;
        e.data = d.read_only ? "mode=555" : "mode=755";
        if (!d.tmpfs_data.empty()) {  // a CDI tmpfs: its options; "ro" remounts it read-only
          e.flags = d.tmpfs_flags & ~static_cast<unsigned long>(MS_RDONLY);
          e.data = d.tmpfs_data;
          e.read_only = d.read_only;
        }
        tmpfs_dirs.push_back(*target);
        break;
      case DeviceEdit::Kind::kBind:
        if (d.source.empty() || d.source.front() != '/')
          return make_error("device edit", d.source, "host path must be absolute");
        e.kind = d.is_dir ? MountKind::kRbind : MountKind::kBind;
        e.source = d.source;
        e.target_kind = d.is_dir ? kDir : kFile;
        e.read_only = d.read_only;
        break;
      case DeviceEdit::Kind::kSymlink:
        e.kind = MountKind::kSymlink;
        e.source = d.source;
        e.target_kind = kFile;
        break;
      case DeviceEdit::Kind::kFile: {
        bool in_tmpfs = is_at_or_under(*target, kBerthRunDir);
        for (const auto& t : tmpfs_dirs) in_tmpfs |= is_at_or_under(*target, t);
        e.kind = MountKind::kWriteFile;
        e.data = d.source;
        e.target_kind = kFile;
        if (!in_tmpfs) {
          // Written in the run directory, then bound read-only over the target.
          e.target = std::string(kBerthRunDir) + "/files/" + std::to_string(generated++);
          e.required = true;
          out.push_back(e);
          e = MountEntry{};
          e.kind = MountKind::kBind;
          e.source = std::string(kBerthRunDir) + "/files/" + std::to_string(generated - 1);
          e.source_in_root = true;
          e.target = *target;
          e.target_kind = kFile;
          e.read_only = true;
          e.required = d.required;
        }
        break;
      }
    }
    need_run_dir |= is_at_or_under(e.target, kBerthRunDir) || e.source_in_root;
    out.push_back(std::move(e));
  }
  if (!need_run_dir) {
    plan.entries.insert(plan.entries.end(), out.begin(), out.end());
    return {};
  }
  MountEntry run_dir;
  run_dir.kind = MountKind::kFs;
  run_dir.source = "tmpfs";
  run_dir.fstype = "tmpfs";
  run_dir.flags = MS_NOSUID | MS_NODEV;
  run_dir.data = "mode=755";
  run_dir.target = kBerthRunDir;
  plan.entries.push_back(std::move(run_dir));
  if (!spec.ld_library_dirs.empty()) {
    MountEntry conf;
    conf.kind = MountKind::kWriteFile;
    conf.target = kBerthLdConf;
    conf.target_kind = kFile;
    // The injected folders before the image's own configuration: ldconfig keeps, of two
    // libraries with one soname, the one of the folder it read first, and the host driver's
    // must win over an image's same-named copy (an old libcuda.so.1, a stub).
    for (const auto& dir : spec.ld_library_dirs) conf.data += dir + "\n";
    conf.data += "include /etc/ld.so.conf\n";
    plan.entries.push_back(std::move(conf));
  }
  plan.entries.insert(plan.entries.end(), out.begin(), out.end());
  return {};
}

Result<MountPlan> plan_mounts(const ContainerSpec& spec, const HostInfo& host) {
  MountPlan plan;
  for (const DefaultMount& d : kDefaults) {
    if (!applies(d.when, spec)) continue;
    if (is_bind(d.kind) && host.kind(d.source) == HostPathKind::kMissing) {
      if (d.required)
        return make_error("mount", d.target,
                          std::string("host path ") + d.source + " does not exist");
      continue;  // optional and absent on this host: the container goes without it
    }
    MountEntry e;
    e.kind = d.kind;
    e.source = d.source;
    e.target = d.target;
    e.fstype = d.fstype;
    e.flags = d.flags;
    e.data = d.data;
    e.target_kind = d.target_kind;
    e.read_only = d.read_only;
    e.required = d.required;
    plan.entries.push_back(std::move(e));
  }
  // --tmpfs before the volumes: a volume may go inside one, and a tmpfs's mount point made
  // inside a bound host folder would be left on the host.
  for (const TmpfsMount& t : spec.tmpfs) {
    std::string where = "tmpfs " + t.container;
    auto target = normalize_container_path(t.container);
    if (!target) return make_error("mount", where, target.error().detail);
    if (*target == "/") return make_error("mount", where, "cannot mount over the container's root");
    MountEntry e;
    e.kind = MountKind::kFs;
    e.source = "tmpfs";
    e.target = *target;
    e.fstype = "tmpfs";
    e.flags = t.flags;
    e.data = t.data;
    e.target_kind = kDir;
    e.required = true;
    plan.entries.push_back(std::move(e));
  }
  for (const Volume& v : spec.volumes) {
    std::string where = "volume " + v.host + ":" + v.container;
    if (v.host.empty() || v.host.front() != '/')
      return make_error("mount", where, "host path must be absolute");
    auto target = normalize_container_path(v.container);
    if (!target) return make_error("mount", where, target.error().detail);
    if (*target == "/") return make_error("mount", where, "cannot mount over the container's root");
    HostPathKind kind = host.kind(v.host);
    if (kind == HostPathKind::kMissing)
      return make_error("mount", where, "bind source path does not exist");
    MountEntry e;
    e.kind = MountKind::kRbind;
    e.source = v.host;
    e.target = *target;
    e.target_kind = kind == HostPathKind::kDirectory ? kDir : kFile;
    e.read_only = v.read_only;
    e.flags = v.flags;
    e.propagation = v.propagation;
    e.required = true;
    plan.entries.push_back(std::move(e));
    if (v.propagation & MS_SLAVE) plan.slave_root = true;
  }
  if (plan.slave_root) {
    for (MountEntry& e : plan.entries)
      if ((e.kind == MountKind::kBind || e.kind == MountKind::kRbind) && e.propagation == 0)
        e.propagation = MS_PRIVATE | MS_REC;
  }
  return plan;
}

HostInfo probe_host(const ContainerSpec& spec) {
  HostInfo info;
  auto add = [&info](const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return;  // missing or unreadable: the plan decides
    info.paths[path] = S_ISDIR(st.st_mode) ? HostPathKind::kDirectory : HostPathKind::kFile;
  };
  for (const DefaultMount& d : kDefaults) {
    if (is_bind(d.kind) && applies(d.when, spec)) add(d.source);
  }
  for (const Volume& v : spec.volumes) add(v.host);
  return info;
}

}  // namespace berth

#include "runtime/mount_plan.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

#include <string>
#include <vector>

namespace berth {
namespace {

/// A host with every device node, /proc, /sys, resolv.conf and hosts.
HostInfo full_host() {
  HostInfo h;
  for (const char* d : {"/proc", "/dev", "/sys"}) h.paths[d] = HostPathKind::kDirectory;
  for (const char* f : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                        "/dev/tty", "/etc/resolv.conf", "/etc/hosts"})
    h.paths[f] = HostPathKind::kFile;
  return h;
}

/// "KIND target" per entry, for order checks.
std::vector<std::string> summary(const MountPlan& p) {
  std::vector<std::string> out;
  for (const MountEntry& e : p.entries) {
    std::string k = e.kind == MountKind::kBind        ? "bind"
                    : e.kind == MountKind::kRbind     ? "rbind"
                    : e.kind == MountKind::kFs        ? e.fstype
                    : e.kind == MountKind::kWriteFile ? "file"
                                                      : "link";
    out.push_back(k + " " + e.target + (e.read_only ? " ro" : "") + (e.required ? "" : " opt"));
  }
  return out;
}

ContainerSpec base() {
  ContainerSpec s;
  s.rootfs = "/r";
  s.argv = {"true"};
  return s;
}

TEST(MountPlan, DefaultMountsInOrder) {
  auto p = plan_mounts(base(), full_host());
  ASSERT_TRUE(p) << p.error().message();
  std::vector<std::string> want = {
      "rbind /proc",           "tmpfs /dev",           "bind /dev/null",
      "bind /dev/zero opt",    "bind /dev/full opt",   "bind /dev/random opt",
      "bind /dev/urandom opt", "bind /dev/tty opt",    "devpts /dev/pts opt",
      "link /dev/ptmx opt",    "tmpfs /dev/shm opt",   "link /dev/fd opt",
      "link /dev/stdin opt",   "link /dev/stdout opt", "link /dev/stderr opt",
      "rbind /sys ro opt",     "tmpfs /tmp",           "bind /etc/resolv.conf opt",
      "bind /etc/hosts opt",
  };
  EXPECT_EQ(summary(*p), want);
  const MountEntry& ptmx = p->entries[9];
  EXPECT_EQ(ptmx.source, "pts/ptmx");
  const MountEntry& pts = p->entries[8];
  EXPECT_EQ(pts.data, "newinstance,ptmxmode=0666,mode=0620");
  EXPECT_EQ(p->entries[2].target_kind, TargetKind::kFile);
  EXPECT_EQ(p->entries[1].target_kind, TargetKind::kDirectory);
  EXPECT_EQ(p->entries[16].data, "mode=1777");
  EXPECT_EQ(p->entries[16].flags, static_cast<unsigned long>(MS_NOSUID | MS_NODEV));
}

TEST(MountPlan, PidNamespaceGetsItsOwnProc) {
  ContainerSpec s = base();
  s.pid_namespace = true;
  auto p = plan_mounts(s, full_host());
  ASSERT_TRUE(p);
  const MountEntry& proc = p->entries[0];
  EXPECT_EQ(proc.kind, MountKind::kFs);
  EXPECT_EQ(proc.fstype, "proc");
  EXPECT_EQ(proc.target, "/proc");
  EXPECT_EQ(proc.flags, static_cast<unsigned long>(MS_NOSUID | MS_NODEV | MS_NOEXEC));
  EXPECT_TRUE(proc.required);
}

TEST(MountPlan, HostDevReplacesMinimalDev) {
  ContainerSpec s = base();
  s.host_dev = true;
  auto p = plan_mounts(s, full_host());
  ASSERT_TRUE(p);
  std::vector<std::string> want = {"rbind /proc",
                                   "rbind /dev",
                                   "rbind /sys ro opt",
                                   "tmpfs /tmp",
                                   "bind /etc/resolv.conf opt",
                                   "bind /etc/hosts opt"};
  EXPECT_EQ(summary(*p), want);
}

TEST(MountPlan, OptionalHostPathsMissingAreLeftOut) {
  HostInfo h = full_host();
  h.paths.erase("/etc/resolv.conf");
  h.paths.erase("/dev/tty");
  h.paths.erase("/sys");
  auto p = plan_mounts(base(), h);
  ASSERT_TRUE(p);
  for (const MountEntry& e : p->entries) {
    EXPECT_NE(e.target, "/etc/resolv.conf");
    EXPECT_NE(e.target, "/dev/tty");
    EXPECT_NE(e.target, "/sys");
  }
}

TEST(MountPlan, RequiredHostPathMissingIsAnError) {
  HostInfo h = full_host();
  h.paths.erase("/dev/null");
  auto p = plan_mounts(base(), h);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message(), "mount /dev/null: host path /dev/null does not exist");
}

TEST(MountPlan, VolumesComeLastInCommandLineOrder) {
  HostInfo h = full_host();
  h.paths["/data"] = HostPathKind::kDirectory;
  h.paths["/home/u/.bashrc"] = HostPathKind::kFile;
  ContainerSpec s = base();
  s.volumes = {{"/data", "/mnt//data/", true}, {"/home/u/.bashrc", "/root/./.bashrc", false}};
  auto p = plan_mounts(s, h);
  ASSERT_TRUE(p);
  ASSERT_GE(p->entries.size(), 2u);
  const MountEntry& a = p->entries[p->entries.size() - 2];
  const MountEntry& b = p->entries.back();
  EXPECT_EQ(a.kind, MountKind::kRbind);
  EXPECT_EQ(a.source, "/data");
  EXPECT_EQ(a.target, "/mnt/data");
  EXPECT_TRUE(a.read_only);
  EXPECT_TRUE(a.required);
  EXPECT_EQ(a.target_kind, TargetKind::kDirectory);
  EXPECT_EQ(b.target, "/root/.bashrc");
  EXPECT_FALSE(b.read_only);
  EXPECT_EQ(b.target_kind, TargetKind::kFile);
}

TEST(MountPlan, AVolumesFlagsAndPropagationReachItsEntry) {
  HostInfo h = full_host();
  h.paths["/data"] = HostPathKind::kDirectory;
  h.paths["/shared"] = HostPathKind::kDirectory;
  ContainerSpec s = base();
  s.volumes = {{"/data", "/data", false, MS_NOSUID | MS_NOEXEC, MS_UNBINDABLE}};
  auto p = plan_mounts(s, h);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->entries.back().flags, static_cast<unsigned long>(MS_NOSUID | MS_NOEXEC));
  EXPECT_EQ(p->entries.back().propagation, static_cast<unsigned long>(MS_UNBINDABLE));
  EXPECT_FALSE(p->slave_root);
  // rslave: the mounts start as the host's slaves, and every other bind is made private.
  s.volumes.push_back({"/shared", "/shared", false, 0, MS_SLAVE | MS_REC});
  p = plan_mounts(s, h);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->slave_root);
  EXPECT_EQ(p->entries.back().propagation, static_cast<unsigned long>(MS_SLAVE | MS_REC));
  EXPECT_EQ(p->entries[p->entries.size() - 2].propagation,
            static_cast<unsigned long>(MS_UNBINDABLE));
  for (const MountEntry& e : p->entries) {
    if (e.kind == MountKind::kRbind || e.kind == MountKind::kBind) {
      EXPECT_NE(e.propagation, 0u) << e.target;
    }
  }
}

TEST(MountPlan, TmpfsMountsComeBeforeTheVolumes) {
  HostInfo h = full_host();
  h.paths["/data"] = HostPathKind::kDirectory;
  ContainerSpec s = base();
  s.volumes = {{"/data", "/scratch/data", false}};
  s.tmpfs = {{"/scratch//", MS_NOSUID, "mode=1777,size=1m"}};
  auto p = plan_mounts(s, h);
  ASSERT_TRUE(p);
  ASSERT_GE(p->entries.size(), 2u);
  const MountEntry& t = p->entries[p->entries.size() - 2];
  EXPECT_EQ(t.kind, MountKind::kFs);
  EXPECT_EQ(t.fstype, "tmpfs");
  EXPECT_EQ(t.target, "/scratch");
  EXPECT_EQ(t.flags, static_cast<unsigned long>(MS_NOSUID));
  EXPECT_EQ(t.data, "mode=1777,size=1m");
  EXPECT_EQ(p->entries.back().target, "/scratch/data");
  s.tmpfs = {{"/a/../..", 0, ""}};
  EXPECT_FALSE(plan_mounts(s, h));
  s.tmpfs = {{"/", 0, ""}};
  EXPECT_EQ(plan_mounts(s, h).error().message(),
            "mount tmpfs /: cannot mount over the container's root");
}

struct BadVolume {
  Volume v;
  std::string message;
};

TEST(MountPlan, BadVolumesAreRefused) {
  HostInfo h = full_host();
  h.paths["/data"] = HostPathKind::kDirectory;
  const BadVolume cases[] = {
      {{"/data", "/../etc", false},
       "mount volume /data:/../etc: container path must not contain \"..\""},
      {{"/data", "/a/../../etc", false},
       "mount volume /data:/a/../../etc: container path must not contain \"..\""},
      {{"/data", "relative", false},
       "mount volume /data:relative: container path must be absolute"},
      {{"/data", "/", false}, "mount volume /data:/: cannot mount over the container's root"},
      {{"/data", "//./", false}, "mount volume /data://./: cannot mount over the container's root"},
      {{"data", "/x", false}, "mount volume data:/x: host path must be absolute"},
      {{"/nope", "/x", false}, "mount volume /nope:/x: bind source path does not exist"},
  };
  for (const BadVolume& c : cases) {
    ContainerSpec s = base();
    s.volumes = {c.v};
    auto p = plan_mounts(s, h);
    ASSERT_FALSE(p) << c.v.container;
    EXPECT_EQ(p.error().message(), c.message);
  }
}

TEST(MountPlan, NormalizeContainerPath) {
  EXPECT_EQ(*normalize_container_path("/a//b/./c/"), "/a/b/c");
  EXPECT_EQ(*normalize_container_path("/"), "/");
  EXPECT_FALSE(normalize_container_path("a/b"));
  EXPECT_FALSE(normalize_container_path(""));
  EXPECT_FALSE(normalize_container_path("/a/.."));
}

TEST(MountPlan, ProbeHostSeesVolumeKinds) {
  ContainerSpec s = base();
  s.volumes = {{"/", "/host", true}, {"/proc/self/status", "/s", true}, {"/no/such", "/n", false}};
  HostInfo h = probe_host(s);
  EXPECT_EQ(h.kind("/"), HostPathKind::kDirectory);
  EXPECT_EQ(h.kind("/proc/self/status"), HostPathKind::kFile);
  EXPECT_EQ(h.kind("/no/such"), HostPathKind::kMissing);
  EXPECT_EQ(h.kind("/dev/null"), HostPathKind::kFile);
}

TEST(MountPlan, DeviceEditsFollowVolumesWithARunDirectory) {
  ContainerSpec s = base();
  using K = DeviceEdit::Kind;
  s.device_edits = {
      {K::kTmpfs, "", "/usr/lib/berth", false, true},  // folded into the run directory
      {K::kBind, "/drv/dev/nvidia0", "/dev/nvidia0", false},
      {K::kBind, "/drv/lib/libcuda.so.550", "/usr/lib/berth/nvidia/libcuda.so.550"},
      {K::kSymlink, "libcuda.so.550", "/usr/lib/berth/nvidia/libcuda.so.1"},
      {K::kTmpfs, "", "/proc/driver/nvidia/gpus", true, true, false},
      {K::kFile, "ModifyDeviceFiles: 0\n", "/proc/driver/nvidia/params", true, false, false},
  };
  s.ld_library_dirs = {"/usr/lib/berth/nvidia"};
  auto p = plan_mounts(s, full_host());
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_TRUE(plan_device_edits(s, *p).ok());
  std::vector<std::string> all = summary(*p);
  std::vector<std::string> tail(all.end() - 8, all.end());
  EXPECT_EQ(tail, (std::vector<std::string>{
                      "tmpfs /usr/lib/berth",
                      "file /usr/lib/berth/ld.so.conf",
                      "bind /dev/nvidia0",
                      "bind /usr/lib/berth/nvidia/libcuda.so.550 ro",
                      "link /usr/lib/berth/nvidia/libcuda.so.1",
                      "tmpfs /proc/driver/nvidia/gpus opt",
                      "file /usr/lib/berth/files/0",
                      "bind /proc/driver/nvidia/params ro opt",
                  }));
  const MountEntry& conf = p->entries[all.size() - 7];
  // The injected folder first: ldconfig keeps the first folder's library of a soname.
  EXPECT_EQ(conf.data, "/usr/lib/berth/nvidia\ninclude /etc/ld.so.conf\n");
  const MountEntry& params = p->entries.back();
  EXPECT_TRUE(params.source_in_root);  // resolved beneath the root, never on the host
  EXPECT_EQ(params.source, "/usr/lib/berth/files/0");
  EXPECT_EQ(p->entries[all.size() - 2].data, "ModifyDeviceFiles: 0\n");
  EXPECT_EQ(p->entries[all.size() - 3].data, "mode=555");
}

TEST(MountPlan, NoRunDirectoryWithoutNeed) {
  ContainerSpec s = base();
  s.device_edits = {{DeviceEdit::Kind::kBind, "/dev/fuse", "/dev/fuse", false}};
  auto p = plan_mounts(s, full_host());
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(plan_device_edits(s, *p).ok());
  EXPECT_EQ(summary(*p).back(), "bind /dev/fuse");
  for (const auto& e : p->entries) EXPECT_NE(e.target, "/usr/lib/berth");
}

TEST(MountPlan, CdiTmpfsTakesItsOwnOptions) {
  ContainerSpec s = base();
  DeviceEdit tmpfs{DeviceEdit::Kind::kTmpfs, "", "/scratch", true, true, true};
  tmpfs.tmpfs_data = "mode=1777,size=1m";
  tmpfs.tmpfs_flags = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY;
  s.device_edits = {tmpfs};
  MountPlan p;
  ASSERT_TRUE(plan_device_edits(s, p).ok());
  ASSERT_EQ(p.entries.size(), 1u);
  const MountEntry& e = p.entries[0];
  EXPECT_EQ(e.target, "/scratch");
  EXPECT_EQ(e.data, "mode=1777,size=1m");
  EXPECT_EQ(e.flags, static_cast<unsigned long>(MS_NOSUID | MS_NODEV | MS_NOEXEC));
  EXPECT_TRUE(e.read_only);  // remounted read-only once mounted
}

TEST(MountPlan, BadDeviceEditsAreRefused) {
  ContainerSpec s = base();
  s.device_edits = {{DeviceEdit::Kind::kBind, "/x", "/usr/../etc/passwd"}};
  MountPlan p;
  auto st = plan_device_edits(s, p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(),
            "device edit /usr/../etc/passwd: container path must not contain \"..\"");
  s.device_edits = {{DeviceEdit::Kind::kBind, "relative/lib.so", "/lib.so"}};
  st = plan_device_edits(s, p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "device edit relative/lib.so: host path must be absolute");
}

}  // namespace
}  // namespace berth

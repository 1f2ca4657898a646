// The fallback engines' pure parts: argv and config.json from a spec, symlink forms, device
// edits as binds, command resolution in a rootfs.
#include "runtime/apptainer_engine.h"
#include "runtime/device_binds.h"
#include "runtime/fakechroot_engine.h"
#include "runtime/fallback.h"
#include "runtime/library_path.h"
#include "runtime/link_form.h"
#include "runtime/oci_engine.h"
#include "runtime/proot_engine.h"
#include "runtime/tool.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/elf.h"
#include "core/fs.h"
#include "test_util.h"

namespace berth {
namespace {

/// The engine table's row `name` (which must exist).
const Engine& row(std::string_view name) {
  const Engine* e = find_engine(name);
  EXPECT_NE(e, nullptr) << name;
  return *e;
}

HostInfo full_host() {
  HostInfo h;
  for (const char* d : {"/proc", "/dev", "/sys", "/srv/data"})
    h.paths[d] = HostPathKind::kDirectory;
  for (const char* f : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                        "/dev/tty", "/etc/resolv.conf", "/etc/hosts"})
    h.paths[f] = HostPathKind::kFile;
  return h;
}

ContainerSpec base() {
  ContainerSpec s;
  s.rootfs = "/r";
  s.argv = {"probe", "id"};
  s.env = {"PATH=/bin", "A=1"};
  s.cwd = "/work";
  s.volumes = {{"/srv/data", "/data", false}};
  return s;
}

MountPlan plan_of(const ContainerSpec& s) {
  auto p = plan_mounts(s, full_host());
  EXPECT_TRUE(p) << p.error().message();
  return p ? *p : MountPlan{};
}

TEST(ProotArgv, RootBindsWorkdirAndCommand) {
  ContainerSpec s = base();
  std::vector<std::string> argv =
      proot_argv(s, "/usr/bin/proot", plan_of(s), "/bin/probe", {{"/h/lib", "/usr/lib/x", true}});
  std::vector<std::string> want = {"/usr/bin/proot",
                                   "--verbose=-1",
                                   "-0",
                                   "-r",
                                   "/r",
                                   "-w",
                                   "/work",
                                   "-b",
                                   "/proc",
                                   "-b",
                                   "/dev",
                                   "-b",
                                   "/sys",
                                   "-b",
                                   "/etc/resolv.conf",
                                   "-b",
                                   "/etc/hosts",
                                   "-b",
                                   "/srv/data:/data",
                                   "-b",
                                   "/h/lib:/usr/lib/x",
                                   "/bin/probe",
                                   "id"};
  EXPECT_EQ(argv, want);
}

TEST(ProotArgv, UserIsEmulatedWithI) {
  ContainerSpec s = base();
  s.uid = 1234;
  s.gid = 50;
  auto argv = proot_argv(s, "proot", plan_of(s), "/bin/probe", {});
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(argv[2], "-i");
  EXPECT_EQ(argv[3], "1234:50");
}

TEST(OciConfig, RootlessMappingsMountsAndProcess) {
  ContainerSpec s = base();
  s.volumes.push_back({"/srv/data", "/ro", true});
  s.tty = true;
  s.hostname = "box";
  auto c = oci_config(s, 1001, 1002, plan_of(s), {});
  ASSERT_TRUE(c) << c.error().message();
  const auto& j = *c;
  EXPECT_EQ(j["process"]["args"], nlohmann::json({"probe", "id"}));
  EXPECT_EQ(j["process"]["env"], nlohmann::json({"PATH=/bin", "A=1"}));
  EXPECT_EQ(j["process"]["cwd"], "/work");
  EXPECT_EQ(j["process"]["terminal"], true);
  EXPECT_EQ(j["root"]["path"], "/r");
  EXPECT_EQ(j["hostname"], "box");
  EXPECT_EQ(j["linux"]["uidMappings"],
            nlohmann::json::parse(R"([{"containerID":0,"hostID":1001,"size":1}])"));
  EXPECT_EQ(j["linux"]["gidMappings"],
            nlohmann::json::parse(R"([{"containerID":0,"hostID":1002,"size":1}])"));
  EXPECT_EQ(j["linux"]["namespaces"],
            nlohmann::json::parse(R"([{"type":"user"},{"type":"mount"},{"type":"uts"}])"));
  std::vector<std::string> dests;
  for (const auto& m : j["mounts"]) dests.push_back(m["destination"]);
  // runc makes the minimal /dev's nodes and links itself.
  std::vector<std::string> want = {"/proc", "/dev", "/dev/pts",         "/dev/shm",
                                   "/sys",  "/tmp", "/etc/resolv.conf", "/etc/hosts",
                                   "/data", "/ro"};
  EXPECT_EQ(dests, want);
  EXPECT_EQ(j["mounts"][9]["options"], nlohmann::json({"rbind", "ro"}));
  EXPECT_EQ(j["mounts"][4]["options"],
            nlohmann::json({"rbind", "nosuid", "nodev", "noexec", "ro"}));
  EXPECT_EQ(j["mounts"][1]["options"],
            nlohmann::json({"nosuid", "strictatime", "mode=755", "size=65536k"}));
}

TEST(OciConfig, PidNamespaceMountsProc) {
  ContainerSpec s = base();
  s.pid_namespace = true;
  auto c = oci_config(s, 1, 1, plan_of(s), {});
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)["mounts"][0]["type"], "proc");
  EXPECT_EQ((*c)["linux"]["namespaces"].back()["type"], "pid");
}

TEST(OciConfig, RefusesAnotherUser) {
  ContainerSpec s = base();
  s.uid = 1234;
  auto c = oci_config(s, 1, 1, plan_of(s), {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message(),
            "oci user 1234:0: the oci engine runs the workload as root inside: rootless runc "
            "needs container UID 0 mapped, and an unprivileged user can map only one ID");
}

TEST(SymlinkForms, ImageToHostAndBack) {
  EXPECT_EQ(rewrite_link_target("/lib/x.so", "", "/c/rootfs"), "/c/rootfs/lib/x.so");
  EXPECT_EQ(rewrite_link_target("x.so", "", "/c/rootfs"), std::nullopt);
  EXPECT_EQ(rewrite_link_target("/c/rootfs/lib", "", "/c/rootfs"), std::nullopt);  // already
  EXPECT_EQ(rewrite_link_target("/c/rootfs/lib/x.so", "/c/rootfs", ""), "/lib/x.so");
  EXPECT_EQ(rewrite_link_target("/c/rootfs", "/c/rootfs", ""), "/");
  EXPECT_EQ(rewrite_link_target("/c/rootfs2/x", "/c/rootfs", ""), std::nullopt);
  EXPECT_EQ(rewrite_link_target("/etc/passwd", "/c/rootfs", ""), std::nullopt);
  EXPECT_EQ(rewrite_link_target("/old/rootfs/x", "/old/rootfs", "/new/rootfs"), "/new/rootfs/x");
}

TEST(SymlinkForms, RewriteTreeBothWays) {
  TempDir t;
  ASSERT_TRUE(make_dirs(t.path + "/lib64"));
  ASSERT_EQ(::symlink("/lib/ld.so", (t.path + "/lib64/ld.so").c_str()), 0);
  ASSERT_EQ(::symlink("busybox", (t.path + "/sh").c_str()), 0);
  auto n = rewrite_symlinks(t.path, "", t.path);
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, 1u);
  char buf[4096];
  ssize_t len = ::readlink((t.path + "/lib64/ld.so").c_str(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(len)), t.path + "/lib/ld.so");
  n = rewrite_symlinks(t.path, t.path, "");
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 1u);
  len = ::readlink((t.path + "/lib64/ld.so").c_str(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(len)), "/lib/ld.so");
  len = ::readlink((t.path + "/sh").c_str(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(len)), "busybox");
}

TEST(DeviceBinds, TmpfsFilesAndLinksBecomeAScratchFolder) {
  TempDir t;
  ContainerSpec s = base();
  s.device_edits = {
      {DeviceEdit::Kind::kTmpfs, "", "/usr/lib/berth", true, true, true},
      {DeviceEdit::Kind::kFile, "conf\n", "/usr/lib/berth/ld.so.conf", true, false, true},
      {DeviceEdit::Kind::kSymlink, "libcuda.so.1", "/usr/lib/berth/gpu/libcuda.so", true, false,
       true},
      {DeviceEdit::Kind::kBind, t.path, "/usr/lib/berth/gpu/dir", true, true, true},
      {DeviceEdit::Kind::kBind, "/no/such", "/proc/driver/nvidia", true, true, false},
      {DeviceEdit::Kind::kFile, "x=1\n", "/etc/extra.conf", true, false, true},
  };
  auto binds = device_binds(s, t.path + "/scratch", row("proot"), true);
  ASSERT_TRUE(binds) << binds.error().message();
  std::vector<HostBind> want = {{t.path + "/scratch/tmpfs0", "/usr/lib/berth", false},
                                {t.path, "/usr/lib/berth/gpu/dir", true},
                                {t.path + "/scratch/file0", "/etc/extra.conf", true}};
  EXPECT_EQ(*binds, want);
  EXPECT_EQ(*read_file(t.path + "/scratch/file0"), "x=1\n");
  EXPECT_EQ(*read_file(t.path + "/scratch/tmpfs0/ld.so.conf"), "conf\n");
  char buf[256];
  ssize_t len = ::readlink((t.path + "/scratch/tmpfs0/gpu/libcuda.so").c_str(), buf, sizeof buf);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(len)), "libcuda.so.1");
  struct stat st;
  ASSERT_EQ(::stat((t.path + "/scratch/tmpfs0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0555u);
  ::chmod((t.path + "/scratch/tmpfs0").c_str(), 0755);  // so that the folder can be removed
}

TEST(DeviceBinds, BerthsRunDirectoryIsAScratchFolderWhenUsed) {
  ContainerSpec s = base();
  s.device_edits = {{DeviceEdit::Kind::kBind, "/", "/usr/lib/berth/gpu/x", true, false, true}};
  auto binds = device_binds(s, "/s", row("oci"), false);
  ASSERT_TRUE(binds) << binds.error().message();
  std::vector<HostBind> want = {{"/s/tmpfs0", "/usr/lib/berth", false},
                                {"/", "/usr/lib/berth/gpu/x", true}};
  EXPECT_EQ(*binds, want);
}

TEST(DeviceBinds, ALinkToAStagedBindBecomesABind) {
  ContainerSpec s = base();
  s.device_edits = {
      {DeviceEdit::Kind::kBind, "/bin/sh", "/usr/lib/berth/host/usr/bin/nvidia-smi", true, false,
       true},
      {DeviceEdit::Kind::kSymlink, "/usr/lib/berth/host/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi",
       true, false, false},
      {DeviceEdit::Kind::kSymlink, "/elsewhere", "/usr/bin/other", true, false, false},
  };
  auto binds = device_binds(s, "/s", row("proot"), false);
  ASSERT_TRUE(binds) << binds.error().message();
  std::vector<HostBind> want = {{"/s/tmpfs0", "/usr/lib/berth", false},
                                {"/bin/sh", "/usr/lib/berth/host/usr/bin/nvidia-smi", true},
                                {"/bin/sh", "/usr/bin/nvidia-smi", true}};
  EXPECT_EQ(*binds, want);
}

TEST(DeviceBinds, OciLeavesOutOptionalEditsInsideProc) {
  ContainerSpec s = base();
  s.device_edits = {
      {DeviceEdit::Kind::kTmpfs, "", "/proc/driver/nvidia/gpus", true, true, false},
      {DeviceEdit::Kind::kBind, "/", "/proc/driver/nvidia/gpus/0", true, true, false}};
  auto oci = device_binds(s, "/s", row("oci"), false);
  ASSERT_TRUE(oci);
  EXPECT_TRUE(oci->empty());
  auto proot = device_binds(s, "/s", row("proot"), false);
  ASSERT_TRUE(proot);
  EXPECT_EQ(proot->size(), 2u);
  // The column says which: every engine that takes devices either mounts there or leaves out.
  for (const Engine& e : engine_table()) {
    if (!e.devices) continue;
    auto binds = device_binds(s, "/s", e, false);
    ASSERT_TRUE(binds) << e.name;
    EXPECT_EQ(binds->size(), e.mounts_in_proc ? 2u : 0u) << e.name;
  }
}

TEST(DeviceBinds, ALinkOutsideATmpfsIsRefused) {
  ContainerSpec s = base();
  s.device_edits = {{DeviceEdit::Kind::kSymlink, "x", "/usr/lib/libcuda.so", true, false, true}};
  auto binds = device_binds(s, "/nowhere", row("proot"), false);
  ASSERT_FALSE(binds);
  EXPECT_EQ(binds.error().message(),
            "device /usr/lib/libcuda.so: the proot engine cannot create links in the image");
  EXPECT_EQ(binds.error().hint, "--gpus and --device need the userns or oci engine");
}

TEST(LibraryDirs, GoInFrontOfLdLibraryPath) {
  ContainerSpec s = base();
  s.ld_library_dirs = {"/usr/lib/berth/gpu"};
  auto env = env_with_library_dirs(s);
  EXPECT_EQ(env.back(), "LD_LIBRARY_PATH=/usr/lib/berth/gpu");
  s.env.push_back("LD_LIBRARY_PATH=/opt/lib");
  env = env_with_library_dirs(s);
  EXPECT_EQ(env.back(), "LD_LIBRARY_PATH=/usr/lib/berth/gpu:/opt/lib");
}

TEST(LibraryDirs, FirstOnceWhateverWasThere) {
  std::vector<std::string> env = {"LD_LIBRARY_PATH=/opt/lib:/b:/a"};
  put_library_dirs_first(env, {"/a", "/b"});
  EXPECT_EQ(env, std::vector<std::string>{"LD_LIBRARY_PATH=/a:/b:/opt/lib"});
  put_library_dirs_first(env, {"/a", "/b"});
  EXPECT_EQ(env, std::vector<std::string>{"LD_LIBRARY_PATH=/a:/b:/opt/lib"});
  env = {"LD_LIBRARY_PATH="};
  put_library_dirs_first(env, {"/a"});
  EXPECT_EQ(env, std::vector<std::string>{"LD_LIBRARY_PATH=/a"});
  env = {"X=1"};
  put_library_dirs_first(env, {});
  EXPECT_EQ(env, std::vector<std::string>{"X=1"});
}

TEST(Fakechroot, LaunchThroughTheImagesLoader) {
  ContainerSpec s = base();
  s.volumes = {{"/home/u", "/home/u", false}, {"/srv/data", "/data", false}};
  s.env.push_back("LD_LIBRARY_PATH=/opt/lib");
  auto l = fakechroot_launch(s, "/lib64/ld-linux-x86-64.so.2", "/bin/probe",
                             {"/lib/x86_64-linux-gnu", "/lib64"}, "/usr/lib/libfakechroot.so");
  std::vector<std::string> argv = {"/r/lib64/ld-linux-x86-64.so.2", "--library-path",
                                   "/r/opt/lib:/r/lib/x86_64-linux-gnu:/r/lib64", "/r/bin/probe",
                                   "id"};
  EXPECT_EQ(l.argv, argv);
  std::vector<std::string> env = {
      "PATH=/bin",
      "A=1",
      "LD_LIBRARY_PATH=/r/opt/lib:/r/lib/x86_64-linux-gnu:/r/lib64",
      "LD_PRELOAD=/usr/lib/libfakechroot.so",
      "FAKECHROOT_BASE=/r",
      "FAKECHROOT_ELFLOADER=/r/lib64/ld-linux-x86-64.so.2",
      "FAKECHROOT_EXCLUDE_PATH=/dev:/proc:/sys:/etc/resolv.conf:/etc/hosts:/home/u:/srv/data",
  };
  EXPECT_EQ(l.env, env);
}

TEST(Elf, InterpreterOfDynamicAndStaticPrograms) {
  UniqueFd sh(::open("/bin/sh", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(sh.valid());
  auto interp = elf_interpreter(sh.get(), "/bin/sh");
  ASSERT_TRUE(interp) << interp.error().message();
  EXPECT_TRUE(interp->starts_with("/lib")) << *interp;
  UniqueFd probe(::open(BERTH_PROBE_PATH, O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(probe.valid());
  interp = elf_interpreter(probe.get(), "probe");
  ASSERT_TRUE(interp);
  EXPECT_EQ(*interp, "");
  UniqueFd text(::open("/etc/passwd", O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(elf_interpreter(text.get(), "/etc/passwd").error().message(),
            "exec /etc/passwd: not an ELF executable");
}

TEST(ResolveCommand, PathLookupAndExitCodes) {
  TempDir t;
  ASSERT_TRUE(make_dirs(t.path + "/bin"));
  ASSERT_TRUE(write_file_atomic(t.path + "/bin/tool", "#!/bin/sh\n", 0755));
  ASSERT_TRUE(write_file_atomic(t.path + "/plain", "x", 0644));
  ContainerSpec s = base();
  s.rootfs = t.path;
  int code = 0;
  s.argv = {"tool"};
  EXPECT_EQ(*resolve_command(s, &code), "/bin/tool");
  s.argv = {"/bin/tool"};
  EXPECT_EQ(*resolve_command(s, &code, PathView::kHost), "/bin/tool");
  s.argv = {"missing"};
  auto r = resolve_command(s, &code);
  EXPECT_EQ(code, 127);
  EXPECT_EQ(r.error().message(), "exec: \"missing\": executable file not found in $PATH");
  s.argv = {"/plain"};
  r = resolve_command(s, &code);
  EXPECT_EQ(code, 126);
  s.argv = {"/nope"};
  r = resolve_command(s, &code);
  EXPECT_EQ(code, 127);
}

TEST(Engines, NamesAndUnknownEngine) {
  EXPECT_EQ(engine_names(), "userns, oci, proot, fakechroot, apptainer, auto");
  auto choice = parse_engine("auto");
  ASSERT_TRUE(choice);
  EXPECT_TRUE(choice->is_auto());
  EXPECT_EQ(choice->spelled, "auto");
  for (const char* bad : {"docker", "Userns", "runc"}) {
    auto st = parse_engine(bad);
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().message(), "engine " + std::string(bad) + ": unknown engine");
    EXPECT_EQ(st.error().hint, "one of: userns, oci, proot, fakechroot, apptainer, auto");
  }
}

TEST(Engines, EveryNameAndAliasParsesToItsRowAndKeepsItsSpelling) {
  for (const Engine& e : engine_table()) {
    auto by_name = parse_engine(e.name);
    ASSERT_TRUE(by_name) << e.name;
    EXPECT_EQ(by_name->row, &e);
    EXPECT_EQ(by_name->spelled, e.name);
    if (e.alias == nullptr) continue;
    auto by_alias = parse_engine(e.alias);
    ASSERT_TRUE(by_alias) << e.alias;
    EXPECT_EQ(by_alias->row, &e);
    EXPECT_EQ(by_alias->spelled, e.alias);  // written back as it was given
    EXPECT_EQ(*by_alias, *by_name);         // one engine, whichever word named it
  }
  EXPECT_EQ(default_engine().row, &engine_table().front());
  EXPECT_EQ(default_engine().spelled, "userns");
  EXPECT_NE(*parse_engine("auto"), default_engine());
}

TEST(EngineTable, RowsByNameAndAlias) {
  EXPECT_EQ(engine_table().front().name, std::string("userns"));  // auto's first choice
  EXPECT_EQ(find_engine("singularity"), find_engine("apptainer"));
  EXPECT_EQ(find_engine("auto"), nullptr);
  EXPECT_EQ(find_engine("docker"), nullptr);
  EXPECT_EQ(engines_with(&Engine::devices), "userns, oci or proot");
  EXPECT_EQ(engines_with(&Engine::host_path_links), "fakechroot");
  EXPECT_EQ(engines_with(&Engine::runs_in_place), "userns");
  EXPECT_EQ(engines_with(&Engine::joinable), "userns");
  EXPECT_EQ(engines_with(&Engine::network_namespace), "userns");
}

TEST(EngineTable, TmpfsIsRefusedExactlyWhereTheColumnSaysSo) {
  ContainerSpec s = base();
  s.tmpfs = {TmpfsMount{}};
  s.tmpfs[0].container = "/scratch";
  for (const Engine& e : engine_table()) {
    auto st = refuse_unsupported(s, e);
    EXPECT_EQ(st.ok(), e.tmpfs) << e.name;
    if (st.ok()) continue;
    EXPECT_EQ(st.error().message(),
              "mount tmpfs /scratch: the " + std::string(e.name) + " engine cannot mount a tmpfs");
    EXPECT_EQ(st.error().hint, "--tmpfs needs the userns or oci engine");
  }
}

TEST(EngineTable, ReadOnlyVolumeIsRefusedExactlyWhereTheColumnSaysSo) {
  ContainerSpec s = base();
  s.volumes = {{"/srv/data", "/data", true}};
  for (const Engine& e : engine_table()) {
    auto st = refuse_unsupported(s, e);
    EXPECT_EQ(st.ok(), e.read_only_volumes) << e.name;
    if (st.ok()) continue;
    EXPECT_EQ(st.error().message(), "mount volume /srv/data:/data:ro: the " + std::string(e.name) +
                                        " engine cannot make a volume read-only");
    EXPECT_EQ(st.error().hint, "use the userns, oci or apptainer engine, or drop :ro");
  }
  s.volumes[0].read_only = false;
  for (const Engine& e : engine_table()) EXPECT_TRUE(refuse_unsupported(s, e)) << e.name;
}

TEST(EngineTable, DeviceEditsAreRefusedExactlyWhereTheColumnSaysSo) {
  ContainerSpec s = base();
  s.device_edits = {{DeviceEdit::Kind::kBind, "/", "/dev/x", true, false, true}};
  for (const Engine& e : engine_table()) {
    auto st = refuse_unsupported(s, e);
    EXPECT_EQ(st.ok(), e.devices) << e.name;
    if (st.ok()) continue;
    EXPECT_EQ(st.error().message(),
              "run --gpus/--device: the " + std::string(e.name) + " engine cannot inject devices");
    EXPECT_EQ(st.error().hint, "--gpus needs the userns, oci or proot engine");
  }
}

TEST(EngineTable, ToolsCanBePointedAt) {
  for (const Engine& e : engine_table()) {
    // A built-in engine runs no tool; an engine with a Debian package names it in its error.
    if (e.tools.empty()) {
      EXPECT_FALSE(engine_tool(e)) << e.name;
      continue;
    }
    EXPECT_NE(e.tools.front().env_var, nullptr) << e.name << ": its tool can be pointed at";
  }
  // The engines `auto` may fall back to run without user namespaces: they bring their own
  // isolation (ptrace, a preloaded library) and no namespace at all.
  for (const Engine& e : engine_table()) {
    if (e.needs_user_namespaces) continue;
    EXPECT_FALSE(e.pid_namespace || e.hostname) << e.name;
  }
}

TEST(Engines, MissingToolNamesTheDebianPackage) {
  auto t = find_tool("berth-no-such-tool", nullptr, "berth-pkg");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message(), "engine berth-no-such-tool: not installed");
  EXPECT_EQ(t.error().hint, "install the Debian package 'berth-pkg'");
}

TEST(Apptainer, ExecOnTheRootfsFolder) {
  ContainerSpec s = base();
  s.volumes.push_back({"/srv/data", "/ro", true});
  auto argv = apptainer_argv(s, "apptainer");
  ASSERT_TRUE(argv) << argv.error().message();
  std::vector<std::string> want = {"apptainer",  "exec",       "--userns", "--containall",
                                   "--writable", "--cleanenv", "--pwd",    "/work"};
  if (::getuid() != 0) want.push_back("--fakeroot");
  for (const char* w : {"--env", "PATH=/bin", "--env", "A=1", "--bind", "/srv/data:/data", "--bind",
                        "/srv/data:/ro:ro", "/r", "probe", "id"})
    want.push_back(w);
  EXPECT_EQ(*argv, want);
}

}  // namespace
}  // namespace berth

// Device plans to ContainerSpec edits: GPU plans, CDI specs (JSON and YAML), YAML parsing.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "devices/cdi.h"
#include "devices/inject.h"
#include "devices/yaml.h"
#include "runtime/library_path.h"
#include "test_util.h"

namespace berth {
namespace {

namespace fs = std::filesystem;

GpuPlan sample_plan() {
  GpuPlan p;
  p.inject = true;
  p.devices = {{"/dev/nvidiactl", "/h/dev/nvidiactl"}, {"/dev/nvidia0", "/h/dev/nvidia0"}};
  p.libraries = {{"/h/lib/libcuda.so.550.54.15", "/usr/lib/berth/nvidia/libcuda.so.550.54.15"}};
  p.links = {{"/usr/lib/berth/nvidia/libcuda.so.1", "libcuda.so.550.54.15"}};
  p.binaries = {{"/h/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"}};
  p.proc_gpus = {{"/h/proc/driver/nvidia/gpus/0000:07:00.0",
                  "/proc/driver/nvidia/gpus/0000:07:00.0", true, true}};
  p.generated = {{"/proc/driver/nvidia/params", "ModifyDeviceFiles: 0\n"}};
  p.env = {"NVIDIA_VISIBLE_DEVICES=GPU-1"};
  p.library_dirs = {"/usr/lib/berth/nvidia"};
  return p;
}

TEST(InjectGpuPlan, EditsInOrderAndLoaderThroughLdconfig) {
  TempDir root;
  root.write("sbin/ldconfig", "#!", S_IXUSR);
  ContainerSpec s;
  s.rootfs = root.path;
  s.env = {"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"};
  inject_gpu_plan(sample_plan(), s);
  using K = DeviceEdit::Kind;
  std::vector<DeviceEdit> want = {
      {K::kTmpfs, "", "/usr/lib/berth", false, true},
      {K::kBind, "/h/dev/nvidiactl", "/dev/nvidiactl", false},
      {K::kBind, "/h/dev/nvidia0", "/dev/nvidia0", false},
      {K::kBind, "/h/lib/libcuda.so.550.54.15", "/usr/lib/berth/nvidia/libcuda.so.550.54.15"},
      {K::kSymlink, "libcuda.so.550.54.15", "/usr/lib/berth/nvidia/libcuda.so.1"},
      {K::kBind, "/h/usr/bin/nvidia-smi", "/usr/lib/berth/host/usr/bin/nvidia-smi"},
      {K::kSymlink, "/usr/lib/berth/host/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", true, false,
       false},
      {K::kTmpfs, "", "/proc/driver/nvidia/gpus", true, true, false},
      {K::kBind, "/h/proc/driver/nvidia/gpus/0000:07:00.0", "/proc/driver/nvidia/gpus/0000:07:00.0",
       true, true, false},
      {K::kFile, "ModifyDeviceFiles: 0\n", "/proc/driver/nvidia/params", true, false, false},
  };
  EXPECT_EQ(s.device_edits, want);
  EXPECT_EQ(s.ld_library_dirs, std::vector<std::string>{"/usr/lib/berth/nvidia"});
  EXPECT_EQ(s.ldconfig_path, "/sbin/ldconfig");
  EXPECT_EQ(s.env, (std::vector<std::string>{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=GPU-1"}));
}

TEST(InjectGpuPlan, ImageWithoutLdconfigGetsLdLibraryPath) {
  TempDir root;
  root.write("sbin/ldconfig", "not executable");  // present but not executable: not usable
  ContainerSpec s;
  s.rootfs = root.path;
  s.env = {"LD_LIBRARY_PATH=/opt/lib"};
  inject_gpu_plan(sample_plan(), s);
  EXPECT_TRUE(s.ld_library_dirs.empty());
  // Berth's folder first, as every engine orders it: an image library never wins over the host
  // driver's.
  EXPECT_EQ(s.env.front(), "LD_LIBRARY_PATH=/usr/lib/berth/nvidia:/opt/lib");
}

TEST(InjectGpuPlan, ImageWithLdconfigAndLdLibraryPathGetsBerthsFolderFirst) {
  TempDir root;
  root.write("sbin/ldconfig", "#!", S_IXUSR);
  ContainerSpec s;
  s.rootfs = root.path;
  s.env = {"LD_LIBRARY_PATH=/opt/lib"};
  inject_gpu_plan(sample_plan(), s);
  // The loader reads LD_LIBRARY_PATH before its cache: the folder goes in front there too.
  EXPECT_EQ(s.ld_library_dirs, std::vector<std::string>{"/usr/lib/berth/nvidia"});
  EXPECT_EQ(s.env.front(), "LD_LIBRARY_PATH=/usr/lib/berth/nvidia:/opt/lib");
  // A fallback engine puts the same folders first again: nothing changes.
  EXPECT_EQ(env_with_library_dirs(s), s.env);
}

TEST(InjectGpuPlan, MpsDirectoriesAreBoundAndTheirVariablesWinOverTheImage) {
  TempDir root;
  root.write("sbin/ldconfig", "#!", S_IXUSR);
  GpuPlan p = sample_plan();
  p.files = {{"/h/run/mps/pipe", "/run/mps/pipe", false, true},
             {"/h/run/mps/log", "/run/mps/log", false, true}};
  p.env.insert(p.env.begin(),
               {"CUDA_MPS_PIPE_DIRECTORY=/run/mps/pipe", "CUDA_MPS_LOG_DIRECTORY=/run/mps/log"});
  ContainerSpec s;
  s.rootfs = root.path;
  s.env = {"PATH=/bin", "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"};
  inject_gpu_plan(p, s);
  std::vector<std::string> binds;
  for (const DeviceEdit& e : s.device_edits)
    if (e.kind == DeviceEdit::Kind::kBind && e.source.starts_with("/h/run/mps"))
      binds.push_back(e.source + " " + e.target + (e.read_only ? " ro" : " rw"));
  EXPECT_EQ(binds, (std::vector<std::string>{"/h/run/mps/pipe /usr/lib/berth/host/run/mps/pipe rw",
                                             "/h/run/mps/log /usr/lib/berth/host/run/mps/log rw"}));
  EXPECT_EQ(s.env, (std::vector<std::string>{"PATH=/bin", "CUDA_MPS_PIPE_DIRECTORY=/run/mps/pipe",
                                             "CUDA_MPS_LOG_DIRECTORY=/run/mps/log",
                                             "NVIDIA_VISIBLE_DEVICES=GPU-1"}));
}

TEST(InjectGpuPlan, NothingWhenNotInjecting) {
  ContainerSpec s;
  GpuPlan p;
  inject_gpu_plan(p, s);
  EXPECT_TRUE(s.device_edits.empty() && s.env.empty());
}

TEST(Yaml, ScalarsSequencesMappings) {
  auto j = parse_yaml(
      "---\nkind: a.com/b\nn: 195\nq: \"0\"\nb: true\nz: ~\nlist:\n- x\n- {k: v}\nflow: [1, two]\n",
      "t.yaml");
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ(*j, nlohmann::json::parse(R"({"kind":"a.com/b","n":195,"q":"0","b":true,"z":null,
                                          "list":["x",{"k":"v"}],"flow":[1,"two"]})"));
}

TEST(Yaml, ErrorsNameTheFileAndLine) {
  auto j = parse_yaml("a: [1, 2\nb: c\n", "/etc/cdi/x.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_TRUE(j.error().message().starts_with("parse YAML /etc/cdi/x.yaml: "))
      << j.error().message();
  EXPECT_NE(j.error().message().find("line "), std::string::npos);
  j = parse_yaml("a: &x 1\nb: *x\n", "y.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error().message(), "parse YAML y.yaml: aliases are not supported");
}

TEST(Cdi, SpecDirsFromEnvironment) {
  EXPECT_EQ(cdi_spec_dirs({"BERTH_CDI_SPEC_DIRS=/a:/b"}, "/home/u"),
            (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(cdi_spec_dirs({}, "/home/u"),
            (std::vector<std::string>{"/etc/cdi", "/var/run/cdi", "/home/u/.config/cdi"}));
  EXPECT_EQ(cdi_spec_dirs({"XDG_CONFIG_HOME=/x"}, "/home/u").back(), "/x/cdi");
}

TEST(Cdi, LoadApplyAndPrecedence) {
  TempDir d;
  d.write("host/data", "d");
  d.write("host/node", "");
  d.write("rootfs/etc/existing", "");
  d.write("low/vendor.yaml",
          "cdiVersion: 0.6.0\nkind: vendor.com/dev\ndevices:\n- name: a\n"
          "  containerEdits:\n    env: [WHICH=low]\n");
  d.write("high/vendor.json", R"({"cdiVersion":"0.6.0","kind":"vendor.com/dev",
    "containerEdits":{"env":["COMMON=1"]},
    "devices":[{"name":"a","containerEdits":{"env":["WHICH=high"],
      "deviceNodes":[{"path":"/dev/vd0","hostPath":")" +
                                  d.path + R"(/host/node"}],
      "mounts":[{"hostPath":")" + d.path +
                                  R"(/host/data","containerPath":"/etc/existing","options":["ro"]},
                {"hostPath":")" + d.path +
                                  R"(/host/data","containerPath":"/opt/new"}],
      "hooks":[{"hookName":"createContainer","path":"/usr/bin/nvidia-ctk",
                "args":["nvidia-ctk","hook","update-ldcache","--folder","/usr/lib64"]},
               {"hookName":"createContainer","path":"/usr/bin/nvidia-ctk",
                "args":["nvidia-ctk","hook","create-symlinks","--link","libfoo.so.1::/usr/lib64/libfoo.so"]},
               {"hookName":"createContainer","path":"/bin/other","args":["other","x"]}]}}]})");
  d.write("high/broken.yaml", "kind: [unterminated\n");
  std::vector<std::string> warnings;
  auto specs = load_cdi_specs({d.path + "/low", d.path + "/high", d.path + "/missing"}, &warnings);
  ASSERT_TRUE(specs.ok());
  ASSERT_EQ(specs->size(), 2u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("broken.yaml"), std::string::npos);

  ContainerSpec s;
  s.rootfs = d.path + "/rootfs";
  auto w = apply_cdi_device(*specs, "vendor.com/dev=a", s);
  ASSERT_TRUE(w.ok()) << w.error().message();
  // The later directory wins; with no ldconfig in this root, the update-ldcache folder goes to
  // LD_LIBRARY_PATH.
  EXPECT_EQ(s.env,
            (std::vector<std::string>{"COMMON=1", "WHICH=high", "LD_LIBRARY_PATH=/usr/lib64"}));
  using K = DeviceEdit::Kind;
  std::vector<DeviceEdit> want = {
      {K::kBind, d.path + "/host/node", "/dev/vd0", false},
      {K::kBind, d.path + "/host/data", "/etc/existing", true},
      // Not in the image: bound at its containerPath all the same (its mount point is made).
      {K::kBind, d.path + "/host/data", "/opt/new", false},
      {K::kSymlink, "libfoo.so.1", "/usr/lib64/libfoo.so", true, false, false},
  };
  EXPECT_EQ(s.device_edits, want);
  EXPECT_TRUE(s.ld_library_dirs.empty());
  ASSERT_EQ(w->size(), 1u);
  EXPECT_NE((*w)[0].find("hook \"/bin/other x\" skipped"), std::string::npos);
}

nlohmann::json minimal_spec() {
  return nlohmann::json::parse(R"({"cdiVersion":"0.3.0","kind":"vendor.com/dev",
    "devices":[{"name":"a","containerEdits":{"env":["A=1"]}}]})");
}

TEST(Cdi, RequiredVersionFollowsTheFieldsUsed) {
  auto s = minimal_spec();
  EXPECT_EQ(cdi_required_version(s), "0.3.0");
  auto with = [&s](const char* pointer, nlohmann::json value) {
    nlohmann::json t = s;
    t[nlohmann::json::json_pointer(pointer)] = std::move(value);
    return cdi_required_version(t);
  };
  EXPECT_EQ(with("/containerEdits/mounts",
                 {{{"hostPath", "/a"}, {"containerPath", "/b"}, {"type", "bind"}}}),
            "0.4.0");
  EXPECT_EQ(
      with("/devices/0/containerEdits/deviceNodes", {{{"path", "/dev/x"}, {"hostPath", "/dev/y"}}}),
      "0.5.0");
  EXPECT_EQ(with("/devices/0/name", "0"), "0.5.0");
  EXPECT_EQ(with("/annotations", {{"k", "v"}}), "0.6.0");
  EXPECT_EQ(with("/devices/0/annotations", {{"k", "v"}}), "0.6.0");
  EXPECT_EQ(with("/kind", "vendor.com/dev.sub"), "0.6.0");
  EXPECT_EQ(with("/containerEdits/additionalGids", {44}), "0.7.0");
  EXPECT_EQ(with("/devices/0/containerEdits/intelRdt", {{"closID", "x"}}), "0.7.0");
  EXPECT_EQ(with("/devices/0/containerEdits/intelRdt", {{"enableMonitoring", true}}), "1.1.0");
  EXPECT_EQ(with("/containerEdits/netDevices", {{{"hostInterfaceName", "eth0"}, {"name", "e"}}}),
            "1.1.0");
}

TEST(Cdi, ValidationRules) {
  EXPECT_TRUE(validate_cdi_spec(minimal_spec(), "s.json").ok());
  struct Case {
    const char* pointer;
    nlohmann::json value;
    const char* why;
  };
  std::vector<Case> cases = {
      {"/cdiVersion", "0.9.0", "unknown cdiVersion \"0.9.0\""},
      {"/cdiVersion", "latest", "unknown cdiVersion \"latest\""},
      {"/devices/0/name", "0", "cdiVersion 0.3.0 is too old for the fields used; they need 0.5.0"},
      {"/kind", "vendor.com",
       "invalid kind \"vendor.com\" (vendor.com/class: letters, digits, _ - .)"},
      {"/kind", "-vendor.com/dev",
       "invalid kind \"-vendor.com/dev\" (vendor.com/class: letters, digits, _ - .)"},
      {"/kind", "vendor.com/dev-",
       "invalid kind \"vendor.com/dev-\" (vendor.com/class: letters, digits, _ - .)"},
      {"/devices/0/name", "a b", "invalid device name \"a b\""},
      {"/devices/0/name", "a:", "invalid device name \"a:\""},
      {"/devices/0/containerEdits", nlohmann::json::object(), "device \"a\" has no containerEdits"},
      {"/devices/1",
       {{"name", "a"}, {"containerEdits", {{"env", {"B=2"}}}}},
       "device \"a\" defined twice"},
      {"/devices", nlohmann::json::array(), "no devices"},
      {"/devices/0/containerEdits/env/0", "=1",
       "device \"a\": invalid environment variable \"=1\""},
      {"/containerEdits/env", {"NOEQUALS"}, "invalid environment variable \"NOEQUALS\""},
      {"/devices/0/containerEdits/deviceNodes",
       {{{"path", "/dev/x"}, {"permissions", "rx"}}},
       "device \"a\": device /dev/x: invalid permissions \"rx\""},
      {"/devices/0/containerEdits/deviceNodes",
       {{{"path", "/dev/x"}, {"type", "z"}}},
       "device \"a\": device /dev/x: invalid type \"z\""},
      {"/devices/0/containerEdits/hooks",
       {{{"hookName", "onBoot"}, {"path", "/x"}}},
       "device \"a\": invalid hook name \"onBoot\""},
      {"/devices/0/containerEdits/mounts",
       {{{"hostPath", "/x"}}},
       "device \"a\": mount with an empty containerPath"},
  };
  for (const Case& c : cases) {
    nlohmann::json t = minimal_spec();
    t[nlohmann::json::json_pointer(c.pointer)] = c.value;
    auto r = validate_cdi_spec(t, "s.json");
    ASSERT_FALSE(r.ok()) << c.pointer << " " << c.value.dump();
    EXPECT_EQ(r.error().message(), std::string("CDI spec s.json: ") + c.why);
  }
  nlohmann::json t = minimal_spec();
  t["cdiVersion"] = "v0.3.0";  // the reference library takes a leading v
  EXPECT_TRUE(validate_cdi_spec(t, "s.json").ok());
}

TEST(Cdi, SameDeviceTwiceIsAConflictNamingBothFiles) {
  TempDir d;
  const char* a =
      R"({"cdiVersion":"0.3.0","kind":"vendor.com/dev","devices":[{"name":"x","containerEdits":{"env":["W=a"]}}]})";
  const char* b =
      R"({"cdiVersion":"0.3.0","kind":"vendor.com/dev","devices":[{"name":"x","containerEdits":{"env":["W=b"]}},
                      {"name":"y","containerEdits":{"env":["W=y"]}}]})";
  d.write("one/a.json", a);
  d.write("one/b.json", b);
  std::vector<std::string> warnings;
  auto specs = load_cdi_specs({d.path + "/one"}, &warnings);
  ASSERT_TRUE(specs.ok());
  ContainerSpec s;
  auto r = apply_cdi_device(*specs, "vendor.com/dev=x", s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "--device vendor.com/dev=x: conflicting definitions in " + d.path +
                                     "/one/a.json and " + d.path + "/one/b.json");
  EXPECT_TRUE(apply_cdi_device(*specs, "vendor.com/dev=y", s).ok());
  // In two directories, the later one wins.
  d.write("two/b.json", b);
  specs = load_cdi_specs({d.path + "/one", d.path + "/two"}, &warnings);
  std::remove((d.path + "/one/b.json").c_str());
  specs = load_cdi_specs({d.path + "/one", d.path + "/two"}, &warnings);
  ContainerSpec s2;
  ASSERT_TRUE(apply_cdi_device(*specs, "vendor.com/dev=x", s2).ok());
  EXPECT_EQ(s2.env, (std::vector<std::string>{"W=b"}));
  // Twice in one spec: the spec is invalid, and the device says why.
  d.write("three/c.json", R"({"cdiVersion":"0.3.0","kind":"vendor.com/dup","devices":[
      {"name":"x","containerEdits":{"env":["A=1"]}},{"name":"x","containerEdits":{"env":["A=2"]}}]})");
  warnings.clear();
  specs = load_cdi_specs({d.path + "/three"}, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  r = apply_cdi_device(*specs, "vendor.com/dup=x", s2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "--device vendor.com/dup=x: its spec is invalid: CDI spec " +
                                     d.path + "/three/c.json: device \"x\" defined twice");
}

/// One device whose containerEdits are `edits`, loaded from a spec in `d`.
std::vector<CdiSpec> one_device(TempDir& d, const nlohmann::json& edits,
                                const char* version = "0.7.0") {
  nlohmann::json doc = {{"cdiVersion", version},
                        {"kind", "vendor.com/dev"},
                        {"devices", {{{"name", "a"}, {"containerEdits", edits}}}}};
  d.write("cdi/spec.json", doc.dump());
  std::vector<std::string> warnings;
  auto specs = load_cdi_specs({d.path + "/cdi"}, &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  return *specs;
}

TEST(Cdi, DeviceNodePermissionsModeAndOwner) {
  TempDir d;
  d.write("node", "");
  ::chmod((d.path + "/node").c_str(), 0640);
  std::string node = d.path + "/node";
  using K = DeviceEdit::Kind;
  auto apply = [&](nlohmann::json n) {
    n["path"] = "/dev/x";
    n["hostPath"] = node;
    ContainerSpec s;
    auto specs = one_device(d, {{"deviceNodes", {n}}});
    auto r = apply_cdi_device(specs, "vendor.com/dev=a", s);
    return std::make_pair(r.ok() ? std::string() : r.error().message(), s.device_edits);
  };
  auto [err, edits] = apply({{"permissions", "r"}});
  EXPECT_EQ(err, "");
  EXPECT_EQ(edits, (std::vector<DeviceEdit>{{K::kBind, node, "/dev/x", true, false, true}}));
  std::tie(err, edits) =
      apply({{"permissions", "rwm"}, {"fileMode", 0640}, {"uid", ::getuid()}, {"gid", ::getgid()}});
  EXPECT_EQ(err, "");
  EXPECT_EQ(edits, (std::vector<DeviceEdit>{{K::kBind, node, "/dev/x", false, false, true}}));
  std::tie(err, edits) = apply({{"fileMode", 0666}});
  EXPECT_EQ(err, "CDI " + d.path +
                     "/cdi/spec.json (a): device node /dev/x: fileMode 0666 cannot be honoured "
                     "rootless: the host node " +
                     node + " has 0640");
  std::tie(err, edits) = apply({{"uid", ::getuid() + 1}});
  EXPECT_EQ(err, "CDI " + d.path + "/cdi/spec.json (a): device node /dev/x: uid " +
                     std::to_string(::getuid() + 1) +
                     " cannot be honoured rootless: the host node " + node + " has " +
                     std::to_string(::getuid()));
}

TEST(Cdi, TmpfsMountsGroupsAndWhatCannotBeHonoured) {
  TempDir d;
  using K = DeviceEdit::Kind;
  ContainerSpec s;
  auto specs = one_device(d, {{"mounts",
                               {{{"hostPath", "tmpfs"},
                                 {"containerPath", "/scratch"},
                                 {"type", "tmpfs"},
                                 {"options", {"nosuid", "size=1m"}}}}},
                              {"additionalGids", {::getegid()}}});
  auto r = apply_cdi_device(specs, "vendor.com/dev=a", s);
  ASSERT_TRUE(r.ok()) << r.error().message();
  // A real directory at containerPath, mode 1777 with the spec's size, whether the image has
  // the path or not (its mount point is made, as Podman does).
  DeviceEdit tmpfs{K::kTmpfs, "", "/scratch", false, true, true};
  tmpfs.tmpfs_data = "mode=1777,size=1m";
  tmpfs.tmpfs_flags = MS_NOSUID | MS_NODEV;
  EXPECT_EQ(s.device_edits, std::vector<DeviceEdit>{tmpfs});
  d.write("rootfs/scratch/.keep", "");
  ContainerSpec in_image;
  in_image.rootfs = d.path + "/rootfs";
  ASSERT_TRUE(apply_cdi_device(specs, "vendor.com/dev=a", in_image).ok());
  EXPECT_EQ(in_image.device_edits, std::vector<DeviceEdit>{tmpfs});
  // ro and mode= as asked; an option a tmpfs does not take is noted, propagation is not.
  auto ro = one_device(
      d, {{"mounts",
           {{{"hostPath", "tmpfs"},
             {"containerPath", "/scratch"},
             {"type", "tmpfs"},
             {"options", {"ro", "mode=755", "nr_inodes=64", "rprivate", "tmpcopyup"}}}}}});
  ContainerSpec ro_spec;
  r = apply_cdi_device(ro, "vendor.com/dev=a", ro_spec);
  ASSERT_TRUE(r.ok()) << r.error().message();
  DeviceEdit ro_tmpfs{K::kTmpfs, "", "/scratch", true, true, true};
  ro_tmpfs.tmpfs_data = "mode=755,nr_inodes=64";
  ro_tmpfs.tmpfs_flags = MS_NOSUID | MS_NODEV | MS_RDONLY;
  EXPECT_EQ(ro_spec.device_edits, std::vector<DeviceEdit>{ro_tmpfs});
  EXPECT_EQ(*r, (std::vector<std::string>{"CDI " + d.path +
                                          "/cdi/spec.json (a): tmpfs option tmpcopyup on /scratch "
                                          "ignored"}));
  std::vector<std::pair<nlohmann::json, std::string>> refused = {
      {{{"netDevices", {{{"hostInterfaceName", "eth0"}, {"name", "e"}}}}},
       "netDevices cannot be honoured by a rootless run"},
      {{{"intelRdt", {{"closID", "x"}}}}, "intelRdt cannot be honoured by a rootless run"},
      {{{"additionalGids", {::getegid() + 4242}}},
       "additionalGids " + std::to_string(::getegid() + 4242) +
           " cannot be honoured: the caller is not in that group and a rootless run cannot add it"},
  };
  for (const auto& [edits, why] : refused) {
    ContainerSpec t;
    auto specs2 = one_device(d, edits, "1.1.0");
    auto r2 = apply_cdi_device(specs2, "vendor.com/dev=a", t);
    ASSERT_FALSE(r2.ok()) << edits.dump();
    EXPECT_EQ(r2.error().message(), "CDI " + d.path + "/cdi/spec.json (a): " + why);
  }
}

TEST(Cdi, BadNamesAndMissingDevices) {
  std::vector<CdiSpec> none;
  ContainerSpec s;
  for (const char* bad : {"gpu0", "nvidia.com/gpu", "nvidia/gpu=0",
                          "nvidia.com/gpu=", "nvidia.com/gpu=a b", "nvidia.com/-gpu=0"}) {
    auto r = apply_cdi_device(none, bad, s);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message(), std::string("--device ") + bad + ": not a CDI device name");
  }
  auto r = apply_cdi_device(none, "nvidia.com/gpu=0", s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "--device nvidia.com/gpu=0: no CDI spec for nvidia.com/gpu found");
}

}  // namespace
}  // namespace berth

// Device plans to ContainerSpec edits: GPU plans, CDI specs (JSON and YAML), YAML parsing.
#include <gtest/gtest.h>
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
  p.proc_gpus = {{"/h/proc/driver/nvidia/gpus/0000:07:00.0", "/proc/driver/nvidia/gpus/0000:07:00.0", true, true}};
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
      {K::kSymlink, "/usr/lib/berth/host/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", true, false, false},
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

TEST(InjectGpuPlan, NothingWhenNotInjecting) {
  ContainerSpec s;
  GpuPlan p;
  inject_gpu_plan(p, s);
  EXPECT_TRUE(s.device_edits.empty() && s.env.empty());
}

TEST(Yaml, ScalarsSequencesMappings) {
  auto j = parse_yaml("---\nkind: a.com/b\nn: 195\nq: \"0\"\nb: true\nz: ~\nlist:\n- x\n- {k: v}\nflow: [1, two]\n",
                      "t.yaml");
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ(*j, nlohmann::json::parse(R"({"kind":"a.com/b","n":195,"q":"0","b":true,"z":null,
                                          "list":["x",{"k":"v"}],"flow":[1,"two"]})"));
}

TEST(Yaml, ErrorsNameTheFileAndLine) {
  auto j = parse_yaml("a: [1, 2\nb: c\n", "/etc/cdi/x.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_TRUE(j.error().message().starts_with("parse YAML /etc/cdi/x.yaml: ")) << j.error().message();
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
  d.write("low/vendor.yaml", "cdiVersion: 0.6.0\nkind: vendor.com/dev\ndevices:\n- name: a\n"
                             "  containerEdits:\n    env: [WHICH=low]\n");
  d.write("high/vendor.json", R"({"cdiVersion":"0.6.0","kind":"vendor.com/dev",
    "containerEdits":{"env":["COMMON=1"]},
    "devices":[{"name":"a","containerEdits":{"env":["WHICH=high"],
      "deviceNodes":[{"path":"/dev/vd0","hostPath":")" + d.path + R"(/host/node"}],
      "mounts":[{"hostPath":")" + d.path + R"(/host/data","containerPath":"/etc/existing","options":["ro"]},
                {"hostPath":")" + d.path + R"(/host/data","containerPath":"/opt/new"}],
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
  EXPECT_EQ(s.env, (std::vector<std::string>{"COMMON=1", "WHICH=high", "LD_LIBRARY_PATH=/usr/lib64"}));
  using K = DeviceEdit::Kind;
  std::vector<DeviceEdit> want = {
      {K::kTmpfs, "", "/usr/lib/berth", false, true},
      {K::kBind, d.path + "/host/node", "/dev/vd0", false},
      {K::kBind, d.path + "/host/data", "/etc/existing", true},
      {K::kBind, d.path + "/host/data", "/usr/lib/berth/host/opt/new", false},
      {K::kSymlink, "/usr/lib/berth/host/opt/new", "/opt/new", true, false, false},
      {K::kSymlink, "libfoo.so.1", "/usr/lib64/libfoo.so", true, false, false},
  };
  EXPECT_EQ(s.device_edits, want);
  EXPECT_TRUE(s.ld_library_dirs.empty());
  ASSERT_EQ(w->size(), 1u);
  EXPECT_NE((*w)[0].find("hook \"/bin/other x\" skipped"), std::string::npos);
}

TEST(Cdi, BadNamesAndMissingDevices) {
  std::vector<CdiSpec> none;
  ContainerSpec s;
  for (const char* bad : {"gpu0", "nvidia.com/gpu", "nvidia/gpu=0", "nvidia.com/gpu="}) {
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

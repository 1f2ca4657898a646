// Selection and policy, table-driven: --gpus, NVIDIA_VISIBLE_DEVICES,
// capabilities, the caller's CUDA_VISIBLE_DEVICES, NVIDIA_REQUIRE_* grammar,
// forward compatibility, and the injection plan on a fabricated host.
#include <gtest/gtest.h>

#include <filesystem>

#include "devices/gpu_plan.h"
#include "devices/gpu_select.h"
#include "gpu_fixture.h"

namespace berth {
namespace {

using Kind = GpuRequest::Kind;

std::vector<NvidiaGpu> two_gpus() {
  std::vector<NvidiaGpu> g(2);
  g[0].index = 0, g[0].uuid = testing::kUuid0;
  g[1].index = 1, g[1].uuid = testing::kUuid1;
  return g;
}

TEST(GpusFlag, Table) {
  struct Case {
    const char* in;
    Kind kind;
    int count;
    std::vector<std::string> devices;
    std::optional<CapabilitySet> caps;
  } cases[] = {
      {"all", Kind::kAll, 0, {}, {}},
      {"2", Kind::kCount, 2, {}, {}},
      {"count=1", Kind::kCount, 1, {}, {}},
      {"0", Kind::kNothing, 0, {}, {}},
      {"device=0,2", Kind::kList, 0, {"0", "2"}, {}},
      {"\"device=0,2\"", Kind::kList, 0, {"0", "2"}, {}},
      {"device=GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", Kind::kList, 0, {testing::kUuid1}, {}},
      {"\"device=GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\"",
       Kind::kList,
       0,
       {testing::kUuid1},
       {}},
      {"all,capabilities=utility", Kind::kAll, 0, {}, kCapUtility},
      {"\"capabilities=compute,utility\",device=1",
       Kind::kList,
       0,
       {"1"},
       kCapCompute | kCapUtility},
      {"all,\"capabilities=gpu\"", Kind::kAll, 0, {}, kCapDefault},
      {"driver=nvidia,count=all", Kind::kAll, 0, {}, {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in);
    auto r = parse_gpus_flag(c.in);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->kind, c.kind);
    EXPECT_EQ(r->count, c.count);
    EXPECT_EQ(r->devices, c.devices);
    EXPECT_EQ(r->caps, c.caps);
  }
}

TEST(GpusFlag, Errors) {
  struct Case {
    const char* in;
    const char* msg;
  } cases[] = {
      {"", "parse --gpus : empty field"},
      {"many", "parse --gpus many: unknown field 'many'"},
      {"all,2", "parse --gpus all,2: the GPU count is given twice"},
      {"device=", "parse --gpus device=: empty device in the list"},
      {"\"device=0", "parse --gpus \"device=0: unterminated quote"},
      {"driver=amd", "parse --gpus driver=amd: only the nvidia driver is supported"},
      {"2,device=1", "parse --gpus 2,device=1: give either a count or devices, not both"},
      {"capabilities=utility",
       "parse --gpus capabilities=utility: say which GPUs: all, a count, or device=..."},
      {"all,capabilities=fast",
       "parse NVIDIA_DRIVER_CAPABILITIES=fast: unknown capability 'fast' (known: "
       "utility,compute,video,graphics,display,ngx,compat32, all)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in);
    auto r = parse_gpus_flag(c.in);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message(), c.msg);
  }
}

TEST(VisibleDevices, Table) {
  struct Case {
    std::optional<std::string> in;
    Kind kind;
    std::vector<std::string> devices;
  } cases[] = {
      {std::nullopt, Kind::kNothing, {}},
      {"", Kind::kNothing, {}},
      {"void", Kind::kNothing, {}},
      {"none", Kind::kNoDevices, {}},
      {"all", Kind::kAll, {}},
      {"0,1", Kind::kList, {"0", "1"}},
      {" 1 , GPU-aaaa ", Kind::kList, {"1", "GPU-aaaa"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in.value_or("(unset)"));
    auto r = parse_visible_devices(c.in);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->kind, c.kind);
    EXPECT_EQ(r->devices, c.devices);
  }
  auto r = parse_visible_devices("0,,1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "parse NVIDIA_VISIBLE_DEVICES=0,,1: empty device in the list");
}

TEST(Capabilities, Table) {
  struct Case {
    std::optional<std::string> in;
    CapabilitySet want;
  } cases[] = {
      {std::nullopt, kCapUtility | kCapCompute},
      {"", kCapUtility | kCapCompute},
      {"all", kCapAll},
      {"utility", kCapUtility},
      {"compute,video", kCapCompute | kCapVideo},
      {"graphics, display ,compat32", kCapGraphics | kCapDisplay | kCapCompat32},
      {"ngx,all", kCapAll},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in.value_or("(unset)"));
    auto r = parse_capabilities(c.in);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, c.want);
  }
  auto r = parse_capabilities("compute,gpu");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "parse NVIDIA_DRIVER_CAPABILITIES=compute,gpu: unknown capability 'gpu' (known: "
            "utility,compute,video,graphics,display,ngx,compat32, all)");
  EXPECT_EQ(capabilities_str(kCapCompute | kCapUtility), "utility,compute");
}

TEST(CudaVisibleDevices, Table) {
  struct Case {
    std::optional<std::string> in;
    std::optional<std::vector<int>> want;
  } cases[] = {
      {std::nullopt, std::nullopt},
      {"", std::vector<int>{}},
      {"NoDevFiles", std::vector<int>{}},
      {"-1", std::vector<int>{}},
      {"1", std::vector<int>{1}},
      {"1,0", std::vector<int>{1, 0}},
      {"0,7,1", std::vector<int>{0}},  // CUDA stops at the first invalid entry
      {"GPU-aaaa", std::vector<int>{1}},
      {"GPU-11111111-2222-3333-4444-555555555555,1", std::vector<int>{0, 1}},
      {"GPU-", std::vector<int>{}},  // ambiguous prefix
      {"0,0", std::vector<int>{0}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.in.value_or("(unset)"));
    EXPECT_EQ(parse_cuda_visible_devices(c.in, two_gpus()), c.want);
  }
}

TEST(SelectGpus, Table) {
  auto gpus = two_gpus();
  struct Case {
    const char* gpus_flag;
    std::optional<std::vector<int>> allowed;
    std::vector<int> want;
    const char* error;
  } cases[] = {
      {"all", std::nullopt, {0, 1}, nullptr},
      {"all", std::vector<int>{1}, {1}, nullptr},
      {"1", std::nullopt, {0}, nullptr},
      {"1", std::vector<int>{1}, {1}, nullptr},
      {"\"device=1,0\"", std::nullopt, {1, 0}, nullptr},
      {"device=0", std::vector<int>{1}, {1}, nullptr},  // index within the job's GPUs
      {"device=GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", std::nullopt, {1}, nullptr},
      {"device=1,1", std::nullopt, {1}, nullptr},
      {"3", std::nullopt, {}, "select GPUs 3 GPUs: only 2 GPUs are on this host"},
      {"2",
       std::vector<int>{1},
       {},
       "select GPUs 2 GPUs: only 1 GPU is visible to this job (CUDA_VISIBLE_DEVICES)"},
      {"device=2", std::nullopt, {}, "select GPUs GPU 2: no such GPU: 2 GPUs are on this host"},
      {"device=1",
       std::vector<int>{1},
       {},
       "select GPUs GPU 1: no such GPU: 1 GPU is visible to this job (CUDA_VISIBLE_DEVICES)"},
      {"device=GPU-11111111-2222-3333-4444-555555555555",
       std::vector<int>{1},
       {},
       "select GPUs GPU-11111111-2222-3333-4444-555555555555: this GPU is not visible to this job "
       "(CUDA_VISIBLE_DEVICES)"},
      {"device=GPU-0000",
       std::nullopt,
       {},
       "select GPUs GPU-0000: no GPU with this UUID on this host"},
      {"device=MIG-1234",
       std::nullopt,
       {},
       "select GPUs MIG-1234: MIG devices cannot be selected yet; select the whole GPU"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.gpus_flag);
    auto req = parse_gpus_flag(c.gpus_flag);
    ASSERT_TRUE(req.ok());
    auto r = select_gpus(*req, gpus, c.allowed);
    if (c.error) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().message(), c.error);
    } else {
      ASSERT_TRUE(r.ok()) << r.error().message();
      EXPECT_EQ(*r, c.want);
    }
  }
}

HostFacts facts(const char* driver, const char* cuda, const std::vector<std::string>& archs = {},
                std::vector<std::string> brands = {}) {
  HostFacts f;
  if (driver) f.driver = *parse_version(driver);
  if (cuda) f.cuda = *parse_version(cuda);
  for (const auto& a : archs) f.archs.push_back(*parse_version(a));
  f.brands = std::move(brands);
  return f;
}

TEST(Requirement, GrammarTable) {
  struct Case {
    const char* expr;
    HostFacts f;
    bool met;
  } cases[] = {
      {"cuda>=12.4", facts("550.54.15", "12.4"), true},
      {"cuda>=12.4", facts("535.104.05", "12.2"), false},
      {"cuda>12.2", facts("535.104.05", "12.2"), false},
      {"cuda<=12.2", facts("535.104.05", "12.2"), true},
      {"cuda<12.2", facts("535.104.05", "12.2"), false},
      {"cuda=12.2", facts("535.104.05", "12.2"), true},
      {"cuda=12.2", facts("535.104.05", "12.2.1"), false},
      {"driver>=535", facts("535.104.05", "12.2"), true},
      {"driver>=418,driver<419", facts("418.87.01", "10.1"), true},
      {"driver>=418,driver<419", facts("535.104.05", "12.2"), false},
      // Space is OR, comma is AND (the nvidia/cuda images' form).
      {"cuda>=12.4 brand=tesla,driver>=535,driver<536", facts("535.104.05", "12.2", {}, {"tesla"}),
       true},
      {"cuda>=12.4 brand=tesla,driver>=535,driver<536",
       facts("535.104.05", "12.2", {}, {"geforce"}), false},
      {"cuda>=12.4 brand=tesla,driver>=470,driver<471", facts("535.104.05", "12.2", {}, {"Tesla"}),
       false},
      {"arch>=8.0", facts("550.54.15", "12.4", {"8.0", "9.0"}), true},
      {"arch>=8.0", facts("550.54.15", "12.4", {"7.0", "9.0"}), false},  // every selected GPU
      {"arch=9.0 arch=8.0", facts("550.54.15", "12.4", {"8.0"}), true},
      {"", facts("550.54.15", "12.4"), true},
      // Unknown host facts are not held against the container.
      {"cuda>=99.0", facts("550.54.15", nullptr), true},
      {"brand=tesla", facts("550.54.15", "12.4"), true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expr);
    auto r = parse_requirement(c.expr);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(requirement_met(*r, c.f), c.met);
  }
}

TEST(Requirement, ParseErrors) {
  struct Case {
    const char* expr;
    const char* msg;
  } cases[] = {
      {"gpu>=1", "parse requirement gpu>=1: unknown key 'gpu' (known: cuda, driver, arch, brand)"},
      {"cuda~12", "parse requirement cuda~12: expected one of = > >= < <= after cuda"},
      {"cuda=>12", "parse requirement cuda=>12: expected one of = > >= < <= after cuda"},
      {"cuda>=", "parse requirement cuda>=: no value"},
      {"driver>=abc", "parse requirement driver>=abc: 'abc' is not a version"},
      {"brand>=tesla", "parse requirement brand>=tesla: brand can only be compared with ="},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expr);
    auto r = parse_requirement(c.expr);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message(), c.msg);
  }
}

TEST(Requirement, CheckEnvironment) {
  HostFacts host = facts("535.104.05", "12.2");
  struct Case {
    std::vector<std::string> env;
    const char* error;  // nullptr: met
  } cases[] = {
      {{}, nullptr},
      {{"NVIDIA_REQUIRE_CUDA=cuda>=12.0"}, nullptr},
      {{"NVIDIA_REQUIRE_CUDA=cuda>=12.4"},
       "check requirement NVIDIA_REQUIRE_CUDA=\"cuda>=12.4\": not met by this host (driver "
       "535.104.05, CUDA 12.2)"},
      {{"NVIDIA_REQUIRE_CUDA=cuda>=12.4", "NVIDIA_DISABLE_REQUIRE=1"}, nullptr},
      {{"NVIDIA_REQUIRE_CUDA=cuda>=12.4", "NVIDIA_DISABLE_REQUIRE=true"}, nullptr},
      {{"NVIDIA_REQUIRE_CUDA=cuda>=12.4", "NVIDIA_DISABLE_REQUIRE=false"},
       "check requirement NVIDIA_REQUIRE_CUDA=\"cuda>=12.4\": not met by this host (driver "
       "535.104.05, CUDA 12.2)"},
      // An image with only CUDA_VERSION requires that CUDA major.minor.
      {{"CUDA_VERSION=12.4.1"},
       "check requirement CUDA_VERSION=\"cuda>=12.4\": not met by this host (driver 535.104.05, "
       "CUDA 12.2)"},
      {{"CUDA_VERSION=12.1.0"}, nullptr},
      // NVIDIA_REQUIRE_CUDA, when present, replaces the CUDA_VERSION rule.
      {{"CUDA_VERSION=12.4.1", "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=535,driver<536"},
       nullptr},
      {{"NVIDIA_REQUIRE_DRIVER=driver>=550"},
       "check requirement NVIDIA_REQUIRE_DRIVER=\"driver>=550\": not met by this host (driver "
       "535.104.05, CUDA 12.2)"},
      {{"NVIDIA_REQUIRE_CUDA=cuda>=12.0", "NVIDIA_REQUIRE_FOO=gpu=1"},
       "check NVIDIA_REQUIRE_FOO: parse requirement gpu=1: unknown key 'gpu' (known: cuda, driver, "
       "arch, brand)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.env.empty() ? "(empty)" : c.env[0]);
    Status st = check_requirements(c.env, host);
    if (!c.error) {
      EXPECT_TRUE(st.ok()) << st.error().message();
    } else {
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.error().message(), c.error);
    }
  }
  Status st = check_requirements({"NVIDIA_REQUIRE_CUDA=cuda>=12.4"}, host);
  EXPECT_EQ(st.error().hint,
            "use an image built for CUDA 12.2 or older, update the host driver, or set "
            "NVIDIA_DISABLE_REQUIRE=1 to skip the check");
}

TEST(CudaCompat, UsedOnlyFromANewerDriverBranch) {
  struct Case {
    const char* host;
    const char* compat;
    bool use;
  } cases[] = {
      {"535.104.05", "550.54.15", true},
      {"550.54.15", "535.104.05", false},
      {"550.54.15", "550.54.15", false},
      {"550.54.14", "550.54.15", false},  // same branch: user and kernel parts must match
      {"470.82.01", "550.54.15", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.host) + " vs " + c.compat);
    EXPECT_EQ(use_cuda_compat(*parse_version(c.host), *parse_version(c.compat)), c.use);
  }
  EXPECT_FALSE(use_cuda_compat(*parse_version("535.104.05"), Version{}));
  EXPECT_EQ(compat_libcuda_version({"libcuda.so", "libcuda.so.1", "libcuda.so.550.54.15",
                                    "libnvidia-ptxjitcompiler.so.550.54.15"})
                .str(),
            "550.54.15");
  EXPECT_FALSE(compat_libcuda_version({"libcuda.so.1"}).known());
}

/// The plan on the fabricated host (no CUDA probe: the requirement check is lenient).
class GpuPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DiscoveryOptions o;
    o.driver_root = host.root;
    o.dev_root = host.dev;
    auto r = discover_nvidia(o);
    ASSERT_TRUE(r.ok());
    driver = *r;
  }
  testing::FakeHost host;
  NvidiaDriver driver;
};

std::vector<std::string> containers(const std::vector<GpuBind>& binds) {
  std::vector<std::string> out;
  out.reserve(binds.size());
  for (const auto& b : binds) out.push_back(b.container);
  return out;
}

TEST_F(GpuPlanTest, NothingRequestedNothingInjected) {
  for (const auto& env :
       {std::vector<std::string>{}, std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES=void"}}) {
    auto p = plan_gpus(driver, {std::nullopt, env, std::nullopt, {}});
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(p->inject);
    EXPECT_TRUE(p->devices.empty());
    EXPECT_TRUE(p->env.empty());
  }
}

TEST_F(GpuPlanTest, AllWithDefaultCapabilities) {
  auto p = plan_gpus(driver, {"all", {"CUDA_VERSION=12.4.1"}, std::nullopt, {}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->inject);
  EXPECT_EQ(p->gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(p->caps, kCapUtility | kCapCompute);
  std::vector<std::string> nodes;
  for (const auto& n : p->devices)
    nodes.push_back(n.path + "<-" + n.host_path.substr(host.dev.size()));
  EXPECT_EQ(nodes, (std::vector<std::string>{
                       "/dev/nvidiactl<-/dev/nvidiactl", "/dev/nvidia-uvm<-/dev/nvidia-uvm",
                       "/dev/nvidia-uvm-tools<-/dev/nvidia-uvm-tools", "/dev/nvidia0<-/dev/nvidia0",
                       "/dev/nvidia1<-/dev/nvidia1"}));
  EXPECT_EQ(
      containers(p->libraries),
      (std::vector<std::string>{"/usr/lib/berth/nvidia/libcuda.so.550.54.15",
                                "/usr/lib/berth/nvidia/libnvidia-ml.so.550.54.15",
                                "/usr/lib/berth/nvidia/libnvidia-ptxjitcompiler.so.550.54.15"}));
  for (const auto& l : p->libraries) EXPECT_TRUE(l.read_only);
  EXPECT_EQ(p->libraries[0].host, host.root + "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15");
  std::vector<std::string> links;
  for (const auto& l : p->links) links.push_back(l.path + "->" + l.target);
  EXPECT_EQ(links, (std::vector<std::string>{
                       "/usr/lib/berth/nvidia/libcuda.so.1->libcuda.so.550.54.15",
                       "/usr/lib/berth/nvidia/libcuda.so->libcuda.so.1",
                       "/usr/lib/berth/nvidia/libnvidia-ml.so.1->libnvidia-ml.so.550.54.15",
                       "/usr/lib/berth/nvidia/libnvidia-ml.so->libnvidia-ml.so.1",
                       "/usr/lib/berth/nvidia/"
                       "libnvidia-ptxjitcompiler.so.1->libnvidia-ptxjitcompiler.so.550.54.15",
                   }));
  EXPECT_EQ(containers(p->binaries),
            (std::vector<std::string>{"/usr/bin/nvidia-smi", "/usr/bin/nvidia-cuda-mps-control"}));
  EXPECT_EQ(containers(p->files),
            (std::vector<std::string>{"/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin",
                                      "/etc/OpenCL/vendors/nvidia.icd",
                                      "/run/nvidia-persistenced/socket"}));
  EXPECT_FALSE(p->files[2].read_only);
  EXPECT_EQ(containers(p->proc_gpus),
            (std::vector<std::string>{"/proc/driver/nvidia/gpus/0000:07:00.0",
                                      "/proc/driver/nvidia/gpus/0000:85:00.0"}));
  ASSERT_EQ(p->generated.size(), 1u);
  EXPECT_EQ(p->generated[0].container, "/proc/driver/nvidia/params");
  EXPECT_EQ(p->generated[0].content, "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 0\n");
  EXPECT_EQ(p->library_dirs, std::vector<std::string>{"/usr/lib/berth/nvidia"});
  EXPECT_EQ(p->env,
            (std::vector<std::string>{
                "NVIDIA_VISIBLE_DEVICES=" + std::string(testing::kUuid0) + "," + testing::kUuid1,
                "NVIDIA_DRIVER_CAPABILITIES=utility,compute"}));
  // The CUDA version is known under a driver root too (probed in a forked child), so the
  // requirements are checked and nothing is warned.
  EXPECT_EQ(driver.cuda_version.str(), "12.4");
  EXPECT_TRUE(p->warnings.empty()) << p->warnings[0];
}

TEST_F(GpuPlanTest, SlurmJobGpusAreRenumbered) {
  // The job holds host GPU 1 only; inside, it is GPU 0.
  auto p = plan_gpus(driver, {std::nullopt, {"NVIDIA_VISIBLE_DEVICES=all"}, "1", {}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->gpus, (std::vector<int>{1}));
  EXPECT_EQ(p->devices.back().path, "/dev/nvidia1");
  EXPECT_EQ(containers(p->proc_gpus),
            (std::vector<std::string>{"/proc/driver/nvidia/gpus/0000:85:00.0"}));
  EXPECT_EQ(p->env, (std::vector<std::string>{
                        "NVIDIA_VISIBLE_DEVICES=" + std::string(testing::kUuid1),
                        "NVIDIA_DRIVER_CAPABILITIES=utility,compute", "CUDA_VISIBLE_DEVICES=0"}));
}

TEST_F(GpuPlanTest, MpsDirectoriesAreBoundWritableAndNamedInside) {
  // A shard or mps step of Slurm: the job's GPU, and the node's MPS daemon's directories.
  std::filesystem::create_directories(host.root + "/run/mps/pipe");
  std::filesystem::create_directories(host.root + "/run/mps/log");
  DiscoveryOptions o = driver.options;
  o.mps_pipe_dir = "/run/mps/pipe";
  o.mps_log_dir = "/run/mps/log";
  auto d = discover_nvidia(o);
  ASSERT_TRUE(d.ok());
  auto p = plan_gpus(*d, {"all", {"CUDA_MPS_PIPE_DIRECTORY=/image/value"}, "0", {}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->gpus, (std::vector<int>{0}));
  ASSERT_EQ(p->files.size(), 5u);
  for (size_t i = 3; i < 5; ++i) {
    EXPECT_EQ(p->files[i].host, host.root + p->files[i].container);
    EXPECT_FALSE(p->files[i].read_only);
    EXPECT_TRUE(p->files[i].is_dir);
  }
  EXPECT_EQ(p->files[3].container, "/run/mps/pipe");
  EXPECT_EQ(p->files[4].container, "/run/mps/log");
  EXPECT_EQ(p->env,
            (std::vector<std::string>{
                "CUDA_MPS_PIPE_DIRECTORY=/run/mps/pipe", "CUDA_MPS_LOG_DIRECTORY=/run/mps/log",
                "NVIDIA_VISIBLE_DEVICES=" + std::string(testing::kUuid0),
                "NVIDIA_DRIVER_CAPABILITIES=utility,compute", "CUDA_VISIBLE_DEVICES=0"}));
  // Without compute, no MPS.
  p = plan_gpus(*d, {"all,\"capabilities=utility\"", {}, std::nullopt, {}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  for (const auto& f : p->files) EXPECT_EQ(f.container.find("/run/mps"), std::string::npos);
  for (const auto& e : p->env) EXPECT_FALSE(e.starts_with("CUDA_MPS_")) << e;
}

TEST_F(GpuPlanTest, NoneGivesTheDriverButNoGpu) {
  auto p = plan_gpus(driver, {std::nullopt,
                              {"NVIDIA_VISIBLE_DEVICES=none", "NVIDIA_DRIVER_CAPABILITIES=utility"},
                              std::nullopt,
                              {}});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->inject);
  EXPECT_TRUE(p->gpus.empty());
  ASSERT_EQ(p->devices.size(), 1u);
  EXPECT_EQ(p->devices[0].path, "/dev/nvidiactl");
  EXPECT_TRUE(p->proc_gpus.empty());
  EXPECT_EQ(containers(p->libraries),
            (std::vector<std::string>{"/usr/lib/berth/nvidia/libnvidia-ml.so.550.54.15"}));
  EXPECT_EQ(p->env[0], "NVIDIA_VISIBLE_DEVICES=none");
}

TEST_F(GpuPlanTest, GraphicsVideoAndCompat32) {
  auto p =
      plan_gpus(driver, {"all,\"capabilities=graphics,video,compat32\"", {}, std::nullopt, {}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  std::vector<std::string> want = {"/usr/lib/berth/nvidia/libnvidia-encode.so.550.54.15",
                                   "/usr/lib/berth/nvidia/libGLX_nvidia.so.550.54.15"};
  // compat32 adds the 32-bit twins of the chosen capabilities only: libcuda is compute.
  EXPECT_EQ(containers(p->libraries), want);
  bool glx_indirect = false;
  for (const auto& l : p->links)
    glx_indirect |=
        l.path == "/usr/lib/berth/nvidia/libGLX_indirect.so.0" && l.target == "libGLX_nvidia.so.0";
  EXPECT_TRUE(glx_indirect);
  EXPECT_EQ(containers(p->files),
            (std::vector<std::string>{"/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin",
                                      "/etc/vulkan/icd.d/nvidia_icd.json"}));
  p = plan_gpus(driver, {"all,\"capabilities=compute,compat32\"", {}, std::nullopt, {}});
  ASSERT_TRUE(p.ok());
  if (testing::have_32bit_fake()) {
    EXPECT_EQ(p->libraries.back().container, "/usr/lib/berth/nvidia32/libcuda.so.550.54.15");
    EXPECT_EQ(p->library_dirs,
              (std::vector<std::string>{"/usr/lib/berth/nvidia", "/usr/lib/berth/nvidia32"}));
  }
}

TEST_F(GpuPlanTest, ForwardCompatReplacesHostLibcuda) {
  driver.version = *parse_version("535.104.05");  // pretend an older host branch
  for (auto& l : driver.libraries) l.path.replace(l.path.find("550.54.15"), 9, "535.104.05");
  auto p = plan_gpus(driver,
                     {"device=0",
                      {},
                      std::nullopt,
                      {"libcuda.so", "libcuda.so.1", "libcuda.so.550.54.15",
                       "libnvidia-ptxjitcompiler.so.1", "libnvidia-ptxjitcompiler.so.550.54.15"}});
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_TRUE(p->use_compat);
  EXPECT_EQ(containers(p->libraries),
            (std::vector<std::string>{"/usr/lib/berth/nvidia/libnvidia-ml.so.535.104.05"}));
  std::vector<std::string> links;
  for (const auto& l : p->links) links.push_back(l.path + "->" + l.target);
  EXPECT_NE(
      std::find(links.begin(), links.end(),
                "/usr/lib/berth/nvidia/libcuda.so.1->/usr/local/cuda/compat/libcuda.so.550.54.15"),
      links.end());
  EXPECT_NE(std::find(links.begin(), links.end(),
                      "/usr/lib/berth/nvidia/libnvidia-ptxjitcompiler.so.1->"
                      "/usr/local/cuda/compat/libnvidia-ptxjitcompiler.so.550.54.15"),
            links.end());
}

TEST_F(GpuPlanTest, Errors) {
  driver.cuda_version = *parse_version("12.2");
  struct Case {
    GpuPlanInput in;
    const char* msg;
  } cases[] = {
      {{"all", {"NVIDIA_REQUIRE_CUDA=cuda>=12.4"}, std::nullopt, {}},
       "check requirement NVIDIA_REQUIRE_CUDA=\"cuda>=12.4\": not met by this host (driver "
       "550.54.15, CUDA 12.2)"},
      {{std::nullopt,
        {"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,fast"},
        std::nullopt,
        {}},
       "parse NVIDIA_DRIVER_CAPABILITIES=compute,fast: unknown capability 'fast' (known: "
       "utility,compute,video,graphics,display,ngx,compat32, all)"},
      {{"device=5", {}, std::nullopt, {}},
       "select GPUs GPU 5: no such GPU: 2 GPUs are on this host"},
  };
  for (const auto& c : cases) {
    auto p = plan_gpus(driver, c.in);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().message(), c.msg);
  }
  NvidiaDriver none;
  none.options.driver_root = "/srv/none";
  auto p = plan_gpus(none, {"all", {}, std::nullopt, {}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message(), "inject GPUs --gpus all: no NVIDIA driver found under /srv/none");
  driver.gpus[1].has_node = false;
  p = plan_gpus(driver, {"all", {}, std::nullopt, {}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message(), "inject GPUs /dev/nvidia1: the device node of GPU 1 (" +
                                     std::string(testing::kUuid1) + ") is missing under " +
                                     host.dev);
}

}  // namespace
}  // namespace berth

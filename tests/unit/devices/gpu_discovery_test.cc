// Driver discovery on a fabricated host root: ELF and ld.so.cache readers,
// libraries by exact version and capability, GPUs, nodes, the CUDA probe,
// `gpu info` output and the CDI spec.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "core/elf.h"
#include "core/env_list.h"
#include "devices/amd.h"
#include "devices/cdi.h"
#include "devices/gpu_report.h"
#include "devices/ld_cache.h"
#include "devices/nvidia_discover.h"
#include "devices/nvidia_probe.h"
#include "devices/yaml.h"
#include "gpu_fixture.h"

namespace berth {
namespace {

using testing::FakeHost;
const std::string kLibs = BERTH_FAKE_GPU_LIBS;

TEST(ElfInfo, ReadsSonameClassAndMachine) {
  auto e = read_elf_info(kLibs + "/libcuda.so.550.54.15");
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->soname, "libcuda.so.1");
  EXPECT_EQ(e->elf_class, 64);
  EXPECT_EQ(e->machine, host_elf_machine());
  e = read_elf_info(kLibs + "/libGLX_nvidia.so.550.54.15");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->soname, "libGLX_nvidia.so.0");
}

TEST(ElfInfo, Reads32BitObjects) {
  if (!testing::have_32bit_fake()) GTEST_SKIP() << "the compiler cannot build i386 objects here";
  auto e = read_elf_info(kLibs + "/libcuda32.so");
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->elf_class, 32);
  EXPECT_EQ(e->machine, 3);
  EXPECT_EQ(e->soname, "libcuda.so.1");
}

TEST(ElfInfo, RejectsOtherFiles) {
  FakeHost h;
  std::string p = h.root + "/usr/lib/x86_64-linux-gnu/libnvidia-cfg.so.550.54.15";
  auto e = read_elf_info(p);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "read ELF " + p + ": not an ELF file");
  // A truncated ELF: only the identification bytes.
  std::string t = h.root + "/truncated.so";
  testing::write_text(t, std::string("\x7f"
                                     "ELF\x02\x01\x01",
                                     7) +
                             std::string(9, '\0'));
  e = read_elf_info(t);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().message(), "read ELF " + t + ": truncated ELF header");
}

const std::vector<testing::CacheEntry> kEntries = {
    {"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
    {"libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"},
    {"libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.1", 0x0003},
};

void expect_entries(const std::vector<LdCacheEntry>& got) {
  ASSERT_EQ(got.size(), kEntries.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, kEntries[i].name);
    EXPECT_EQ(got[i].path, kEntries[i].path);
    EXPECT_EQ(got[i].flags, kEntries[i].flags);
  }
}

TEST(LdCache, ParsesAllThreeLayouts) {
  for (const auto& [what, data] : std::vector<std::pair<std::string, std::string>>{
           {"new", testing::new_format_cache(kEntries)},
           {"old", testing::old_format_cache(kEntries, false)},
           {"old+new", testing::old_format_cache(kEntries, true)}}) {
    SCOPED_TRACE(what);
    auto r = parse_ld_cache(data, what);
    ASSERT_TRUE(r.ok()) << r.error().message();
    expect_entries(*r);
  }
}

TEST(LdCache, RejectsGarbageAndTruncation) {
  auto r = parse_ld_cache("hello", "/x/ld.so.cache");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "parse ld.so.cache /x/ld.so.cache: not a glibc ld.so.cache");
  std::string data = testing::new_format_cache(kEntries);
  r = parse_ld_cache(data.substr(0, 60), "c");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "parse ld.so.cache c: entry table is larger than the file");
  data[48 + 7] = '\x7f';  // first key offset: high byte, far outside
  r = parse_ld_cache(data, "c");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "parse ld.so.cache c: entry 0 points outside the string table");
}

/// Cross-check with the real ldconfig: a cache it builds for a root we make.
TEST(LdCache, ReadsWhatLdconfigWrites) {
  if (geteuid() != 0) GTEST_SKIP() << "ldconfig -r needs root";
  FakeHost h;
  testing::write_text(h.root + "/etc/ld.so.conf", "/usr/lib/x86_64-linux-gnu\n/opt/nvidia/lib\n");
  std::filesystem::remove(h.root + "/etc/ld.so.cache");
  std::string cmd = "ldconfig -r " + h.root + " 2>/dev/null";
  if (std::system(cmd.c_str()) != 0 || !path_exists(h.root + "/etc/ld.so.cache"))
    GTEST_SKIP() << "ldconfig -r failed here";
  auto data = read_file(h.root + "/etc/ld.so.cache");
  ASSERT_TRUE(data.ok());
  auto r = parse_ld_cache(*data, "ldconfig's cache");
  ASSERT_TRUE(r.ok()) << r.error().message();
  bool cuda = false, encode = false;
  for (const auto& e : *r) {
    if (e.name == "libcuda.so.1" && e.path == "/usr/lib/x86_64-linux-gnu/libcuda.so.1") {
      cuda = true;
      EXPECT_EQ(e.flags, kLdCacheElfLibc6 | kLdCacheX8664Lib64);
    }
    encode |=
        e.name == "libnvidia-encode.so.1" && e.path == "/opt/nvidia/lib/libnvidia-encode.so.1";
  }
  EXPECT_TRUE(cuda);
  EXPECT_TRUE(encode);
}

TEST(NvrmVersion, ParsesBothKernelModuleFlavours) {
  struct Case {
    const char* text;
    const char* want;  // nullptr: no version
  } cases[] = {
      {"NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n",
       "550.54.15"},
      {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build  "
       "(dvs-builder@U16)  Sat Aug 19 01:13:17 UTC 2023\nGCC version: 12\n",
       "535.104.05"},
      {"NVRM version: NVIDIA UNIX aarch64 Kernel Module  470.82.01  Wed Oct 27 2021\n",
       "470.82.01"},
      {"GCC version: 12\n", nullptr},
      {"NVRM version: something else\n", nullptr},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto v = parse_nvrm_version(c.text);
    if (!c.want) {
      EXPECT_FALSE(v.has_value());
    } else {
      ASSERT_TRUE(v.has_value());
      EXPECT_EQ(v->str(), c.want);
    }
  }
}

DiscoveryOptions options(const FakeHost& h) {
  DiscoveryOptions o;
  o.driver_root = h.root;
  o.dev_root = h.dev;
  return o;
}

std::vector<std::string> paths_of(const std::vector<DriverFile>& fs) {
  std::vector<std::string> out;
  out.reserve(fs.size());
  for (const auto& f : fs) out.push_back(f.path);
  return out;
}

TEST(NvidiaDiscovery, FindsTheFabricatedDriver) {
  FakeHost h;
  auto r = discover_nvidia(options(h));
  ASSERT_TRUE(r.ok()) << r.error().message();
  const NvidiaDriver& d = *r;
  EXPECT_TRUE(d.found);
  EXPECT_EQ(d.version.str(), "550.54.15");
  EXPECT_EQ(d.kernel_version.str(), "550.54.15");
  EXPECT_EQ(d.library_version.str(), "550.54.15");
  // Probed under the driver root too (in a forked child).
  EXPECT_EQ(d.cuda_version.str(), "12.4");
  EXPECT_EQ(d.cuda_version_note, "");
  EXPECT_FALSE(d.cuda_version_derived);

  ASSERT_EQ(d.gpus.size(), 2u);
  EXPECT_EQ(d.gpus[0].index, 0);
  EXPECT_EQ(d.gpus[0].model, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(d.gpus[0].uuid, testing::kUuid0);
  EXPECT_EQ(d.gpus[0].bus_id, "0000:07:00.0");
  EXPECT_EQ(d.gpus[0].minor, 0);
  EXPECT_EQ(d.gpus[0].proc_dir, "/proc/driver/nvidia/gpus/0000:07:00.0");
  EXPECT_TRUE(d.gpus[0].has_node);
  EXPECT_EQ(d.gpus[0].node.host_path, h.dev + "/dev/nvidia0");
  EXPECT_EQ(d.gpus[1].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d.gpus[1].node.path, "/dev/nvidia1");

  std::vector<std::string> nodes;
  for (const auto& n : d.control_nodes) nodes.push_back(n.path);
  EXPECT_EQ(nodes, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm",
                                             "/dev/nvidia-uvm-tools"}));
  ASSERT_EQ(d.cap_nodes.size(), 2u);
  EXPECT_EQ(d.cap_nodes[0].path, "/dev/nvidia-caps/nvidia-cap1");
  EXPECT_TRUE(d.imex_nodes.empty());

  std::vector<std::string> want_libs = {
      "/opt/nvidia/lib/libnvidia-encode.so.550.54.15",
      "/usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.550.54.15",
      "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15",
      "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
      "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.550.54.15",
  };
  if (testing::have_32bit_fake())
    want_libs.push_back("/usr/lib/i386-linux-gnu/libcuda.so.550.54.15");
  EXPECT_EQ(paths_of(d.libraries), want_libs);
  for (const auto& l : d.libraries) {
    SCOPED_TRACE(l.path);
    EXPECT_EQ(l.host_path, h.root + l.path);
    EXPECT_EQ(l.lib32, l.path.find("i386") != std::string::npos);
  }
  EXPECT_EQ(d.libraries[0].caps, unsigned{kCapVideo});
  EXPECT_EQ(d.libraries[0].soname, "libnvidia-encode.so.1");
  EXPECT_EQ(d.libraries[1].caps, unsigned{kCapGraphics});
  EXPECT_EQ(d.libraries[1].soname, "libGLX_nvidia.so.0");
  EXPECT_EQ(d.libraries[2].caps, unsigned{kCapCompute});
  EXPECT_EQ(d.libraries[3].caps, unsigned{kCapUtility});

  EXPECT_EQ(paths_of(d.binaries),
            (std::vector<std::string>{"/usr/bin/nvidia-smi", "/usr/bin/nvidia-cuda-mps-control"}));
  EXPECT_EQ(paths_of(d.firmware),
            (std::vector<std::string>{"/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin"}));
  EXPECT_EQ(paths_of(d.config_files), (std::vector<std::string>{"/etc/vulkan/icd.d/nvidia_icd.json",
                                                                "/etc/OpenCL/vendors/nvidia.icd"}));
  EXPECT_EQ(paths_of(d.ipc), (std::vector<std::string>{"/run/nvidia-persistenced/socket"}));
  EXPECT_NE(d.proc_params.find("ModifyDeviceFiles: 1"), std::string::npos);
  ASSERT_EQ(d.warnings.size(), 1u);
  EXPECT_EQ(d.warnings[0],
            "ignoring " + h.root +
                "/usr/lib/x86_64-linux-gnu/libnvidia-cfg.so.550.54.15: read ELF " + h.root +
                "/usr/lib/x86_64-linux-gnu/libnvidia-cfg.so.550.54.15: not an ELF file");
}

TEST(NvidiaDiscovery, MpsPipeAndLogDirectoriesWhenTheNodeHasThem) {
  FakeHost h;
  DiscoveryOptions o = options(h);
  o.mps_pipe_dir = "/run/mps/pipe";
  o.mps_log_dir = "/run/mps/log";
  // Neither exists: neither is bound.
  auto r = discover_nvidia(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(paths_of(r->ipc), (std::vector<std::string>{"/run/nvidia-persistenced/socket"}));
  // The pipe directory alone, then both.
  std::filesystem::create_directories(h.root + "/run/mps/pipe");
  r = discover_nvidia(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(paths_of(r->ipc),
            (std::vector<std::string>{"/run/nvidia-persistenced/socket", "/run/mps/pipe"}));
  std::filesystem::create_directories(h.root + "/run/mps/log");
  r = discover_nvidia(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(paths_of(r->ipc), (std::vector<std::string>{"/run/nvidia-persistenced/socket",
                                                        "/run/mps/pipe", "/run/mps/log"}));
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_TRUE(r->ipc[i].is_dir);
    EXPECT_EQ(r->ipc[i].host_path, h.root + r->ipc[i].path);
    EXPECT_EQ(r->ipc[i].caps, unsigned{kCapCompute});
  }
}

TEST(NvidiaDiscovery, DevRootDefaultsToDriverRoot) {
  FakeHost h;
  DiscoveryOptions o;
  o.driver_root = h.root;
  auto r = discover_nvidia(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->gpus.size(), 2u);
  EXPECT_FALSE(r->gpus[0].has_node);  // the nodes are under the separate device root only
  EXPECT_TRUE(r->control_nodes.empty());
}

TEST(NvidiaDiscovery, KernelModuleVersionWinsOverLibraries) {
  FakeHost h;
  testing::write_text(
      h.root + "/proc/driver/nvidia/version",
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 2023\n");
  auto r = discover_nvidia(options(h));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->version.str(), "535.104.05");
  EXPECT_EQ(r->library_version.str(), "550.54.15");
  EXPECT_EQ(paths_of(r->libraries),
            (std::vector<std::string>{"/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05"}));
  EXPECT_EQ(paths_of(r->firmware),
            (std::vector<std::string>{"/lib/firmware/nvidia/535.104.05/gsp_ga10x.bin"}));
  EXPECT_NE(
      std::find(r->warnings.begin(), r->warnings.end(),
                "driver libraries 550.54.15 do not match the kernel module 535.104.05; using the "
                "libraries of 535.104.05"),
      r->warnings.end());
}

TEST(NvidiaDiscovery, LibraryVersionWithoutKernelModule) {
  FakeHost h;
  std::filesystem::remove(h.root + "/proc/driver/nvidia/version");
  auto r = discover_nvidia(options(h));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->found);
  EXPECT_FALSE(r->kernel_version.known());
  EXPECT_EQ(r->version.str(), "550.54.15");
}

TEST(NvidiaDiscovery, EmptyRootHasNoDriver) {
  FakeHost h;
  DiscoveryOptions o;
  o.driver_root = h.dev + "/nothing-here";
  auto r = discover_nvidia(o);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->found);
  EXPECT_TRUE(r->gpus.empty());
  EXPECT_TRUE(r->libraries.empty());
}

TEST(CudaProbe, AsksTheFoundLibcudaWhenAllowed) {
  FakeHost h;
  DiscoveryOptions o = options(h);
  o.cuda_probe = CudaProbe::kAlways;
  auto r = discover_nvidia(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cuda_version.str(), "12.4");
  EXPECT_EQ(r->cuda_version_note, "");
  o.cuda_probe = CudaProbe::kNever;
  r = discover_nvidia(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cuda_version.str(), "12.4");
  EXPECT_TRUE(r->cuda_version_derived);
  EXPECT_EQ(r->cuda_version_note,
            "derived from driver branch 550; not probed (BERTH_CUDA_PROBE=never)");
}

TEST(CudaProbe, FailedProbeFallsBackToTheDriverBranch) {
  FakeHost h;
  std::string libcuda = h.root + "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15";
  std::filesystem::copy_file(kLibs + "/libcuda-nosym.so", libcuda,
                             std::filesystem::copy_options::overwrite_existing);
  auto r = discover_nvidia(options(h));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cuda_version.str(), "12.4");
  EXPECT_TRUE(r->cuda_version_derived);
  EXPECT_EQ(r->cuda_version_note,
            "derived from driver branch 550; libcuda has no cuDriverGetVersion");
  std::string text = gpu_info_text(*r, AmdDevices{});
  EXPECT_EQ(text.substr(0, text.find('\n') + 1),
            "NVIDIA driver 550.54.15, CUDA 12.4 (derived from driver branch 550; libcuda has no "
            "cuDriverGetVersion)\n");
}

TEST(CudaProbe, DriverBranchTable) {
  auto cuda = [](const char* driver) {
    return cuda_version_for_driver(*parse_version(driver)).str();
  };
  EXPECT_EQ(cuda("550.54.15"), "12.4");
  EXPECT_EQ(cuda("535.104.05"), "12.2");
  EXPECT_EQ(cuda("470.256.02"), "11.4");
  EXPECT_EQ(cuda("570.124.06"), "12.8");
  EXPECT_EQ(cuda("580.65.06"), "13.0");
  EXPECT_EQ(cuda("590.1"), "13.0");  // newer than the table: at least its last row
  EXPECT_EQ(cuda("418.39"), "10.1");
  EXPECT_EQ(cuda("390.157"), "unknown");
}

TEST(CudaProbe, SurvivesLibrariesWithoutTheSymbolOrThatCrash) {
  std::string note;
  Version v = probe_cuda_driver_version(kLibs + "/libcuda-nosym.so", &note);
  EXPECT_FALSE(v.known());
  EXPECT_EQ(note, "libcuda has no cuDriverGetVersion");
  v = probe_cuda_driver_version(kLibs + "/libcuda-crash.so", &note);
  EXPECT_FALSE(v.known());
  EXPECT_EQ(note.rfind("probing libcuda failed: killed by signal", 0), 0u) << note;
  v = probe_cuda_driver_version(kLibs + "/does-not-exist.so", &note);
  EXPECT_FALSE(v.known());
  EXPECT_EQ(note, "libcuda could not be loaded or cuDriverGetVersion failed");
}

TEST(DiscoveryOptions, EnvironmentWinsOverConfig) {
  DiscoveryOptions configured;  // as the configuration file gives them (site/config.h)
  configured.driver_root = "/from/config";
  configured.dev_root = "/dev/config";
  unsetenv("BERTH_DRIVER_ROOT");
  unsetenv("BERTH_DEV_ROOT");
  auto o = discovery_options_from_env(configured);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->driver_root, "/from/config");
  EXPECT_EQ(o->effective_dev_root(), "/dev/config");
  setenv("BERTH_DRIVER_ROOT", "/from/env", 1);
  o = discovery_options_from_env(DiscoveryOptions{});
  unsetenv("BERTH_DRIVER_ROOT");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->driver_root, "/from/env");
  EXPECT_EQ(o->effective_dev_root(), "/from/env");
  setenv("BERTH_DEV_ROOT", "relative", 1);
  o = discovery_options_from_env(DiscoveryOptions{});
  unsetenv("BERTH_DEV_ROOT");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().message(),
            "read config relative: driver and device roots must be absolute paths");
}

TEST(DiscoveryOptions, MpsDirectoriesFromTheEnvironment) {
  unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  unsetenv("CUDA_MPS_LOG_DIRECTORY");
  auto o = discovery_options_from_env(DiscoveryOptions{});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->mps_pipe_dir, "/tmp/nvidia-mps");  // CUDA's defaults
  EXPECT_EQ(o->mps_log_dir, "/var/log/nvidia-mps");
  setenv("CUDA_MPS_PIPE_DIRECTORY", "/run/mps/pipe", 1);
  setenv("CUDA_MPS_LOG_DIRECTORY", "/run/mps/log", 1);
  o = discovery_options_from_env(DiscoveryOptions{});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->mps_pipe_dir, "/run/mps/pipe");
  EXPECT_EQ(o->mps_log_dir, "/run/mps/log");
  setenv("CUDA_MPS_LOG_DIRECTORY", "mps-log", 1);
  o = discovery_options_from_env(DiscoveryOptions{});
  unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  unsetenv("CUDA_MPS_LOG_DIRECTORY");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().message(),
            "read environment CUDA_MPS_LOG_DIRECTORY: 'mps-log' is not an absolute path");
}

TEST(AmdDiscovery, FindsKfdAndRenderNodes) {
  FakeHost h;
  testing::write_text(h.root + "/opt/rocm/.info/version", "6.0.2-115\n");
  AmdDevices a = discover_amd(options(h));
  EXPECT_TRUE(a.found);
  EXPECT_EQ(a.kfd.path, "/dev/kfd");
  ASSERT_EQ(a.render_nodes.size(), 1u);
  EXPECT_EQ(a.render_nodes[0].host_path, h.dev + "/dev/dri/renderD128");
  EXPECT_EQ(a.rocm_version, "6.0.2-115");
  DiscoveryOptions none;
  none.driver_root = h.root;
  EXPECT_FALSE(discover_amd(none).found);
}

TEST(GpuInfo, JsonAgainstTheFakeRoot) {
  FakeHost h;
  auto nv = discover_nvidia(options(h));
  ASSERT_TRUE(nv.ok());
  auto j = gpu_info_json(*nv, discover_amd(options(h)));
  EXPECT_EQ(j["driver_root"], h.root);
  EXPECT_EQ(j["dev_root"], h.dev);
  EXPECT_EQ(j["nvidia"]["found"], true);
  EXPECT_EQ(j["nvidia"]["driver_version"], "550.54.15");
  EXPECT_EQ(j["nvidia"]["cuda_version"], "12.4");  // probed under the driver root
  EXPECT_EQ(j["nvidia"]["cuda_version_derived"], false);
  ASSERT_EQ(j["nvidia"]["gpus"].size(), 2u);
  EXPECT_EQ(j["nvidia"]["gpus"][1], nlohmann::json({{"index", 1},
                                                    {"model", "NVIDIA H100 80GB HBM3"},
                                                    {"uuid", testing::kUuid1},
                                                    {"bus_id", "0000:85:00.0"},
                                                    {"compute_capability", nullptr},  // no NVML
                                                    {"minor", 1},
                                                    {"device_node", "/dev/nvidia1"}}));
  EXPECT_EQ(j["nvidia"]["capabilities"]["utility"]["libraries"],
            nlohmann::json({"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15"}));
  EXPECT_EQ(j["nvidia"]["capabilities"]["utility"]["binaries"],
            nlohmann::json({"/usr/bin/nvidia-smi"}));
  EXPECT_EQ(j["nvidia"]["capabilities"]["compute"]["config_files"],
            nlohmann::json({"/etc/OpenCL/vendors/nvidia.icd"}));
  EXPECT_EQ(j["amd"]["found"], true);

  std::string text = gpu_info_text(*nv, discover_amd(options(h)));
  EXPECT_EQ(text.rfind("NVIDIA driver 550.54.15, CUDA 12.4\n", 0), 0u) << text;
  EXPECT_NE(text.find("\n0      NVIDIA A100-SXM4-40GB  " + std::string(testing::kUuid0) +
                      "  0000:07:00.0  0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  utility   libnvidia-ml.so.550.54.15 nvidia-smi\n"), std::string::npos)
      << text;
}

TEST(GpuInfo, SaysWhenThereIsNoDriver) {
  NvidiaDriver nv;
  nv.options.driver_root = "/srv/empty";
  EXPECT_EQ(gpu_info_text(nv, AmdDevices{}), "no NVIDIA driver found under /srv/empty\n");
  EXPECT_EQ(gpu_info_json(nv, AmdDevices{})["nvidia"]["found"], false);
}

TEST(Cdi, SpecStructure) {
  FakeHost h;
  testing::write_text(h.root + "/usr/bin/nvidia-cdi-hook", "#!/bin/sh\n");
  auto nv = discover_nvidia(options(h));
  ASSERT_TRUE(nv.ok());
  nlohmann::json s = make_cdi_spec(*nv);
  // The lowest version its fields need (device names starting with a digit, hostPath: 0.5.0),
  // so Podman 4.3 (CDI 0.5) accepts it; and it passes Berth's own validation.
  EXPECT_EQ(s["cdiVersion"], "0.5.0");
  EXPECT_TRUE(validate_cdi_spec(s, "generated").ok());
  EXPECT_EQ(s["kind"], "nvidia.com/gpu");
  std::vector<std::string> names;
  for (const auto& d : s["devices"]) names.push_back(d["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"0", testing::kUuid0, "1", testing::kUuid1, "all"}));
  EXPECT_EQ(
      s["devices"][1]["containerEdits"]["deviceNodes"],
      nlohmann::json::array({{{"path", "/dev/nvidia0"}, {"hostPath", h.dev + "/dev/nvidia0"}}}));
  EXPECT_EQ(s["devices"][4]["containerEdits"]["deviceNodes"].size(), 2u);
  const auto& e = s["containerEdits"];
  EXPECT_EQ(e["env"], nlohmann::json({"NVIDIA_VISIBLE_DEVICES=void"}));
  EXPECT_EQ(e["deviceNodes"].size(), 3u);
  nlohmann::json want_cuda = {
      {"hostPath", h.root + "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"},
      {"containerPath", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"},
      {"options", {"ro", "nosuid", "nodev", "bind"}}};
  nlohmann::json want_soname = want_cuda;
  want_soname["containerPath"] = "/usr/lib/x86_64-linux-gnu/libcuda.so.1";
  bool cuda = false, soname = false, socket_rw = false, no32 = true;
  for (const auto& m : e["mounts"]) {
    cuda |= m == want_cuda;
    soname |= m == want_soname;
    if (m["containerPath"] == "/run/nvidia-persistenced/socket")
      socket_rw = m["options"] == nlohmann::json({"nosuid", "nodev", "bind"});
    if (m["containerPath"].get<std::string>().find("i386") != std::string::npos) no32 = false;
  }
  EXPECT_TRUE(cuda);
  EXPECT_TRUE(soname);
  EXPECT_TRUE(socket_rw);
  EXPECT_TRUE(no32);
  ASSERT_EQ(e["hooks"].size(), 1u);
  EXPECT_EQ(e["hooks"][0]["hookName"], "createContainer");
  // Where the hook is on this host: under the driver root.
  EXPECT_EQ(e["hooks"][0]["path"], h.root + "/usr/bin/nvidia-cdi-hook");
  EXPECT_EQ(e["hooks"][0]["args"],
            nlohmann::json({"nvidia-cdi-hook", "update-ldcache", "--folder", "/opt/nvidia/lib",
                            "--folder", "/usr/lib/x86_64-linux-gnu"}));
  // As YAML, the same document.
  std::string yaml = cdi_spec_text(s, true);
  auto back = parse_yaml(yaml, "generated.yaml");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(*back, s) << yaml;
  EXPECT_EQ(nlohmann::json::parse(cdi_spec_text(s, false)), s);
}

TEST(NvidiaDiscovery, ARealProgramWinsOverAWrapperScript) {
  // As on a host whose driver lives in /usr/local/nvidia: /usr/bin/nvidia-smi is a script that
  // sets LD_LIBRARY_PATH and execs the real one, which a container could not reach.
  FakeHost h;
  testing::copy_lib("libnvidia-ml.so.550.54.15",
                    h.root + "/usr/local/nvidia/bin/nvidia-smi");  // any ELF
  auto nv = discover_nvidia(options(h));
  ASSERT_TRUE(nv.ok());
  std::map<std::string, std::string> found;
  for (const auto& b : nv->binaries) found[b.path.substr(b.path.rfind('/') + 1)] = b.path;
  EXPECT_EQ(found["nvidia-smi"], "/usr/local/nvidia/bin/nvidia-smi");
  // With nothing better, the script is still what there is.
  EXPECT_EQ(found["nvidia-cuda-mps-control"], "/usr/bin/nvidia-cuda-mps-control");
}

TEST(Cdi, WithoutAHookTheLibraryFoldersStillReachTheLoader) {
  // No nvidia-cdi-hook on this host: the spec has no update-ldcache hook, and a library folder
  // the loader does not search unasked (/opt/nvidia/lib here; /usr/local/nvidia/lib64 on GKE)
  // must still reach the container's loader when Berth applies the spec.
  FakeHost h;
  auto nv = discover_nvidia(options(h));
  ASSERT_TRUE(nv.ok());
  nlohmann::json s = make_cdi_spec(*nv);
  EXPECT_FALSE(s["containerEdits"].contains("hooks"));
  TempDir d;
  d.write("cdi/nvidia.json", s.dump());
  d.write("rootfs/etc/passwd", "");
  std::vector<std::string> warnings;
  auto specs = load_cdi_specs({d.path + "/cdi"}, &warnings);
  ASSERT_TRUE(specs.ok());
  ContainerSpec c;
  c.rootfs = d.path + "/rootfs";
  auto w = apply_cdi_device(*specs, "nvidia.com/gpu=0", c);
  ASSERT_TRUE(w.ok()) << w.error().message();
  // No ldconfig in this root: the folder goes to LD_LIBRARY_PATH; the standard one does not.
  EXPECT_EQ(env_lookup(c.env, "LD_LIBRARY_PATH").value_or(""), "/opt/nvidia/lib");
}

}  // namespace
}  // namespace berth

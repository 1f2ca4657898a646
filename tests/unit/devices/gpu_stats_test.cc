// `berth gpu stats`: the NVML reader (devices/nvml.h) run on the fabricated driver's
// libnvidia-ml (tests/fake_gpu/nvml.c, a real ELF library answering from a state file), the
// selection, the window and the report's JSON and text (devices/gpu_stats.h).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "devices/gpu_process.h"
#include "devices/gpu_report.h"
#include "devices/gpu_stats.h"
#include "devices/nvidia_discover.h"
#include "devices/nvml.h"
#include "gpu_fixture.h"
#include "test_util.h"

namespace berth {
namespace {

using testing::kUuid0;
using testing::kUuid1;
const std::string kLibs = BERTH_FAKE_GPU_LIBS;
const std::string kNvml = kLibs + "/libnvidia-ml.so.550.54.15";

const char* const kTwoGpus =
    "driver 550.54.15\n"
    "gpu GPU-11111111-2222-3333-4444-555555555555 00000000:07:00.0 NVIDIA A100-SXM4-40GB\n"
    "gpu GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee 00000000:85:00.0 NVIDIA H100 80GB HBM3\n"
    "util 0 37 12\n"
    "mem 0 40960 1024\n"
    "temp 0 45\n"
    "power 0 61234\n"
    "proc 0 4242 1000\n"
    "proc 0 4243 -\n"
    "util 1 0 0\n"
    "mem 1 81559 0\n";

/// A state file for the fake NVML, named by $BERTH_FAKE_NVML_STATE while the test runs.
class Nvml : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("BERTH_FAKE_NVML_STATE", state_.c_str(), 1); }
  void TearDown() override { ::unsetenv("BERTH_FAKE_NVML_STATE"); }
  void state(const std::string& text) { write_text(state_, text); }
  static NvmlOptions fast(int samples = 1) {
    NvmlOptions o;
    o.samples = samples;
    o.interval_ms = 0;
    o.timeout_s = 10;
    return o;
  }

  TempDir dir_{"nvml"};
  std::string state_ = dir_.path + "/state";
};

TEST_F(Nvml, ReadsEachGpuAsTheDriverReportsIt) {
  state(kTwoGpus);
  auto r = read_nvml(kNvml, fast());
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->driver_version, "550.54.15");
  ASSERT_EQ(r->samples.size(), 1u);
  ASSERT_EQ(r->samples[0].gpus.size(), 2u);
  const NvmlGpuReading& g = r->samples[0].gpus[0];
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.uuid, kUuid0);
  EXPECT_EQ(g.name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(g.bus_id, "0000:07:00.0");
  EXPECT_EQ(g.utilization_gpu, 37u);
  EXPECT_EQ(g.utilization_memory, 12u);
  EXPECT_EQ(g.memory_total_mib, 40960u);
  EXPECT_EQ(g.memory_used_mib, 1024u);
  EXPECT_EQ(g.temperature_c, 45u);
  ASSERT_TRUE(g.power_w.has_value());
  EXPECT_DOUBLE_EQ(*g.power_w, 61.234);
  ASSERT_TRUE(g.processes.has_value());
  ASSERT_EQ(g.processes->size(), 2u);
  EXPECT_EQ((*g.processes)[0].pid, 4242u);
  EXPECT_EQ((*g.processes)[0].used_memory_mib, 1000u);
  EXPECT_EQ((*g.processes)[1].pid, 4243u);
  EXPECT_FALSE((*g.processes)[1].used_memory_mib.has_value());  // NVML_VALUE_NOT_AVAILABLE
  const NvmlGpuReading& h = r->samples[0].gpus[1];
  EXPECT_EQ(h.uuid, kUuid1);
  EXPECT_EQ(h.utilization_gpu, 0u);
  EXPECT_FALSE(h.temperature_c.has_value());  // NOT_SUPPORTED
  ASSERT_TRUE(h.processes.has_value());
  EXPECT_TRUE(h.processes->empty());
  EXPECT_GT(r->samples[0].unix_ms, 0);
}

TEST_F(Nvml, GrowsTheProcessBufferAsNvmlAsks) {
  std::string s = kTwoGpus;
  for (int pid = 100; pid < 112; ++pid) s += "proc 1 " + std::to_string(pid) + " 10\n";
  state(s);
  auto r = read_nvml(kNvml, fast());
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_TRUE(r->samples[0].gpus[1].processes.has_value());
  ASSERT_EQ(r->samples[0].gpus[1].processes->size(), 12u);
  EXPECT_EQ(r->samples[0].gpus[1].processes->back().pid, 111u);
}

TEST_F(Nvml, ReadsOnlyTheSelectedGpus) {
  state(kTwoGpus);
  NvmlOptions o = fast();
  o.uuids = std::vector<std::string>{"gpu-AAAAAAAA-bbbb-cccc-dddd-eeeeeeeeeeee"};
  auto r = read_nvml(kNvml, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->samples[0].gpus.size(), 1u);
  EXPECT_EQ(r->samples[0].gpus[0].index, 1);
  EXPECT_EQ(r->samples[0].gpus[0].uuid, kUuid1);
  o.uuids = std::vector<std::string>{};
  r = read_nvml(kNvml, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->samples[0].gpus.empty());
}

TEST_F(Nvml, SamplesGiveTheWindowsMinimumMeanAndMaximum) {
  state(std::string(kTwoGpus) + "util 0 10 1 20 2 61 3\n");  // later lines replace earlier ones
  NvmlOptions o = fast(3);
  auto r = read_nvml(kNvml, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->samples.size(), 3u);
  EXPECT_EQ(r->samples[0].gpus[0].utilization_gpu, 10u);
  EXPECT_EQ(r->samples[2].gpus[0].utilization_gpu, 61u);
  nlohmann::json j = gpu_stats_json(*r, o);
  EXPECT_EQ(j["samples"], 3);
  EXPECT_EQ(j["gpus"][0]["utilization"]["gpu"], 61);  // the last sample
  EXPECT_EQ(j["gpus"][0]["window"]["utilization_gpu"],
            nlohmann::json::parse(R"({"min": 10.0, "mean": 30.333, "max": 61.0})"));
  EXPECT_EQ(j["gpus"][0]["window"]["utilization_memory"],
            nlohmann::json::parse(R"({"min": 1.0, "mean": 2.0, "max": 3.0})"));
  EXPECT_EQ(j["gpus"][1]["window"]["utilization_gpu"],
            nlohmann::json::parse(R"({"min": 0.0, "mean": 0.0, "max": 0.0})"));
}

TEST_F(Nvml, AMissingOptionalFunctionLeavesItsFieldNull) {
  state(kTwoGpus);
  auto r = read_nvml(kLibs + "/libnvidia-ml-minimal.so", fast());
  ASSERT_TRUE(r.ok()) << r.error().message();
  const NvmlGpuReading& g = r->samples[0].gpus[0];
  EXPECT_EQ(g.uuid, kUuid0);
  EXPECT_EQ(g.utilization_gpu, 37u);
  EXPECT_EQ(g.bus_id, "");
  EXPECT_FALSE(g.temperature_c.has_value());
  EXPECT_FALSE(g.power_w.has_value());
  EXPECT_FALSE(g.processes.has_value());
  nlohmann::json j = gpu_stats_json(*r, fast())["gpus"][0];
  EXPECT_TRUE(j["bus_id"].is_null());
  EXPECT_TRUE(j["temperature_c"].is_null());
  EXPECT_TRUE(j["power_w"].is_null());
  EXPECT_TRUE(j["processes"].is_null());
  EXPECT_TRUE(j["window"]["power_w"].is_null());
  EXPECT_EQ(j["utilization"]["gpu"], 37);
}

TEST_F(Nvml, MemoryUsedLeavesOutTheDriversReservation) {
  // nvmlDeviceGetMemoryInfo_v2's `used`, as nvidia-smi shows it; a library with only v1 (the
  // minimal one) counts the reservation in.
  state(std::string(kTwoGpus) + "reserved 0 600\n");
  auto r = read_nvml(kNvml, fast());
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->samples[0].gpus[0].memory_used_mib, 1024u);
  EXPECT_EQ(r->samples[0].gpus[0].memory_total_mib, 40960u);
  r = read_nvml(kLibs + "/libnvidia-ml-minimal.so", fast());
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->samples[0].gpus[0].memory_used_mib, 1624u);
}

TEST_F(Nvml, InitFailureIsOneLineWithNvmlsWords) {
  ::unsetenv("BERTH_FAKE_NVML_STATE");  // the fake then answers NVML_ERROR_DRIVER_NOT_LOADED
  auto r = read_nvml(kNvml, fast());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "read NVML " + kNvml + ": nvmlInit_v2: Driver Not Loaded");
  state("fail nvmlInit_v2 999\n");
  ::setenv("BERTH_FAKE_NVML_STATE", state_.c_str(), 1);
  r = read_nvml(kNvml, fast());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "read NVML " + kNvml + ": nvmlInit_v2: Unknown Error");
}

TEST_F(Nvml, AGpuWithoutAHandleIsReportedWithItsError) {
  state(std::string(kTwoGpus) + "fail nvmlDeviceGetHandleByIndex_v2 4\n");
  auto r = read_nvml(kNvml, fast());
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->samples[0].gpus.size(), 2u);
  EXPECT_EQ(r->samples[0].gpus[1].error, "nvmlDeviceGetHandleByIndex_v2: Insufficient Permissions");
  EXPECT_EQ(gpu_stats_json(*r, fast())["gpus"][1]["error"],
            "nvmlDeviceGetHandleByIndex_v2: Insufficient Permissions");
  state(std::string(kTwoGpus) + "fail nvmlDeviceGetCount_v2 3\n");
  r = read_nvml(kNvml, fast());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "read NVML " + kNvml + ": nvmlDeviceGetCount_v2: Not Supported");
}

TEST_F(Nvml, AHungDriverIsKilledAfterTheTimeLimit) {
  for (const char* where : {"nvmlInit_v2", "nvmlDeviceGetUtilizationRates"}) {
    state(std::string(kTwoGpus) + "hang " + where + "\n");
    NvmlOptions o = fast();
    o.timeout_s = 1;
    auto r = read_nvml(kNvml, o);
    ASSERT_FALSE(r.ok()) << where;
    EXPECT_EQ(r.error().message(),
              "read NVML " + kNvml +
                  ": NVML gave no answer within 1 s (is the driver hung?); its process was killed");
  }
}

TEST_F(Nvml, ALibraryThatIsNotNvmlIsRefused) {
  auto r = read_nvml(kLibs + "/libnvidia-encode.so.550.54.15", fast());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "read NVML " + kLibs +
                "/libnvidia-encode.so.550.54.15: it lacks nvmlInit_v2, nvmlDeviceGetCount_v2 or "
                "nvmlDeviceGetHandleByIndex_v2: not NVML");
  r = read_nvml(dir_.path + "/none.so", fast());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message().rfind("read NVML " + dir_.path + "/none.so: cannot load it: ", 0),
            0u)
      << r.error().message();
}

TEST(NvmlLibrary, IsTheDiscoveredDriversLibnvidiaMl) {
  testing::FakeHost host;
  DiscoveryOptions o;
  o.driver_root = host.root;
  o.dev_root = host.dev;
  o.cuda_probe = CudaProbe::kNever;
  auto nv = discover_nvidia(o);
  ASSERT_TRUE(nv.ok()) << nv.error().message();
  EXPECT_EQ(nvml_library(*nv), host.root + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15");
  EXPECT_EQ(nvml_library(NvidiaDriver{}), "");
  EXPECT_EQ(no_nvidia_driver_error("gpu stats", "/srv/none").message(),
            "gpu stats: no NVIDIA driver found under /srv/none");
}

TEST(NvmlBusId, TakesTheKernelsForm) {
  EXPECT_EQ(normalize_bus_id("00000000:07:00.0"), "0000:07:00.0");
  EXPECT_EQ(normalize_bus_id("00000001:0A:00.0"), "0001:0a:00.0");
  EXPECT_EQ(normalize_bus_id("0000:85:00.0"), "0000:85:00.0");
  EXPECT_EQ(normalize_bus_id("10000000:07:00.0"), "10000000:07:00.0");
  EXPECT_EQ(normalize_bus_id(""), "");
}

TEST(GpuStatsWindow, CountsOnlyTheSamplesWithAValue) {
  EXPECT_FALSE(window_of({}).has_value());
  EXPECT_FALSE(window_of({std::nullopt, std::nullopt}).has_value());
  auto w = window_of({4.0, std::nullopt, 1.0, 2.0});
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->min, 1.0);
  EXPECT_DOUBLE_EQ(w->mean, 2.333);
  EXPECT_DOUBLE_EQ(w->max, 4.0);
  // Rounding never takes the mean outside the samples' range.
  EXPECT_DOUBLE_EQ(window_of({61.234, 61.234, 61.234})->mean, 61.234);
}

std::vector<NvidiaGpu> two_gpus() {
  std::vector<NvidiaGpu> gpus(2);
  gpus[0].index = 0;
  gpus[0].uuid = kUuid0;
  gpus[1].index = 1;
  gpus[1].uuid = kUuid1;
  return gpus;
}

TEST(GpuStatsSelection, FollowsRunsGpusFlagWithinTheJobsGpus) {
  auto all = stats_selection(std::nullopt, std::nullopt, two_gpus());
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->has_value());
  auto one = stats_selection("device=1", std::nullopt, two_gpus());
  ASSERT_TRUE(one.ok()) << one.error().message();
  EXPECT_EQ(**one, std::vector<std::string>{kUuid1});
  auto by_uuid = stats_selection(std::string("device=") + kUuid0, std::nullopt, two_gpus());
  ASSERT_TRUE(by_uuid.ok()) << by_uuid.error().message();
  EXPECT_EQ(**by_uuid, std::vector<std::string>{kUuid0});
  auto job = stats_selection(std::nullopt, "1", two_gpus());
  ASSERT_TRUE(job.ok()) << job.error().message();
  EXPECT_EQ(**job, std::vector<std::string>{kUuid1});
  auto first_of_job = stats_selection("device=0", "1", two_gpus());
  ASSERT_TRUE(first_of_job.ok()) << first_of_job.error().message();
  EXPECT_EQ(**first_of_job, std::vector<std::string>{kUuid1});
  auto outside = stats_selection("device=1", "1", two_gpus());
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().message(),
            "select GPUs GPU 1: no such GPU: 1 GPU is visible to this job (CUDA_VISIBLE_DEVICES)");
  auto bad = stats_selection("bogus", std::nullopt, two_gpus());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "parse --gpus bogus: unknown field 'bogus'");
}

NvmlReadings sample_readings() {
  NvmlReadings r;
  r.driver_version = "550.54.15";
  for (unsigned u : {10u, 50u}) {
    NvmlSample s;
    s.unix_ms = 1795664423123 + (u == 50 ? 1000 : 0);
    NvmlGpuReading a;
    a.index = 0;
    a.uuid = kUuid0;
    a.name = "NVIDIA A100-SXM4-40GB";
    a.bus_id = "0000:07:00.0";
    a.compute_capability = "8.0";
    a.utilization_gpu = u;
    a.utilization_memory = 5;
    a.memory_total_mib = 40960;
    a.memory_used_mib = 1024;
    a.temperature_c = 45;
    a.power_w = 61.25;
    a.processes = std::vector<NvmlProcess>{{4242, 1000}, {4243, std::nullopt}};
    NvmlGpuReading b;
    b.index = 1;
    b.error = "nvmlDeviceGetHandleByIndex_v2: Insufficient Permissions";
    s.gpus = {a, b};
    r.samples.push_back(s);
  }
  return r;
}

TEST(GpuStatsReport, JsonKeepsItsDocumentedShape) {
  NvmlOptions o;
  o.samples = 2;
  o.interval_ms = 1000;
  GpuStatsHost host;
  host.node = "n1";
  GpuProcessOwner owner;
  owner.found = true;
  owner.uid = 1000;
  owner.user = "alice";
  owner.command = "python3";
  owner.slurm_job_id = 42;
  owner.slurm_job_from = "slurmstepd";
  host.owners[4242] = owner;
  EXPECT_EQ(gpu_stats_json(sample_readings(), o, host), nlohmann::json::parse(R"({
    "node": "n1", "driver_version": "550.54.15", "time": "2026-11-26T03:40:24.123Z", "samples": 2,
    "interval_ms": 1000,
    "gpus": [
      {"index": 0, "uuid": "GPU-11111111-2222-3333-4444-555555555555",
       "name": "NVIDIA A100-SXM4-40GB", "bus_id": "0000:07:00.0", "compute_capability": "8.0",
       "utilization": {"gpu": 50, "memory": 5},
       "memory": {"total_mib": 40960, "used_mib": 1024},
       "temperature_c": 45, "power_w": 61.25,
       "processes": [{"pid": 4242, "used_memory_mib": 1000, "uid": 1000, "user": "alice",
                      "command": "python3", "slurm_job_id": 42, "slurm_job_from": "slurmstepd"},
                     {"pid": 4243, "used_memory_mib": null, "uid": null, "user": null,
                      "command": null, "slurm_job_id": null, "slurm_job_from": null}],
       "window": {"utilization_gpu": {"min": 10.0, "mean": 30.0, "max": 50.0},
                  "utilization_memory": {"min": 5.0, "mean": 5.0, "max": 5.0},
                  "memory_used_mib": {"min": 1024.0, "mean": 1024.0, "max": 1024.0},
                  "power_w": {"min": 61.25, "mean": 61.25, "max": 61.25}},
       "error": null},
      {"index": 1, "uuid": null, "name": null, "bus_id": null, "compute_capability": null,
       "utilization": {"gpu": null, "memory": null},
       "memory": {"total_mib": null, "used_mib": null},
       "temperature_c": null, "power_w": null, "processes": null,
       "window": {"utilization_gpu": null, "utilization_memory": null, "memory_used_mib": null,
                  "power_w": null},
       "error": "nvmlDeviceGetHandleByIndex_v2: Insufficient Permissions"}
    ]})"));
}

TEST(GpuStatsReport, TextIsATablePerGpuThenTheProcesses) {
  NvmlOptions o;
  o.interval_ms = 1000;
  NvmlReadings r = sample_readings();
  GpuStatsHost host;
  host.owners[4242].uid = 1000;
  host.owners[4242].user = "alice";
  host.owners[4242].command = "python3";
  host.owners[4242].slurm_job_id = 42;
  host.owners[4243].uid = 1001;  // an account without a name
  EXPECT_EQ(
      gpu_stats_text(r, o, host),
      "NVIDIA driver 550.54.15, 2026-11-26T03:40:24.123Z, 2 samples 1000 ms apart: "
      "utilisation as mean (min-max)\n"
      "GPU  NAME                   BUS ID        UTIL         MEM UTIL  MEMORY (MiB)  TEMP  POWER\n"
      "0    NVIDIA A100-SXM4-40GB  0000:07:00.0  30% (10-50)  5% (5-5)  1024 / 40960  45C   61.2W\n"
      "GPU 1 cannot be read: nvmlDeviceGetHandleByIndex_v2: Insufficient Permissions\n"
      "\n"
      "GPU  PID   USER   JOB  COMMAND  MEMORY (MiB)\n"
      "0    4242  alice  42   python3  1000\n"
      "0    4243  1001   -    -        -\n");
  r.samples.erase(r.samples.begin());
  r.samples[0].gpus.pop_back();
  r.samples[0].gpus[0].processes.reset();
  EXPECT_EQ(gpu_stats_text(r, o),
            "NVIDIA driver 550.54.15, 2026-11-26T03:40:24.123Z\n"
            "GPU  NAME                   BUS ID        UTIL  MEM UTIL  MEMORY (MiB)  TEMP  POWER\n"
            "0    NVIDIA A100-SXM4-40GB  0000:07:00.0  50%   5%        1024 / 40960  45C   61.2W\n"
            "\n"
            "no compute processes\n"
            "processes unknown (NVML cannot list them) on GPU 0\n");
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

TEST(GpuProcessOwner, SlurmJobFromCgroupStepdTitleAndEnviron) {
  EXPECT_EQ(slurm_job_of_cgroup("12:pids:/\n4:memory:/slurm/uid_1000/job_42/step_0/task_0\n"), 42);
  EXPECT_EQ(slurm_job_of_cgroup("0::/system.slice/slurmstepd.scope/job_7/step_batch/user/task_0\n"),
            7);
  EXPECT_FALSE(slurm_job_of_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n").has_value());
  EXPECT_FALSE(slurm_job_of_cgroup("0::/x/job_abc/job_\n").has_value());
  EXPECT_FALSE(slurm_job_of_cgroup("").has_value());
  EXPECT_EQ(slurm_job_of_stepd_title(std::string("slurmstepd: [123.batch]\0\0\0", 26)), 123);
  EXPECT_EQ(slurm_job_of_stepd_title("slurmstepd: [9.0]"), 9);
  EXPECT_EQ(slurm_job_of_stepd_title("slurmstepd: [9.extern]"), 9);
  EXPECT_FALSE(slurm_job_of_stepd_title("slurmstepd").has_value());
  EXPECT_FALSE(slurm_job_of_stepd_title("slurmstepd: [9]").has_value());
  EXPECT_FALSE(slurm_job_of_stepd_title(std::string("sh\0slurmstepd: [9.0]", 20)).has_value());
  std::string env("HOME=/home/a\0SLURM_JOB_ID=55\0SLURM_JOB_IDX=1\0", 44);
  EXPECT_EQ(slurm_job_of_environ(env), 55);
  EXPECT_FALSE(slurm_job_of_environ(std::string("XSLURM_JOB_ID=5\0", 16)).has_value());
  EXPECT_FALSE(slurm_job_of_environ("SLURM_JOB_ID=").has_value());
}

/// A fabricated /proc entry: stat (its parent), status (its uid), comm, cmdline, and the
/// optional cgroup and environ.
void fake_proc(const TempDir& root, unsigned pid, unsigned ppid, const std::string& comm,
               const std::string& cmdline, const std::string& cgroup = "",
               const std::string& environ = "") {
  const std::string d = std::to_string(pid) + "/";
  root.write(d + "stat",
             std::to_string(pid) + " (" + comm + ") S " + std::to_string(ppid) + " 1 1 0\n");
  root.write(d + "status", "Name:\t" + comm + "\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n");
  root.write(d + "comm", comm + "\n");
  root.write(d + "cmdline", cmdline);
  if (!cgroup.empty()) root.write(d + "cgroup", cgroup);
  if (!environ.empty()) root.write(d + "environ", environ);
}

TEST(GpuProcessOwner, DescribesAProcessFromAProcTree) {
  TempDir proc("proc");
  // slurmd (10) > slurmstepd [77.0] (20) > berth (30) > python (a) b (40), with a comm of
  // spaces and parentheses; 50 daemonised (parent 1) carrying the job it left in its
  // environment; 60 in a Slurm cgroup; 70 outside any job.
  fake_proc(proc, 10, 1, "slurmd", std::string("/usr/sbin/slurmd\0", 17));
  fake_proc(proc, 20, 10, "slurmstepd", std::string("slurmstepd: [77.0]\0\0", 20));
  fake_proc(proc, 30, 20, "berth", std::string("berth\0run\0", 10));
  fake_proc(proc, 40, 30, "python (a) b", std::string("python\0", 7));
  fake_proc(proc, 50, 1, "leftover", std::string("leftover\0", 9), "0::/user.slice\n",
            std::string("SLURM_JOB_ID=66\0", 16));
  fake_proc(proc, 60, 1, "trainer", std::string("trainer\0", 8),
            "0::/system.slice/slurmstepd.scope/job_88/step_0/user/task_0\n",
            std::string("SLURM_JOB_ID=66\0", 16));
  fake_proc(proc, 70, 1, "sleep", std::string("sleep\0", 6));
  GpuProcessOwner o = describe_gpu_process(proc.path, 40);
  EXPECT_TRUE(o.found);
  EXPECT_EQ(o.uid, 0u);
  EXPECT_EQ(o.user, "root");
  EXPECT_EQ(o.command, "python (a) b");
  EXPECT_EQ(o.slurm_job_id, 77);
  EXPECT_EQ(o.slurm_job_from, "slurmstepd");
  o = describe_gpu_process(proc.path, 50);
  EXPECT_EQ(o.slurm_job_id, 66);
  EXPECT_EQ(o.slurm_job_from, "environ");
  o = describe_gpu_process(proc.path, 60);
  EXPECT_EQ(o.slurm_job_id, 88);
  EXPECT_EQ(o.slurm_job_from, "cgroup");
  o = describe_gpu_process(proc.path, 70);
  EXPECT_TRUE(o.found);
  EXPECT_EQ(o.command, "sleep");
  EXPECT_FALSE(o.slurm_job_id.has_value());
  EXPECT_EQ(o.slurm_job_from, "");
  // slurmstepd is nobody's job by its own title, only its descendants are.
  EXPECT_FALSE(describe_gpu_process(proc.path, 20).slurm_job_id.has_value());
  // Gone: nothing known.
  o = describe_gpu_process(proc.path, 99);
  EXPECT_FALSE(o.found);
  EXPECT_FALSE(o.uid.has_value());
  EXPECT_EQ(o.command, "");
}

TEST(GpuProcessOwner, OwnProcessOnTheRealProc) {
  // This test's own process: its uid, its name, and (outside Slurm) no job unless its
  // environment names one.
  GpuProcessOwner o = describe_gpu_process("/proc", static_cast<unsigned>(::getpid()));
  ASSERT_TRUE(o.found);
  EXPECT_EQ(o.uid, ::getuid());
  EXPECT_FALSE(o.command.empty());
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr) {
    EXPECT_FALSE(o.slurm_job_id.has_value());
  }
}

}  // namespace
}  // namespace berth

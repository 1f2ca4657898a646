#include "broker/manifests.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "test_util.h"

namespace berth::broker {
namespace {

using nlohmann::json;

// The goldens are the emitters' output as dump(2) writes it, compared as text, so that a number
// turning from 8 into 8.0 fails too. BERTH_UPDATE_GOLDENS=1 rewrites them (then read the diff);
// tests/e2e/test_broker_manifests.py checks the same files with the backends' own client models
// and schemas.
void expect_golden(const json& got, const std::string& name) {
  std::string path = std::string(BERTH_TEST_DATA) + "/broker/" + name + ".json";
  std::string text = got.dump(2) + "\n";
  if (const char* u = std::getenv("BERTH_UPDATE_GOLDENS"); u != nullptr && std::string(u) == "1") {
    std::ofstream(path) << text;
    return;
  }
  EXPECT_EQ(text, slurp(path)) << name << ": " << json::diff(json::parse(slurp(path)), got).dump();
}

/// Two H100s of at least 40 GiB on one node, CUDA 12.2 and driver 535 at least.
BrokerJob gpu_job() {
  BrokerJob j;
  j.name = "Train ResNet_50";
  j.image = "registry.example.org/ml/train:1.2";
  j.command = {"python3", "train.py", "--epochs", "3"};
  j.env = {{"EPOCHS", "3"}, {"WANDB_MODE", "offline"}};
  j.need.cpus_per_task = 8;
  j.need.gpus = 2;
  j.need.memory_mb = 65536;
  j.need.walltime_s = 7200;
  j.need.gpu.vendor = "nvidia";
  j.need.gpu.models = {"H100"};
  j.need.gpu.memory_mib_min = 40960;
  j.need.gpu.cuda_min = "12.2";
  j.need.gpu.driver_min = "535";
  return j;
}

NodeClass h100_class() {
  NodeClass c;
  c.partition = "gpu";
  c.name = "64cpu-512000mb-4xh100";
  c.gpu_vendor = "NVIDIA";
  c.gpu_model = "NVIDIA H100 80GB HBM3";
  c.gpu_type = "h100";
  c.gpus_per_node = 4;
  c.gpu_memory_mib = 81559;
  c.cuda_version = "12.4";
  c.driver_version = "550.54.15";
  c.cpus_per_node = 64;
  c.memory_mb_per_node = 512000;
  c.total_nodes = 4;
  return c;
}

/// A job of the body's defaults but two CPUs and a command.
BrokerJob cpu_job() {
  BrokerJob j;
  j.image = "debian:12";
  j.command = {"sh", "-c", "echo hi"};
  j.need.cpus_per_task = 2;
  return j;
}

NodeClass cpu_class() {
  NodeClass c;
  c.partition = "batch";
  c.name = "32cpu-128000mb";
  c.cpus_per_node = 32;
  c.memory_mb_per_node = 128000;
  c.total_nodes = 10;
  return c;
}

SiteOptions k8s_site() {
  SiteOptions s;
  s.k8s_namespace = "batch";
  s.runtime_class = "nvidia";
  return s;
}

SiteOptions mesos_site() {
  SiteOptions s;
  s.disk_mb = 10240;
  s.chronos_gpus = true;
  return s;
}

SiteOptions openstack_site() {
  SiteOptions s;
  s.image_ref = "7d1a9c7e-2f4b-4c39-9c1e-0c0f4e6a8b21";
  s.network_id = "3b5d8f9a-1c2e-4d6f-8a0b-9e7c5d3f1a2b";
  s.key_name = "berth";
  s.flavours = {
      {"f-m1l", "m1.large", 8, 16384, 0, "", 0},
      {"f-m1x", "m1.xlarge", 16, 32768, 0, "", 0},
      {"f-g2h2", "g2.h100x2", 32, 131072, 2, "H100", 81920},
      {"f-g1h2", "g1.h100x2", 32, 131072, 2, "h100", 81920},  // the same size: its name wins
      {"f-g1h1", "g1.h100x1", 16, 65536, 1, "H100", 81920},
      {"f-g1a2", "g1.a100x2", 32, 131072, 2, "A100", 40960},
      {"f-g1h4", "g1.h100x4", 64, 262144, 4, "H100", 81920},
  };
  return s;
}

TEST(BrokerManifestsTest, KubernetesGpuJobSelectsOnFeatureDiscoveryLabels) {
  expect_golden(kubernetes_job(gpu_job(), h100_class(), k8s_site()), "kubernetes_gpu");
}

TEST(BrokerManifestsTest, KubernetesAmdJobAsksAmdGpusWithoutNvidiaLabels) {
  BrokerJob j = gpu_job();
  j.name = "mi250x-bench";
  j.need.gpus = 1;
  j.need.gpu = {};
  j.need.gpu.vendor = "amd";
  j.need.gpu.models = {"MI250X"};
  NodeClass c = h100_class();
  c.gpu_vendor = "AMD";
  c.gpu_model = "AMD Instinct MI250X";
  c.gpu_type = "mi250x";
  expect_golden(kubernetes_job(j, c, SiteOptions{}), "kubernetes_amd");
}

TEST(BrokerManifestsTest, KubernetesCpuJobHasNoGpuResourceNorToleration) {
  expect_golden(kubernetes_job(cpu_job(), cpu_class(), SiteOptions{}), "kubernetes_cpu");
}

TEST(BrokerManifestsTest, KubernetesSiteResourceNameWinsAndNodesArePods) {
  SiteOptions s = k8s_site();
  s.gpu_resource = "nvidia.com/mig-1g.10gb";
  BrokerJob j = gpu_job();
  j.need.nodes = 2;
  j.need.gpus = 3;
  j.need.walltime_s = 0;
  json m = kubernetes_job(j, h100_class(), s);
  const json& spec = m["spec"];
  EXPECT_EQ(spec["completions"], 2);
  EXPECT_EQ(spec["parallelism"], 2);
  EXPECT_FALSE(spec.contains("activeDeadlineSeconds"));
  const json& pod = spec["template"]["spec"];
  EXPECT_EQ(pod["containers"][0]["resources"]["limits"]["nvidia.com/mig-1g.10gb"], "2");
  EXPECT_EQ(pod["tolerations"][0]["key"], "nvidia.com/mig-1g.10gb");
  EXPECT_FALSE(pod.contains("affinity"));  // GFD's labels are the whole GPU's
}

TEST(BrokerManifestsTest, KubernetesNameIsADnsLabel) {
  BrokerJob j = cpu_job();
  j.name = "--" + std::string(70, 'X') + "_y";
  EXPECT_EQ(kubernetes_job(j, cpu_class(), SiteOptions{})["metadata"]["name"],
            std::string(63, 'x'));
  j.name = "__";
  EXPECT_EQ(kubernetes_job(j, cpu_class(), SiteOptions{})["metadata"]["name"], "berth-job");
}

TEST(BrokerManifestsTest, MarathonGpuAppUsesTheMesosContainerizer) {
  expect_golden(marathon_app(gpu_job(), h100_class(), mesos_site()), "marathon_gpu");
}

TEST(BrokerManifestsTest, MarathonCpuAppUsesDocker) {
  expect_golden(marathon_app(cpu_job(), cpu_class(), SiteOptions{}), "marathon_cpu");
}

TEST(BrokerManifestsTest, MesosConstraintIsTheLiteralClassName) {
  NodeClass c = h100_class();
  c.gpu_type = "";
  c.gpu_model = "A100-SXM4-80GB (rev.2)";
  SiteOptions s;
  s.mesos_gpu_attribute = "gpu";
  EXPECT_EQ(marathon_app(gpu_job(), c, s)["constraints"],
            json::parse(R"j([["gpu", "LIKE", "A100-SXM4-80GB \\(rev\\.2\\)"]])j"));
  BrokerJob any = gpu_job();
  any.need.gpu.models.clear();  // any model: no constraint
  EXPECT_FALSE(marathon_app(any, c, s).contains("constraints"));
}

TEST(BrokerManifestsTest, ChronosGpuJobWhereTheSiteHasTheDeepPatch) {
  expect_golden(chronos_job(gpu_job(), h100_class(), mesos_site()), "chronos_gpu");
}

TEST(BrokerManifestsTest, ChronosCpuJob) {
  expect_golden(chronos_job(cpu_job(), cpu_class(), SiteOptions{}), "chronos_cpu");
}

TEST(BrokerManifestsTest, OpenStackGpuServerOnTheSmallestAdequateFlavour) {
  auto m = openstack_server(gpu_job(), h100_class(), openstack_site());
  ASSERT_TRUE(m.ok()) << m.error().message();
  expect_golden(*m, "openstack_gpu");
}

TEST(BrokerManifestsTest, OpenStackCpuServer) {
  SiteOptions s = openstack_site();
  s.network_id = "";
  s.key_name = "";
  BrokerJob j = cpu_job();
  j.need.nodes = 3;
  j.need.tasks = 3;
  auto m = openstack_server(j, cpu_class(), s);
  ASSERT_TRUE(m.ok()) << m.error().message();
  expect_golden(*m, "openstack_cpu");
}

TEST(BrokerManifestsTest, SmallestFlavourHasFewestGpusThenLeastRam) {
  std::vector<Flavour> fl = {
      {"a", "big-ram-1gpu", 8, 500000, 1, "L4", 24576},
      {"b", "small-ram-2gpu", 8, 16000, 2, "L4", 24576},
      {"c", "l40-1gpu", 8, 16000, 1, "L40", 49152},
  };
  Requirement need;
  need.gpus = 1;
  need.gpu.models = {"l4"};
  ASSERT_NE(smallest_flavour(need, fl), nullptr);
  EXPECT_EQ(smallest_flavour(need, fl)->id, "a");  // L40 is not L4
  need.gpu.models.clear();
  EXPECT_EQ(smallest_flavour(need, fl)->id, "c");
  need.gpu.memory_mib_max = 32768;
  EXPECT_EQ(smallest_flavour(need, fl)->id, "a");
  need.memory_mb = 600000;
  EXPECT_EQ(smallest_flavour(need, fl), nullptr);
}

TEST(BrokerManifestsTest, NoFlavourFitsIsOneLine) {
  BrokerJob j = gpu_job();
  j.need.gpus = 8;
  auto m = openstack_server(j, h100_class(), openstack_site());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message(),
            "check requirement OpenStack flavours: none of 7 holds 8 GPUs (H100, at least 40960 "
            "MiB), 8 vCPUs and 65536 MB of RAM");
  j = cpu_job();
  j.need.cpus_per_task = 1;
  auto none = openstack_server(j, cpu_class(), SiteOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(),
            "check requirement OpenStack flavours: none of 0 holds 1 vCPU and 0 MB of RAM");
}

TEST(BrokerManifestsTest, ManifestForDispatchesOnTheKind) {
  for (const char* kind : {"kubernetes", "marathon", "chronos", "openstack"}) {
    auto m = manifest_for(kind, cpu_job(), cpu_class(), openstack_site());
    ASSERT_TRUE(m.ok()) << kind << ": " << m.error().message();
  }
  EXPECT_EQ(manifest_for("kubernetes", gpu_job(), h100_class(), k8s_site()).value(),
            kubernetes_job(gpu_job(), h100_class(), k8s_site()));
  EXPECT_EQ(manifest_for("marathon", cpu_job(), cpu_class(), {}).value()["id"], "/berthd-job");
  EXPECT_EQ(manifest_for("chronos", cpu_job(), cpu_class(), {}).value()["schedule"], "R1//PT1M");
  EXPECT_EQ(manifest_for("openstack", cpu_job(), cpu_class(), openstack_site())
                .value()["server"]["flavorRef"],
            "f-m1l");
}

TEST(BrokerManifestsTest, ABerthdSiteGetsItsOwnJobBodyPinnedToTheClass) {
  BrokerJob job = gpu_job();
  job.mounts = {"/data:/data:ro"};
  job.group = "/vo/ml";
  EXPECT_EQ(berthd_job(job, h100_class()),
            (nlohmann::json{{"name", "Train ResNet_50"},
                            {"image", "registry.example.org/ml/train:1.2"},
                            {"command", {"python3", "train.py", "--epochs", "3"}},
                            {"env", {{"EPOCHS", "3"}, {"WANDB_MODE", "offline"}}},
                            {"mounts", {"/data:/data:ro"}},
                            {"group", "/vo/ml"},
                            {"resources",
                             {{"nodes", 1},
                              {"tasks", 1},
                              {"cpus_per_task", 8},
                              {"gpus", 2},
                              {"gpu_model", "h100"},
                              {"memory_mb", 65536},
                              {"walltime_s", 7200},
                              {"partition", "gpu"}}}}));
  // A CPU job: no GPU fields; the class's partition all the same.
  EXPECT_EQ(manifest_for("berthd", cpu_job(), cpu_class(), {}).value(),
            (nlohmann::json{
                {"name", "berthd-job"},
                {"image", "debian:12"},
                {"command", {"sh", "-c", "echo hi"}},
                {"resources",
                 {{"nodes", 1}, {"tasks", 1}, {"cpus_per_task", 2}, {"partition", "batch"}}}}));
}

TEST(BrokerManifestsTest, ManifestForRefusesWhatItCannotEmit) {
  auto slurm = manifest_for("slurm", cpu_job(), cpu_class(), {});
  ASSERT_FALSE(slurm.ok());
  EXPECT_EQ(slurm.error().message(),
            "parse manifest kind: \"slurm\" is not berthd, kubernetes, marathon, chronos or "
            "openstack");
  EXPECT_EQ(slurm.error().code, ErrorCode::kInvalidInput);
  auto chronos = manifest_for("chronos", gpu_job(), h100_class(), SiteOptions{});
  ASSERT_FALSE(chronos.ok());
  EXPECT_EQ(chronos.error().message(),
            "check requirement Chronos: asks 2 GPUs; this site's Chronos has no GPU support "
            "(chronos_gpus)");
  BrokerJob share = cpu_job();
  share.need.gpu_share = 0.25;
  auto shared = manifest_for("kubernetes", share, h100_class(), k8s_site());
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.error().message(),
            "check requirement kubernetes: asks a share of a GPU; this kind of site gives whole "
            "GPUs only");
  auto openstack = manifest_for("openstack", gpu_job(), h100_class(), SiteOptions{});
  ASSERT_FALSE(openstack.ok());
  EXPECT_EQ(openstack.error().message(),
            "check requirement OpenStack flavours: none of 0 holds 2 GPUs (H100, at least 40960 "
            "MiB), 8 vCPUs and 65536 MB of RAM");
}

}  // namespace
}  // namespace berth::broker

#include <gtest/gtest.h>

#include "gateway/glue.h"

namespace berth::gateway {
namespace {

GlueSite two_classes() {
  GlueSite s;
  s.cluster = "berth";
  s.host = "gw.example.org";
  s.slurm_version = "22.05.8";
  s.creation_time = "2026-11-26T04:00:00Z";
  // Two GPU nodes of one class (one busy with 2 of its 4 GPUs, one drained), one CPU node.
  s.nodes = {{"g1", "mixed", 64, 16, 256000, "a100", 4, 2, {"gpu", "all"}},
             {"g2", "unavailable", 64, 0, 256000, "a100", 4, 0, {"gpu", "all"}},
             {"c1", "idle", 32, 0, 128000, "", 0, 0, {"cpu", "all"}}};
  s.partitions = {{"gpu", 86400, 3600, true, 1, 2, 2},
                  {"cpu", -1, -1, false, 0, 0, -1},
                  {"all", 3600, -1, true, 1, 2, -1}};
  s.accelerators["a100"] = {"NVIDIA", "NVIDIA A100-SXM4-40GB", 40960, {"8.0"}, "550.54.15", "12.4"};
  return s;
}

const nlohmann::json& by_name(const nlohmann::json& list, const std::string& name) {
  for (const auto& e : list)
    if (e["Name"] == name) return e;
  static const nlohmann::json none;
  return none;
}

TEST(Glue, ServiceManagerAndAccelerators) {
  auto d = glue_document(two_classes());
  const auto& service = d["ComputingService"][0];
  EXPECT_EQ(service["ID"], "urn:glue2:ComputingService:berth@berth.gw.example.org");
  EXPECT_EQ(service["RunningJobs"], 2);
  EXPECT_EQ(service["WaitingJobs"], 4);
  EXPECT_EQ(service["Associations"]["ComputingShareID"].size(), 3u);
  const auto& m = d["ComputingManager"][0];
  EXPECT_EQ(m["ProductName"], "SLURM");
  EXPECT_EQ(m["ProductVersion"], "22.05.8");
  EXPECT_EQ(m["TotalLogicalCPUs"], 160);
  EXPECT_EQ(m["SlotsUsedByLocalJobs"], 16);
  const auto& cma = d["ComputingManagerAccelerator"][0];
  EXPECT_EQ(cma["Type"], "GPU");
  EXPECT_EQ(cma["TotalNumbers"], 8);  // the drained node's cards included
  EXPECT_EQ(cma["TotalSlots"], 4);    // only the available node's
  EXPECT_EQ(cma["UsedSlots"], 2);
}

TEST(Glue, OneExecutionEnvironmentPerNodeClassWithItsAccelerator) {
  auto d = glue_document(two_classes());
  ASSERT_EQ(d["ExecutionEnvironment"].size(), 2u);
  const auto& gpu = by_name(d["ExecutionEnvironment"], "64cpu-256000mb-4xa100");
  EXPECT_EQ(gpu["TotalInstances"], 2);
  EXPECT_EQ(gpu["UsedInstances"], 1);
  EXPECT_EQ(gpu["UnavailableInstances"], 1);
  EXPECT_EQ(gpu["LogicalCPUs"], 64);
  EXPECT_EQ(gpu["MainMemorySize"], 256000);
  ASSERT_EQ(d["AcceleratorEnvironment"].size(), 1u);
  const auto& acc = d["AcceleratorEnvironment"][0];
  EXPECT_EQ(gpu["Associations"]["AcceleratorEnvironmentID"][0], acc["ID"]);
  EXPECT_EQ(acc["Associations"]["ExecutionEnvironmentID"], gpu["ID"]);
  EXPECT_EQ(acc["Type"], "GPU");
  EXPECT_EQ(acc["Numbers"], 4);
  EXPECT_EQ(acc["Vendor"], "NVIDIA");
  EXPECT_EQ(acc["Model"], "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(acc["Memory"], 40960);
  EXPECT_EQ(acc["ComputeCapability"], nlohmann::json({"8.0"}));
  EXPECT_EQ(acc["Version"], "550.54.15");
  EXPECT_EQ(acc["OtherInfo"], nlohmann::json::array({"GRESType=a100", "CUDAVersion=12.4"}));
  const auto& cpu = by_name(d["ExecutionEnvironment"], "32cpu-128000mb");
  EXPECT_FALSE(cpu["Associations"].contains("AcceleratorEnvironmentID"));
}

TEST(Glue, SharesCountSlotsOverTheirAvailableNodes) {
  auto d = glue_document(two_classes());
  const auto& gpu = by_name(d["ComputingShare"], "gpu");
  EXPECT_EQ(gpu["MappingQueue"], "gpu");
  EXPECT_EQ(gpu["MaxWallTime"], 86400);
  EXPECT_EQ(gpu["DefaultWallTime"], 3600);
  EXPECT_EQ(gpu["ServingState"], "production");
  EXPECT_EQ(gpu["UsedSlots"], 16);
  EXPECT_EQ(gpu["FreeSlots"], 48);  // the drained node offers nothing
  EXPECT_EQ(gpu["Associations"]["ExecutionEnvironmentID"].size(), 1u);
  const auto& cpu = by_name(d["ComputingShare"], "cpu");
  EXPECT_EQ(cpu["ServingState"], "closed");
  EXPECT_FALSE(cpu.contains("MaxWallTime"));
  EXPECT_EQ(by_name(d["ComputingShare"], "all")["Associations"]["ExecutionEnvironmentID"].size(),
            2u);
  // GPU shares: the CPU-only partition has none.
  ASSERT_EQ(d["ComputingShareAccelerator"].size(), 2u);
  const auto& sa = by_name(d["ComputingShareAccelerator"], "gpu GPUs");
  EXPECT_EQ(sa["FreeSlots"], 2);
  EXPECT_EQ(sa["UsedSlots"], 2);
  EXPECT_EQ(sa["MaxSlotsPerJob"], 2);
  EXPECT_FALSE(by_name(d["ComputingShareAccelerator"], "all GPUs").contains("MaxSlotsPerJob"));
}

TEST(Glue, InfiniBandSplitsAClassAndIsPublishedAsNetworkInfo) {
  GlueSite s = two_classes();
  s.nodes[1].infiniband = true;  // g2: the same shape as g1, but on the fabric
  auto d = glue_document(s);
  ASSERT_EQ(d["ExecutionEnvironment"].size(), 3u);
  const auto& ib = by_name(d["ExecutionEnvironment"], "64cpu-256000mb-ib-4xa100");
  EXPECT_EQ(ib["ID"],
            "urn:glue2:ExecutionEnvironment:64cpu-256000mb-ib-4xa100@berth.gw.example.org");
  EXPECT_EQ(ib["NetworkInfo"], nlohmann::json::array({"infiniband"}));
  EXPECT_EQ(ib["TotalInstances"], 1);
  EXPECT_EQ(ib["UnavailableInstances"], 1);
  const auto& plain = by_name(d["ExecutionEnvironment"], "64cpu-256000mb-4xa100");
  EXPECT_EQ(plain["TotalInstances"], 1);
  EXPECT_FALSE(plain.contains("NetworkInfo"));
  EXPECT_FALSE(by_name(d["ExecutionEnvironment"], "32cpu-128000mb").contains("NetworkInfo"));
  // Each class its own accelerator entity; both partitions list both classes.
  EXPECT_EQ(d["AcceleratorEnvironment"].size(), 2u);
  EXPECT_EQ(by_name(d["ComputingShare"], "gpu")["Associations"]["ExecutionEnvironmentID"].size(),
            2u);
}

TEST(Glue, AnEndpointURLIsPublishedAsAComputingEndpointOfTheService) {
  GlueSite s = two_classes();
  s.endpoint_url = "https://gw.example.org:8443";
  auto d = glue_document(s);
  ASSERT_EQ(d["ComputingEndpoint"].size(), 1u);
  const auto& ep = d["ComputingEndpoint"][0];
  EXPECT_EQ(ep["ID"], "urn:glue2:ComputingEndpoint:berth@berth.gw.example.org");
  EXPECT_EQ(ep["URL"], "https://gw.example.org:8443");
  EXPECT_EQ(ep["InterfaceName"], "org.berth.berthd");
  EXPECT_EQ(ep["InterfaceVersion"], "1");
  EXPECT_EQ(ep["Technology"], "rest");
  EXPECT_EQ(ep["QualityLevel"], "production");
  EXPECT_EQ(ep["HealthState"], "ok");
  EXPECT_EQ(ep["ServingState"], "production");
  EXPECT_EQ(ep["CreationTime"], "2026-11-26T04:00:00Z");
  EXPECT_EQ(ep["Validity"], 300);
  const auto& service = d["ComputingService"][0];
  EXPECT_EQ(ep["Associations"]["ComputingServiceID"], service["ID"]);
  EXPECT_EQ(service["Associations"]["ComputingEndpointID"], nlohmann::json::array({ep["ID"]}));
  // Without a URL: no endpoint, and the service names none.
  auto bare = glue_document(two_classes());
  EXPECT_TRUE(bare["ComputingEndpoint"].empty());
  EXPECT_FALSE(bare["ComputingService"][0]["Associations"].contains("ComputingEndpointID"));
}

TEST(Glue, AnUntypedGpuHasNoGresTypeInOtherInfo) {
  GlueSite s;
  s.cluster = "c";
  s.host = "h";
  s.nodes = {{"n1", "idle", 8, 0, 16000, "", 2, 0, {"p"}}};
  s.partitions = {{"p", -1, -1, true, 0, 0, -1}};
  auto d = glue_document(s);
  const auto& acc = d["AcceleratorEnvironment"][0];
  EXPECT_EQ(acc["Name"], "8cpu-16000mb-2xgpu");
  EXPECT_EQ(acc["Model"], "");
  EXPECT_FALSE(acc.contains("OtherInfo"));
}

TEST(Glue, ASiteWithoutGpusHasNoAcceleratorEntities) {
  GlueSite s;
  s.cluster = "c";
  s.host = "h";
  s.nodes = {{"n1", "idle", 4, 0, 8000, "", 0, 0, {"p"}}};
  s.partitions = {{"p", 600, -1, true, 0, 0, -1}};
  auto d = glue_document(s);
  EXPECT_TRUE(d["ComputingManagerAccelerator"].empty());
  EXPECT_TRUE(d["ComputingShareAccelerator"].empty());
  EXPECT_TRUE(d["AcceleratorEnvironment"].empty());
  EXPECT_EQ(d["ExecutionEnvironment"][0]["TotalInstances"], 1);
}

}  // namespace
}  // namespace berth::gateway

#include "broker/site_info.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/json.h"
#include "gateway/glue.h"
#include "test_util.h"

namespace berth::broker {
namespace {

using nlohmann::json;

/// Every field of a class on one line, so that a failure shows which differs.
std::string describe(const NodeClass& c) {
  return "partition=" + c.partition + " name=" + c.name + " id=" + c.id +
         " vendor=" + c.gpu_vendor + " model=" + c.gpu_model + " type=" + c.gpu_type +
         " gpus=" + std::to_string(c.gpus_per_node) +
         " gpu_mib=" + std::to_string(c.gpu_memory_mib) + " cc=" + c.compute_capability +
         " cuda=" + c.cuda_version + " driver=" + c.driver_version +
         " cpus=" + std::to_string(c.cpus_per_node) +
         " mem=" + std::to_string(c.memory_mb_per_node) +
         " total=" + std::to_string(c.total_nodes) +
         " down=" + std::to_string(c.unavailable_nodes) + " used=" + std::to_string(c.used_nodes) +
         " free_gpus=" + std::to_string(c.free_gpus) +
         " walltime=" + std::to_string(c.max_walltime_s) +
         " production=" + (c.production ? "1" : "0") +
         " max_gpus=" + std::to_string(c.max_gpus_per_job) +
         " waiting=" + std::to_string(c.waiting_jobs) +
         " running=" + std::to_string(c.running_jobs) + " ib=" + (c.infiniband ? "1" : "0");
}

void expect_classes(const std::vector<NodeClass>& got, const std::vector<NodeClass>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(describe(got[i]), describe(want[i])) << "class " << i;
    EXPECT_TRUE(got[i] == want[i]) << "class " << i;
  }
}

/// A site of two partitions: "gpu" holds two A100 nodes (one busy with 2 of its 4 GPUs, one
/// down) and a CPU node; "hpc" (closed) two H100 nodes on InfiniBand (one using 4 of its 8
/// GPUs) and both CPU nodes (one fully allocated).
gateway::GlueSite two_partitions() {
  gateway::GlueSite s;
  s.cluster = "hpc1";
  s.host = "gw.example.org";
  s.slurm_version = "23.02.7";
  s.creation_time = "2026-12-04T18:00:00Z";
  s.validity_s = 120;
  s.endpoint_url = "https://gw.example.org:8443";
  s.nodes = {{"a1", "mixed", 64, 16, 256000, "a100", 4, 2, {"gpu"}},
             {"a2", "unavailable", 64, 0, 256000, "a100", 4, 0, {"gpu"}},
             {"h1", "mixed", 96, 32, 1024000, "h100", 8, 4, {"hpc"}, true},
             {"h2", "idle", 96, 0, 1024000, "h100", 8, 0, {"hpc"}, true},
             {"c1", "idle", 32, 0, 128000, "", 0, 0, {"gpu", "hpc"}},
             {"c2", "allocated", 32, 32, 128000, "", 0, 0, {"hpc"}}};
  s.partitions = {{"gpu", 86400, 3600, true, 3, 5, 4}, {"hpc", -1, -1, false, 2, 0, -1}};
  s.accelerators["a100"] = {"NVIDIA", "NVIDIA A100-SXM4-40GB", 40960, {"8.0"}, "550.54.15", "12.4"};
  // 81559 MiB, as berthd publishes NVML's memory: 85520 MB.
  s.accelerators["h100"] = {"NVIDIA", "NVIDIA H100 80GB HBM3", 85520, {"8.9", "9.0"}, "550.54.15",
                            "12.4"};
  return s;
}

NodeClass cpu_class(const std::string& partition) {
  NodeClass c;
  c.partition = partition;
  c.name = "32cpu-128000mb";
  c.cpus_per_node = 32;
  c.memory_mb_per_node = 128000;
  c.total_nodes = 2;
  c.used_nodes = 1;
  c.free_gpus = 0;
  return c;
}

TEST(BrokerSiteInfo, ReadsBackEveryFieldOfBerthdsDocument) {
  auto site = read_glue("hpc1", gateway::glue_document(two_partitions()));
  ASSERT_TRUE(site.ok()) << site.error().message();
  EXPECT_EQ(site->site, "hpc1");
  EXPECT_EQ(site->creation_time, "2026-12-04T18:00:00Z");
  EXPECT_EQ(site->validity_s, 120);

  NodeClass cpu_gpu = cpu_class("gpu");
  cpu_gpu.max_walltime_s = 86400;
  cpu_gpu.max_gpus_per_job = 4;
  cpu_gpu.waiting_jobs = 5;
  cpu_gpu.running_jobs = 3;
  NodeClass a100 = cpu_gpu;
  a100.name = "64cpu-256000mb-4xa100";
  a100.gpu_vendor = "NVIDIA";
  a100.gpu_model = "NVIDIA A100-SXM4-40GB";
  a100.gpu_type = "a100";
  a100.gpus_per_node = 4;
  a100.gpu_memory_mib = 39063;  // 40960 MB
  a100.compute_capability = "8.0";
  a100.cuda_version = "12.4";
  a100.driver_version = "550.54.15";
  a100.cpus_per_node = 64;
  a100.memory_mb_per_node = 256000;
  a100.total_nodes = 2;
  a100.unavailable_nodes = 1;
  a100.used_nodes = 1;
  a100.free_gpus = 2;  // the share's only GPU class: the up node's 4 less the 2 in use
  NodeClass cpu_hpc = cpu_class("hpc");
  cpu_hpc.production = false;
  cpu_hpc.running_jobs = 2;
  NodeClass h100 = cpu_hpc;
  h100.name = "96cpu-1024000mb-ib-8xh100";
  h100.gpu_vendor = "NVIDIA";
  h100.gpu_model = "NVIDIA H100 80GB HBM3";
  h100.gpu_type = "h100";
  h100.gpus_per_node = 8;
  h100.gpu_memory_mib = 81559;
  h100.compute_capability = "9.0";  // the highest, though listed last
  h100.cuda_version = "12.4";
  h100.driver_version = "550.54.15";
  h100.cpus_per_node = 96;
  h100.memory_mb_per_node = 1024000;
  h100.total_nodes = 2;
  h100.used_nodes = 1;
  h100.free_gpus = 12;
  h100.infiniband = true;
  for (NodeClass* c : {&cpu_gpu, &a100, &cpu_hpc, &h100})
    c->id = "urn:glue2:ExecutionEnvironment:" + c->name + "@hpc1.gw.example.org";
  expect_classes(site->classes, {cpu_gpu, a100, cpu_hpc, h100});
}

TEST(BrokerSiteInfo, ReadsTheOgfDialectWithPlainAttributeLinks) {
  auto doc = parse_json(slurp(std::string(BERTH_TEST_DATA) + "/broker/glue_ogf.json"), "golden");
  ASSERT_TRUE(doc.ok()) << doc.error().message();
  auto site = read_glue("tacc", *doc);
  ASSERT_TRUE(site.ok()) << site.error().message();
  EXPECT_EQ(site->creation_time, "2026-12-01T10:00:00Z");
  EXPECT_EQ(site->validity_s, 3600);
  NodeClass gpu;  // linked by the share's Resource
  gpu.partition = "gpu";
  gpu.name = "GpuNode";
  gpu.gpu_vendor = "NVIDIA";
  gpu.gpu_model = "Tesla V100-SXM2-32GB";
  gpu.gpus_per_node = 4;
  gpu.gpu_memory_mib = 31250;  // 32768 MB
  gpu.compute_capability = "7.0";
  gpu.cuda_version = "12.2";
  gpu.driver_version = "535.104.05";
  gpu.cpus_per_node = 48;
  gpu.memory_mb_per_node = 384000;
  gpu.total_nodes = 4;
  gpu.used_nodes = 3;
  gpu.free_gpus = 6;
  gpu.max_walltime_s = 172800;
  gpu.max_gpus_per_job = 8;  // the share accelerator's, not the share's CPU MaxSlotsPerJob
  gpu.waiting_jobs = 12;
  gpu.running_jobs = 7;
  gpu.infiniband = true;  // "InfiniBand" in NetworkInfo
  NodeClass normal;       // linked by the environment's Share
  normal.partition = "normal";
  normal.name = "NodeType1";
  normal.cpus_per_node = 16;
  normal.memory_mb_per_node = 64000;
  normal.total_nodes = 100;
  normal.unavailable_nodes = 2;
  normal.used_nodes = 90;
  normal.free_gpus = 0;
  normal.max_walltime_s = 86400;
  normal.production = false;  // draining
  normal.waiting_jobs = 3;
  normal.running_jobs = 40;
  NodeClass fpga;  // in no share; its FPGA is no GPU
  fpga.name = "FpgaNode";
  fpga.cpus_per_node = 32;
  fpga.memory_mb_per_node = 128000;
  fpga.total_nodes = 2;
  fpga.free_gpus = 0;
  for (NodeClass* c : {&gpu, &normal, &fpga})
    c->id = "urn:glue2:ExecutionEnvironment:" + c->name + ".cluster.example.org";
  expect_classes(site->classes, {gpu, normal, fpga});
}

TEST(BrokerSiteInfo, ReadsEgiAssociationsByClassNameAndFreeGpusOnlyWhereTheyShow) {
  // Two GPU classes in one share: the share's free GPUs are no single class's.
  json doc = json::parse(R"({
    "ComputingShare": [{"ID": "s", "MappingQueue": "mixed",
                        "Associations": {"ExecutionEnvironment": ["busy", "idle"]}}],
    "ComputingShareAccelerator": [{"ID": "sa", "FreeSlots": 9,
                                   "Associations": {"ComputingShare": ["s"]}}],
    "ExecutionEnvironment": [
      {"ID": "busy", "LogicalCPUs": 8, "TotalInstances": 3, "UsedInstances": 1,
       "Associations": {"AcceleratorEnvironment": ["busy-gpu"]}},
      {"ID": "idle", "Name": "idle", "TotalInstances": 3, "UnavailableInstances": 1,
       "NetworkInfo": "infiniband"}],
    "AcceleratorEnvironment": [
      {"ID": "busy-gpu", "Type": "GPU", "Number": 2, "Vendor": "UNKNOWN",
       "OtherInfo": {"CUDAVersion": "12.1"}},
      {"ID": "idle-gpu", "Type": "GPU", "Number": 4, "Model": "L40S",
       "Associations": {"ExecutionEnvironment": ["idle"]}}]
  })");
  auto site = read_glue("egi", doc);
  ASSERT_TRUE(site.ok()) << site.error().message();
  ASSERT_EQ(site->classes.size(), 2u);
  const NodeClass& busy = site->classes[0];
  EXPECT_EQ(busy.name, "busy");  // no Name: the ID
  EXPECT_EQ(busy.partition, "mixed");
  EXPECT_EQ(busy.gpus_per_node, 2);
  EXPECT_EQ(busy.gpu_vendor, "");
  EXPECT_EQ(busy.cuda_version, "12.1");
  EXPECT_EQ(busy.free_gpus, -1);
  EXPECT_EQ(busy.max_walltime_s, -1);
  EXPECT_EQ(busy.max_gpus_per_job, -1);
  EXPECT_TRUE(busy.production);
  const NodeClass& idle = site->classes[1];
  EXPECT_EQ(idle.gpu_model, "L40S");
  EXPECT_EQ(idle.free_gpus, 8);  // no node used: every GPU of the two up nodes
  EXPECT_TRUE(idle.infiniband);
  EXPECT_EQ(site->creation_time, "");
  EXPECT_EQ(site->validity_s, 0);
}

TEST(BrokerSiteInfo, ASiteWithoutNodesHasNoClasses) {
  gateway::GlueSite s;
  s.cluster = "c";
  s.host = "h";
  s.creation_time = "2026-12-04T18:00:00Z";
  auto site = read_glue("empty", gateway::glue_document(s));
  ASSERT_TRUE(site.ok()) << site.error().message();
  EXPECT_TRUE(site->classes.empty());
  EXPECT_EQ(site->validity_s, 300);
}

std::string glue_error(const std::string& text) {
  auto site = read_glue("hpc1", json::parse(text));
  return site.ok() ? "<ok>" : site.error().message();
}

TEST(BrokerSiteInfo, AMalformedGlueDocumentIsOneLineNamingTheSite) {
  auto site = read_glue("hpc1", json::array());
  ASSERT_FALSE(site.ok());
  EXPECT_EQ(site.error().code, ErrorCode::kInvalidInput);
  const std::string p = "parse GLUE document of site hpc1: ";
  EXPECT_EQ(site.error().message(), p + "the document is not a JSON object");
  EXPECT_EQ(glue_error("{}"), p + "there is no \"ExecutionEnvironment\" list");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": {}})"),
            p + "\"ExecutionEnvironment\" is not a list");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e"}, 3]})"),
            p + "ExecutionEnvironment[1] is not an object");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"Name": "e"}]})"),
            p + "ExecutionEnvironment[0] has no \"ID\" string");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e"}, {"ID": "e"}]})"),
            p + "two ExecutionEnvironment entities have ID \"e\"");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e", "LogicalCPUs": "64"}]})"),
            p + "ExecutionEnvironment \"e\": \"LogicalCPUs\" is not a whole number from 0 to "
                "100000000");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e", "MainMemorySize": -1}]})"),
            p + "ExecutionEnvironment \"e\": \"MainMemorySize\" is not a whole number from 0 "
                "to 1099511627776");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e", "TotalInstances": 4,
                           "UsedInstances": 3, "UnavailableInstances": 2}]})"),
            p + "ExecutionEnvironment \"e\": UsedInstances 3 and UnavailableInstances 2 exceed "
                "TotalInstances 4");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e", "NetworkInfo": [1]}]})"),
            p + "ExecutionEnvironment \"e\": \"NetworkInfo\" is not a list of strings");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e", "Associations": []}]})"),
            p + "ExecutionEnvironment \"e\": \"Associations\" is not an object");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e",
                           "Associations": {"ComputingShareID": 7}}]})"),
            p + "ExecutionEnvironment \"e\": \"Associations\".\"ComputingShareID\" is not an ID "
                "or a list of IDs");
  EXPECT_EQ(glue_error(R"({"ComputingShare": [{"ID": "s", "Resource": ["gone"]}],
                           "ExecutionEnvironment": [{"ID": "e"}]})"),
            p + "ComputingShare \"s\" names ExecutionEnvironment \"gone\", which the document "
                "lacks");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e"}],
                           "AcceleratorEnvironment": [{"ID": "a", "ExecutionEnvironment": "e"},
                                                      {"ID": "b", "ExecutionEnvironment": "e"}]})"),
            p + "ExecutionEnvironment \"e\" has two GPU AcceleratorEnvironments, \"a\" and \"b\"");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e"}],
                           "AcceleratorEnvironment": [{"ID": "a", "ExecutionEnvironment": "e",
                                                       "ComputeCapability": ["sm_90"]}]})"),
            p + "AcceleratorEnvironment \"a\": \"ComputeCapability\" holds \"sm_90\", not a "
                "version");
  EXPECT_EQ(glue_error(R"({"ExecutionEnvironment": [{"ID": "e"}],
                           "AcceleratorEnvironment": [{"ID": "a", "Type": 1}]})"),
            p + "AcceleratorEnvironment \"a\": \"Type\" is not a string");
  EXPECT_EQ(glue_error(R"({"ComputingShare": [{"ID": "s", "MaxWallTime": 1.5}],
                           "ExecutionEnvironment": [{"ID": "e", "Share": "s"}]})"),
            p + "ComputingShare \"s\": \"MaxWallTime\" is not a whole number from 0 to "
                "1099511627776");
}

TEST(BrokerSiteInfo, ReadsCmdbFlavoursAsClasses) {
  auto doc = parse_json(slurp(std::string(BERTH_TEST_DATA) + "/broker/cmdb.json"), "golden");
  ASSERT_TRUE(doc.ok()) << doc.error().message();
  auto site = read_cmdb("cloud", *doc);
  ASSERT_TRUE(site.ok()) << site.error().message();
  EXPECT_EQ(site->site, "cloud");
  EXPECT_EQ(site->creation_time, "");
  EXPECT_EQ(site->validity_s, 0);
  NodeClass v100;  // repeated by the second tenant: one class
  v100.name = "g1.xlarge-2xv100";
  v100.gpu_vendor = "NVIDIA";
  v100.gpu_model = "Tesla V100";
  v100.gpus_per_node = 2;
  v100.cuda_version = "12.2";
  v100.driver_version = "535.54.03";
  v100.cpus_per_node = 16;
  v100.memory_mb_per_node = 65536;
  v100.total_nodes = 1;
  NodeClass bar;  // cloud-info-provider's own test flavour: vendor and model UNKNOWN
  bar.name = "m1.bar";
  bar.gpus_per_node = 23;
  bar.cuda_version = "12.2";
  bar.driver_version = "535.54.03";
  bar.cpus_per_node = 4;
  bar.memory_mb_per_node = 8192;
  bar.total_nodes = 1;
  bar.infiniband = true;
  NodeClass small;  // no GPUs: no GPU facts
  small.name = "m1.small";
  small.cpus_per_node = 1;
  small.memory_mb_per_node = 2048;
  small.total_nodes = 1;
  v100.id = "4f6b8a1e";  // flavor_id: what a server is booted on
  bar.id = "9c2d7e30";
  small.id = "1b0e5f77";
  expect_classes(site->classes, {v100, bar, small});
}

std::string cmdb_error(const std::string& text) {
  auto site = read_cmdb("cloud", json::parse(text));
  return site.ok() ? "<ok>" : site.error().message();
}

TEST(BrokerSiteInfo, AMalformedCmdbDocumentIsOneLineNamingTheSite) {
  auto site = read_cmdb("cloud", json::object());
  ASSERT_FALSE(site.ok());
  EXPECT_EQ(site.error().code, ErrorCode::kInvalidInput);
  const std::string p = "parse CMDB document of site cloud: ";
  EXPECT_EQ(site.error().message(), p + "the document is not a JSON list");
  EXPECT_EQ(cmdb_error(R"([{"data": {}}])"), p + "entry 0 has no \"type\" string");
  EXPECT_EQ(cmdb_error(R"([{"type": "image"}, {"type": "flavor", "data": []}])"),
            p + "entry 1 (flavor) has no \"data\" object");
  EXPECT_EQ(cmdb_error(R"([{"type": "flavor", "data": {"flavor_id": "f"}}])"),
            p + "entry 0 (flavor) has no \"flavor_name\" string");
  EXPECT_EQ(cmdb_error(R"([{"type": "flavor", "data": {"flavor_name": "g", "num_gpus": "2"}}])"),
            p + "entry 0 (flavor): \"num_gpus\" is not a whole number from 0 to 100000000");
  EXPECT_EQ(cmdb_error(R"([{"type": "flavor",
                            "data": {"flavor_name": "g", "infiniband_support": "yes"}}])"),
            p + "entry 0 (flavor): \"infiniband_support\" is not true or false");
  EXPECT_EQ(
      cmdb_error(R"([{"type": "service", "data": {"properties": {"gpu_cuda_version": 12}}}])"),
      p + "entry 0 (service) properties: \"gpu_cuda_version\" is not a string");
}

}  // namespace
}  // namespace berth::broker

#include <gtest/gtest.h>

#include "gateway/gpu_facts.h"
#include "gateway/jobs_db.h"
#include "gateway/reclaim.h"
#include "gateway/resources.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

using nlohmann::json;

/// A `berth gpu stats --json` document of `node` at second `t` with `gpus` ({uuid, cc, MiB}).
std::string doc(const std::string& node, int t, const std::string& driver,
                std::vector<std::tuple<std::string, std::string, int>> gpus) {
  json list = json::array();
  int index = 0;
  for (const auto& [uuid, cc, mib] : gpus)
    list.push_back({{"index", index++},
                    {"uuid", uuid},
                    {"compute_capability", cc.empty() ? json() : json(cc)},
                    {"memory", {{"total_mib", mib}, {"used_mib", 1}}},
                    {"utilization", {{"gpu", 50}, {"memory", 1}}}});
  char when[32];
  std::snprintf(when, sizeof when, "2026-12-03T10:00:%02d.000Z", t);
  return json{{"node", node}, {"driver_version", driver}, {"time", when}, {"gpus", list}}.dump(2) +
         "\n";
}

TEST(GpuFacts, SamplesSayWhatEachNodesGpusAre) {
  // Two periods of a two-node job: the later document of a GPU replaces the earlier one.
  std::string text = doc("g1", 1, "535.104.05", {{"GPU-a", "8.0", 40960}}) +
                     doc("g2", 1, "550.54.15", {{"GPU-b", "9.0", 81559}, {"GPU-c", "", 0}}) +
                     doc("g1", 5, "550.54.15", {{"GPU-a", "8.0", 40960}});
  auto s = newest_sample(text, 5);
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->measured.size(), 2u);
  EXPECT_EQ(s->measured.at("g1").driver_version, "550.54.15");
  EXPECT_EQ(s->measured.at("g1").gpus.at("GPU-a"), (MeasuredGpu{"8.0", 40960}));
  EXPECT_EQ(s->measured.at("g2").gpus.at("GPU-b"), (MeasuredGpu{"9.0", 81559}));
  EXPECT_EQ(s->measured.at("g2").gpus.at("GPU-c"), (MeasuredGpu{"", 0}));
  // A document without a node, or GPUs without a UUID, measure nothing.
  GpuFactsMap none;
  add_measured_gpus(json::parse(doc("", 1, "1", {{"GPU-x", "8.0", 1}})), none);
  add_measured_gpus(json::parse(doc("g9", 1, "1", {{"", "8.0", 1}})), none);
  EXPECT_TRUE(none.empty());
}

TEST(GpuFacts, KeptInTheDatabaseAcrossRestarts) {
  TempDir dir("gpu-facts");
  const std::string path = dir / "jobs.db";
  GpuFactsMap g1 = {{"g1", {"550.54.15", {{"GPU-a", {"8.0", 40960}}}}}};
  {
    auto db = JobsDb::open(path);
    ASSERT_TRUE(db.ok()) << db.error().message();
    GpuFacts facts(db->get());
    EXPECT_TRUE(facts.nodes().empty());
    ASSERT_TRUE(facts.observe(g1).ok());
    // A node's other GPU is added to what is known; the first stays.
    ASSERT_TRUE(facts.observe({{"g1", {"", {{"GPU-b", {"8.0", 40960}}}}}}).ok());
    EXPECT_EQ(facts.nodes().at("g1").gpus.size(), 2u);
    EXPECT_EQ(facts.nodes().at("g1").driver_version, "550.54.15");
  }
  auto db = JobsDb::open(path);
  ASSERT_TRUE(db.ok());
  GpuFacts again(db->get());
  ASSERT_EQ(again.nodes().count("g1"), 1u);
  EXPECT_EQ(again.nodes().at("g1").gpus.at("GPU-b"), (MeasuredGpu{"8.0", 40960}));
  // The database's identity is untouched by the facts beside it.
  EXPECT_EQ((*db)->instance().size(), 16u);
  // A stored value that does not parse is forgotten, not fatal.
  ASSERT_TRUE((*db)->set_meta("gpu_facts", "{not json").ok());
  EXPECT_TRUE(GpuFacts(db->get()).nodes().empty());
}

TEST(GpuFacts, GlueSaysWhatWasMeasuredOnEachGresType) {
  std::vector<SlurmNode> nodes = {
      {"g1", "mixed", {"gpu"}, 64, 8, 4, 1, 256000, "a100"},
      {"g2", "idle", {"gpu"}, 64, 0, 4, 0, 256000, "a100"},
      {"h1", "idle", {"gpu"}, 64, 0, 8, 0, 512000, "h100"},
      {"c1", "idle", {"cpu"}, 32, 0, 0, 0, 128000, ""},
  };
  PublishConfig publish;
  publish.gpu_models["a100"].vendor = "NVIDIA";
  publish.gpu_models["a100"].driver_version = "999.1";  // typed, and wrong: measured wins
  publish.gpu_models["a100"].memory_mb = 1;
  GpuFactsMap measured = {
      {"g1", {"550.54.15", {{"GPU-a", {"8.0", 40960}}, {"GPU-b", {"8.6", 40960}}}}},
      {"g2", {"535.104.05", {{"GPU-c", {"8.0", 40000}}}}},
      {"h1", {"550.54.15", {{"GPU-d", {"9.0", 81559}}}}},
      {"c1", {"550.54.15", {{"GPU-z", {"7.5", 1}}}}},    // no GRES: not a GPU node here
      {"gone", {"550.54.15", {{"GPU-y", {"7.0", 1}}}}},  // no longer in Slurm
  };
  GlueSite site = glue_site("c", publish, nodes, {}, {}, -1, measured);
  ASSERT_EQ(site.accelerators.size(), 2u);
  const GlueAccelerator& a100 = site.accelerators.at("a100");
  EXPECT_EQ(a100.vendor, "NVIDIA");
  EXPECT_EQ(a100.compute_capability, (std::vector<std::string>{"8.0", "8.6"}));
  EXPECT_EQ(a100.driver_version, "535.104.05");  // the oldest: what every node offers
  EXPECT_EQ(a100.memory_mb, 41943);              // 40000 MiB, the smallest, in MB
  const GlueAccelerator& h100 = site.accelerators.at("h100");
  EXPECT_EQ(h100.compute_capability, (std::vector<std::string>{"9.0"}));
  EXPECT_EQ(h100.memory_mb, 85520);  // 81559 MiB
  // In the document, as GLUE's attributes.
  json d = glue_document(site);
  bool seen = false;
  for (const auto& acc : d["AcceleratorEnvironment"])
    if (acc["Name"] == "64cpu-256000mb-4xa100") {
      seen = true;
      EXPECT_EQ(acc["ComputeCapability"], json({"8.0", "8.6"}));
      EXPECT_EQ(acc["Version"], "535.104.05");
    }
  EXPECT_TRUE(seen) << d.dump(2);
  // Nothing measured: no ComputeCapability at all, whatever the configuration says.
  site = glue_site("c", publish, nodes, {}, {}, -1);
  EXPECT_TRUE(site.accelerators.at("a100").compute_capability.empty());
  EXPECT_EQ(site.accelerators.at("a100").driver_version, "999.1");
}

TEST(GpuFacts, TheSitesUrlAndInfinibandFromResourcesConfig) {
  std::vector<SlurmNode> nodes = {{"g1", "idle", {"gpu"}, 64, 0, 4, 0, 256000, "a100"}};
  PublishConfig publish;
  GlueSite site = glue_site("c", publish, nodes, {}, {}, -1);
  EXPECT_EQ(site.endpoint_url, "");
  EXPECT_FALSE(site.nodes[0].infiniband);
  publish.url = "https://berthd.example.org";
  publish.infiniband = true;
  site = glue_site("c", publish, nodes, {}, {}, -1);
  EXPECT_EQ(site.endpoint_url, "https://berthd.example.org");
  EXPECT_TRUE(site.nodes[0].infiniband);
  json d = glue_document(site);
  ASSERT_EQ(d["ComputingEndpoint"].size(), 1u);
  EXPECT_EQ(d["ComputingEndpoint"][0]["URL"], "https://berthd.example.org");
  EXPECT_EQ(d["ExecutionEnvironment"][0]["NetworkInfo"], json({"infiniband"}));
}

TEST(GlueSite, OnlyThePartitionsAJobMayNameArePublishedWhereTheGatewaySays) {
  std::vector<SlurmPartition> partitions(3);
  partitions[0].name = "gpu";
  partitions[1].name = "debug";
  partitions[2].name = "admin";
  PublishConfig publish;
  GlueSite site = glue_site("c", publish, {}, partitions, {}, -1);
  EXPECT_EQ(site.partitions.size(), 3u);  // none named: every partition
  publish.partitions = {"debug", "gpu"};
  site = glue_site("c", publish, {}, partitions, {}, -1);
  ASSERT_EQ(site.partitions.size(), 2u);
  EXPECT_EQ(site.partitions[0].name, "gpu");
  EXPECT_EQ(site.partitions[1].name, "debug");
}

}  // namespace
}  // namespace berth::gateway

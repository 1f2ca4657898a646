#include "broker/placement.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace berth::broker {
namespace {

NodeClass gpu_class(std::string partition, std::string name, std::string model, std::string type,
                    int gpus, int64_t mib, std::string cc, std::string cuda, std::string driver) {
  NodeClass c;
  c.partition = std::move(partition);
  c.name = std::move(name);
  c.gpu_vendor = "NVIDIA";
  c.gpu_model = std::move(model);
  c.gpu_type = std::move(type);
  c.gpus_per_node = gpus;
  c.gpu_memory_mib = mib;
  c.compute_capability = std::move(cc);
  c.cuda_version = std::move(cuda);
  c.driver_version = std::move(driver);
  c.cpus_per_node = 64;
  c.memory_mb_per_node = 512000;
  c.total_nodes = 1;
  c.free_gpus = gpus;
  c.max_walltime_s = 86400;
  return c;
}

/// The three sites: a with H100s, b with two nodes of A100-80GBs and InfiniBand, c
/// with L40Ss, a cap of 2 GPUs per job and a small quota.
std::vector<SiteView> three_sites() {
  SiteView a, b, c;
  a.name = "a";
  a.info.classes = {gpu_class("gpu", "64cpu-512000mb-2xh100", "NVIDIA H100 80GB HBM3", "h100", 2,
                              81559, "9.0", "12.4", "550.54.15")};
  b.name = "b";
  NodeClass a100 = gpu_class("gpu", "64cpu-512000mb-2xa100", "NVIDIA A100-SXM4-80GB", "a100", 2,
                             81920, "8.0", "12.2", "535.161.08");
  a100.total_nodes = 2;
  a100.free_gpus = 4;
  a100.infiniband = true;
  NodeClass cpu;
  cpu.partition = "cpu";
  cpu.name = "32cpu-128000mb";
  cpu.cpus_per_node = 32;
  cpu.memory_mb_per_node = 128000;
  cpu.total_nodes = 4;
  cpu.max_walltime_s = 3600;
  b.info.classes = {a100, cpu};
  c.name = "c";
  c.info.classes = {gpu_class("gpu", "64cpu-512000mb-4xl40s", "NVIDIA L40S", "l40s", 4, 46068,
                              "8.9", "12.6", "560.35.03")};
  c.max_gpus_per_job = 2;
  c.gpu_hours_left = 3;
  return {a, b, c};
}

Requirement gpus(int n, std::vector<std::string> models = {}, int nodes = 1) {
  Requirement r;
  r.gpus = n;
  r.nodes = nodes;
  r.gpu.models = std::move(models);
  return r;
}

const Candidate* find(const Placement& p, const std::string& site, const std::string& cls = "") {
  for (const Candidate& c : p.candidates)
    if (c.site == site && (cls.empty() || c.cls == cls)) return &c;
  return nullptr;
}

std::vector<std::string> codes(const Candidate* c) {
  std::vector<std::string> out;
  if (c)
    for (const Reason& r : c->reasons) out.push_back(r.code);
  return out;
}

TEST(PlacementTest, EachModelLandsWhereItIs) {
  auto sites = three_sites();
  EXPECT_EQ(place(gpus(1, {"H100"}), {}, sites).chosen()->site, "a");
  EXPECT_EQ(place(gpus(1, {"A100-80GB"}), {}, sites).chosen()->site, "b");
  EXPECT_EQ(place(gpus(1, {"L40S"}), {}, sites).chosen()->site, "c");
  Placement any_a100 = place(gpus(1, {"A100"}), {}, sites);
  const Candidate* b = any_a100.chosen();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->site, "b");
  EXPECT_EQ(b->gpu_type, "a100");
}

TEST(PlacementTest, AModelNoSiteHasIsRejectedEverywhereWithTheReason) {
  Placement p = place(gpus(1, {"H200"}), {}, three_sites());
  EXPECT_EQ(p.chosen(), nullptr);
  EXPECT_EQ(codes(find(p, "a")), std::vector<std::string>{"no_gpu_model"});
  EXPECT_EQ(find(p, "a")->reasons[0].message, "asks H200; this class has NVIDIA H100 80GB HBM3");
  EXPECT_EQ(codes(find(p, "c")), std::vector<std::string>{"no_gpu_model"});
  EXPECT_EQ(codes(find(p, "b", "32cpu-128000mb")), std::vector<std::string>{"gpus_per_node"});
  EXPECT_EQ(find(p, "b", "32cpu-128000mb")->reasons[0].message,
            "asks 1 GPU per node; nodes of this class have none");
}

TEST(PlacementTest, GpusPerNodeNotPerSite) {
  auto sites = three_sites();
  // b has 4 A100s, 2 on each of two nodes: 4 on one node do not fit, 4 over two nodes do.
  Placement one = place(gpus(4, {"A100"}), {}, sites);
  EXPECT_EQ(codes(find(one, "b", "64cpu-512000mb-2xa100")),
            std::vector<std::string>{"gpus_per_node"});
  EXPECT_EQ(find(one, "b", "64cpu-512000mb-2xa100")->reasons[0].message,
            "asks 4 GPUs per node; nodes of this class have 2");
  EXPECT_EQ(place(gpus(4, {"A100"}, 2), {}, sites).chosen()->site, "b");
  // a has one node: two nodes do not fit however few GPUs each.
  Placement two = place(gpus(2, {"H100"}, 2), {}, sites);
  EXPECT_EQ(codes(find(two, "a")), std::vector<std::string>{"nodes"});
  EXPECT_EQ(find(two, "a")->reasons[0].message, "asks 2 nodes; this class has 1 that take work");
}

TEST(PlacementTest, VersionMinimumsAreMinimums) {
  auto sites = three_sites();
  Requirement r = gpus(1);
  r.gpu.cuda_min = "12.3";
  Placement p = place(r, {}, sites);
  EXPECT_EQ(codes(find(p, "b", "64cpu-512000mb-2xa100")), std::vector<std::string>{"cuda_too_old"});
  EXPECT_EQ(find(p, "b", "64cpu-512000mb-2xa100")->reasons[0].message,
            "asks CUDA 12.3 or newer; this class has 12.2");
  EXPECT_TRUE(find(p, "a")->fits);  // 12.4 is newer, not equal
  EXPECT_TRUE(find(p, "c")->fits);

  r = gpus(1);
  r.gpu.compute_capability_min = "8.9";
  p = place(r, {}, sites);
  EXPECT_EQ(codes(find(p, "b", "64cpu-512000mb-2xa100")),
            std::vector<std::string>{"compute_capability"});
  EXPECT_TRUE(find(p, "c")->fits);

  r = gpus(1);
  r.gpu.driver_min = "550";
  sites[2].info.classes[0].driver_version.clear();
  p = place(r, {}, sites);
  EXPECT_TRUE(find(p, "a")->fits);
  EXPECT_EQ(find(p, "c")->reasons[0].message,
            "asks driver 550 or newer; this class publishes none");
}

TEST(PlacementTest, GpuMemoryVendorAndInfiniband) {
  auto sites = three_sites();
  Requirement r = gpus(1);
  r.gpu.memory_mib_min = 64 * 1024;
  Placement p = place(r, {}, sites);
  EXPECT_EQ(find(p, "c")->reasons[0].message, "asks at least 64GB per GPU; this class's have 45GB");
  EXPECT_TRUE(find(p, "a")->fits);
  // A card counts at the size it is sold by: NVML's 46068 MiB is an L40S's 48 GB, 81559 an
  // H100's 80 GB.
  r.gpu.memory_mib_min = 48 * 1024;
  EXPECT_TRUE(find(place(r, {}, sites), "c")->fits);
  r.gpu.memory_mib_min = 80 * 1024;
  p = place(r, {}, sites);
  EXPECT_TRUE(find(p, "a")->fits);
  EXPECT_EQ(codes(find(p, "c")), std::vector<std::string>{"gpu_memory"});

  r = gpus(1);
  r.gpu.vendor = "amd";
  p = place(r, {}, sites);
  EXPECT_EQ(p.chosen(), nullptr);
  EXPECT_EQ(find(p, "a")->reasons[0].message, "asks amd GPUs; this class has nvidia ones");

  r = gpus(1);
  r.infiniband = true;
  p = place(r, {}, sites);
  EXPECT_EQ(p.chosen()->site, "b");
  EXPECT_EQ(codes(find(p, "a")), std::vector<std::string>{"no_infiniband"});
}

TEST(PlacementTest, TheCallersLimitsAndQuotaAtEachSite) {
  auto sites = three_sites();
  Placement p = place(gpus(3, {"L40S"}), {}, sites);
  EXPECT_EQ(p.chosen(), nullptr);
  EXPECT_EQ(find(p, "c")->reasons[0].code, "max_gpus_per_job");
  EXPECT_EQ(find(p, "c")->reasons[0].message, "asks 3 GPUs; the site allows at most 2 per job");

  Requirement r = gpus(2, {"L40S"});
  r.walltime_s = 7200;  // 4 GPU-hours, 3 left
  p = place(r, {}, sites);
  EXPECT_EQ(codes(find(p, "c")), std::vector<std::string>{"quota"});
  EXPECT_EQ(find(p, "c")->reasons[0].message,
            "the caller has 3 GPU-hours left at this site; the job may use 4");
  r.walltime_s = 3600;
  EXPECT_EQ(place(r, {}, sites).chosen()->site, "c");
}

TEST(PlacementTest, ASiteItselfIsRejectedWithEveryReason) {
  auto sites = three_sites();
  sites[0].up = false;
  sites[0].fresh = false;
  sites[1].issuer_trusted = false;
  sites[1].group_allowed = false;
  PlacementRequest where;
  where.exclude = {"c"};
  Placement p = place(gpus(1), where, sites);
  EXPECT_EQ(p.chosen(), nullptr);
  EXPECT_EQ(codes(find(p, "a")), std::vector<std::string>{"site_down"});  // hides stale_info
  EXPECT_EQ(codes(find(p, "b")), (std::vector<std::string>{"issuer_untrusted", "group_denied"}));
  EXPECT_EQ(codes(find(p, "c")), std::vector<std::string>{"excluded"});
  EXPECT_EQ(find(p, "c")->partition, "");
  where = {};
  where.sites = {"a", "b"};
  sites = three_sites();
  p = place(gpus(1), where, sites);
  EXPECT_EQ(find(p, "c")->reasons[0].message, "not among the job's placement.sites (a, b)");
}

TEST(PlacementTest, SharesAndGpuJobsNeedABackendThatTakesThem) {
  auto sites = three_sites();
  sites[0].shares = true;
  sites[2].kind = "chronos";
  sites[2].gpu_jobs = false;
  Requirement r;
  r.gpu_share = 0.5;
  Placement p = place(r, {}, sites);
  EXPECT_EQ(p.chosen()->site, "a");
  EXPECT_EQ(codes(find(p, "b")), std::vector<std::string>{"share_unsupported"});
  EXPECT_EQ(codes(find(p, "c")),
            (std::vector<std::string>{"backend_unsupported", "share_unsupported"}));
  EXPECT_EQ(find(p, "c")->reasons[0].message, "the site's chronos backend runs no GPU jobs");
}

TEST(PlacementTest, ACpuJobPrefersNodesWithoutGpus) {
  Requirement r;
  r.cpus_per_task = 4;
  Placement p = place(r, {}, three_sites());
  ASSERT_NE(p.chosen(), nullptr);
  EXPECT_EQ(p.chosen()->site, "b");
  EXPECT_EQ(p.chosen()->cls, "32cpu-128000mb");
  r.walltime_s = 7200;  // past the cpu partition's hour
  p = place(r, {}, three_sites());
  EXPECT_EQ(find(p, "b", "32cpu-128000mb")->reasons[0].message,
            "asks 7200 s; partition cpu allows at most 3600");
}

TEST(PlacementTest, ScoresRankByStartNowThenPreferenceAndTiesGoByName) {
  auto sites = three_sites();
  // Two identical sites: the tie goes by name.
  sites[1] = sites[0];
  sites[1].name = "a2";
  sites.resize(2);
  Placement p = place(gpus(1), {}, sites);
  ASSERT_EQ(p.candidates.size(), 2u);
  EXPECT_EQ(p.candidates[0].site, "a");
  EXPECT_EQ(p.candidates[0].score, p.candidates[1].score);
  // The caller's preference moves a2 first.
  PlacementRequest where;
  where.prefer = {{"a2", 1}};
  EXPECT_EQ(place(gpus(1), where, sites).chosen()->site, "a2");
  // A busy class (no free GPU) loses to one that can start now.
  sites[0].info.classes[0].free_gpus = 0;
  sites[0].info.classes[0].used_nodes = 1;
  p = place(gpus(1), {}, sites);
  EXPECT_EQ(p.chosen()->site, "a2");
  EXPECT_EQ(find(p, "a")->factors.start_now, 0);
  EXPECT_EQ(find(p, "a2")->factors.start_now, 100);
  EXPECT_GT(find(p, "a2")->score, find(p, "a")->score);
}

TEST(PlacementTest, WhatASitesDryRunSaidDecidesOnceThePublishedFactsFit) {
  auto sites = three_sites();
  sites[1] = sites[0];
  sites[1].name = "a2";
  sites.resize(2);
  // A class refusal rejects that class only; a caller-wide one the whole site.
  sites[0].asked.push_back({"gpu", "64cpu-512000mb-2xh100",
                            Reason{"no_gpu_model", "the site says: no GPU of type h100 here"},
                            false, std::nullopt});
  Placement p = place(gpus(1), {}, sites);
  ASSERT_NE(p.chosen(), nullptr);
  EXPECT_EQ(p.chosen()->site, "a2");
  EXPECT_EQ(codes(find(p, "a")), std::vector<std::string>{"no_gpu_model"});
  EXPECT_EQ(find(p, "a")->partition, "gpu");
  EXPECT_EQ(find(p, "a")->reasons[0].message, "the site says: no GPU of type h100 here");
  sites[0].asked = {{"gpu", "64cpu-512000mb-2xh100",
                     Reason{"quota", "the site says: 3 of 3 running jobs"}, true, std::nullopt}};
  p = place(gpus(1), {}, sites);
  EXPECT_EQ(codes(find(p, "a")), std::vector<std::string>{"quota"});
  EXPECT_EQ(find(p, "a")->partition, "");  // the site as a whole
  // A published fact that does not fit is the reason still, not the site's word.
  sites[0].asked[0].whole_site = false;
  EXPECT_EQ(codes(find(place(gpus(3), {}, sites), "a")), std::vector<std::string>{"gpus_per_node"});
  // A start estimate: an hour's wait at a loses to at once at a2; at once at both, a by name.
  sites[0].asked = {{"gpu", "64cpu-512000mb-2xh100", std::nullopt, false, 3600}};
  sites[1].asked = {{"gpu", "64cpu-512000mb-2xh100", std::nullopt, false, 0}};
  p = place(gpus(1), {}, sites);
  EXPECT_EQ(p.chosen()->site, "a2");
  EXPECT_NEAR(find(p, "a")->factors.wait, 100.0 / 7, 1e-9);
  EXPECT_EQ(find(p, "a2")->factors.wait, 100);
  sites[0].asked[0].wait_s = 0;
  EXPECT_EQ(place(gpus(1), {}, sites).chosen()->site, "a");
  // An estimate of another class is not this class's.
  sites[0].asked[0].cls = "another";
  EXPECT_EQ(find(place(gpus(1), {}, sites), "a")->factors.wait, 100);  // nobody waiting
}

TEST(PlacementTest, TheAnswerAsPostV1PlacementsWritesIt) {
  auto sites = three_sites();
  sites.resize(1);
  SiteView down;
  down.name = "z";
  down.up = false;
  sites.push_back(down);
  nlohmann::json j = placement_json(place(gpus(2, {"H100"}), {}, sites));
  EXPECT_EQ(
      j["chosen"],
      (nlohmann::json{{"site", "a"}, {"partition", "gpu"}, {"class", "64cpu-512000mb-2xh100"}}));
  ASSERT_EQ(j["candidates"].size(), 2u);
  const nlohmann::json& fit = j["candidates"][0];
  EXPECT_EQ(fit["verdict"], "fit");
  EXPECT_EQ(fit["reasons"], nlohmann::json::array());
  EXPECT_EQ(fit["factors"]["start_now"], 100);
  EXPECT_EQ(fit["factors"]["fit"], 100.0 * (1.0 + 1.0 / 64) / 2);  // 2 of 2 GPUs, 1 of 64 CPUs
  const nlohmann::json& no = j["candidates"][1];
  EXPECT_EQ(no,
            (nlohmann::json{
                {"site", "z"},
                {"partition", nullptr},
                {"class", nullptr},
                {"verdict", "rejected"},
                {"reasons",
                 {{{"code", "site_down"}, {"message", "the site did not answer its last poll"}}}},
                {"score", nullptr},
                {"factors", nullptr}}));
  EXPECT_EQ(placement_json(place(gpus(9), {}, sites))["chosen"], nullptr);
}

}  // namespace
}  // namespace berth::broker

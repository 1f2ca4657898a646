#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>

#include "gateway/reclaim.h"

namespace berth::gateway {
namespace {

/// A `berth gpu stats --json` document (docs/gpu.md), pretty-printed as the command writes it.
std::string doc(int64_t time, std::initializer_list<double> means, int ms = 123) {
  std::string gpus;
  int i = 0;
  for (double m : means) {
    if (!gpus.empty()) gpus += ",\n";
    gpus += "    {\"index\": " + std::to_string(i++) + ", \"utilization\": {\"gpu\": 99},\n" +
            "     \"window\": {\"utilization_gpu\": {\"min\": 0.0, \"mean\": " + std::to_string(m) +
            ", \"max\": 1.0}}}";
  }
  char when[32];
  time_t tt = static_cast<time_t>(time);
  struct tm tm {};
  gmtime_r(&tt, &tm);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03dZ", ms);
  return "{\n  \"driver_version\": \"550.54.15\",\n  \"time\": \"" + std::string(when) +
         frac + "\",\n  \"gpus\": [\n" + gpus + "\n  ]\n}\n";
}

TEST(GatewayReclaim, TheNewestPeriodAcrossNodesDecides) {
  // Two nodes per period, writing within a fraction of a second; the newest period has one
  // busy GPU: not idle.
  std::string text = doc(100, {0, 0}, 100) + doc(100, {1}, 400) + doc(160, {0, 0}, 800) +
                     doc(161, {50}, 100);
  auto s = newest_sample(text, 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->time, 161);
  EXPECT_EQ(s->gpus, 3);
  EXPECT_FALSE(s->idle);
  s = newest_sample(doc(100, {0, 0}) + doc(100, {1}, 200) + doc(160, {2, 0}) + doc(160, {4.9}, 300), 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->idle);
  // One node sampling every second: its previous document is not part of the newest period.
  s = newest_sample(doc(200, {0}) + doc(201, {0}), 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->gpus, 1);
  // A document cut short (the sampler writing) ends the reading; what came before counts.
  std::string cut = doc(200, {0});
  s = newest_sample(doc(190, {0}) + cut.substr(0, cut.size() / 2), 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->time, 190);
  // A tail of the file that begins inside a document skips to the next.
  std::string first = doc(100, {50});
  s = newest_sample(first.substr(first.size() / 2) + doc(160, {0}), 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->time, 160);
  EXPECT_TRUE(s->idle);
  EXPECT_FALSE(newest_sample("", 5).has_value());
  EXPECT_FALSE(newest_sample("berth: error: gpu stats: no NVIDIA driver found under /\n", 5).has_value());
  // No GPU reported is not "idle".
  EXPECT_FALSE(newest_sample(R"({"time": "1970-01-01T00:00:05Z", "gpus": []})", 5)->idle);
}

TEST(GatewayReclaim, AJobIsFlaggedOnceAfterItsIdleTime) {
  ReclaimPolicy p;
  p.idle_for_s = 120;
  IdleTracker t;
  using V = IdleTracker::Verdict;
  EXPECT_EQ(t.observe(7, {0, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {60, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {100, 1, false}, p), V::kBusy);  // busy again: the clock restarts
  EXPECT_EQ(t.observe(7, {160, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {279, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {280, 1, true}, p), V::kFlag);
  EXPECT_EQ(t.observe(7, {340, 1, true}, p), V::kIdle);  // flagged once
  EXPECT_TRUE(t.flagged(7));
  // A cancelling policy: two sample periods after the flag, once.
  p.cancel = true;
  p.sample_interval_s = 60;
  EXPECT_EQ(t.observe(7, {399, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {400, 1, true}, p), V::kCancel);
  EXPECT_EQ(t.observe(7, {460, 1, true}, p), V::kIdle);
  p.cancel = false;
  EXPECT_EQ(t.observe(8, {340, 1, false}, p), V::kBusy);
  EXPECT_EQ(t.flagged_count(), 1u);
  t.forget(7);
  EXPECT_TRUE(t.flagged(7));  // its record keeps the flag
  EXPECT_EQ(t.flagged_count(), 0u);
}

TEST(GatewayReclaim, TheSamplerAndTheNoticeInTheJobsScript) {
  ReclaimPolicy p;
  p.sample_interval_s = 30;
  std::string s = reclaim_watch_script("/usr/bin/berth", "/o/j.gpu", "/o/j.notice", "/o/j.err", p, 2);
  EXPECT_NE(s.find("srun --overlap --mem=0 --ntasks-per-node=1 --quiet '/usr/bin/berth' gpu stats --json"),
            std::string::npos) << s;
  EXPECT_NE(s.find(">>'/o/j.gpu' 2>>'/o/j.gpu.log'"), std::string::npos) << s;
  EXPECT_NE(s.find("cat '/o/j.notice' >>'/o/j.err'"), std::string::npos) << s;
  EXPECT_NE(s.find("sleep 30"), std::string::npos) << s;
  // On one node the batch step samples itself: no step to start.
  std::string one = reclaim_watch_script("/usr/bin/berth", "/o/j.gpu", "/o/j.notice", "/o/j.err", p, 1);
  EXPECT_NE(one.find("while :; do '/usr/bin/berth' gpu stats $sel --json"), std::string::npos) << one;
  EXPECT_NE(one.find("sel=\"--gpus device=$SLURM_JOB_GPUS\""), std::string::npos) << one;
  EXPECT_TRUE(s.ends_with(") &\n")) << s;
}

}  // namespace
}  // namespace berth::gateway

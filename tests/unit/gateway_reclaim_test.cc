#include <gtest/gtest.h>

#include <ctime>

#include "gateway/reclaim.h"

namespace berth::gateway {
namespace {

/// A `berth gpu stats --json` document (docs/gpu.md), pretty-printed as the command writes it.
std::string doc(int64_t time, std::initializer_list<double> means) {
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
  return "{\n  \"driver_version\": \"550.54.15\",\n  \"time\": \"" + std::string(when) +
         ".123Z\",\n  \"gpus\": [\n" + gpus + "\n  ]\n}\n";
}

TEST(GatewayReclaim, TheNewestPeriodAcrossNodesDecides) {
  // Two nodes per period; the newest period has one busy GPU: not idle.
  std::string text = doc(100, {0, 0}) + doc(101, {1}) + doc(160, {0, 0}) + doc(161, {50});
  auto s = newest_sample(text, 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->time, 161);
  EXPECT_EQ(s->gpus, 3);
  EXPECT_FALSE(s->idle);
  s = newest_sample(doc(100, {0, 0}) + doc(101, {1}) + doc(160, {2, 0}) + doc(161, {4.9}), 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->idle);
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
  EXPECT_EQ(t.observe(8, {340, 1, false}, p), V::kBusy);
  EXPECT_EQ(t.flagged_count(), 1u);
  t.forget(7);
  EXPECT_FALSE(t.flagged(7));
}

TEST(GatewayReclaim, TheWatcherSamplesInAStepOfItsOwnAndPassesTheNoticeOn) {
  ReclaimPolicy p;
  p.sample_interval_s = 30;
  std::string s = reclaim_watch_script("/usr/bin/berth", "/o/j.gpu", "/o/j.notice", "/o/j.err", p);
  EXPECT_NE(s.find("srun --overlap --ntasks-per-node=1 --quiet '/usr/bin/berth' gpu stats --json"),
            std::string::npos) << s;
  EXPECT_NE(s.find(">>'/o/j.gpu'"), std::string::npos) << s;
  EXPECT_NE(s.find("cat '/o/j.notice' >>'/o/j.err'"), std::string::npos) << s;
  EXPECT_NE(s.find("sleep 30"), std::string::npos) << s;
  EXPECT_TRUE(s.ends_with(") &\n")) << s;
}

}  // namespace
}  // namespace berth::gateway

// GPU-hour quotas (gateway/quotas.h): the period's start, the check and its message, and the
// [quotas] keys.
#include <gtest/gtest.h>

#include "gateway/config.h"
#include "gateway/quotas.h"

namespace berth::gateway {
namespace {

constexpr int64_t kH = 3600;
// Thursday 2026-11-26 14:30:15 UTC.
constexpr int64_t kNow = 1795703415;

TEST(GatewayQuotas, PeriodStartsInUtc) {
  QuotaConfig q;
  q.period = "month";
  EXPECT_EQ(period_start(q, kNow), 1793491200);  // 2026-11-01T00:00:00Z
  q.period = "week";
  EXPECT_EQ(period_start(q, kNow), 1795392000);  // Monday 2026-11-23
  q.period = "day";
  EXPECT_EQ(period_start(q, kNow), 1795651200);  // 2026-11-26
  EXPECT_EQ(period_start(q, 1795651200), 1795651200);
  q.period = "";
  q.period_s = 3600;
  EXPECT_EQ(period_start(q, kNow), kNow - int64_t{30} * 60 - 15);
  EXPECT_EQ(period_name(q), "3600 s period");
}

TEST(GatewayQuotas, RefusesAGpuJobOnceTheGroupHasUsedItsBudget) {
  QuotaConfig q;
  q.period = "day";
  q.gpu_hours["physics"] = 3;
  const int64_t day = 1795651200;
  std::vector<UsageRecord> records = {
      {"1", "alice", "physics", "a100", 2, 8, day - 2 * kH, day + kH},  // 1 h today: 2 GPU-h
      {"2", "bob", "physics", "", 0, 64, day, 0},                       // CPU only
      {"3", "carol", "bio", "a100", 8, 8, day, 0},                      // another group
  };
  // 2 GPU-hours used of 3: a GPU job is let through, and a job without GPUs always is.
  EXPECT_FALSE(check_gpu_quota(q, "physics", true, records, kNow));
  // A running job counts up to now: 1 GPU since 13:30:15 adds one hour.
  records.push_back({"4", "alice", "physics", "a100", 1, 1, kNow - kH, 0});
  auto no = check_gpu_quota(q, "physics", true, records, kNow);
  ASSERT_TRUE(no);
  EXPECT_EQ(no->message,
            "group physics has used 3.0000 of its 3 GPU-hours in the day from "
            "2026-11-26T00:00:00Z, the quota [quotas.groups.\"physics\"] gpu_hours = 3");
  EXPECT_EQ(no->group, "physics");
  EXPECT_DOUBLE_EQ(no->used, 3);
  EXPECT_EQ(no->since, day);
  EXPECT_EQ(no->period, "day");
  EXPECT_FALSE(check_gpu_quota(q, "physics", false, records, kNow));
  // Groups without an entry have no quota; an entry of 0 allows no GPU job at all.
  EXPECT_FALSE(check_gpu_quota(q, "bio", true, records, kNow));
  q.gpu_hours["bio"] = 0;
  EXPECT_TRUE(check_gpu_quota(q, "bio", true, {}, kNow));
  // Yesterday's use is not today's.
  q.gpu_hours["physics"] = 2.5;
  records.pop_back();
  EXPECT_FALSE(check_gpu_quota(q, "physics", true, records, kNow));
}

TEST(GatewayQuotas, ReadsAndChecksTheQuotasSection) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  auto c = parse_gateway_config(iss + R"(
[quotas]
period = "week"
[quotas.groups."physics"]
gpu_hours = 1000
[quotas.groups.bio]
gpu_hours = 0.5
)",
                                "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->quotas.period, "week");
  EXPECT_EQ(c->quotas.gpu_hours, (std::map<std::string, double>{{"bio", 0.5}, {"physics", 1000}}));
  c = parse_gateway_config(iss + "[quotas]\nperiod = 86400\n", "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->quotas.period_s, 86400);
  EXPECT_EQ(c->quotas.period, "");
  EXPECT_TRUE(c->quotas.empty());
  struct Case {
    std::string text;
    const char* message;
  };
  const Case cases[] = {
      {"[quotas]\nperiod = \"year\"\n",
       "read config f: line 5: \"period\" is not \"month\", \"week\", \"day\" or a number of "
       "seconds from 60 to 31622400"},
      {"[quotas]\nperiod = 5\n",
       "read config f: line 5: \"period\" is not \"month\", \"week\", \"day\" or a number of "
       "seconds from 60 to 31622400"},
      {"[quotas]\nbudget = 1\n", "read config f: line 5: \"budget\" is not a key of [quotas]"},
      {"[quotas.groups.g]\ngpu_hours = -1\n",
       "read config f: line 5: \"gpu_hours\" is not a number of GPU-hours from 0 to 1e9"},
      {"[quotas.groups.g]\ngpu_hours = \"10\"\n",
       "read config f: line 5: \"gpu_hours\" is not a number of GPU-hours from 0 to 1e9"},
      {"[quotas.groups.g]\ncpu_hours = 1\n",
       "read config f: line 5: \"cpu_hours\" is not a key of [quotas.groups.\"g\"]"},
      {"[quotas.groups.g]\n",
       "read config f: line 4: \"g\" [quotas.groups.\"g\"] has no gpu_hours"},
  };
  for (const Case& t : cases) {
    auto bad = parse_gateway_config(iss + t.text, "f");
    ASSERT_FALSE(bad.ok()) << t.text;
    EXPECT_EQ(bad.error().message(), t.message) << t.text;
  }
}

}  // namespace
}  // namespace berth::gateway

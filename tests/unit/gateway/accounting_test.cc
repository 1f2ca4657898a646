#include <gtest/gtest.h>

#include "gateway/accounting.h"

namespace berth::gateway {
namespace {

constexpr int64_t kH = 3600;

std::vector<UsageRecord> scripted() {
  // Window [10h, 20h); now = 18h.
  return {
      {"1", "alice", "physics", "a100", 2, 8, 9 * kH, 12 * kH},  // 2 h inside: 4 GPU-h, 16 CPU-h
      {"2", "alice", "physics", "", 0, 4, 11 * kH, 13 * kH},     // CPU only: 8 CPU-h
      {"3", "bob", "bio", "h100", 1, 2, 15 * kH, 0},             // running: 3 h to now
      {"4", "bob", "bio", "h100", 4, 4, 21 * kH, 22 * kH},       // after the window
      {"5", "carol", "physics", "a100", 1, 1, 0, 0},             // never started
  };
}

TEST(GatewayAccounting, GpuAndCpuHoursPerUserGroupAndModel) {
  auto by_user = aggregate_usage(scripted(), 10 * kH, 20 * kH, 18 * kH, GroupBy::kUser);
  ASSERT_EQ(by_user.size(), 2u);
  EXPECT_EQ(by_user[0].key, "alice");
  EXPECT_DOUBLE_EQ(by_user[0].gpu_hours, 4);
  EXPECT_DOUBLE_EQ(by_user[0].cpu_hours, 16 + 8);
  EXPECT_EQ(by_user[0].jobs, 2);
  EXPECT_EQ(by_user[1].key, "bob");
  EXPECT_DOUBLE_EQ(by_user[1].gpu_hours, 3);
  EXPECT_DOUBLE_EQ(by_user[1].cpu_hours, 6);
  EXPECT_EQ(by_user[1].jobs, 1);

  auto by_group = aggregate_usage(scripted(), 10 * kH, 20 * kH, 18 * kH, GroupBy::kGroup);
  ASSERT_EQ(by_group.size(), 2u);
  EXPECT_EQ(by_group[0].key, "bio");
  EXPECT_EQ(by_group[1].key, "physics");
  EXPECT_DOUBLE_EQ(by_group[1].gpu_hours, 4);

  auto by_model = aggregate_usage(scripted(), 10 * kH, 20 * kH, 18 * kH, GroupBy::kGpuModel);
  ASSERT_EQ(by_model.size(), 2u);  // the CPU job has no model row
  EXPECT_EQ(by_model[0].key, "a100");
  EXPECT_EQ(by_model[1].key, "h100");
  EXPECT_DOUBLE_EQ(by_model[1].gpu_hours, 3);

  EXPECT_DOUBLE_EQ(gpu_hours_of_group(scripted(), "physics", 10 * kH, 20 * kH, 18 * kH), 4);
  EXPECT_DOUBLE_EQ(gpu_hours_of_group(scripted(), "bio", 0, 30 * kH, 30 * kH), 15 * 1 + 4);
  EXPECT_EQ(parse_group_by("gpu_model"), GroupBy::kGpuModel);
  EXPECT_FALSE(parse_group_by("node").has_value());
}

TEST(GatewayAccounting, AShareOfAGpuCountsAsThatFraction) {
  std::vector<UsageRecord> records = {
      {"1", "alice", "physics", "", 0, 1, 10 * kH, 14 * kH, 0.25},  // a quarter for 4 h: 1 GPU-h
      {"2", "alice", "physics", "a100", 1, 1, 10 * kH, 12 * kH},    // a whole GPU for 2 h
  };
  auto rows = aggregate_usage(records, 0, 20 * kH, 20 * kH, GroupBy::kUser);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].gpu_hours, 1 + 2);
  EXPECT_DOUBLE_EQ(gpu_hours_of_group(records, "physics", 0, 20 * kH, 20 * kH), 3);
  auto by_model = aggregate_usage(records, 0, 20 * kH, 20 * kH, GroupBy::kGpuModel);
  ASSERT_EQ(by_model.size(), 2u);  // the share is a GPU job: its row has no model
  EXPECT_EQ(by_model[0].key, "");
  EXPECT_DOUBLE_EQ(by_model[0].gpu_hours, 1);

  // From sacct: the share GRES's count over the units of one GPU; without [share] it is no GPU.
  std::string text = R"({"jobs":[{"job_id":5,"user":"alice","account":"physics",
    "time":{"start":100,"end":3700},"tres":{"allocated":[{"type":"cpu","count":1},
    {"type":"gres","name":"shard","count":1},{"type":"gres","name":"shard:fake","count":1}]}}]})";
  auto shared = usage_from_sacct_json(text, {"shard", 4});
  ASSERT_TRUE(shared.ok()) << shared.error().message();
  ASSERT_EQ(shared->size(), 1u);
  EXPECT_EQ((*shared)[0].gpus, 0);
  EXPECT_DOUBLE_EQ((*shared)[0].gpu_share, 0.25);
  EXPECT_EQ((*shared)[0].gpu_model, "fake");
  auto plain = usage_from_sacct_json(text);
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain->size(), 1u);
  EXPECT_DOUBLE_EQ((*plain)[0].gpu_share, 0);
}

TEST(GatewayAccounting, JsonAndCsv) {
  auto rows = aggregate_usage(scripted(), 10 * kH, 20 * kH, 18 * kH, GroupBy::kUser);
  auto j = usage_json(rows, GroupBy::kUser, 10 * kH, 20 * kH);
  EXPECT_EQ(j["group_by"], "user");
  EXPECT_EQ(
      j["rows"][0],
      nlohmann::json({{"user", "alice"}, {"gpu_hours", 4.0}, {"cpu_hours", 24.0}, {"jobs", 2}}));
  EXPECT_EQ(usage_csv(rows, GroupBy::kUser),
            "user,gpu_hours,cpu_hours,jobs\nalice,4.0000,24.0000,2\nbob,3.0000,6.0000,1\n");
  EXPECT_EQ(usage_csv({{"a,\"b\"", 1.0 / 3, 0, 1}}, GroupBy::kGroup),
            "group,gpu_hours,cpu_hours,jobs\n\"a,\"\"b\"\"\",0.3333,0.0000,1\n");
}

TEST(GatewayAccounting, SacctJson) {
  // The shape of Slurm 22.05's `sacct --json` (trimmed to the fields read).
  auto r = usage_from_sacct_json(R"({"meta":{},"errors":[],"jobs":[
    {"job_id":7,"user":"alice","account":"physics","time":{"start":100,"end":3700},
     "tres":{"allocated":[{"type":"cpu","name":"","id":1,"count":4},
                          {"type":"mem","name":"","id":2,"count":1024},
                          {"type":"gres","name":"gpu","id":1001,"count":2},
                          {"type":"gres","name":"gpu:a100","id":1002,"count":2}]}},
    {"job_id":8,"user":"bob","account":"bio","time":{"start":0,"end":0},"tres":{"allocated":[]}},
    {"job_id":9,"user":"bob","account":"bio","time":{"start":50,"end":0},
     "tres":{"allocated":[{"type":"cpu","count":1},{"type":"gres","name":"gpu:h100","count":1}]}}]})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 2u);  // job 8 never started
  const UsageRecord& a = (*r)[0];
  EXPECT_EQ(a.job_id, "7");
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.group, "physics");
  EXPECT_EQ(a.cpus, 4);
  EXPECT_EQ(a.gpus, 2);  // not 4: the typed entry repeats the untyped one
  EXPECT_EQ(a.gpu_model, "a100");
  EXPECT_EQ(a.start, 100);
  EXPECT_EQ(a.end, 3700);
  EXPECT_EQ((*r)[1].gpus, 1);
  EXPECT_EQ((*r)[1].gpu_model, "h100");
  EXPECT_EQ((*r)[1].end, 0);

  // As Debian's slurmdbd 22.05.8 writes it: null names and counts, and a null user for a user
  // slurmdbd has no association of.
  auto real = usage_from_sacct_json(R"({"meta":{},"errors":[],"jobs":[
    {"account":"berthtest","job_id":20094012,"user":"berthtest","group":"berthtest",
     "time":{"elapsed":2,"end":1795676715,"start":1795676713,"submission":1795676711},
     "tres":{"allocated":[{"type":"cpu","name":null,"id":1,"count":1},
                          {"type":"mem","name":null,"id":2,"count":100},
                          {"type":"energy","name":null,"id":3,"count":null},
                          {"type":"node","name":null,"id":4,"count":1},
                          {"type":"billing","name":null,"id":5,"count":1},
                          {"type":"gres","name":"gpu","id":1001,"count":1},
                          {"type":"gres","name":"gpu:fake","id":1002,"count":1}],
             "requested":[]}},
    {"account":"berthgw2","job_id":20094013,"user":null,"association":null,
     "time":{"elapsed":1,"end":1795676714,"start":1795676713},
     "tres":{"allocated":[{"type":"cpu","name":null,"id":1,"count":1}]}}]})");
  ASSERT_TRUE(real.ok()) << real.error().message();
  ASSERT_EQ(real->size(), 2u);
  EXPECT_EQ((*real)[0].user, "berthtest");
  EXPECT_EQ((*real)[0].gpus, 1);
  EXPECT_EQ((*real)[0].gpu_model, "fake");
  EXPECT_EQ((*real)[0].cpus, 1);
  EXPECT_EQ((*real)[0].end - (*real)[0].start, 2);
  EXPECT_EQ((*real)[1].user, "");
  EXPECT_EQ((*real)[1].group, "berthgw2");
  EXPECT_EQ((*real)[1].gpus, 0);

  auto bad = usage_from_sacct_json("sacct: error: Problem talking to the database");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "read accounting sacct --json: not a sacct JSON document (no \"jobs\" list)");
}

}  // namespace
}  // namespace berth::gateway

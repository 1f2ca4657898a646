// A job's VO and the usage grouped by it (gateway/job_usage.h): the VO berthd picks at
// submission, its column in the job database (added to an older database), and usage and
// GPU-hour quotas grouped by it, or by the Unix primary group with [accounting] group_by "unix".
#include <gtest/gtest.h>
#include <pwd.h>
#include <sqlite3.h>
#include <unistd.h>

#include "gateway/config.h"
#include "gateway/job_request.h"
#include "gateway/job_usage.h"
#include "gateway/jobs_db.h"
#include "gateway/quotas.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

Account account(std::vector<std::string> groups) {
  Account a;
  a.user = "alice";
  a.gid = ::getgid();
  a.groups = std::move(groups);
  return a;
}

TEST(GatewayJobVo, TheRequestsGroupThenAGroupWithAnEntryThenTheFirstThenTheUnixGroup) {
  QuotaConfig quotas;
  quotas.gpu_hours["gpu-vo"] = 10;
  LimitsConfig limits;
  limits.groups["cms"] = {};
  // A group the request names is taken when the caller is in it.
  EXPECT_EQ(*job_vo(account({"atlas", "gpu-vo"}), "atlas", quotas, limits), "atlas");
  // Else the first group with a quota or limits entry, in the token's order.
  EXPECT_EQ(*job_vo(account({"atlas", "gpu-vo", "cms"}), "", quotas, limits), "gpu-vo");
  EXPECT_EQ(*job_vo(account({"atlas", "cms", "gpu-vo"}), "", quotas, limits), "cms");
  // Else the token's first group; a token without groups: the Unix primary group.
  EXPECT_EQ(*job_vo(account({"atlas", "lhcb"}), "", quotas, limits), "atlas");
  EXPECT_EQ(*job_vo(account({}), "", quotas, limits), group_name(::getgid()));
  // A group the caller is not in is refused (a 403), naming the caller's groups.
  auto no = job_vo(account({"atlas", "cms"}), "gpu-vo", quotas, limits);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().code, ErrorCode::kPermission);
  EXPECT_EQ(no.error().detail,
            "group \"gpu-vo\" is not one of your token groups (yours: atlas, cms): name one of "
            "them, or leave group out");
  no = job_vo(account({}), "gpu-vo", quotas, limits);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().detail,
            "group \"gpu-vo\" is not one of your token groups (your token names none): name one "
            "of them, or leave group out");
}

TEST(GatewayJobVo, OlderDatabaseGetsTheColumnAndItsRowsReadAsBefore) {
  TempDir dir("jobvo");
  std::string path = dir.path + "/jobs.db";
  {
    // A database of the first schema, with one job.
    sqlite3* old = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &old), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(old,
                           "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT "
                           "NOT NULL, issuer TEXT NOT NULL, subject TEXT NOT NULL, "
                           "idempotency_key TEXT, request TEXT NOT NULL, state TEXT NOT NULL, "
                           "slurm_job_id INTEGER NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT "
                           "'', exit_code INTEGER, nodes TEXT NOT NULL DEFAULT '', created_at "
                           "INTEGER NOT NULL, updated_at INTEGER NOT NULL, UNIQUE (owner, "
                           "idempotency_key));"
                           "INSERT INTO jobs (owner, issuer, subject, request, state, created_at, "
                           "updated_at) VALUES ('alice', 'i', 's', '{\"image\":\"x\"}', "
                           "'COMPLETED', 1, 2);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(old);
    sqlite3_close(old);
  }
  auto db = JobsDb::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message();
  auto first = (*db)->get(1);
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->owner, "alice");
  EXPECT_EQ((*first)->vo, "");
  JobRecord j{0, "alice", "i", "s", "", R"({"image":"x"})"};
  j.vo = "gpu-vo";
  bool existing = false;
  auto accepted = (*db)->accept(j, 10, &existing);
  ASSERT_TRUE(accepted.ok()) << accepted.error().message();
  EXPECT_EQ((*(*db)->get(accepted->id))->vo, "gpu-vo");
  db->reset();
  // Reopened (the column there already): the VO is still there.
  db = JobsDb::open(path);
  ASSERT_TRUE(db.ok()) << db.error().message();
  EXPECT_EQ((*(*db)->get(2))->vo, "gpu-vo");
  EXPECT_EQ((*(*db)->get(1))->vo, "");
}

TEST(GatewayJobVo, UsageAndQuotasGroupByTheVoUnlessGroupByUnix) {
  TempDir dir("jobvo");
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok()) << db.error().message();
  // Two users of one Unix group (this process's), in two VOs; and a job from before VOs.
  const passwd* me = ::getpwuid(::getuid());
  ASSERT_NE(me, nullptr);
  const std::string user = me->pw_name, unix_group = group_name(me->pw_gid);
  bool existing = false;
  auto job = [&](const std::string& vo, int gpus) {
    JobRecord j{0, user, "i", "s", "", R"({"image":"x"})"};
    j.vo = vo;
    JobRecord rec = *(*db)->accept(j, 1, &existing);
    rec.state = JobState::kCompleted;
    rec.start_time = 1000;
    rec.end_time = 1000 + 3600;
    rec.gpus = gpus;
    EXPECT_TRUE((*db)->record(rec).ok());
  };
  job("gpu-vo", 2);
  job("cms", 1);
  job("", 4);
  AccountingConfig by_token;
  JobUsage usage(**db, by_token, {});
  auto rows = aggregate_usage(*usage.records(""), 0, 10000, 10000, GroupBy::kGroup);
  ASSERT_EQ(rows.size(), 3u);
  std::map<std::string, double> hours;
  for (const UsageRow& r : rows) hours[r.key] = r.gpu_hours;
  EXPECT_EQ(hours, (std::map<std::string, double>{{"cms", 1}, {"gpu-vo", 2}, {unix_group, 4}}));
  // The quota of gpu-vo counts its own jobs only: cms's member is not held by it.
  QuotaConfig quotas;
  quotas.period_s = 100000;
  quotas.gpu_hours["gpu-vo"] = 2;
  auto records = *usage.records("");
  Account cms = account({"cms"});
  Account gpu = account({"gpu-vo"});
  EXPECT_EQ(usage.quota_group(gpu, "gpu-vo"), "gpu-vo");
  EXPECT_TRUE(check_gpu_quota(quotas, usage.quota_group(gpu, "gpu-vo"), true, records, 5000));
  EXPECT_FALSE(check_gpu_quota(quotas, usage.quota_group(cms, "cms"), true, records, 5000));
  // group_by "unix": everything is the Unix group's, as before VOs.
  AccountingConfig by_unix;
  by_unix.group_by = "unix";
  JobUsage unix_usage(**db, by_unix, {});
  rows = aggregate_usage(*unix_usage.records(""), 0, 10000, 10000, GroupBy::kGroup);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, unix_group);
  EXPECT_DOUBLE_EQ(rows[0].gpu_hours, 7);
  EXPECT_EQ(unix_usage.quota_group(gpu, "gpu-vo"), group_name(::getgid()));
}

TEST(GatewayJobVo, RequestGroupFieldAndGroupByKey) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  auto c = parse_gateway_config(iss, "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->accounting.group_by, "token");
  c = parse_gateway_config(iss + "[accounting]\ngroup_by = \"unix\"\n", "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->accounting.group_by, "unix");
  c = parse_gateway_config(iss + "[accounting]\ngroup_by = \"vo\"\n", "f");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(),
            "read config f: line 5: \"group_by\" is not \"token\" or \"unix\"");
  // A request may name its group; the job's answer shows the VO it was accounted to.
  auto r = parse_job_request(nlohmann::json::parse(R"({"image": "x", "group": "gpu-vo"})"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->group, "gpu-vo");
  for (const char* bad : {R"({"image": "x", "group": ""})", R"({"image": "x", "group": 3})"})
    EXPECT_FALSE(parse_job_request(nlohmann::json::parse(bad)).ok()) << bad;
  JobRecord j;
  j.request = R"({"image": "x"})";
  EXPECT_FALSE(job_json(j).contains("group"));
  j.vo = "gpu-vo";
  EXPECT_EQ(job_json(j)["group"], "gpu-vo");
}

}  // namespace
}  // namespace berth::gateway

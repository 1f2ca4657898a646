// Slurm's accounting as berthd's usage source (gateway/sacct.h): sacct's arguments, the child
// process (output, errors, timeout, environment), the [accounting] keys, and the job service
// reading usage from sacct, falling back to its database with "auto", and charging jobs to the
// caller's primary group.
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include "core/fs.h"
#include "fake_http_server.h"
#include "gateway/config.h"
#include "gateway/jobs.h"
#include "gateway/sacct.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

using json = nlohmann::json;

TEST(GatewaySacct, ArgumentsForAWindowInUtc) {
  AccountingConfig c;
  c.sacct = "/usr/bin/sacct";
  // 2026-11-26T00:00:00Z to 2026-11-27T00:00:00Z: -E is inclusive, so the last second.
  EXPECT_EQ(sacct_args(c, 1795651200, 1795737600),
            (std::vector<std::string>{"/usr/bin/sacct", "--json", "-X", "--allusers", "-S",
                                      "2026-11-26T00:00:00", "-E", "2026-11-26T23:59:59"}));
}

TEST(GatewaySacct, RunsAProgramWithATimeout) {
  auto out = run_program({"echo", "a", "b c"}, {}, 5, 1 << 20);
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(*out, "a b c\n");
  auto env =
      run_program({"/usr/bin/env"}, {{"TZ", "UTC"}, {"SLURM_CONF", "/x/slurm.conf"}}, 5, 1 << 20);
  ASSERT_TRUE(env.ok());
  EXPECT_NE(env->find("\nTZ=UTC\n"), std::string::npos);
  EXPECT_NE(env->find("SLURM_CONF=/x/slurm.conf\n"), std::string::npos);
  auto failed = run_program({"/bin/sh", "-c",
                             "echo '' >&2; echo 'sacct: error: Slurm accounting "
                             "storage is disabled' >&2; exit 1"},
                            {}, 5, 1 << 20);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message(),
            "read accounting /bin/sh: sacct: error: Slurm accounting "
            "storage is disabled (exit status 1)");
  auto silent = run_program({"/bin/false"}, {}, 5, 1 << 20);
  EXPECT_EQ(silent.error().message(), "read accounting /bin/false: exit status 1");
  auto start = std::chrono::steady_clock::now();
  auto slow = run_program({"sleep", "30"}, {}, 1, 1 << 20);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error().message(),
            "read accounting sleep: no answer within 1 s ([accounting] timeout_s)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  auto big = run_program({"/bin/sh", "-c", "yes | head -c 100000"}, {}, 5, 1000);
  EXPECT_EQ(big.error().message(), "read accounting /bin/sh: the answer is larger than 1000 bytes");
  auto missing = run_program({"/no/such/sacct"}, {}, 5, 1 << 20);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "exec: \"/no/such/sacct\": No such file or directory");
}

TEST(GatewaySacct, ReadsTheAccountingSection) {
  const std::string iss = "[[issuers]]\nissuer = \"https://a/\"\naudience = \"b\"\n";
  auto c = parse_gateway_config(iss + R"(
[accounting]
source = "sacct"
sacct = "/opt/slurm/bin/sacct"
slurm_conf = "/etc/slurm/slurm.conf"
timeout_s = 20
slurm_account = "default"
)",
                                "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->accounting.source, "sacct");
  EXPECT_EQ(c->accounting.sacct, "/opt/slurm/bin/sacct");
  EXPECT_EQ(c->accounting.slurm_conf, "/etc/slurm/slurm.conf");
  EXPECT_EQ(c->accounting.timeout_s, 20);
  EXPECT_EQ(c->accounting.slurm_account, "default");
  auto d = parse_gateway_config(iss, "f");
  EXPECT_EQ(d->accounting.source, "database");
  EXPECT_EQ(d->accounting.slurm_account, "primary_group");
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"[accounting]\nsource = \"slurmdbd\"\n",
            "read config f: line 5: \"source\" is not \"database\", \"sacct\" or \"auto\""},
           {"[accounting]\nslurm_conf = \"slurm.conf\"\n",
            "read config f: line 5: \"slurm_conf\" is not an absolute path"},
           {"[accounting]\ntimeout_s = 0\n", "read config f: line 5: \"timeout_s\" is less than 1"},
           {"[accounting]\nslurm_account = \"bio\"\n",
            "read config f: line 5: \"slurm_account\" is not \"primary_group\" or \"default\""},
           {"[accounting]\nsince = 1\n",
            "read config f: line 5: \"since\" is not a key of [accounting]"}}) {
    auto bad = parse_gateway_config(iss + text, "f");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.error().message(), message) << text;
  }
}

/// A slurmrestd that takes every submission.
struct AcceptingSlurmrestd {
  std::mutex mu;
  std::vector<json> submitted;
  testing::FakeHttpServer server{[this](const testing::FakeRequest& r) {
    std::lock_guard<std::mutex> lock(mu);
    testing::FakeResponse res;
    if (r.target == "/slurm/v0.0.38/job/submit") {
      submitted.push_back(json::parse(r.body));
      res.body = R"({"errors": [], "job_id": )" + std::to_string(800 + submitted.size()) + "}";
    } else {
      res.status = 404;
    }
    return res;
  }};
};

TEST(GatewaySacct, ServiceReadsSacctFallsBackAndChargesThePrimaryGroup) {
  const struct passwd* pw = ::getpwuid(::getuid());
  const struct group* gr = pw ? ::getgrgid(pw->pw_gid) : nullptr;
  if (gr == nullptr) GTEST_SKIP() << "this process's account has no named primary group";
  const std::string user = pw->pw_name, group = gr->gr_name;
  TempDir dir("sacct");
  // A stand-in for sacct: what Slurm 22.05's sacct --json writes, and its arguments beside it.
  const int64_t now = std::time(nullptr);
  std::string doc =
      json({{"jobs",
             {{{"job_id", 1},
               {"user", user},
               {"account", group},
               {"time", {{"start", now - 3600}, {"end", now - 1800}}},
               {"tres",
                {{"allocated",
                  {{{"type", "cpu"}, {"count", 4}},
                   {{"type", "gres"}, {"name", "gpu"}, {"count", 2}}}}}}},
              {{"job_id", 2},
               {"user", "someone-else"},
               {"account", group},
               {"time", {{"start", now - 600}, {"end", 0}}},
               {"tres", {{"allocated", {{{"type", "gres"}, {"name", "gpu"}, {"count", 1}}}}}}}}}})
          .dump();
  std::string script = dir.path + "/sacct";
  ASSERT_TRUE(write_file_atomic(script, "#!/bin/sh\necho \"$@\" > " + dir.path +
                                            "/args\ncat <<'EOF'\n" + doc + "\nEOF\n")
                  .ok());
  ::chmod(script.c_str(), 0755);
  AcceptingSlurmrestd slurm;
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  AccountingConfig acct;
  acct.source = "sacct";
  acct.sacct = script;
  QuotaConfig quotas;
  quotas.period_s = int64_t{86400} * 366;
  quotas.gpu_hours[group] = 1.5;
  JobService jobs(std::move(*db),
                  SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {}, {},
                  quotas, acct);
  auto mine = jobs.accounting(user, now - 7200, now);
  ASSERT_TRUE(mine.ok()) << mine.error().message();
  EXPECT_EQ(mine->source, "sacct");
  ASSERT_EQ(mine->records.size(), 1u);  // the caller's own
  EXPECT_EQ(mine->records[0].gpus, 2);
  auto all = jobs.accounting("", now - 7200, now);
  ASSERT_EQ(all->records.size(), 2u);
  EXPECT_NE(read_file(dir.path + "/args")->find("--json -X --allusers -S "), std::string::npos);
  // The group used 1 GPU-hour (job 1) and some minutes (job 2, running): under 1.5, a GPU job
  // is let through, charged to the caller's primary group.
  Account me{"iss", "s", user, pw->pw_uid, pw->pw_gid};
  const std::string body = R"({"image": "alpine", "resources": {"gpus": 1}})";
  auto ok = jobs.submit(me, "", body, *parse_job_request(json::parse(body)));
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_FALSE(ok->over_quota);
  ASSERT_EQ(slurm.submitted.size(), 1u);
  EXPECT_EQ(slurm.submitted[0]["job"]["account"], group);
  // sacct failing: "sacct" is an error (a 503), "auto" the database's record.
  ASSERT_TRUE(write_file_atomic(script,
                                "#!/bin/sh\necho 'sacct: error: Problem talking to the "
                                "database: Connection refused' >&2\nexit 1\n")
                  .ok());
  ::chmod(script.c_str(), 0755);
  auto failed = jobs.accounting("", now - 7200, now);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kBusy);
  EXPECT_EQ(failed.error().message(), "read accounting " + script +
                                          ": sacct: error: Problem talking to the database: "
                                          "Connection refused (exit status 1)");
  auto refused = jobs.submit(me, "", body, *parse_job_request(json::parse(body)));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kBusy);
  EXPECT_EQ(slurm.submitted.size(), 1u);
  auto db2 = JobsDb::open(dir.path + "/jobs2.db");
  acct.source = "auto";
  acct.slurm_account = "default";
  JobService fallback(std::move(*db2),
                      SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {},
                      {}, {}, acct);
  auto from_db = fallback.accounting("", now - 7200, now);
  ASSERT_TRUE(from_db.ok()) << from_db.error().message();
  EXPECT_EQ(from_db->source, "database");
  ASSERT_TRUE(fallback.submit(me, "", body, *parse_job_request(json::parse(body))).ok());
  EXPECT_FALSE(slurm.submitted.back()["job"].contains("account"));
}

}  // namespace
}  // namespace berth::gateway

namespace berth::gateway {
namespace {

TEST(GatewaySacct, QuotasCountTheJobsOfAVoAndSacctRecordsTakeItByJobId) {
  const struct passwd* pw = ::getpwuid(::getuid());
  const struct group* gr = pw ? ::getgrgid(pw->pw_gid) : nullptr;
  if (gr == nullptr) GTEST_SKIP() << "this process's account has no named primary group";
  const std::string user = pw->pw_name, group = gr->gr_name;
  TempDir dir("sacct");
  // sacct: job 801 (the Slurm id the first submission below gets) used 2 GPU-hours, job 5
  // (not berthd's) 1; both charged to the Unix group's Slurm account.
  const int64_t now = std::time(nullptr);
  auto job = [&](int id, int gpus) {
    return json{{"job_id", id},
                {"user", user},
                {"account", group},
                {"time", {{"start", now - 3600}, {"end", now - 1}}},
                {"tres", {{"allocated", {{{"type", "gres"}, {"name", "gpu"}, {"count", gpus}}}}}}};
  };
  std::string doc = json({{"jobs", {job(801, 2), job(5, 1)}}}).dump();
  std::string script = dir.path + "/sacct";
  ASSERT_TRUE(write_file_atomic(script, "#!/bin/sh\ncat <<'EOF'\n" + doc + "\nEOF\n").ok());
  ::chmod(script.c_str(), 0755);
  AcceptingSlurmrestd slurm;
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  AccountingConfig acct;
  acct.source = "sacct";
  acct.sacct = script;
  QuotaConfig quotas;
  quotas.period_s = int64_t{86400} * 366;
  quotas.gpu_hours["gpu-vo"] = 1.5;
  quotas.gpu_hours[group] = 0.5;  // used up by the Unix group's jobs, VOs or not
  JobService jobs(std::move(*db),
                  SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {}, {},
                  quotas, acct);
  Account gpu{"iss", "s1", user, pw->pw_uid, pw->pw_gid, {"atlas", "gpu-vo"}};
  Account cms{"iss", "s2", user, pw->pw_uid, pw->pw_gid, {"cms"}};
  const std::string body = R"({"image": "alpine", "resources": {"gpus": 1}})";
  auto first = jobs.submit(gpu, "", body, *parse_job_request(json::parse(body)));
  ASSERT_TRUE(first.ok()) << first.error().message();
  ASSERT_FALSE(first->over_quota);
  EXPECT_EQ(first->job.vo, "gpu-vo");
  EXPECT_EQ(first->job.slurm_job_id, 801);
  // Slurm job 801 is berthd's job of gpu-vo; job 5 keeps its Slurm account.
  auto usage = jobs.accounting("", now - 7200, now);
  ASSERT_TRUE(usage.ok()) << usage.error().message();
  ASSERT_EQ(usage->records.size(), 2u);
  EXPECT_EQ(usage->records[0].group, "gpu-vo");
  EXPECT_EQ(usage->records[1].group, group);
  // gpu-vo has used its 1.5 GPU-hours: its next GPU job is refused; cms has no quota.
  auto again = jobs.submit(gpu, "", body, *parse_job_request(json::parse(body)));
  ASSERT_TRUE(again.ok()) << again.error().message();
  ASSERT_TRUE(again->over_quota);
  EXPECT_EQ(again->over_quota->group, "gpu-vo");
  auto other = jobs.submit(cms, "", body, *parse_job_request(json::parse(body)));
  ASSERT_TRUE(other.ok()) << other.error().message();
  EXPECT_FALSE(other->over_quota);
  EXPECT_EQ(other->job.vo, "cms");
  // A group the caller is not in: refused before anything is recorded.
  const std::string named = R"({"image": "alpine", "group": "gpu-vo"})";
  auto wrong = jobs.submit(cms, "", named, *parse_job_request(json::parse(named)));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kPermission);
  EXPECT_EQ(slurm.submitted.size(), 2u);
  // group_by "unix": the Unix group's quota, as before VOs (its 0.5 are used up).
  acct.group_by = "unix";
  JobService by_unix(std::move(*JobsDb::open(dir.path + "/jobs.db")),
                     SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {},
                     {}, quotas, acct);
  usage = by_unix.accounting("", now - 7200, now);
  ASSERT_TRUE(usage.ok()) << usage.error().message();
  EXPECT_EQ(usage->records[0].group, group);
  auto unix_quota = by_unix.submit(cms, "", body, *parse_job_request(json::parse(body)));
  ASSERT_TRUE(unix_quota.ok()) << unix_quota.error().message();
  ASSERT_TRUE(unix_quota->over_quota);
  EXPECT_EQ(unix_quota->over_quota->group, group);
}

}  // namespace
}  // namespace berth::gateway

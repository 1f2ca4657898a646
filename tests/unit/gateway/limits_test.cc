// berthd's limits and audit log (gateway/limits.h, gateway/audit.h): how a user's, groups' and
// the default entries combine, the checks and their messages, the [limits] keys, the job
// service refusing before Slurm hears of a job, and the audit log's lines.
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sqlite3.h>
#include <unistd.h>

#include <ctime>

#include <mutex>
#include <set>
#include <thread>

#include "core/fs.h"
#include "fake_http_server.h"
#include "gateway/audit.h"
#include "gateway/config.h"
#include "gateway/jobs.h"
#include "gateway/limits.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

using json = nlohmann::json;

LimitValues values(std::initializer_list<std::pair<LimitKey, int64_t>> set) {
  LimitValues v;
  for (const auto& [k, n] : set) v[static_cast<size_t>(k)] = n;
  return v;
}

std::optional<Limit> of(const Limits& l, LimitKey k) {
  return l[static_cast<size_t>(k)];
}

std::string shown(const std::optional<Limit>& l) {
  return l ? std::to_string(l->value) + " " + l->from : "none";
}

LimitsConfig site() {
  LimitsConfig c;
  c.defaults = values({{LimitKey::kMaxWalltime, 3600},
                       {LimitKey::kMaxGpusPerJob, 1},
                       {LimitKey::kMaxRunningJobs, 4}});
  c.groups["/hpc/gpu"] = values({{LimitKey::kMaxGpusPerJob, 4}, {LimitKey::kMaxWalltime, 1800}});
  c.groups["/hpc/big"] = values({{LimitKey::kMaxGpusPerJob, 8}});
  c.groups["/hpc/cloud"] = values({{LimitKey::kCloudMaxWalltime, 600}});
  c.users["alice"] = values({{LimitKey::kMaxGpusPerJob, 2}, {LimitKey::kMaxQueuedJobs, 0}});
  return c;
}

TEST(GatewayLimits, UserEntryWinsThenTheMostGenerousGroupThenTheDefault) {
  LimitsConfig c = site();
  Limits bob = resolve_limits(c, "bob", {});
  EXPECT_EQ(shown(of(bob, LimitKey::kMaxWalltime)), "3600 default");
  EXPECT_EQ(shown(of(bob, LimitKey::kMaxGpusPerJob)), "1 default");
  EXPECT_EQ(shown(of(bob, LimitKey::kMaxQueuedJobs)), "none");
  EXPECT_EQ(shown(of(bob, LimitKey::kCloudMaxWalltime)), "none");
  // A group's value replaces the default, even a smaller one; among groups the largest wins,
  // whatever the order the token names them in.
  for (const auto& groups : {std::vector<std::string>{"/hpc/gpu", "/hpc/big", "/other"},
                             std::vector<std::string>{"/hpc/big", "/hpc/gpu"}}) {
    Limits carol = resolve_limits(c, "carol", groups);
    EXPECT_EQ(shown(of(carol, LimitKey::kMaxGpusPerJob)), "8 group /hpc/big");
    EXPECT_EQ(shown(of(carol, LimitKey::kMaxWalltime)), "1800 group /hpc/gpu");
    EXPECT_EQ(shown(of(carol, LimitKey::kMaxRunningJobs)), "4 default");
  }
  // The user's entry wins for the keys it sets, below its groups' too; the rest come as for
  // anyone in those groups.
  Limits alice = resolve_limits(c, "alice", {"/hpc/big", "/hpc/cloud"});
  EXPECT_EQ(shown(of(alice, LimitKey::kMaxGpusPerJob)), "2 user alice");
  EXPECT_EQ(shown(of(alice, LimitKey::kMaxQueuedJobs)), "0 user alice");
  EXPECT_EQ(shown(of(alice, LimitKey::kCloudMaxWalltime)), "600 group /hpc/cloud");
  EXPECT_EQ(shown(of(alice, LimitKey::kMaxWalltime)), "3600 default");
  EXPECT_TRUE(LimitsConfig{}.empty());
  EXPECT_FALSE(c.empty());
}

TEST(GatewayLimits, JobChecksNameTheLimit) {
  Limits l = resolve_limits(site(), "dave", {"/hpc/cloud"});
  WalltimeDecision d;
  auto no = check_job_limits(l, 2, 60, false, &d);
  ASSERT_TRUE(no);
  EXPECT_EQ(no->key, LimitKey::kMaxGpusPerJob);
  EXPECT_EQ(no->value, 1);
  EXPECT_EQ(no->requested, 2);
  EXPECT_EQ(no->message, "the job asks for 2 GPUs, the limit max_gpus_per_job = 1 (default)");
  no = check_job_limits(l, 1, 3660, false, &d);
  ASSERT_TRUE(no);
  EXPECT_EQ(no->message,
            "the job asks for a walltime of 3660 s, the limit max_walltime_s = 3600 (default)");
  // A walltime of its own stands; none gets the cap.
  EXPECT_FALSE(check_job_limits(l, 1, 3600, false, &d));
  EXPECT_EQ(d.walltime_s, 3600);
  EXPECT_EQ(d.from, "request");
  EXPECT_FALSE(check_job_limits(l, 0, 0, false, &d));
  EXPECT_EQ(d.walltime_s, 3600);
  EXPECT_EQ(d.from, "max_walltime_s");
  // A cloud job: the cloud cap, refused rather than shortened when asked for more.
  EXPECT_FALSE(check_job_limits(l, 0, 0, true, &d));
  EXPECT_EQ(d.walltime_s, 600);
  EXPECT_EQ(d.from, "cloud_max_walltime_s");
  no = check_job_limits(l, 0, 601, true, &d);
  ASSERT_TRUE(no);
  EXPECT_EQ(no->key, LimitKey::kCloudMaxWalltime);
  EXPECT_EQ(no->message,
            "the cloud job asks for a walltime of 601 s, the limit "
            "cloud_max_walltime_s = 600 (group /hpc/cloud)");
  // A cloud cap above the batch cap: the batch cap binds.
  LimitsConfig loose = site();
  loose.defaults[static_cast<size_t>(LimitKey::kCloudMaxWalltime)] = 7200;
  no = check_job_limits(resolve_limits(loose, "dave", {}), 0, 4000, true, &d);
  ASSERT_TRUE(no);
  EXPECT_EQ(no->key, LimitKey::kMaxWalltime);
  // Nothing configured: nothing refused, no walltime made up.
  EXPECT_FALSE(check_job_limits(Limits{}, 10000, 0, true, &d));
  EXPECT_EQ(d.walltime_s, 0);
  EXPECT_EQ(d.from, "");
  // A GPU share holds one GPU's device: it passes max_gpus_per_job = 1, not 0.
  EXPECT_FALSE(check_job_limits(l, 0, 0, false, &d, 0.25));
  LimitsConfig none;
  none.defaults[static_cast<size_t>(LimitKey::kMaxGpusPerJob)] = 0;
  auto share = check_job_limits(resolve_limits(none, "dave", {}), 0, 0, false, &d, 0.25);
  ASSERT_TRUE(share);
  EXPECT_EQ(share->key, LimitKey::kMaxGpusPerJob);
  EXPECT_EQ(share->requested, 1);
  EXPECT_EQ(share->message,
            "the job asks for a share of a GPU (0.25), the limit max_gpus_per_job = 0 (default)");
}

TEST(GatewayLimits, CountChecks) {
  Limits l = resolve_limits(site(), "alice", {});
  EXPECT_FALSE(check_count_limits(Limits{}, "alice", 100, 100));
  auto no = check_count_limits(l, "alice", 0, 0);  // max_queued_jobs 0: no new job at all
  ASSERT_TRUE(no);
  EXPECT_EQ(no->message, "alice has 0 queued jobs, the limit max_queued_jobs = 0 (user alice)");
  EXPECT_TRUE(no->count);
  no = check_count_limits(resolve_limits(site(), "bob", {}), "bob", 4, 0);
  ASSERT_TRUE(no);
  EXPECT_EQ(no->key, LimitKey::kMaxRunningJobs);
  EXPECT_EQ(no->requested, 4);
  EXPECT_EQ(no->message, "bob has 4 running jobs, the limit max_running_jobs = 4 (default)");
  EXPECT_FALSE(check_count_limits(resolve_limits(site(), "bob", {}), "bob", 3, 50));
}

constexpr const char* kIssuers = R"(
[[issuers]]
issuer = "https://iam.example.org/"
audience = "berth"
)";

TEST(GatewayLimits, ConfigKeys) {
  auto c = parse_gateway_config(std::string(R"(
audit_log = "/var/log/berthd/audit.jsonl"

[limits]
max_walltime_s = 86400
max_gpus_per_job = 4
max_running_jobs = 10
max_queued_jobs = 50
cloud_max_walltime_s = 3600

[limits.users.alice]
max_gpus_per_job = 16

[limits.groups."/hpc/cloud"]
cloud_max_walltime_s = 7200
max_queued_jobs = 0
)") + kIssuers,
                                "/etc/berthd.conf");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->audit_log, "/var/log/berthd/audit.jsonl");
  EXPECT_EQ(c->limits.defaults, values({{LimitKey::kMaxWalltime, 86400},
                                        {LimitKey::kMaxGpusPerJob, 4},
                                        {LimitKey::kMaxRunningJobs, 10},
                                        {LimitKey::kMaxQueuedJobs, 50},
                                        {LimitKey::kCloudMaxWalltime, 3600}}));
  EXPECT_EQ(c->limits.users.at("alice"), values({{LimitKey::kMaxGpusPerJob, 16}}));
  EXPECT_EQ(c->limits.groups.at("/hpc/cloud"),
            values({{LimitKey::kCloudMaxWalltime, 7200}, {LimitKey::kMaxQueuedJobs, 0}}));
  const std::pair<const char*, const char*> bad[] = {
      {"[limits]\nmax_walltime_s = 90\n",
       "read config /c: line 2: \"max_walltime_s\" is not a whole number of minutes, in seconds "
       "(60, 120, ...)"},
      {"[limits]\ncloud_max_walltime_s = 0\n",
       "read config /c: line 2: \"cloud_max_walltime_s\" is not a whole number of minutes, in "
       "seconds (60, 120, ...)"},
      {"[limits]\nmax_gpus_per_job = -1\n",
       "read config /c: line 2: \"max_gpus_per_job\" is not a whole number from 0 to 1000000"},
      {"[limits]\nmax_running_jobs = \"4\"\n",
       "read config /c: line 2: \"max_running_jobs\" is not a whole number from 0 to 1000000"},
      {"[limits]\nmax_cpus = 4\n", "read config /c: line 2: \"max_cpus\" is not a key of [limits]"},
      {"[limits.users.bob]\nmax_gpus = 1\n",
       "read config /c: line 2: \"max_gpus\" is not a key of [limits.users.\"bob\"]"},
      {"[limits]\ngroups = 3\n",
       "read config /c: line 2: \"groups\" is not a table of tables ([limits.groups.NAME])"},
      {"[limits.groups]\n\"/hpc\" = 3\n",
       "read config /c: line 2: \"/hpc\" is not a table of limits ([limits.groups.\"/hpc\"])"},
      {"limits = 1\n", "read config /c: line 1: \"limits\" is not a table ([limits])"},
      {"audit_log = \"\"\n", "read config /c: line 1: \"audit_log\" is empty"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_gateway_config(std::string(text) + kIssuers, "/c");
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
}

TEST(GatewayAudit, OneJsonObjectPerLine) {
  using std::chrono::milliseconds;
  std::chrono::system_clock::time_point t{milliseconds(1795654969042)};
  AuditEvent e{"job.submit",
               "refused",
               "https://iam.example.org/",
               "s-1",
               "alice",
               "65a1f3c0-2a",
               "POST /v1/jobs",
               {{"limit", "max_gpus_per_job"}, {"value", 2}, {"requested", 4}}};
  EXPECT_EQ(audit_line(e, t),
            R"({"time":"2026-11-26T01:02:49.042Z","event":"job.submit","outcome":"refused",)"
            R"("issuer":"https://iam.example.org/","sub":"s-1","user":"alice",)"
            R"("request_id":"65a1f3c0-2a","route":"POST /v1/jobs",)"
            R"("detail":{"limit":"max_gpus_per_job","requested":4,"value":2}})"
            "\n");
  // A newline or a byte that is not UTF-8 from a token never breaks the line.
  e.subject = "a\nb\xff";
  std::string line = audit_line(e, t);
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_EQ(json::parse(line)["sub"], "a\nb\xef\xbf\xbd");
}

TEST(GatewayAudit, ConcurrentWritersAppendWholeLines) {
  TempDir dir("audit");
  std::string path = dir.path + "/audit.jsonl";
  ASSERT_TRUE(write_file_atomic(path, "{\"earlier\":1}\n").ok());
  auto log = AuditLog::open(path);
  ASSERT_TRUE(log.ok()) << log.error().message();
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        AuditEvent e;
        e.event = "token";
        e.outcome = "accepted";
        e.request_id = std::to_string(t) + "-" + std::to_string(i);
        e.detail = {{"pad", std::string(static_cast<size_t>(100 + i * 7), 'x')}};
        ASSERT_TRUE((*log)->write(e).ok());
      }
    });
  for (auto& t : threads) t.join();
  std::string text = *read_file(path);
  size_t lines = 0, start = 0;
  std::set<std::string> ids;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1, ++lines) {
    json j = json::parse(text.substr(start, nl - start));  // throws on a torn line
    if (lines > 0) ids.insert(j["request_id"].get<std::string>());
  }
  EXPECT_EQ(start, text.size());
  EXPECT_EQ(lines, 1u + 8 * 200);  // appended after what was there
  EXPECT_EQ(ids.size(), 8u * 200);
  EXPECT_FALSE(AuditLog::open(dir.path + "/no/such/dir/audit").ok());
}

/// A slurmrestd whose jobs are PENDING until a test says otherwise; it records submissions.
struct CountingSlurmrestd {
  std::mutex mu;
  std::vector<json> submitted;           // the bodies of POST /job/submit
  std::map<int64_t, std::string> state;  // by Slurm id
  int gets = 0;                          // GET /job/{id}
  int listings = 0;                      // GET /jobs
  int64_t forgotten = 0;  // a job GET /jobs leaves out (Slurm's MinJobAge has passed)
  testing::FakeHttpServer server{[this](const testing::FakeRequest& r) {
    std::lock_guard<std::mutex> lock(mu);
    testing::FakeResponse res;
    const std::string job_prefix = "/slurm/v0.0.38/job/";
    if (r.target == "/slurm/v0.0.38/job/submit") {
      submitted.push_back(json::parse(r.body));
      int64_t id = 700 + static_cast<int64_t>(submitted.size()) - 1;
      state[id] = "PENDING";
      res.body = R"({"errors": [], "job_id": )" + std::to_string(id) + "}";
    } else if (r.target == "/slurm/v0.0.38/jobs") {
      ++listings;
      json jobs = json::array();
      for (const auto& [id, st] : state)
        if (id != forgotten) jobs.push_back({{"job_id", id}, {"job_state", st}});
      res.body = json({{"errors", json::array()}, {"jobs", jobs}}).dump();
    } else if (r.target.starts_with(job_prefix)) {
      ++gets;
      int64_t id = std::stoll(r.target.substr(job_prefix.size()));
      res.body =
          json({{"errors", json::array()}, {"jobs", {{{"job_id", id}, {"job_state", state[id]}}}}})
              .dump();
    } else {
      res.status = 404;
    }
    return res;
  }};
};

TEST(GatewayLimits, ServiceRefusesBeforeSlurmAndNeverItsOwnRetry) {
  TempDir dir("limits");
  CountingSlurmrestd slurm;
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  JobsDb* raw = db->get();
  LimitsConfig limits;
  limits.defaults = values({{LimitKey::kMaxQueuedJobs, 2},
                            {LimitKey::kMaxGpusPerJob, 1},
                            {LimitKey::kCloudMaxWalltime, 120}});
  JobService jobs(std::move(*db),
                  SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {},
                  limits);
  Account alice{"iss", "s-a", "alice"};
  const std::string body = R"({"image": "alpine", "class": "cloud"})";
  JobRequest request = *parse_job_request(json::parse(body));
  auto first = jobs.submit(alice, "k1", body, request);
  ASSERT_TRUE(first.ok()) << first.error().message();
  ASSERT_FALSE(first->refused);
  // The cloud cap became the job's Slurm time limit, in minutes, and is recorded.
  EXPECT_EQ(slurm.submitted.at(0)["job"]["time_limit"], 2);
  EXPECT_EQ(first->job.time_limit_s, 120);
  EXPECT_EQ((*raw->get(first->job.id))->time_limit_from, "cloud_max_walltime_s");
  ASSERT_FALSE(jobs.submit(alice, "", body, request)->refused);
  // Two queued: the third is refused after a look at Slurm, and Slurm never sees it.
  auto third = jobs.submit(alice, "k3", body, request);
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(third->refused);
  EXPECT_EQ(third->refused->message,
            "alice has 2 queued jobs, the limit max_queued_jobs = 2 (default)");
  EXPECT_EQ(slurm.submitted.size(), 2u);
  EXPECT_EQ(slurm.listings, 1);
  EXPECT_EQ(slurm.gets, 0);
  EXPECT_FALSE((*raw->find("alice", "k3")).has_value());
  // The first job's retry is a replay, not a third job over the limit.
  auto retry = jobs.submit(alice, "k1", body, request);
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(retry->refused);
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->job.id, first->job.id);
  // Another account has its own count; a per-job limit is checked before any count.
  Account bob{"iss", "s-b", "bob"};
  EXPECT_FALSE(jobs.submit(bob, "", body, request)->refused);
  const std::string two_gpus = R"({"image": "alpine", "resources": {"gpus": 2}})";
  auto gpus = jobs.submit(alice, "", two_gpus, *parse_job_request(json::parse(two_gpus)));
  ASSERT_TRUE(gpus->refused);
  EXPECT_EQ(gpus->refused->key, LimitKey::kMaxGpusPerJob);
  // Slurm ends the first job: the database has not heard yet, the look before refusing finds
  // it, and the next job is accepted.
  {
    std::lock_guard<std::mutex> lock(slurm.mu);
    slurm.state[700] = "TIMEOUT";
  }
  auto fourth = jobs.submit(alice, "k4", body, request);
  ASSERT_TRUE(fourth.ok());
  EXPECT_FALSE(fourth->refused);
  EXPECT_EQ(slurm.submitted.size(), 4u);
  // A job the listing has forgotten is asked for alone: the second ends, out of the list.
  {
    std::lock_guard<std::mutex> lock(slurm.mu);
    slurm.state[701] = "COMPLETED";
    slurm.forgotten = 701;
  }
  auto fifth = jobs.submit(alice, "k5", body, request);
  ASSERT_TRUE(fifth.ok());
  EXPECT_FALSE(fifth->refused);
  EXPECT_EQ(slurm.gets, 1);
  EXPECT_EQ(slurm.listings, 3);
  // And it shows as cut at its cap.
  json ended = job_json(**raw->get(first->job.id));
  EXPECT_EQ(ended["state"], "TIMEOUT");
  EXPECT_EQ(ended["class"], "cloud");
  EXPECT_EQ(ended["walltime_s"], 120);
  EXPECT_EQ(ended["reason"], "cut at the cloud walltime cap, 120 s (cloud_max_walltime_s)");
}

TEST(GatewayJobsDb, DatabaseFromBeforeTheLimitsGetsTheirColumns) {
  TempDir dir("olddb");
  std::string path = dir.path + "/jobs.db";
  sqlite3* old = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &old), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(old,
                         "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, owner TEXT NOT "
                         "NULL, issuer TEXT NOT NULL, subject TEXT NOT NULL, idempotency_key "
                         "TEXT, request TEXT NOT NULL, state TEXT NOT NULL, slurm_job_id INTEGER "
                         "NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT '', exit_code INTEGER, "
                         "nodes TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, "
                         "updated_at INTEGER NOT NULL, UNIQUE (owner, idempotency_key));"
                         "INSERT INTO jobs (owner, issuer, subject, request, state, created_at, "
                         "updated_at) VALUES ('alice', 'i', 's', '{}', 'RUNNING', 1, 1)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(old);
  for (int round = 0; round < 2; ++round) {  // the second opening finds the columns there
    auto db = JobsDb::open(path);
    ASSERT_TRUE(db.ok()) << db.error().message();
    auto j = (*db)->get(1);
    ASSERT_TRUE(j.ok() && j->has_value());
    EXPECT_EQ((*j)->time_limit_s, 0);
    EXPECT_EQ((*(*db)->count_states("alice")),
              (std::map<JobState, int64_t>{{JobState::kRunning, 1}}));
  }
}

TEST(GatewayQuotas, ServiceRefusesAGpuJobOverItsGroupsQuotaBeforeSlurm) {
  // The caller is this process's own account: the database's usage names its primary group.
  const struct passwd* pw = ::getpwuid(::getuid());
  const struct group* gr = pw ? ::getgrgid(pw->pw_gid) : nullptr;
  if (gr == nullptr) GTEST_SKIP() << "this process's account has no named primary group";
  const std::string user = pw->pw_name, group = gr->gr_name;
  const int64_t now = std::time(nullptr);
  QuotaConfig quotas;
  quotas.period = "month";
  if (now - period_start(quotas, now) < 120) GTEST_SKIP() << "a month began a moment ago";
  quotas.gpu_hours[group] = 0.01;
  TempDir dir("quotas");
  CountingSlurmrestd slurm;
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  JobsDb* raw = db->get();
  JobService jobs(std::move(*db),
                  SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {}, {},
                  quotas);
  Account me{"iss", "s", user, pw->pw_uid, pw->pw_gid};
  const std::string gpu_body = R"({"image": "alpine", "resources": {"gpus": 2}})";
  const JobRequest gpu_job = *parse_job_request(json::parse(gpu_body));
  auto first = jobs.submit(me, "", gpu_body, gpu_job);
  ASSERT_TRUE(first.ok()) << first.error().message();
  ASSERT_FALSE(first->over_quota);
  // It ran 30 s on its 2 GPUs: 1/60 GPU-hour, over the budget of 0.01.
  JobRecord ran = **raw->get(first->job.id);
  ran.state = JobState::kCompleted;
  ran.start_time = now - 60;
  ran.end_time = now - 30;
  ran.gpus = 2;
  ASSERT_TRUE(raw->record(ran).ok());
  auto second = jobs.submit(me, "", gpu_body, gpu_job);
  ASSERT_TRUE(second.ok()) << second.error().message();
  ASSERT_TRUE(second->over_quota);
  EXPECT_EQ(second->over_quota->group, group);
  EXPECT_NEAR(second->over_quota->used, 1.0 / 60, 1e-9);
  EXPECT_EQ(second->over_quota->key, "[quotas.groups.\"" + group + "\"] gpu_hours");
  EXPECT_NE(second->over_quota->message.find("group " + group +
                                             " has used 0.0167 of its 0.01 "
                                             "GPU-hours in the month from "),
            std::string::npos)
      << second->over_quota->message;
  EXPECT_EQ(slurm.submitted.size(), 1u);  // Slurm never heard of it
  // Nor a share of a GPU: its hours count as that fraction of one (accounting.h).
  const std::string share_body = R"({"image": "alpine", "resources": {"gpu_share": 0.25}})";
  auto share_job = parse_job_request(json::parse(share_body));
  ASSERT_TRUE(share_job.ok()) << share_job.error().message();
  auto share = jobs.submit(me, "", share_body, *share_job);
  ASSERT_TRUE(share.ok()) << share.error().message();
  EXPECT_TRUE(share->over_quota);
  EXPECT_EQ(slurm.submitted.size(), 1u);
  // A job without GPUs is not held back by a GPU-hour quota.
  const std::string cpu_body = R"({"image": "alpine"})";
  auto cpu = jobs.submit(me, "", cpu_body, *parse_job_request(json::parse(cpu_body)));
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE(cpu->over_quota);
  EXPECT_EQ(slurm.submitted.size(), 2u);
}

}  // namespace
}  // namespace berth::gateway

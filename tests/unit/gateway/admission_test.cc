// Admission's checks (gateway/admission.h): one check() serving submit() and the dry run, the
// broker's reason code of each refusal, and a dry run that records nothing and asks Slurm
// nothing.
#include "gateway/admission.h"

#include <gtest/gtest.h>

#include <mutex>

#include "fake_http_server.h"
#include "gateway/jobs.h"
#include "gateway/slurm_api.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

using json = nlohmann::json;

TEST(GatewayAdmission, EachRefusalHasTheBrokersReasonCode) {
  EXPECT_STREQ(limit_reason(LimitKey::kMaxGpusPerJob), "max_gpus_per_job");
  EXPECT_STREQ(limit_reason(LimitKey::kMaxWalltime), "walltime");
  EXPECT_STREQ(limit_reason(LimitKey::kCloudMaxWalltime), "walltime");
  EXPECT_STREQ(limit_reason(LimitKey::kMaxRunningJobs), "limit");
  EXPECT_STREQ(limit_reason(LimitKey::kMaxQueuedJobs), "limit");

  Verdict v;
  Fit fit = fit_of(v);
  EXPECT_TRUE(fit.fits());
  EXPECT_EQ(fit.message, "");
  v.over_quota = QuotaRefusal{};
  v.over_quota->message = "group g has used ...";
  fit = fit_of(v);
  EXPECT_FALSE(fit.fits());
  EXPECT_EQ(fit.reason, "quota");
  EXPECT_EQ(fit.message, "group g has used ...");
  // A limit's refusal comes first (check() stops at it, so both are never set by it).
  v.refused = LimitRefusal{LimitKey::kMaxQueuedJobs, 1, 1, true, "default", "alice has 1 ..."};
  fit = fit_of(v);
  EXPECT_EQ(fit.reason, "limit");
  EXPECT_EQ(fit.message, "alice has 1 ...");
}

/// A slurmrestd that answers every call with an empty listing and records it.
struct CountingSlurmrestd {
  std::mutex mu;
  std::vector<std::string> calls;
  testing::FakeHttpServer server{[this](const testing::FakeRequest& r) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(r.method + " " + r.target);
    testing::FakeResponse res;
    res.body = R"({"errors": [], "jobs": []})";
    return res;
  }};
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return calls.size();
  }
};

TEST(GatewayAdmission, DryRunChecksWhatASubmissionChecksAndRecordsNothing) {
  TempDir dir("dry-run");
  CountingSlurmrestd slurm;
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  JobsDb* raw = db->get();
  SlurmConfig sc;
  sc.gpu_models = {"a100"};
  sc.partitions = {"gpu", "long"};
  LimitsConfig limits;
  limits.defaults[static_cast<size_t>(LimitKey::kMaxGpusPerJob)] = 1;
  limits.defaults[static_cast<size_t>(LimitKey::kMaxWalltime)] = 600;
  limits.defaults[static_cast<size_t>(LimitKey::kCloudMaxWalltime)] = 60;
  limits.defaults[static_cast<size_t>(LimitKey::kMaxQueuedJobs)] = 1;
  QuotaConfig quotas;
  quotas.gpu_hours["/spent"] = 0;  // a budget of nothing: used up from the start
  JobService jobs(std::move(*db),
                  SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), sc,
                  limits, quotas);
  const Account alice{"iss", "s-a", "alice", 1000, 1000, {"/vo"}};
  struct Case {
    const char* body;
    const char* reason;  // "" fits
    const char* message;
  };
  const Case cases[] = {
      {R"({"image": "x"})", "", ""},
      {R"({"image": "x", "resources": {"gpus": 1, "gpu_type": "a100", "partition": "long"}})", "",
       ""},
      {R"({"image": "x", "resources": {"gpus": 2}})", "max_gpus_per_job",
       "the job asks for 2 GPUs, the limit max_gpus_per_job = 1 (default)"},
      {R"({"image": "x", "resources": {"walltime_s": 601}})", "walltime",
       "the job asks for a walltime of 601 s, the limit max_walltime_s = 600 (default)"},
      {R"({"image": "x", "class": "cloud", "resources": {"walltime_s": 120}})", "walltime",
       "the cloud job asks for a walltime of 120 s, the limit cloud_max_walltime_s = 60 "
       "(default)"},
      {R"({"image": "x", "resources": {"gpus": 1, "gpu_model": "h100"}})", "no_gpu_model",
       "\"resources.gpu_model\" is \"h100\", not a GPU model of this site (known: a100)"},
      {R"({"image": "x", "resources": {"gpu_share": 0.5}})", "share_unsupported",
       "\"resources.gpu_share\" asks for a share of a GPU, which this site does not offer"},
      {R"({"image": "x", "resources": {"partition": "debug"}})", "partition",
       "resources.partition: \"debug\" is not one of this site's partitions (gpu, long)"},
  };
  for (const Case& c : cases) {
    auto request = parse_job_request(json::parse(c.body));
    ASSERT_TRUE(request.ok()) << c.body;
    auto fit = jobs.dry_run(alice, *request);
    ASSERT_TRUE(fit.ok()) << fit.error().message();
    EXPECT_EQ(fit->reason, c.reason) << c.body;
    EXPECT_EQ(fit->message, c.message) << c.body;
    EXPECT_EQ(fit->fits(), std::string(c.reason).empty()) << c.body;
  }
  // The same checks refuse the submission: the site's as a 400, a limit's as a 403.
  auto partition = parse_job_request(json::parse(cases[7].body));
  EXPECT_EQ(jobs.admissible(*partition).error().detail, cases[7].message);
  auto gpus = *parse_job_request(json::parse(cases[2].body));
  auto refused = jobs.submit(alice, "", cases[2].body, gpus);
  ASSERT_TRUE(refused.ok()) << refused.error().message();
  ASSERT_TRUE(refused->refused);
  EXPECT_EQ(refused->refused->message, cases[2].message);

  // A GPU job of a group whose quota is spent.
  const Account spent{"iss", "s-b", "bob", 1001, 1001, {"/spent"}};
  auto gpu = *parse_job_request(json::parse(R"({"image": "x", "resources": {"gpus": 1}})"));
  auto fit = jobs.dry_run(spent, gpu);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_EQ(fit->reason, "quota");
  EXPECT_EQ(fit->message.substr(0, 44), "group /spent has used 0.0000 of its 0 GPU-ho");
  // A "group" the caller is not in is the error a submission gets (a 403).
  auto other = *parse_job_request(json::parse(R"({"image": "x", "group": "/other"})"));
  auto denied = jobs.dry_run(alice, other);
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, ErrorCode::kPermission);

  // Nothing was recorded, and Slurm was asked nothing.
  auto listed = raw->list("", std::nullopt, 0, 100);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  EXPECT_EQ(slurm.count(), 0U);

  // One job queued (recorded, not yet in Slurm): max_queued_jobs = 1 refuses the next, as the
  // database counts it, with the limit named.
  bool existing = false;
  ASSERT_TRUE(
      raw->accept({0, "alice", "iss", "s-a", "", R"({"image": "x"})"}, 100, &existing).ok());
  fit = jobs.dry_run(alice, *parse_job_request(json::parse(R"({"image": "x"})")));
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_EQ(fit->reason, "limit");
  EXPECT_EQ(fit->message, "alice has 1 queued jobs, the limit max_queued_jobs = 1 (default)");
  EXPECT_EQ(slurm.count(), 0U);
  EXPECT_EQ(raw->list("", std::nullopt, 0, 100)->size(), 1U);
}

}  // namespace
}  // namespace berth::gateway

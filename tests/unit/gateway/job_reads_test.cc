// The job endpoints' reads (gateway/job_reads.h): a cancel of a job Slurm may or may not have.
#include "gateway/job_reads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "fake_http_server.h"
#include "gateway/job_request.h"
#include "gateway/jobs.h"
#include "gateway/slurm_api.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

/// A slurmrestd (v0.0.38) whose job list is `listed` (JSON objects), recording each call.
struct ListingSlurmrestd {
  std::mutex mu;
  std::vector<std::string> calls;
  std::string listed;
  testing::FakeHttpServer server{[this](const testing::FakeRequest& r) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(r.method + " " + r.target);
    testing::FakeResponse res;
    res.body = r.method == "GET" && r.target.starts_with("/slurm/v0.0.38/jobs")
                   ? R"({"errors": [], "jobs": [)" + listed + "]}"
                   : R"({"errors": []})";
    return res;
  }};
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
};

const Account alice{"iss", "s-a", "alice", 1000, 1000, {"/vo"}};

/// An ACCEPTED job of alice's, as a submission slurmrestd did not answer leaves it.
int64_t accepted(JobsDb& db) {
  JobRecord rec;
  rec.owner = alice.user;
  rec.issuer = alice.issuer;
  rec.subject = alice.subject;
  rec.request = R"({"image": "x"})";
  bool existing = false;
  auto job = db.accept(rec, 1000, &existing);
  EXPECT_TRUE(job.ok());
  return job.ok() ? job->id : 0;
}

TEST(GatewayJobReads, AnAcceptedJobIsLookedForInSlurmBeforeItsCancelIsTaken) {
  TempDir dir("job-reads");
  ListingSlurmrestd slurm;
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  JobsDb* raw = db->get();
  const int64_t lost = accepted(*raw), reached = accepted(*raw);
  slurm.listed = R"({"job_id": 77, "comment": ")" + job_comment(raw->instance(), reached) +
                 R"(", "user_name": "alice", "job_state": "PENDING"})";
  JobService jobs(std::move(*db),
                  SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {});

  // Not in Slurm: CANCELLED here, and reconciliation never submits it.
  auto cancelled = jobs.cancel(alice, lost);
  ASSERT_TRUE(cancelled.ok()) << cancelled.error().message();
  ASSERT_TRUE(cancelled->has_value());
  EXPECT_EQ((*cancelled)->state, JobState::kCancelled);
  EXPECT_EQ((*cancelled)->reason, "cancelled before Slurm had it");
  EXPECT_EQ((*raw->get(lost))->state, JobState::kCancelled);
  // In Slurm under its comment: recorded as that Slurm job and cancelled there.
  auto found = jobs.cancel(alice, reached);
  ASSERT_TRUE(found.ok()) << found.error().message();
  EXPECT_EQ((*found)->slurm_job_id, 77);
  EXPECT_EQ((*raw->get(reached))->slurm_job_id, 77);
  std::vector<std::string> calls = slurm.seen();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "DELETE /slurm/v0.0.38/job/77"), calls.end());
  JobService::Reconciled r = jobs.reconcile(5000, 0);
  EXPECT_EQ(r.resubmitted, 0);
  for (const std::string& c : slurm.seen()) EXPECT_EQ(c.find("submit"), std::string::npos) << c;
}

TEST(GatewayJobReads, ACancelSlurmCannotAnswerIsAnErrorAndChangesNothing) {
  TempDir dir("job-reads-down");
  int port;
  {
    testing::FakeHttpServer gone(
        [](const testing::FakeRequest&) { return testing::FakeResponse{}; });
    port = gone.port();
  }
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  JobsDb* raw = db->get();
  const int64_t id = accepted(*raw);
  JobService jobs(
      std::move(*db),
      SlurmRest("http://127.0.0.1:" + std::to_string(port), "k", 60, slurm_api("v0.0.38")), {});
  auto cancelled = jobs.cancel(alice, id);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, ErrorCode::kNetwork) << cancelled.error().message();
  EXPECT_EQ((*raw->get(id))->state, JobState::kAccepted);
}

}  // namespace
}  // namespace berth::gateway

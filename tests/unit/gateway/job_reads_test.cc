// The job endpoints' reads (gateway/job_reads.h): a cancel of a job Slurm may or may not have.
#include "gateway/job_reads.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

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

/// A slurmrestd (v0.0.38) that has no jobs and holds each submission until let go, then makes
/// it Slurm job 42.
struct HoldingSlurmrestd {
  std::mutex mu;
  std::condition_variable changed;
  bool submitting = false, let_go = false;
  std::vector<std::string> calls;
  testing::FakeHttpServer server{[this](const testing::FakeRequest& r) {
    std::unique_lock<std::mutex> lock(mu);
    calls.push_back(r.method + " " + r.target);
    testing::FakeResponse res;
    res.body = R"({"errors": [], "jobs": []})";
    if (r.target == "/slurm/v0.0.38/job/submit") {
      submitting = true;
      changed.notify_all();
      changed.wait(lock, [this] { return let_go; });
      res.body = R"({"errors": [], "job_id": 42})";
    }
    return res;
  }};
  /// Waits for a submission to arrive, gives `racer` (started now) time to run into it, then
  /// lets the submission finish; returns once `racer` has.
  void race(std::thread& racer, const std::function<void()>& run) {
    {
      std::unique_lock<std::mutex> lock(mu);
      changed.wait(lock, [this] { return submitting; });
    }
    racer = std::thread(run);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    {
      std::lock_guard<std::mutex> lock(mu);
      let_go = true;
    }
    changed.notify_all();
  }
  bool saw(const std::string& call) {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(calls.begin(), calls.end(), call) != calls.end();
  }
};

/// A cancel that comes while a job's submission is in flight (`submit` on its own thread) waits
/// for it and cancels the Slurm job it made; `submit` is reconciliation's or the POST's.
void cancel_during_submission(const std::function<void(JobService&)>& submit, bool accept_first) {
  TempDir dir("job-reads-race");
  HoldingSlurmrestd slurm;
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  JobsDb* raw = db->get();
  const int64_t id = accept_first ? accepted(*raw) : 1;  // the POST records job 1
  JobService jobs(std::move(*db),
                  SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {});
  std::thread submitting([&] { submit(jobs); }), cancelling;
  Result<std::optional<JobRecord>> cancelled = std::optional<JobRecord>();
  slurm.race(cancelling, [&] { cancelled = jobs.cancel(alice, id); });
  submitting.join();
  cancelling.join();
  ASSERT_TRUE(cancelled.ok()) << cancelled.error().message();
  ASSERT_TRUE(cancelled->has_value());
  EXPECT_EQ((*cancelled)->slurm_job_id, 42);
  EXPECT_TRUE(slurm.saw("DELETE /slurm/v0.0.38/job/42")) << "Slurm job 42 is left running";
  EXPECT_EQ((*raw->get(id))->slurm_job_id, 42);
}

TEST(GatewayJobReads, ACancelDuringReconciliationsSubmissionCancelsWhatItSubmitted) {
  cancel_during_submission([](JobService& jobs) { (void)jobs.reconcile(5000, 0); }, true);
}

TEST(GatewayJobReads, ACancelDuringThePostsSubmissionCancelsWhatItSubmitted) {
  cancel_during_submission(
      [](JobService& jobs) {
        const std::string body = R"({"image": "x", "command": ["true"]})";
        auto request = parse_job_request(nlohmann::json::parse(body));
        ASSERT_TRUE(request.ok()) << request.error().message();
        auto done = jobs.submit(alice, "", body, *request);
        ASSERT_TRUE(done.ok()) << done.error().message();
      },
      false);
}

}  // namespace
}  // namespace berth::gateway

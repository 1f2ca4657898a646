// Cloud jobs cut at their time limit by berthd (gateway/caps.h): which jobs are due, given
// their start times and walltimes, and the record of a cut job that Slurm reports CANCELLED.
#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "gateway/caps.h"
#include "gateway/job_sync.h"
#include "gateway/jobs_db.h"
#include "gateway/slurm_api.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

JobRecord job(int64_t id, const char* job_class, JobState state, int64_t start, int64_t limit) {
  JobRecord j;
  j.id = id;
  j.owner = "alice";
  j.request = std::string(R"({"image":"x","class":")") + job_class + R"("})";
  j.state = state;
  j.slurm_job_id = 100 + id;
  j.start_time = start;
  j.time_limit_s = limit;
  return j;
}

TEST(GatewayCaps, RunningCloudJobsAreDueAtStartPlusWalltime) {
  const std::vector<JobRecord> jobs = {
      job(1, "cloud", JobState::kRunning, 1000, 60),   // due at 1060
      job(2, "cloud", JobState::kRunning, 1010, 60),   // due at 1070
      job(3, "batch", JobState::kRunning, 900, 60),    // batch: Slurm's limit alone
      job(4, "cloud", JobState::kPending, 900, 60),    // a pending job's start is an estimate
      job(5, "cloud", JobState::kRunning, 0, 60),      // start not known yet
      job(6, "cloud", JobState::kRunning, 900, 0),     // no walltime
      job(7, "cloud", JobState::kCompleted, 900, 60),  // ended
  };
  EXPECT_EQ(cap_deadline(jobs[0]), 1060);
  EXPECT_EQ(cap_deadline(jobs[2]), std::nullopt);
  EXPECT_EQ(cap_deadline(jobs[3]), std::nullopt);
  EXPECT_EQ(jobs_due(jobs, 1059), std::vector<int64_t>{});
  EXPECT_EQ(jobs_due(jobs, 1060), std::vector<int64_t>{1});
  EXPECT_EQ(jobs_due(jobs, 1075), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(cut_at_cap(jobs[3]));
  EXPECT_FALSE(cut_at_cap(jobs[2]));
  EXPECT_FALSE(cut_at_cap(jobs[5]));
}

/// A job database with one cloud job accepted (walltime `limit`), and the JobSync that records
/// Slurm's word on it (no slurmrestd behind: record() alone is used).
struct CloudJob {
  explicit CloudJob(int64_t limit) {
    auto opened = JobsDb::open(dir.path + "/jobs.db");
    if (!opened.ok()) ADD_FAILURE() << opened.error().message();
    db = opened.ok() ? std::move(*opened) : nullptr;
    JobRecord j{0, "alice", "iss", "s1", "", R"({"image":"x","class":"cloud"})"};
    j.time_limit_s = limit;
    bool existing = false;
    auto accepted = db ? db->accept(j, 100, &existing) : Result<JobRecord>(j);
    if (!accepted.ok()) ADD_FAILURE() << accepted.error().message();
    job = accepted.ok() ? *accepted : j;
  }
  TempDir dir{"caps"};
  std::unique_ptr<JobsDb> db;
  SlurmRest slurm{"http://127.0.0.1:1", "k", 60, slurm_api("v0.0.38")};
  JobRecord job;
};

TEST(GatewayCaps, JobCutAtItsCapIsRecordedTimeout) {
  CloudJob f(0);
  ASSERT_NE(f.db, nullptr);
  JobSync sync(*f.db, f.slurm);
  const JobRecord* accepted = &f.job;
  JobRecord rec = *accepted;
  rec.state = JobState::kRunning;
  rec.reason = kCutAtCapReason;
  SlurmJobInfo still;  // Slurm has not ended it yet: the reason stays
  still.state = JobState::kRunning;
  still.reason = "None";
  ASSERT_TRUE(sync.record(rec, still).ok());
  EXPECT_EQ(rec.reason, kCutAtCapReason);
  SlurmJobInfo ended;
  ended.state = JobState::kCancelled;
  ended.reason = "None";
  ended.start_time = 1000;
  ended.end_time = 1061;
  ASSERT_TRUE(sync.record(rec, ended).ok());
  EXPECT_EQ(rec.state, JobState::kTimeout);
  EXPECT_EQ(rec.reason, kCutAtCapReason);
  // A job cancelled by its owner stays CANCELLED.
  JobRecord other = *accepted;
  other.state = JobState::kRunning;
  ASSERT_TRUE(sync.record(other, ended).ok());
  EXPECT_EQ(other.state, JobState::kCancelled);
}

TEST(GatewayCaps, ARefreshThatRacedTheCutRecordsItsTimeoutToo) {
  // A GET's refresh read the job before the cut wrote its reason, and Slurm then answered
  // CANCELLED: Slurm's times say the job ran its whole walltime, so the cut is not lost.
  CloudJob f(60);
  ASSERT_NE(f.db, nullptr);
  JobSync sync(*f.db, f.slurm);
  const JobRecord* accepted = &f.job;
  JobRecord stale = *accepted;
  stale.state = JobState::kRunning;
  stale.start_time = 1000;
  SlurmJobInfo ended;
  ended.state = JobState::kCancelled;
  ended.reason = "None";
  ended.start_time = 1000;
  ended.end_time = 1060;
  JobRecord cut = stale;
  ASSERT_TRUE(sync.record(cut, ended).ok());
  EXPECT_EQ(cut.state, JobState::kTimeout);
  EXPECT_EQ(cut.reason, kCutAtCapReason);
  auto stored = f.db->get(accepted->id);
  ASSERT_TRUE(stored.ok() && *stored);
  EXPECT_EQ((*stored)->state, JobState::kTimeout);
  // Cancelled by its owner a second before its deadline: CANCELLED, as asked.
  JobRecord cancelled = stale;
  ended.end_time = 1059;
  ASSERT_TRUE(sync.record(cancelled, ended).ok());
  EXPECT_EQ(cancelled.state, JobState::kCancelled);
  // A batch job has no cap of berthd's: Slurm's CANCELLED stands, however long it ran.
  JobRecord batch = stale;
  batch.request = R"({"image":"x","class":"batch"})";
  ended.end_time = 5000;
  ASSERT_TRUE(sync.record(batch, ended).ok());
  EXPECT_EQ(batch.state, JobState::kCancelled);
}

}  // namespace
}  // namespace berth::gateway

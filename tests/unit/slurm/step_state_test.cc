#include "slurm/step_state.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

namespace berth::slurm {
namespace {

StepRecord up_record() {
  StepRecord r;
  r.phase = StepPhase::kUp;
  r.holder = 4242;
  r.container = "keep.n1";
  r.owned = true;
  r.stepd = 77;
  r.save = "/home/u/saved.sqsh";
  return r;
}

TEST(SlurmStepState, ARecordReadsBackAsWritten) {
  TempDir dir("step-state");
  std::string path = dir / "5.0.n1.step";
  StepRecord r = up_record();
  ASSERT_EQ(write_record(path, r), "");
  std::optional<StepRecord> back;
  ASSERT_EQ(read_record(path, &back), "");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, r);
  // Written whole under a temporary name, then renamed: nothing is left beside it.
  EXPECT_EQ(slurp(path), encode(r));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(::getpid())));
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  StepRecord failed;
  failed.phase = StepPhase::kFailed;
  failed.error = "mount volume /nonexistent:/x: bind source path does not exist";
  ASSERT_EQ(write_record(path, failed), "");  // replaces the one before
  ASSERT_EQ(read_record(path, &back), "");
  EXPECT_EQ(*back, failed);
}

TEST(SlurmStepState, AMissingRecordIsNothingRecorded) {
  TempDir dir("step-state");
  std::optional<StepRecord> r = up_record();
  EXPECT_EQ(read_record(dir / "none.step", &r), "");
  EXPECT_FALSE(r.has_value());
  std::optional<JobRecord> j = JobRecord{};
  EXPECT_EQ(read_record(dir / "none.job", &j), "");
  EXPECT_FALSE(j.has_value());
}

TEST(SlurmStepState, ACorruptRecordIsOneLineNamingTheFile) {
  TempDir dir("step-state");
  std::string path = dir / "5.0.n1.step";
  std::optional<StepRecord> r;
  // The format before this one ("HOLDER NAME OWNED RUNNER STEPD").
  write_text(path, "4242 keep.n1 1 0 77");
  EXPECT_EQ(read_record(path, &r), "step record " + path + ": not JSON");
  EXPECT_FALSE(r.has_value());
  std::string good = encode(up_record());
  write_text(path, good.substr(0, good.size() / 2));  // cut short
  EXPECT_EQ(read_record(path, &r), "step record " + path + ": not JSON");
  write_text(path, "[1]");
  EXPECT_EQ(read_record(path, &r), "step record " + path + ": not a JSON object");
}

TEST(SlurmStepState, DecodeIsStrict) {
  StepRecord r;
  auto with = [](const std::string& key, const std::string& value) {
    std::string text = encode(up_record());
    size_t at = text.find("\"" + key + "\":");
    size_t start = at + key.size() + 3;
    size_t end = text.find_first_of(",}", start);
    if (text[start] == '"') end = text.find('"', start + 1) + 1;
    return text.substr(0, start) + value + text.substr(end);
  };
  EXPECT_EQ(decode(with("holder", "\"4242\""), &r), "key 'holder' is not an integer");
  EXPECT_EQ(decode(with("owned", "1"), &r), "key 'owned' is not a boolean");
  EXPECT_EQ(decode(with("container", "null"), &r), "key 'container' is not a string");
  EXPECT_EQ(decode(with("phase", "\"running\""), &r),
            "unknown phase 'running' (starting, up, failed)");
  EXPECT_EQ(decode(with("version", "2"), &r), "version 2 (this plugin reads version 1)");
  EXPECT_EQ(decode(with("holder", "-1"), &r), "a negative pid");
  EXPECT_EQ(decode(R"({"version":1,"phase":"up"})", &r), "key 'holder' (an integer) is missing");
  std::string extra = encode(up_record());
  extra.insert(1, "\"colour\":\"blue\",");
  EXPECT_EQ(decode(extra, &r), "unknown key 'colour'");
  EXPECT_EQ(decode(encode(up_record()), &r), "");
  EXPECT_EQ(r, up_record());
}

TEST(SlurmStepState, BytesThatAreNotUtf8AreRefusedNotMangled) {
  TempDir dir("step-state");
  StepRecord r = up_record();
  r.save = "/home/u/\xff.sqsh";
  EXPECT_EQ(write_record(dir / "x.step", r),
            "write step record " + (dir / "x.step") + ": a value is not valid UTF-8");
  EXPECT_FALSE(std::filesystem::exists(dir / "x.step"));
}

TEST(SlurmStepState, RootNeverReadsThroughALinkOrFromAFifo) {
  TempDir dir("step-state");
  std::string target = dir.write("elsewhere", encode(up_record()));
  std::string link = dir / "5.0.n1.step";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  std::optional<StepRecord> r;
  EXPECT_EQ(read_record(link, &r), "step record " + link + ": a symbolic link, not a record");
  std::string fifo = dir / "6.0.n1.step";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_record(fifo, &r), "step record " + fifo + ": not a regular file");
  std::string big = dir.write("7.0.n1.step", std::string(70000, ' '));
  EXPECT_EQ(read_record(big, &r), "step record " + big + ": larger than 64 KiB");
}

TEST(SlurmStepState, TheJobRecordKeepsWhereTheStoreIs) {
  TempDir dir("step-state");
  JobRecord j = job_record({"PATH=/bin", "HOME=/home/u", "BERTH_HOME=/scratch/u/berth",
                            "XDG_DATA_HOME=/home/u/.data", "HOMEWARD=no"});
  EXPECT_EQ(j.store_env, (std::vector<std::string>{"HOME=/home/u", "BERTH_HOME=/scratch/u/berth",
                                                   "XDG_DATA_HOME=/home/u/.data"}));
  ASSERT_EQ(write_record(dir / "5.job", j), "");
  std::optional<JobRecord> back;
  ASSERT_EQ(read_record(dir / "5.job", &back), "");
  EXPECT_EQ(*back, j);
  write_text(dir / "6.job", R"({"version":1,"store_env":["HOME=/h",3]})");
  EXPECT_EQ(read_record(dir / "6.job", &back),
            "job record " + (dir / "6.job") + ": key 'store_env' is not an array of strings");
}

TEST(SlurmStepState, FileNames) {
  StepIds ids;
  ids.job = 12;
  ids.step = 3;
  ids.node = "n1";
  EXPECT_EQ(step_file_name(ids), "12.3.n1.step");
  ids.step = kBatchStep;
  EXPECT_EQ(step_file_name(ids), "12.batch.n1.step");
  EXPECT_EQ(job_file_name(12), "12.job");
  std::string job_step;
  EXPECT_TRUE(is_step_file("12.3.n1.step", 12, "n1", &job_step));
  EXPECT_EQ(job_step, "12.3");
  EXPECT_FALSE(is_step_file("12.3.n2.step", 12, "n1"));
  EXPECT_TRUE(is_step_file("12.3.n2.step", 12, ""));
  EXPECT_FALSE(is_step_file("120.3.n1.step", 12, "n1"));
  EXPECT_FALSE(is_step_file("12.3.n1.step.tmp.99", 12, "n1"));  // a write in progress
  EXPECT_FALSE(is_step_file("12.3.n1.step.lock", 12, ""));
}

}  // namespace
}  // namespace berth::slurm

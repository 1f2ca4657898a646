// The site's start estimate (gateway/start_estimate.h): sbatch --test-only's arguments, reading
// its answer, the child process with its environment and errors, and the [slurm] keys.
#include <gtest/gtest.h>

#include "core/fs.h"
#include "gateway/config.h"
#include "gateway/start_estimate.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

TEST(GatewayStartEstimate, AsksWithTheJobsResourcesAndNotItsAccount) {
  SlurmJobSpec s;
  s.name = "train";
  s.partition = "gpu";
  s.account = "bio";
  s.nodes = 2;
  s.tasks = 4;
  s.cpus_per_task = 8;
  s.memory_mb = 16384;
  s.gpus = 2;
  s.gpu_type = "a100";
  s.gres = "shard:2";
  s.time_limit_min = 30;
  EXPECT_EQ(
      test_only_args("/usr/bin/sbatch", s),
      (std::vector<std::string>{"/usr/bin/sbatch", "--test-only", "--job-name=train", "--nodes=2",
                                "--ntasks=4", "--cpus-per-task=8", "--partition=gpu", "--mem=16384",
                                "--gpus=a100:2", "--gres=shard:2", "--time=30", "--wrap=true"}));
  SlurmJobSpec plain;
  plain.gpus = 1;
  EXPECT_EQ(
      test_only_args("sbatch", plain),
      (std::vector<std::string>{"sbatch", "--test-only", "--job-name=berthd", "--nodes=1",
                                "--ntasks=1", "--cpus-per-task=1", "--gpus=1", "--wrap=true"}));
}

TEST(GatewayStartEstimate, ReadsTheStartTimeSbatchNames) {
  auto t = read_test_only(
      "sbatch: Job 7 to start at 1764900000 using 2 processors on nodes n1 in partition gpu\n");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(*t, 1764900000);
  EXPECT_EQ(*read_test_only("sbatch: Job 8 to start at 1764900001\n"), 1764900001);
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           // A start time in another format than SLURM_TIME_FORMAT=%s asks for is not guessed.
           {"sbatch: Job 7 to start at 2026-12-05T10:00:00 using 1 processors on nodes n1\n",
            "estimate start sbatch --test-only: it names no start time: \"sbatch: Job 7 to "
            "start at 2026-12-05T10:00:00 using 1 processors on nodes n1\""},
           {"sbatch: Job 7 to start at 0 using 1 processors\n",
            "estimate start sbatch --test-only: it names no start time: \"sbatch: Job 7 to "
            "start at 0 using 1 processors\""},
           {"", "estimate start sbatch --test-only: it names no start time: \"\""}}) {
    auto bad = read_test_only(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.error().message(), message);
    EXPECT_EQ(bad.error().code, ErrorCode::kInvalidInput);
  }
}

TEST(GatewayStartEstimate, RunsSbatchWithTheTokenAndReadsItsStderr) {
  TempDir dir("estimate");
  // A stand-in for sbatch: it answers on stderr, as sbatch does, and keeps what it was given.
  const std::string seen = dir.path + "/seen";
  StartEstimateConfig c;
  c.enabled = true;
  c.slurm_conf = "/etc/slurm/other.conf";
  c.sbatch = dir.write("sbatch",
                       "#!/bin/sh\n"
                       "printf '%s\\n' \"$@\" \"jwt=$SLURM_JWT\" \"fmt=$SLURM_TIME_FORMAT\" "
                       "\"conf=$SLURM_CONF\" > " +
                           seen +
                           "\n"
                           "echo 'sbatch: Job 3 to start at 1764900123 using 1 processors on "
                           "nodes n1 in partition debug' >&2\n",
                       0755);
  SlurmJobSpec s;
  s.partition = "debug";
  auto t = estimate_start(c, "tok.en", s);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(*t, 1764900123);
  auto args = read_file(seen);
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args,
            "--test-only\n--job-name=berthd\n--nodes=1\n--ntasks=1\n--cpus-per-task=1\n"
            "--partition=debug\n--wrap=true\njwt=tok.en\nfmt=%s\nconf=/etc/slurm/other.conf\n");
  // A job Slurm could never run: sbatch's own words, under this operation.
  c.sbatch = dir.write("refusing",
                       "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Requested "
                       "node configuration is not available' >&2\nexit 1\n",
                       0755);
  auto never = estimate_start(c, "t", s);
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(never.error().message(),
            "estimate start " + c.sbatch +
                ": sbatch: error: Batch job submission failed: Requested node configuration is "
                "not available (exit status 1)");
  c.sbatch = dir.write("slow", "#!/bin/sh\nexec sleep 30\n", 0755);
  c.timeout_s = 1;
  auto slow = estimate_start(c, "t", s);
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.error().message(),
            "estimate start " + c.sbatch + ": no answer within 1 s ([slurm] estimate_timeout_s)");
}

TEST(GatewayStartEstimate, ReadsTheSlurmKeys) {
  const std::string iss =
      "database = \"/var/lib/berthd/jobs.db\"\n[[issuers]]\nissuer = \"https://a/\"\n"
      "audience = \"b\"\n";
  const std::string slurm = "[slurm]\nrest_url = \"http://h:1\"\njwt_key = \"/k\"\n";
  auto c = parse_gateway_config(iss + slurm + R"(
start_estimate = "sbatch"
sbatch = "/opt/slurm/bin/sbatch"
slurm_conf = "/etc/slurm/slurm.conf"
estimate_timeout_s = 3
)",
                                "f");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_TRUE(c->slurm.estimate.enabled);
  EXPECT_EQ(c->slurm.estimate.sbatch, "/opt/slurm/bin/sbatch");
  EXPECT_EQ(c->slurm.estimate.slurm_conf, "/etc/slurm/slurm.conf");
  EXPECT_EQ(c->slurm.estimate.timeout_s, 3);
  auto d = parse_gateway_config(iss + slurm, "f");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_FALSE(d->slurm.estimate.enabled);
  EXPECT_EQ(d->slurm.estimate.sbatch, "sbatch");
  EXPECT_EQ(d->slurm.estimate.timeout_s, 10);
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"start_estimate = \"squeue\"\n",
            "read config f: line 8: \"start_estimate\" is not \"none\" or \"sbatch\""},
           {"slurm_conf = \"slurm.conf\"\n",
            "read config f: line 8: \"slurm_conf\" is not an absolute path"},
           {"estimate_timeout_s = 0\n",
            "read config f: line 8: \"estimate_timeout_s\" is less than 1"},
           {"sbatch = \"\"\n", "read config f: line 8: \"sbatch\" is empty"}}) {
    auto bad = parse_gateway_config(iss + slurm + text, "f");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.error().message(), message) << text;
  }
}

}  // namespace
}  // namespace berth::gateway

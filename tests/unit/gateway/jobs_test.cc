// berthd's jobs (gateway/jobs.h, jobs_db.h, slurm_v0038.h, slurm_rest.h): request checks and
// the stored request read back, the Slurm job a request becomes, slurmrestd v0.0.38's shapes,
// the minted Slurm token, and the SQLite database's idempotency and listing.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <algorithm>
#include <mutex>

#include "core/json.h"
#include "fake_http_server.h"
#include "gateway/jobs.h"
#include "gateway/jobs_db.h"
#include "gateway/jwt.h"
#include "gateway/slurm_api.h"
#include "gateway/slurm_rest.h"
#include "gateway/slurm_v0038.h"
#include "gateway/slurm_v0041.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

const SlurmApi& v0038() {
  return *slurm_api("v0.0.38");
}

using json = nlohmann::json;

TEST(GatewayJobs, RequestFieldsAndErrors) {
  auto r = parse_job_request(json::parse(R"({
    "name": "train", "image": "nvcr.io/nvidia/pytorch:24.01", "command": ["python", "t.py"],
    "env": {"EPOCHS": "3"}, "mounts": ["/data:/data:ro"], "workdir": "/work", "class": "cloud",
    "resources": {"nodes": 2, "tasks": 8, "cpus_per_task": 4, "memory_mb": 64000, "gpus": 8,
                  "walltime_s": 3601}})"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->nodes, 2);
  EXPECT_EQ(r->gpus, 8);
  EXPECT_EQ(r->memory_mb, 64000);
  EXPECT_EQ(r->job_class, "cloud");
  const std::pair<const char*, const char*> bad[] = {
      {"[]", "parse job request: the body is not a JSON object"},
      {R"({"command": ["x"]})", "parse job request: \"image\" is required"},
      {R"({"image": 1})", "parse job request: \"image\" is not a string"},
      {R"({"image": "x", "command": "true"})",
       "parse job request: \"command\" is not a list of strings"},
      {R"({"image": "x", "env": {"A=B": "1"}})",
       "parse job request: \"env\" names a variable \"A=B\""},
      {R"({"image": "x", "resources": {"gpus": 1.5}})",
       "parse job request: \"resources.gpus\" is not a whole number from 0 to 10000"},
      {R"({"image": "x", "resources": {"tasks": 0}})",
       "parse job request: \"resources\" asks for no nodes, tasks or CPUs"},
      {R"({"image": "x", "resources": {"disks": 1}})",
       "parse job request: \"resources.disks\" is not a field of a job request"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_job_request(json::parse(text));
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
}

TEST(GatewayJobs, SlurmJobRunsTheContainerOnTheSrunLine) {
  JobRequest r = *parse_job_request(json::parse(R"({
    "image": "alpine:3", "command": ["sh", "-c", "echo 'hi'"], "env": {"A": "1", "PATH": "/x"},
    "mounts": ["/a:/a", "/b:/b:ro"], "workdir": "/w",
    "resources": {"tasks": 2, "memory_mb": 100, "gpus": 1, "walltime_s": 61}})"));
  SlurmConfig sc;
  sc.partition = "gpu";
  sc.workdir = "/scratch";
  sc.environment = {{"PATH", "/usr/bin:/bin"}, {"SITE", "x"}};
  SlurmJobSpec s = slurm_spec(r, 42, "berthd:0123456789abcdef:42", sc);
  EXPECT_EQ(s.script,
            "#!/bin/sh\nexec srun --container-image='alpine:3' --container-workdir='/w' "
            "--container-mounts='/a:/a,/b:/b:ro' -- 'sh' '-c' 'echo '\\''hi'\\'''\n");
  EXPECT_EQ(s.comment, "berthd:0123456789abcdef:42");
  EXPECT_EQ(s.time_limit_min, 2);
  EXPECT_EQ(s.environment,
            (std::map<std::string, std::string>{
                {"A", "1"}, {"BERTHD_JOB_ID", "42"}, {"PATH", "/x"}, {"SITE", "x"}}));
  json body = submit_body_v0038(s);
  EXPECT_EQ(body["job"]["gpus"], "1");
  EXPECT_EQ(body["job"]["nodes"], "1");  // slurmrestd 22.05 ignores the [min, max] array
  EXPECT_EQ(body["job"]["partition"], "gpu");
  EXPECT_EQ(body["job"]["current_working_directory"], "/scratch");
  EXPECT_EQ(body["job"]["environment"]["SITE"], "x");
  EXPECT_EQ(body["job"]["memory_per_node"], 100);
}

TEST(GatewayJobs, GpuShareRequestAndItsRefusals) {
  auto r = parse_job_request(json::parse(R"({"image": "x", "resources": {"gpu_share": 0.25}})"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->gpu_share, 0.25);
  EXPECT_EQ(r->gpus, 0);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"image": "x", "resources": {"gpu_share": 0}})",
       "parse job request: \"resources.gpu_share\" is not a number above 0 and below 1"},
      {R"({"image": "x", "resources": {"gpu_share": 1}})",
       "parse job request: \"resources.gpu_share\" is not a number above 0 and below 1"},
      {R"({"image": "x", "resources": {"gpu_share": 1.5}})",
       "parse job request: \"resources.gpu_share\" is not a number above 0 and below 1"},
      {R"({"image": "x", "resources": {"gpu_share": -0.5}})",
       "parse job request: \"resources.gpu_share\" is not a number above 0 and below 1"},
      {R"({"image": "x", "resources": {"gpu_share": "0.5"}})",
       "parse job request: \"resources.gpu_share\" is not a number above 0 and below 1"},
      {R"({"image": "x", "resources": {"gpu_share": 0.5, "gpus": 1}})",
       "parse job request: \"resources\" asks for both gpus and gpu_share (a share is of one GPU)"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_job_request(json::parse(text));
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
  // A site that does not share GPUs refuses it (a 400); a request without a share passes.
  ShareConfig off;
  auto no = check_share(*r, off);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().detail,
            "\"resources.gpu_share\" asks for a share of a GPU, which this site does not offer");
  EXPECT_TRUE(check_share(*parse_job_request(json::parse(R"({"image": "x"})")), off).ok());
  ShareConfig on;
  on.enabled = true;
  on.units_per_gpu = 8;
  EXPECT_TRUE(check_share(*r, on).ok());
}

TEST(GatewayJobs, GpuModelBecomesTheGresTypeOfTheJobsGpus) {
  auto r = parse_job_request(
      json::parse(R"({"image": "x", "resources": {"gpus": 2, "gpu_model": "a100"}})"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->gpu_model, "a100");
  SlurmJobSpec s = slurm_spec(*r, 1, "c", SlurmConfig{});
  EXPECT_EQ(s.gpu_type, "a100");
  EXPECT_EQ(submit_body_v0038(s)["job"]["gpus"], "a100:2");  // sbatch --gpus=a100:2
  EXPECT_EQ(submit_body_v0041(s)["job"]["tres_per_job"], "gres/gpu:a100:2");
  EXPECT_EQ(submit_body_v0041(slurm_spec(
                *parse_job_request(json::parse(R"({"image": "x", "resources": {"gpus": 2}})")), 1,
                "c", SlurmConfig{}))["job"]["tres_per_job"],
            "gres/gpu:2");
  JobRecord j;
  j.request = R"({"image": "x", "resources": {"gpus": 2, "gpu_model": "a100"}})";
  EXPECT_EQ(job_json(j)["gpu_model"], "a100");

  const std::pair<const char*, const char*> bad[] = {
      {R"({"image": "x", "resources": {"gpu_model": "a100"}})",
       "parse job request: \"resources.gpu_model\" names a GPU model but resources.gpus asks "
       "for no GPUs: give both"},
      {R"({"image": "x", "resources": {"gpus": 1, "gpu_model": "a100:2"}})",
       "parse job request: \"resources.gpu_model\" is not a GPU model name (letters, digits, "
       "'_', '.', '-')"},
      {R"({"image": "x", "resources": {"gpus": 1, "gpu_model": ""}})",
       "parse job request: \"resources.gpu_model\" is not a GPU model name (letters, digits, "
       "'_', '.', '-')"},
      {R"({"image": "x", "resources": {"gpus": 1, "gpu_model": 100}})",
       "parse job request: \"resources.gpu_model\" is not a string"},
  };
  for (const auto& [text, message] : bad) {
    auto e = parse_job_request(json::parse(text));
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().message(), message) << text;
  }
  // The site's [gpu_models] say which models exist.
  EXPECT_TRUE(check_gpu_model(*r, {"a100", "t4"}).ok());
  auto no = check_gpu_model(*r, {"h100", "t4"});
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().detail,
            "\"resources.gpu_model\" is \"a100\", not a GPU model of this site (known: h100, t4)");
  no = check_gpu_model(*r, {});
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().detail,
            "\"resources.gpu_model\" is \"a100\", not a GPU model of this site (it names none in "
            "[gpu_models])");
  EXPECT_TRUE(check_gpu_model(*parse_job_request(json::parse(R"({"image": "x"})")), {}).ok());
}

TEST(GatewayJobs, GpuShareBecomesShardOrMpsGres) {
  ShareConfig shard;
  shard.enabled = true;
  shard.units_per_gpu = 8;
  ShareConfig mps = shard;
  mps.gres = "mps";
  mps.units_per_gpu = 100;
  const struct {
    double x;
    const ShareConfig& share;
    const char* gres;
  } cases[] = {
      {0.25, shard, "shard:2"}, {0.3, shard, "shard:3"}, {0.01, shard, "shard:1"},
      {0.99, shard, "shard:8"}, {0.5, shard, "shard:4"}, {0.25, mps, "mps:25"},
      {0.333, mps, "mps:33"},   {0.001, mps, "mps:1"},   {0.999, mps, "mps:100"},
  };
  for (const auto& c : cases) EXPECT_EQ(share_gres(c.x, c.share), c.gres) << c.x;
  ShareConfig ten = shard;
  ten.units_per_gpu = 10;
  EXPECT_EQ(share_gres(0.3, ten), "shard:3");  // not 4: 0.3 * 10 is 3.0000000000000004

  JobRequest r = *parse_job_request(json::parse(R"({
    "image": "alpine:3", "env": {"CUDA_MPS_PIPE_DIRECTORY": "/mine"},
    "resources": {"gpu_share": 0.25}})"));
  SlurmConfig sc;
  sc.share = shard;
  sc.share.pipe_dir = "/run/mps/pipe";
  sc.share.log_dir = "/run/mps/log";
  SlurmJobSpec s = slurm_spec(r, 7, "berthd:0123456789abcdef:7", sc);
  EXPECT_EQ(s.gres, "shard:2");
  EXPECT_EQ(s.gpus, 0);
  // The site's MPS directories, whatever the request said.
  EXPECT_EQ(s.environment,
            (std::map<std::string, std::string>{{"BERTHD_JOB_ID", "7"},
                                                {"CUDA_MPS_LOG_DIRECTORY", "/run/mps/log"},
                                                {"CUDA_MPS_PIPE_DIRECTORY", "/run/mps/pipe"}}));
  json body = submit_body_v0038(s);
  EXPECT_EQ(body["job"]["gres"], "shard:2");
  EXPECT_FALSE(body["job"].contains("gpus"));
  // A job without a share asks for no GRES and gets no MPS variables.
  SlurmJobSpec plain = slurm_spec(*parse_job_request(json::parse(R"({"image": "a"})")), 8, "c", sc);
  EXPECT_EQ(plain.gres, "");
  EXPECT_FALSE(plain.environment.contains("CUDA_MPS_PIPE_DIRECTORY"));
  EXPECT_FALSE(submit_body_v0038(plain)["job"].contains("gres"));
}

TEST(GatewayJobs, SlurmrestdAnswers) {
  EXPECT_EQ(*parse_submit(v0038(), R"({"errors": [], "job_id": 17, "step_id": "BATCH"})", "u"), 17);
  auto refused = parse_submit(
      v0038(), R"({"errors": [{"description": "Invalid partition", "error_number": 2000}]})", "u");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), "parse u: slurmrestd: Invalid partition");
  auto done = parse_job(v0038(), R"({"errors": [], "jobs": [{"job_state": "FAILED",
      "state_reason": "NonZeroExitCode", "exit_code": 768, "nodes": "n1", "start_time": 5}]})",
                        "u");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->exit_code, 3);
  EXPECT_EQ(done->reason, "NonZeroExitCode");
  auto killed =
      parse_job(v0038(), R"({"jobs": [{"job_state": "CANCELLED", "exit_code": 9}]})", "u");
  EXPECT_EQ(killed->exit_code, 137);
  auto running = parse_job(
      v0038(), R"({"jobs": [{"job_state": "RUNNING", "exit_code": 0, "state_reason": "None"}]})",
      "u");
  EXPECT_FALSE(running->exit_code.has_value());
  EXPECT_EQ(running->reason, "");
  EXPECT_FALSE(parse_job(v0038(), R"({"jobs": []})", "u").ok());
}

TEST(GatewayJobs, MintedSlurmTokenIsForTheUserAlone) {
  std::string key(32, '\x07');
  std::string tok = mint_slurm_token(key, "alice", 1000, 60);
  size_t d1 = tok.find('.'), d2 = tok.rfind('.');
  EXPECT_EQ(json::parse(*base64url_decode(tok.substr(0, d1))),
            json({{"alg", "HS256"}, {"typ", "JWT"}}));
  EXPECT_EQ(json::parse(*base64url_decode(tok.substr(d1 + 1, d2 - d1 - 1))),
            json({{"iat", 1000}, {"exp", 1060}, {"sun", "alice"}}));
  unsigned char mac[32];
  unsigned int len = 0;
  std::string input = tok.substr(0, d2);
  HMAC(EVP_sha256(), key.data(), 32, reinterpret_cast<const unsigned char*>(input.data()),
       input.size(), mac, &len);
  EXPECT_EQ(tok.substr(d2 + 1), base64url_encode(std::string(reinterpret_cast<char*>(mac), len)));
}

TEST(GatewayJobsDb, IdempotencyListingAndReopening) {
  TempDir dir("jobsdb");
  std::string path = dir.path + "/jobs.db";
  {
    auto db = JobsDb::open(path);
    ASSERT_TRUE(db.ok()) << db.error().message();
    JobRecord a{0, "alice", "iss", "s1", "k1", R"({"image":"x"})"};
    bool existing = true;
    auto j1 = (*db)->accept(a, 100, &existing);
    ASSERT_TRUE(j1.ok()) << j1.error().message();
    EXPECT_FALSE(existing);
    EXPECT_EQ(job_state_name(j1->state), "ACCEPTED");
    auto again = (*db)->accept(a, 101, &existing);
    EXPECT_TRUE(existing);
    EXPECT_EQ(again->id, j1->id);
    // The same key of another user, and requests without a key, are jobs of their own.
    JobRecord b{0, "bob", "iss", "s2", "k1", "{}"};
    auto j2 = (*db)->accept(b, 102, &existing);
    EXPECT_FALSE(existing);
    b.idempotency_key.clear();
    auto j3 = (*db)->accept(b, 103, &existing);
    auto j4 = (*db)->accept(b, 104, &existing);
    EXPECT_FALSE(existing);
    EXPECT_NE(j3->id, j4->id);
    ASSERT_TRUE((*db)->submitted(j1->id, 5001, JobState::kPending, 110).ok());
    ASSERT_TRUE((*db)->update(j2->id, JobState::kFailed, "NonZeroExitCode", 3, "n1", 120).ok());
    EXPECT_EQ((*db)->list("alice", std::nullopt, 0, 100)->size(), 1u);
    EXPECT_EQ((*db)->list("bob", std::nullopt, 0, 100)->size(), 3u);
    EXPECT_EQ((*db)->list("", std::nullopt, 0, 100)->size(), 4u);
    EXPECT_EQ((*db)->list("", JobState::kFailed, 0, 100)->size(), 1u);
    EXPECT_EQ((*db)->list("", std::nullopt, 103, 100)->size(), 2u);
    EXPECT_EQ((*db)->list("bob", std::nullopt, 0, 100)->front().id, j4->id);  // newest first
    EXPECT_EQ(*(*db)->count_by_state(),
              (std::map<JobState, int>{
                  {JobState::kAccepted, 2}, {JobState::kFailed, 1}, {JobState::kPending, 1}}));
  }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Everything is there after reopening (a restart), under the same name.
  std::string name = (*JobsDb::open(path))->instance();
  auto db = JobsDb::open(path);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ((*db)->instance(), name);
  EXPECT_NE((*JobsDb::open(dir.path + "/other.db"))->instance(), name);
  auto j = (*db)->get(1);
  ASSERT_TRUE(j.ok() && j->has_value());
  EXPECT_EQ((*j)->slurm_job_id, 5001);
  EXPECT_EQ(job_state_name((*j)->state), "PENDING");
  auto f = (*db)->get(2);
  EXPECT_EQ((*f)->exit_code, 3);
  EXPECT_EQ((*f)->nodes, "n1");
  EXPECT_FALSE((*db)->get(99)->has_value());
  json shown = job_json(**f);
  EXPECT_EQ(shown["id"], "2");
  EXPECT_EQ(shown["exit_code"], 3);
}

}  // namespace
}  // namespace berth::gateway

namespace berth::gateway {
namespace {

TEST(GatewayJobs, StoredRequestIsReadBackOnceForTheAnswerAndTheUsage) {
  // What POST /v1/jobs recorded comes back as the request it was.
  auto r = read_stored_request(R"({"name": "n", "image": "busybox", "class": "cloud",
      "resources": {"nodes": 2, "tasks": 3, "cpus_per_task": 4, "gpu_share": 0.25}})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->name, "n");
  EXPECT_EQ(r->job_class, "cloud");
  EXPECT_EQ(r->nodes * r->tasks * r->cpus_per_task, 24);
  EXPECT_DOUBLE_EQ(r->gpu_share, 0.25);
  // Defaults for what the body left out, as at submission.
  auto plain = read_stored_request(R"({"image": "busybox"})");
  ASSERT_TRUE(plain.ok()) << plain.error().message();
  EXPECT_EQ(plain->name, "berthd-job");
  EXPECT_EQ(plain->job_class, "batch");
  EXPECT_EQ(plain->gpus, 0);
  // Text that is no request is an error, not a request of defaults.
  for (const char* bad : {"", "not json", "[1]", R"({"name": "no image"})"}) {
    auto no = read_stored_request(bad);
    ASSERT_FALSE(no.ok()) << bad;
    EXPECT_EQ(no.error().code, ErrorCode::kInvalidInput) << bad;
  }
  // The job's answer shows the stored request's name, image, class and share.
  JobRecord j;
  j.id = 4;
  j.request = R"({"name": "n", "image": "busybox", "resources": {"gpu_share": 0.5}})";
  j.gres = "shard:2";
  json out = job_json(j);
  EXPECT_EQ(out["name"], "n");
  EXPECT_EQ(out["image"], "busybox");
  EXPECT_EQ(out["class"], "batch");
  EXPECT_EQ(out["gpu_share"], 0.5);
  EXPECT_EQ(out["gres"], "shard:2");
  j.request = R"({"image": "busybox", "resources": {"gpus": 1}})";
  out = job_json(j);
  EXPECT_FALSE(out.contains("gpu_share"));
  EXPECT_EQ(out["name"], "berthd-job");
}

TEST(GatewayJobs, JobTextIsTheJsonOfTheJob) {
  // append_job_text() writes a job as nlohmann would write its value: keys in order, its
  // escapes and replacements, whatever the row holds.
  std::vector<JobRecord> jobs(6);
  jobs[0] = {1, "alice", "i", "s", "", R"({"image": "alpine"})"};
  jobs[1] = {2, "bob", "i", "s", "k", R"({"name": "caf\u00e9 \"x\"", "image": "a\tb",
      "class": "cloud", "resources": {"gpus": 2, "gpu_model": "a100"}})"};
  jobs[1].state = JobState::kRunning;
  jobs[1].slurm_job_id = 77;
  jobs[1].nodes = "n[1-2]";
  jobs[1].start_time = 1700000000;
  jobs[1].gpus = 2;
  jobs[1].gres_detail = {"gpu:a100:1(IDX:0)", "gpu:a100:1(IDX:1)"};
  jobs[1].vo = "/gpu-vo";
  jobs[2] = {3, "carol", "i", "s", "", R"({"image": "x", "resources": {"gpu_share": 0.3}})"};
  jobs[2].gres = "shard:3";
  jobs[2].state = JobState::kTimeout;
  jobs[2].time_limit_s = 3600;
  jobs[2].time_limit_from = "cloud_max_walltime_s";
  jobs[2].exit_code = 0;
  jobs[2].end_time = 1700003600;
  jobs[3] = {4, "dave", "i", "s", "", "not a request"};  // no name, image or class of its own
  jobs[3].reason = std::string(
      "bad\xff\x01"
      "byte\0",
      10);
  jobs[3].state = JobState::kSubmitFailed;
  jobs[4] = {5, "erin", "i", "s", "", R"({"image": "y"})"};
  jobs[4].state = JobState::kTimeout;
  jobs[4].time_limit_s = 60;
  jobs[4].time_limit_from = "request";
  jobs[4].exit_code = -9;
  jobs[5] = {6, "frank", "i", "s", "", R"({"image": "z"})"};
  jobs[5].state = JobState::kTimeout;
  jobs[5].reason = "TimeLimit";
  for (const JobRecord& j : jobs) {
    std::string text;
    append_job_text(text, j);
    json parsed = json::parse(text);
    EXPECT_EQ(text, to_text(parsed)) << j.id;
    EXPECT_EQ(parsed, job_json(j)) << j.id;
    EXPECT_EQ(parsed["id"], std::to_string(j.id));
  }
  json shown = job_json(jobs[1]);
  EXPECT_EQ(shown["name"], "caf\u00e9 \"x\"");
  EXPECT_EQ(shown["gpu_model"], "a100");
  EXPECT_EQ(shown["group"], "/gpu-vo");
  EXPECT_EQ(shown["exit_code"], nullptr);
  EXPECT_EQ(shown["gres_detail"].size(), 2u);
  shown = job_json(jobs[2]);
  EXPECT_EQ(shown["reason"], "cut at the cloud walltime cap, 3600 s (cloud_max_walltime_s)");
  EXPECT_EQ(shown["gpu_share"], 0.3);
  EXPECT_EQ(shown["gres"], "shard:3");
  EXPECT_EQ(shown["exit_code"], 0);
  shown = job_json(jobs[3]);
  EXPECT_EQ(shown["class"], "batch");
  EXPECT_FALSE(shown.contains("image"));
  EXPECT_EQ(shown["reason"], std::string("bad\xef\xbf\xbd\x01"
                                         "byte\0",
                                         12));
  EXPECT_EQ(job_json(jobs[4])["reason"], "cut at the walltime it asked for, 60 s");
  EXPECT_EQ(job_json(jobs[5])["reason"], "TimeLimit");  // no limit recorded: Slurm's word
}

TEST(GatewayJobs, JobListAnswer) {
  auto jobs = parse_jobs(v0038(), R"({"errors": [], "jobs": [
      {"job_id": 7, "comment": "berthd:3", "user_name": "alice", "job_state": "RUNNING"},
      {"job_id": 8, "comment": "", "user_name": "bob", "job_state": "COMPLETED", "exit_code": 0},
      {"comment": "no id"}]})",
                         "u");
  ASSERT_TRUE(jobs.ok()) << jobs.error().message();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id, 7);
  EXPECT_EQ((*jobs)[0].comment, "berthd:3");
  EXPECT_EQ((*jobs)[0].user, "alice");
  EXPECT_EQ((*jobs)[1].info.exit_code, 0);
}

/// A slurmrestd that knows Slurm job 500 (comment "berthd:INSTANCE:1") and another gateway's
/// job 501 ("berthd:ffffffffffffffff:2"), accepts submissions as job 600 on, and records what it
/// was asked.
struct FakeSlurmrestd {
  std::string instance;
  std::mutex mu;
  std::vector<std::string> calls;  // "METHOD PATH USER"
  std::vector<json> submitted;     // the bodies of POST /job/submit
  int next = 600;
  testing::FakeHttpServer server{[this](const testing::FakeRequest& r) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(r.method + " " + r.target + " " + r.header("x-slurm-user-name"));
    testing::FakeResponse res;
    if (r.target == "/slurm/v0.0.38/jobs")
      res.body = R"({"errors": [], "jobs": [{"job_id": 500, "comment": "berthd:)" + instance +
                 R"(:1", "job_state": "RUNNING", "nodes": "n1"}, {"job_id": 501,
                 "comment": "berthd:ffffffffffffffff:2", "job_state": "RUNNING"}]})";
    else if (r.target == "/slurm/v0.0.38/job/submit") {
      submitted.push_back(json::parse(r.body));
      res.body = R"({"errors": [], "job_id": )" + std::to_string(next++) + "}";
    } else
      res.body = R"({"errors": [], "jobs": [{"job_id": 1, "job_state": "COMPLETED",
                    "exit_code": 0, "nodes": "n2"}]})";
    return res;
  }};
};

TEST(GatewayJobs, ReconcileFindsOrSubmitsAcceptedJobsOnce) {
  TempDir dir("reconcile");
  FakeSlurmrestd slurm;
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  bool existing = false;
  const std::string body = R"({"image": "alpine", "command": ["true"]})";
  // Job 1 reached Slurm before a crash, job 2 did not, job 3 is a minute old (in flight).
  for (int64_t created : {100, 100, 1000})
    ASSERT_TRUE((*db)->accept({0, "alice", "iss", "s", "", body}, created, &existing).ok());
  JobsDb* raw = db->get();
  ASSERT_EQ(raw->instance().size(), 16u);
  slurm.instance = raw->instance();
  JobService jobs(std::move(*db),
                  SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {});
  auto r = jobs.reconcile(1060, 120);
  EXPECT_EQ(r.found, 1);
  EXPECT_EQ(r.resubmitted, 1);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ((*raw->get(1))->slurm_job_id, 500);
  // Then refreshed, as its owner, with the rest of the unfinished jobs.
  EXPECT_EQ(job_state_name((*raw->get(1))->state), "COMPLETED");
  EXPECT_EQ(r.refreshed, 2);
  EXPECT_EQ((*raw->get(2))->slurm_job_id, 600);
  EXPECT_EQ(job_state_name((*raw->get(3))->state), "ACCEPTED");
  {
    std::lock_guard<std::mutex> lock(slurm.mu);
    EXPECT_EQ(
        std::count(slurm.calls.begin(), slurm.calls.end(), "POST /slurm/v0.0.38/job/submit alice"),
        1);
    EXPECT_EQ(
        std::count(slurm.calls.begin(), slurm.calls.end(), "GET /slurm/v0.0.38/job/500 alice"), 1);
  }
  // A second round submits nothing again; the in-flight job's turn comes when it is old.
  r = jobs.reconcile(1200, 120);
  EXPECT_EQ(r.resubmitted, 1);
  EXPECT_EQ((*raw->get(3))->slurm_job_id, 601);
  r = jobs.reconcile(1300, 120);
  EXPECT_EQ(r.found + r.resubmitted, 0);
}

TEST(GatewayJobs, ShareJobIsRecordedWithItsGresAndRefusedOnceTheSiteStopsSharing) {
  TempDir dir("share");
  FakeSlurmrestd slurm;
  auto db = JobsDb::open(dir.path + "/jobs.db");
  ASSERT_TRUE(db.ok());
  JobsDb* raw = db->get();
  slurm.instance = raw->instance();
  SlurmConfig sc;
  sc.share.enabled = true;
  sc.share.gres = "mps";
  sc.share.units_per_gpu = 100;
  JobService jobs(std::move(*db),
                  SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), sc);
  const std::string body = R"({"image": "alpine", "resources": {"gpu_share": 0.25}})";
  JobRequest request = *parse_job_request(json::parse(body));
  EXPECT_TRUE(jobs.admissible(request).ok());
  auto done = jobs.submit({"iss", "s-a", "alice"}, "", body, request);
  ASSERT_TRUE(done.ok()) << done.error().message();
  ASSERT_FALSE(done->refused);
  {
    std::lock_guard<std::mutex> lock(slurm.mu);
    ASSERT_EQ(slurm.submitted.size(), 1u);
    EXPECT_EQ(slurm.submitted[0]["job"]["gres"], "mps:25");
    EXPECT_EQ(slurm.submitted[0]["job"]["environment"]["CUDA_MPS_PIPE_DIRECTORY"],
              "/tmp/nvidia-mps");
    EXPECT_EQ(slurm.submitted[0]["job"]["environment"]["CUDA_MPS_LOG_DIRECTORY"],
              "/var/log/nvidia-mps");
  }
  json shown = job_json(**raw->get(done->job.id));
  EXPECT_EQ(shown["gpu_share"], 0.25);
  EXPECT_EQ(shown["gres"], "mps:25");
  // A job without a share shows neither.
  json plain = job_json({1, "alice", "i", "s", "", R"({"image": "alpine"})"});
  EXPECT_FALSE(plain.contains("gpu_share") || plain.contains("gres"));

  // The site turns sharing off while a share job waits ACCEPTED (berthd crashed before Slurm
  // had it): reconciliation does not send it, and says why.
  auto db2 = JobsDb::open(dir.path + "/jobs2.db");
  ASSERT_TRUE(db2.ok());
  bool existing = false;
  ASSERT_TRUE((*db2)->accept({0, "alice", "iss", "s", "", body}, 100, &existing).ok());
  JobsDb* raw2 = db2->get();
  JobService off(std::move(*db2),
                 SlurmRest("http://" + slurm.server.host(), "k", 60, slurm_api("v0.0.38")), {});
  EXPECT_FALSE(off.admissible(request).ok());
  off.reconcile(1000, 0);
  auto job = *raw2->get(1);
  EXPECT_EQ(job_state_name(job->state), "SUBMIT_FAILED");
  EXPECT_EQ(job->reason,
            "\"resources.gpu_share\" asks for a share of a GPU, which this site does not offer");
  std::lock_guard<std::mutex> lock(slurm.mu);
  EXPECT_EQ(slurm.submitted.size(), 1u);
}

}  // namespace
}  // namespace berth::gateway

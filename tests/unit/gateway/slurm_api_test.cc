// slurmrestd's versions (gateway/slurm_api.h, slurm_v0038.h, slurm_v0041.h, slurm_rest.h) and
// the job states (gateway/job_state.h): real answers of Slurm 22.05's slurmrestd (v0.0.38) and
// 24.11's (v0.0.41), captured on a one-host cluster (tests/data/slurmrestd/README.md), read into
// the same facts; the version chosen from what a slurmrestd offers.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_http_server.h"
#include "gateway/job_state.h"
#include "gateway/slurm_api.h"
#include "gateway/slurm_rest.h"
#include "gateway/slurm_v0041.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

using nlohmann::json;

const SlurmApi& v0041() {
  return *slurm_api("v0.0.41");
}

// ---------------------------------------------------------------------------------------------
// Job states

TEST(GatewayJobState, NamesRoundTripAndArePhasedAsBefore) {
  for (const JobStateFacts& f : job_states()) {
    EXPECT_EQ(parse_job_state(f.name), f.state) << f.name;
    EXPECT_EQ(json(f.state), f.name);
  }
  EXPECT_EQ(parse_job_state("RUNNING "), std::nullopt);
  EXPECT_EQ(parse_job_state("running"), std::nullopt);
  auto named = [](JobPhase phase) {
    std::vector<std::string> out;
    for (const JobStateFacts& f : job_states())
      if (f.phase == phase) out.emplace_back(f.name);
    return out;
  };
  EXPECT_EQ(
      named(JobPhase::kQueued),
      (std::vector<std::string>{"ACCEPTED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "PENDING"}));
  EXPECT_EQ(named(JobPhase::kFinal),
            (std::vector<std::string>{"SUBMIT_FAILED", "COMPLETED", "CANCELLED", "FAILED",
                                      "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
                                      "OUT_OF_MEMORY"}));
  std::vector<std::string> running;  // Slurm's exit code is not yet a fact
  for (const JobStateFacts& f : job_states())
    if (!f.ended && f.from_slurm) running.emplace_back(f.name);
  EXPECT_EQ(running, (std::vector<std::string>{"COMPLETING", "CONFIGURING", "PENDING", "RUNNING",
                                               "SUSPENDED"}));
  std::vector<std::string> infrastructure;
  for (const JobStateFacts& f : job_states())
    if (f.infrastructure_failure) infrastructure.emplace_back(f.name);
  EXPECT_EQ(infrastructure, (std::vector<std::string>{"NODE_FAIL", "BOOT_FAIL"}));
  EXPECT_TRUE(job_state_final(JobState::kSubmitFailed));
  EXPECT_TRUE(job_state_queued(JobState::kAccepted));
  EXPECT_FALSE(job_state_final(JobState::kUnknown) || job_state_queued(JobState::kUnknown));
}

TEST(GatewayJobState, SlurmWordsAndListsReadAsJobStateStringWouldShow) {
  EXPECT_EQ(job_state_from_slurm("COMPLETED"), JobState::kCompleted);
  EXPECT_EQ(job_state_from_slurm("REQUEUE_HOLD"), JobState::kRequeueHold);
  // Not Slurm's: berthd's own words, and words of a later release.
  EXPECT_EQ(job_state_from_slurm("ACCEPTED"), JobState::kUnknown);
  EXPECT_EQ(job_state_from_slurm("EXPEDITED"), JobState::kUnknown);
  using L = std::vector<std::string>;
  // A flag before the base state, whatever the list's order.
  EXPECT_EQ(job_state_from_slurm_list(L{"RUNNING", "COMPLETING"}), JobState::kCompleting);
  EXPECT_EQ(job_state_from_slurm_list(L{"COMPLETING", "COMPLETED"}), JobState::kCompleting);
  EXPECT_EQ(job_state_from_slurm_list(L{"PENDING", "REQUEUED"}), JobState::kRequeued);
  EXPECT_EQ(job_state_from_slurm_list(L{"CONFIGURING", "RUNNING", "COMPLETING"}),
            JobState::kCompleting);
  // Flags job_state_string() never shows are passed over.
  EXPECT_EQ(job_state_from_slurm_list(L{"RUNNING", "POWER_UP_NODE"}), JobState::kRunning);
  EXPECT_EQ(job_state_from_slurm_list(L{"FAILED", "LAUNCH_FAILED"}), JobState::kFailed);
  EXPECT_EQ(job_state_from_slurm_list(L{}), JobState::kUnknown);
  EXPECT_EQ(job_state_from_slurm_list(L{"EXPEDITED"}), JobState::kUnknown);
}

// ---------------------------------------------------------------------------------------------
// Real answers, one release at a time

struct Release {
  const char* slurm;    ///< the folder under tests/data/slurmrestd
  const char* version;  ///< the API version its slurmrestd was asked in
};

void PrintTo(const Release& r, std::ostream* os) {
  *os << "Slurm " << r.slurm;
}

std::string golden(const Release& r, const std::string& name) {
  return slurp(std::string(BERTH_TEST_DATA) + "/slurmrestd/" + r.slurm + "/" + name + ".json");
}

class SlurmGolden : public ::testing::TestWithParam<Release> {
 protected:
  const SlurmApi& api() const { return *slurm_api(GetParam().version); }
  std::string body(const std::string& name) const { return golden(GetParam(), name); }
  bool old() const { return std::string(GetParam().slurm) == "22.05"; }
  SlurmJobInfo job(const std::string& name) const {
    auto j = parse_job(api(), body(name), "u");
    EXPECT_TRUE(j.ok()) << name << ": " << j.error().message();
    return j.ok() ? *j : SlurmJobInfo{};
  }
};

TEST_P(SlurmGolden, JobsReadTheSameOnEitherRelease) {
  SlurmJobInfo held = job("job_pending_held");
  EXPECT_EQ(job_state_name(held.state), "PENDING");
  EXPECT_EQ(held.reason, "JobHeldUser");
  EXPECT_EQ(held.exit_code, std::nullopt);
  EXPECT_GT(held.submit_time, 0);
  EXPECT_EQ(held.start_time, 0);
  EXPECT_EQ(held.end_time, 0);

  SlurmJobInfo gpu = job("job_running_gpu");
  EXPECT_EQ(job_state_name(gpu.state), "RUNNING");
  EXPECT_EQ(gpu.reason, "");
  EXPECT_EQ(gpu.exit_code, std::nullopt);
  EXPECT_GE(gpu.start_time, gpu.submit_time);
  EXPECT_EQ(gpu.end_time, 0);  // Slurm's answer holds the time limit, not an end
  EXPECT_EQ(gpu.nodes, "n1");
  EXPECT_EQ(gpu.partition, "debug");
  EXPECT_EQ(gpu.gpus, 1);
  EXPECT_EQ(gpu.gres_detail, std::vector<std::string>{"gpu:fake:1(IDX:0)"});

  SlurmJobInfo shard = job("job_running_shard");
  EXPECT_EQ(shard.gpus, 0);
  ASSERT_EQ(shard.gres_detail.size(), 1u);
  // 22.05 names the GPU's index, 24.11 each GPU's shards in use of its count.
  EXPECT_EQ(shard.gres_detail[0], old() ? "shard:2(IDX:1)" : "shard:2(0/4,2/4)");

  // Caught while Slurm ends it at its time limit: 22.05 says COMPLETING, 24.11 ["TIMEOUT",
  // "COMPLETING"]; the exit code and end are not facts yet.
  SlurmJobInfo completing = job("job_completing");
  EXPECT_EQ(job_state_name(completing.state), "COMPLETING");
  EXPECT_EQ(completing.exit_code, std::nullopt);
  EXPECT_EQ(completing.end_time, 0);
  EXPECT_EQ(json::parse(body("job_completing"))["jobs"][0]["job_state"],
            old() ? json("COMPLETING") : json({"TIMEOUT", "COMPLETING"}));

  struct Ended {
    const char* file;
    const char* state;
    const char* reason;
    int exit_code;
  };
  const Ended ended[] = {
      {"job_cancelled", "CANCELLED", "", 143},  // SIGTERM
      {"job_completed", "COMPLETED", "", 0},
      {"job_failed", "FAILED", "NonZeroExitCode", 3},
      {"job_signalled", "FAILED", old() ? "JobLaunchFailure" : "RaisedSignal", 137},
      {"job_timeout", "TIMEOUT", "TimeLimit", 137},  // it ignored SIGTERM: SIGKILL
  };
  for (const Ended& e : ended) {
    SlurmJobInfo j = job(e.file);
    EXPECT_EQ(job_state_name(j.state), e.state) << e.file;
    EXPECT_EQ(j.reason, e.reason) << e.file;
    EXPECT_EQ(j.exit_code, e.exit_code) << e.file;
    EXPECT_GT(j.start_time, 0) << e.file;
    EXPECT_GE(j.end_time, j.start_time) << e.file;
    EXPECT_TRUE(j.gres_detail.empty()) << e.file;
    // Slurm's view of the GPUs is gone once a job ends (no gres_detail; tres_alloc_str has
    // no gres/gpu where AccountingStorageTRES does not track it): the one-GPU job that was
    // cancelled still shows the GPU it asked for and was given, read from its tres_per_job.
    EXPECT_EQ(j.gpus, std::string(e.file) == "job_cancelled" ? 1 : 0) << e.file;
  }
  // A pending job asking for GPUs has none yet.
  json pending = json::parse(body("job_cancelled"));
  pending["jobs"][0]["nodes"] = "";
  auto p = parse_job(api(), pending.dump(), "u");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->gpus, 0);
}

TEST_P(SlurmGolden, SubmissionListingAndErrors) {
  auto id = parse_submit(api(), body("submit"), "u");
  ASSERT_TRUE(id.ok()) << id.error().message();
  // The job submitted is the one read back running.
  EXPECT_EQ(*id, json::parse(body("job_running_gpu"))["jobs"][0]["job_id"].get<int64_t>());

  // The listing has the held, the GPU and the shard job (and what ran before them).
  auto jobs = parse_jobs(api(), body("jobs"), "u");
  ASSERT_TRUE(jobs.ok()) << jobs.error().message();
  std::map<int64_t, std::string> listed;
  for (const SlurmJobEntry& e : *jobs) {
    listed[e.id] = job_state_name(e.info.state);
    EXPECT_EQ(e.comment, "berthd:0123456789abcdef:1");
    EXPECT_EQ(e.user, "berthtest");
  }
  auto id_of = [this](const char* file) {
    return json::parse(body(file))["jobs"][0]["job_id"].get<int64_t>();
  };
  EXPECT_EQ(listed[id_of("job_pending_held")], "PENDING");
  EXPECT_EQ(listed[*id], "RUNNING");
  EXPECT_EQ(listed[id_of("job_running_shard")], "RUNNING");

  const std::string refused = old() ? "Invalid partition name specified"
                                    : "Batch job submission failed: Invalid partition name "
                                      "specified";
  EXPECT_EQ(api().error_text(body("error_submit_partition")), refused);
  auto submit = parse_submit(api(), body("error_submit_partition"), "u");
  ASSERT_FALSE(submit.ok());
  EXPECT_EQ(submit.error().message(), "parse u: slurmrestd: " + refused);
  EXPECT_EQ(api().error_text(body("error_job_unknown")),
            old() ? "Unable to find JobId=999999"
                  : "Unable to query JobId=999999: Invalid job id specified");
  EXPECT_FALSE(parse_job(api(), body("error_job_unknown"), "u").ok());
  EXPECT_EQ(api().error_text(body("job_completed")), "");
}

TEST_P(SlurmGolden, NodesPartitionsAndPing) {
  auto nodes = parse_nodes(api(), body("nodes"), "u");
  ASSERT_TRUE(nodes.ok()) << nodes.error().message();
  ASSERT_EQ(nodes->size(), 2u);
  for (const SlurmNode& n : *nodes) {
    EXPECT_EQ(n.state, "idle") << n.name;
    EXPECT_EQ(n.partitions, std::vector<std::string>{"debug"});
    EXPECT_EQ(n.cpus, 16);
    EXPECT_EQ(n.alloc_cpus, 0);
    EXPECT_EQ(n.gpus, 2);
    EXPECT_EQ(n.gpus_used, 0);
    EXPECT_EQ(n.memory_mb, 16000);
    EXPECT_EQ(n.gpu_model, "fake");
  }
  EXPECT_EQ((*nodes)[0].name, "n1");
  EXPECT_EQ((*nodes)[1].name, "n2");

  auto parts = parse_partitions(api(), body("partitions"), "u");
  ASSERT_TRUE(parts.ok()) << parts.error().message();
  ASSERT_EQ(parts->size(), 1u);
  const SlurmPartition& p = (*parts)[0];
  EXPECT_EQ(p.name, "debug");
  EXPECT_EQ(p.state, "UP");
  EXPECT_EQ(p.nodes, 2);
  EXPECT_EQ(p.cpus, 32);
  EXPECT_EQ(p.max_time_s, -1);  // MaxTime=INFINITE
  EXPECT_EQ(p.default_time_s, -1);
  // v0.0.41 has no partition flags: whether it is the default is not said.
  EXPECT_EQ(p.is_default, old() ? std::optional<bool>(true) : std::nullopt);

  auto up = parse_ping(api(), body("ping"), "u");
  ASSERT_TRUE(up.ok()) << up.error().message();
  EXPECT_TRUE(*up);
}

TEST_P(SlurmGolden, OpenApiDocumentChoosesThisVersion) {
  std::vector<std::string> offered = offered_slurm_apis(body("openapi_v3"));
  const std::vector<std::string> served =
      old() ? std::vector<std::string>{"v0.0.38"}
            : std::vector<std::string>{"v0.0.40", "v0.0.41", "v0.0.42"};
  EXPECT_EQ(offered, served);
  EXPECT_EQ(choose_slurm_api(offered), &api());
}

INSTANTIATE_TEST_SUITE_P(Releases, SlurmGolden,
                         ::testing::Values(Release{"22.05", "v0.0.38"},
                                           Release{"24.11", "v0.0.41"}),
                         [](const auto& info) {
                           std::string n = info.param.slurm;
                           return "Slurm" + n.replace(n.find('.'), 1, "_");
                         });

// ---------------------------------------------------------------------------------------------
// v0.0.41's own shapes

TEST(GatewaySlurmV0041, SubmitBody) {
  SlurmJobSpec s;
  s.name = "train";
  s.script = "#!/bin/sh\nexec srun true\n";
  s.environment = {{"PATH", "/usr/bin:/bin"}, {"BERTHD_JOB_ID", "7"}};
  s.workdir = "/tmp";
  s.comment = "berthd:0123456789abcdef:7";
  s.partition = "gpu";
  s.account = "physics";
  s.standard_output = s.standard_error = "/dev/null";
  s.nodes = 2;
  s.tasks = 4;
  s.cpus_per_task = 2;
  s.memory_mb = 1000;
  s.gpus = 2;
  s.gres = "shard:2";
  s.time_limit_min = 10;
  EXPECT_EQ(submit_body_v0041(s), json::parse(R"({"job": {
      "name": "train", "script": "#!/bin/sh\nexec srun true\n",
      "environment": ["BERTHD_JOB_ID=7", "PATH=/usr/bin:/bin"],
      "current_working_directory": "/tmp", "comment": "berthd:0123456789abcdef:7",
      "partition": "gpu", "account": "physics",
      "standard_output": "/dev/null", "standard_error": "/dev/null",
      "nodes": "2", "tasks": 4, "cpus_per_task": 2,
      "memory_per_node": {"set": true, "infinite": false, "number": 1000},
      "tres_per_job": "gres/gpu:2", "tres_per_node": "gres/shard:2",
      "time_limit": {"set": true, "infinite": false, "number": 10}}})"));
  // What is not asked for is left to Slurm; the environment is always a list.
  SlurmJobSpec plain;
  plain.script = "#!/bin/sh\n";
  json job = submit_body_v0041(plain)["job"];
  for (const char* key : {"partition", "account", "standard_output", "standard_error",
                          "memory_per_node", "tres_per_job", "tres_per_node", "time_limit"})
    EXPECT_FALSE(job.contains(key)) << key;
  EXPECT_EQ(job["environment"], json::array());
  EXPECT_EQ(job["nodes"], "1");
}

TEST(GatewaySlurmV0041, StatesAndLimitsFromLists) {
  auto nodes = parse_nodes(v0041(), R"({"errors": [], "nodes": [
      {"name": "a", "state": ["MIXED"]}, {"name": "b", "state": ["IDLE", "DRAIN"]},
      {"name": "c", "state": ["ALLOCATED", "COMPLETING"]},
      {"name": "d", "state": ["DOWN", "NOT_RESPONDING"]}, {"name": "e", "state": []}]})",
                           "u");
  ASSERT_TRUE(nodes.ok()) << nodes.error().message();
  std::vector<std::string> states;
  for (const SlurmNode& n : *nodes) states.push_back(n.state);
  EXPECT_EQ(states, (std::vector<std::string>{"mixed", "unavailable", "allocated", "unavailable",
                                              "unavailable"}));
  auto parts = parse_partitions(v0041(), R"({"partitions": [{"name": "gpu",
      "partition": {"state": ["DRAIN"]}, "nodes": {"total": 4}, "cpus": {"total": 64},
      "maximums": {"time": {"set": true, "infinite": false, "number": 60}},
      "defaults": {"time": {"set": true, "infinite": false, "number": 10}}},
      {"name": "long", "maximums": {"time": {"set": false, "infinite": true, "number": 0}},
       "defaults": {"time": "ten"}}]})",
                                "u");
  ASSERT_TRUE(parts.ok()) << parts.error().message();
  EXPECT_EQ((*parts)[0].state, "DRAIN");
  EXPECT_EQ((*parts)[0].nodes, 4);
  EXPECT_EQ((*parts)[0].cpus, 64);
  EXPECT_EQ((*parts)[0].max_time_s, 3600);
  EXPECT_EQ((*parts)[0].default_time_s, 600);
  EXPECT_EQ((*parts)[1].state, "");
  EXPECT_EQ((*parts)[1].max_time_s, -1);
  EXPECT_EQ((*parts)[1].default_time_s, -1);
  // A job still completing reads as 22.05 shows it; an exit code of neither kind is no fact.
  auto completing = parse_job(v0041(), R"({"jobs": [{"job_state": ["COMPLETED", "COMPLETING"],
      "exit_code": {"status": ["SUCCESS"], "return_code": {"set": true, "number": 0}}}]})",
                              "u");
  ASSERT_TRUE(completing.ok());
  EXPECT_EQ(job_state_name(completing->state), "COMPLETING");
  EXPECT_EQ(completing->exit_code, std::nullopt);  // not ended: not a fact yet
  auto unset = parse_job(v0041(), R"({"jobs": [{"job_state": ["FAILED"],
      "exit_code": {"status": ["INVALID"], "return_code": {"set": false, "number": 0}}}]})",
                         "u");
  EXPECT_EQ(unset->exit_code, std::nullopt);
  EXPECT_FALSE(*parse_ping(v0041(), R"({"pings": [{"hostname": "c", "pinged": "DOWN"}]})", "u"));
}

// ---------------------------------------------------------------------------------------------
// The version SlurmRest speaks

/// A slurmrestd that offers the versions of `openapi` (a GET /openapi/v3 answer) and answers
/// v0.0.41's ping with 24.11's captured answer; records each request's target.
struct OfferingSlurmrestd {
  explicit OfferingSlurmrestd(std::string openapi) : openapi(std::move(openapi)) {}
  std::string openapi;
  std::mutex mu;
  std::vector<std::string> targets;
  testing::FakeHttpServer server{[this](const testing::FakeRequest& r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      targets.push_back(r.target);
    }
    testing::FakeResponse res;
    if (r.target == "/openapi/v3")
      res.body = openapi;
    else if (r.target == "/slurm/v0.0.41/ping")
      res.body = golden({"24.11", "v0.0.41"}, "ping");
    else
      res.status = 404;
    return res;
  }};
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mu);
    return targets;
  }
};

TEST(GatewaySlurmRest, AutoChoosesOnceFromWhatSlurmrestdOffers) {
  OfferingSlurmrestd slurm(golden({"24.11", "v0.0.41"}, "openapi_v3"));
  SlurmRest rest("http://" + slurm.server.host(), "k", 60, nullptr);
  std::vector<std::string> told;
  rest.set_api_observer([&](const SlurmApi& chosen, const std::vector<std::string>& offered) {
    told.push_back(std::string(chosen.version) + " of " + join_versions(offered));
  });
  EXPECT_EQ(rest.api_version(), "");
  for (int i = 0; i < 2; ++i) {
    auto up = rest.ping("alice");
    ASSERT_TRUE(up.ok()) << up.error().message();
    EXPECT_TRUE(*up);
  }
  EXPECT_EQ(rest.api_version(), "v0.0.41");
  EXPECT_EQ(slurm.seen(), (std::vector<std::string>{"/openapi/v3", "/slurm/v0.0.41/ping",
                                                    "/slurm/v0.0.41/ping"}));
  EXPECT_EQ(told, std::vector<std::string>{"v0.0.41 of v0.0.40, v0.0.41, v0.0.42"});
}

TEST(GatewaySlurmRest, ConfiguredVersionIsSpokenWithoutAsking) {
  OfferingSlurmrestd slurm("{}");
  const std::string url = "http://" + slurm.server.host();
  SlurmRest rest(url, "k", 60, slurm_api("v0.0.41"));
  EXPECT_EQ(rest.api_version(), "v0.0.41");
  EXPECT_TRUE(*rest.ping("alice"));
  EXPECT_EQ(slurm.seen(), std::vector<std::string>{"/slurm/v0.0.41/ping"});
  // One it does not serve: 24.11's slurmrestd answers v0.0.38's paths 404, not in JSON.
  auto up = SlurmRest(url, "k", 60, slurm_api("v0.0.38")).ping("alice");
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.error().message(), "GET " + url +
                                      "/slurm/v0.0.38/ping: slurmrestd does not serve v0.0.38 "
                                      "([slurm] api_version) (HTTP 404)");
}

TEST(GatewaySlurmRest, NoneOfOursIsOneLineNamingWhatItOffersAndIsAskedAgain) {
  json doc = {{"paths",
               {{"/slurm/v0.0.39/ping", json::object()},
                {"/slurm/v0.0.40/ping", json::object()},
                {"/slurmdb/v0.0.41/jobs", json::object()},
                {"/openapi/v3", json::object()}}}};
  OfferingSlurmrestd slurm(doc.dump());
  const std::string url = "http://" + slurm.server.host();
  SlurmRest rest(url, "k", 60, nullptr);
  for (int i = 0; i < 2; ++i) {
    auto up = rest.ping("alice");
    ASSERT_FALSE(up.ok());
    EXPECT_EQ(up.error().message(), "GET " + url +
                                        "/openapi/v3: slurmrestd offers v0.0.39, v0.0.40; berthd "
                                        "speaks v0.0.41, v0.0.38");
    EXPECT_EQ(up.error().code, ErrorCode::kUnsupported);
  }
  EXPECT_EQ(slurm.seen(), (std::vector<std::string>{"/openapi/v3", "/openapi/v3"}));
  EXPECT_EQ(rest.api_version(), "");
  // A server that does not list its paths.
  OfferingSlurmrestd bare("not json");
  auto up = SlurmRest("http://" + bare.server.host(), "k", 60, nullptr).ping("alice");
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.error().message(), "GET http://" + bare.server.host() +
                                      "/openapi/v3: slurmrestd lists no Slurm API version; berthd "
                                      "speaks v0.0.41, v0.0.38");
}

TEST(GatewaySlurmRest, UnreachableIsANetworkErrorAndNothingIsChosen) {
  int port = 0;
  {
    OfferingSlurmrestd gone("{}");
    port = gone.server.port();
  }  // closed: nothing listens there now
  SlurmRest rest("http://127.0.0.1:" + std::to_string(port), "k", 60, nullptr);
  auto up = rest.ping("alice");
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.error().code, ErrorCode::kNetwork);
  EXPECT_EQ(rest.api_version(), "");
}

}  // namespace
}  // namespace berth::gateway

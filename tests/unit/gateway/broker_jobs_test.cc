// A broker's jobs (gateway/broker_jobs.h) against berthd sites on loopback: where a job is
// sent, with which key and token, how it moves on, and what a crash leaves for later.
#include "gateway/broker_jobs.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "fake_http_server.h"
#include "fake_issuer.h"
#include "gateway/glue.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

using testing::FakeHttpServer;
using testing::FakeRequest;
using testing::FakeResponse;

/// What one loopback berthd site does with the jobs it is sent.
struct SiteState {
  std::mutex mu;
  int post_status = 201;               ///< the answer to POST /v1/jobs
  std::string post_state = "PENDING";  ///< the state a taken job is answered with
  std::string job_state = "PENDING";   ///< GET /v1/jobs/ID's state
  std::string refusal = "no more than 1 job at once";
  std::map<std::string, int> by_key;  ///< Idempotency-Key -> the job made for it
  int next_id = 41;
  int deletes = 0;
  /// Called as a GET of a job arrives, before it is answered (set before the site is used).
  std::function<void()> before_read;
};

std::string site_glue(const std::string& cluster) {
  GlueSite s;
  s.cluster = cluster;
  s.host = cluster + ".example.org";
  s.creation_time = "2026-12-04T00:00:00Z";
  s.nodes = {{"n1", "idle", 64, 0, 512000, "h100", 2, 0, {"gpu"}}};
  s.partitions = {{"gpu", 86400, 3600, true, 0, 0, -1}};
  s.accelerators["h100"] = {"NVIDIA", "NVIDIA H100 80GB HBM3", 85520, {"9.0"}, "550.54.15", "12.4"};
  return glue_document(s).dump();
}

FakeHttpServer::Handler berthd_site(const std::shared_ptr<SiteState>& st,
                                    const std::string& cluster) {
  std::string glue = site_glue(cluster);
  return [st, glue](const FakeRequest& r) -> FakeResponse {
    if (r.method == "GET" && r.target.starts_with("/v1/jobs/") && st->before_read)
      st->before_read();
    std::lock_guard lock(st->mu);
    if (r.target == "/v1/health")
      return {200, {}, R"({"status":"ok","issuers":[{"issuer":"https://a","audience":"berth"}]})"};
    if (r.target == "/v1/resources") return {200, {}, glue};
    if (r.method == "POST" && r.target == "/v1/jobs") {
      if (st->post_status >= 400)
        return {st->post_status,
                {},
                nlohmann::json{{"error", {{"status", st->post_status}, {"message", st->refusal}}}}
                    .dump()};
      std::string key = r.header("idempotency-key");
      bool replay = st->by_key.count(key) > 0;
      if (!replay) st->by_key[key] = st->next_id++;
      nlohmann::json job = {{"id", std::to_string(st->by_key[key])},
                            {"state", st->post_state},
                            {"reason", st->post_state == "SUBMIT_FAILED" ? "no partition" : ""}};
      return {replay ? 200 : 201, {}, job.dump()};
    }
    if (r.method == "GET" && r.target.rfind("/v1/jobs/", 0) == 0)
      return {200,
              {},
              nlohmann::json{{"id", r.target.substr(9)}, {"state", st->job_state}, {"nodes", "n1"}}
                  .dump()};
    if (r.method == "DELETE" && r.target.rfind("/v1/jobs/", 0) == 0) {
      ++st->deletes;
      st->job_state = "CANCELLED";
      return {202, {}, nlohmann::json{{"id", r.target.substr(9)}, {"state", "CANCELLED"}}.dump()};
    }
    return {404, {}, "{}"};
  };
}

Account alice() {
  Account a;
  a.issuer = "https://a";
  a.subject = "s-alice";
  a.user = "alice";
  return a;
}

/// Two berthd sites, "a" preferred (weight 5) over "b"; a database in a temporary folder.
struct Fixture {
  std::shared_ptr<SiteState> a = std::make_shared<SiteState>();
  std::shared_ptr<SiteState> b = std::make_shared<SiteState>();
  std::unique_ptr<FakeHttpServer> server_a = std::make_unique<FakeHttpServer>(berthd_site(a, "a"));
  FakeHttpServer server_b{berthd_site(b, "b")};
  TempDir dir{"broker-jobs"};
  BrokerConfig config;
  std::unique_ptr<JobsDb> db;
  std::unique_ptr<BrokerService> broker;
  std::unique_ptr<BrokerJobs> jobs;

  Fixture() {
    config.enabled = true;
    for (auto [name, host, weight] :
         {std::tuple{"a", server_a->host(), 5.0}, std::tuple{"b", server_b.host(), 1.0}}) {
      BrokerSiteConfig s;
      s.name = name;
      s.url = "http://" + host;
      s.weight = weight;
      s.info_ttl_s = 3600;
      config.sites.push_back(s);
    }
    auto opened = JobsDb::open(dir.path + "/broker.db");
    if (opened.ok()) db = std::move(*opened);
    broker = std::make_unique<BrokerService>(config);
    jobs = std::make_unique<BrokerJobs>(*db, *broker, config);
  }

  std::vector<FakeRequest> posts(FakeHttpServer& s) {
    std::vector<FakeRequest> out;
    for (const FakeRequest& r : s.requests())
      if (r.method == "POST") out.push_back(r);
    return out;
  }
};

const std::string kJob = R"({"image":"x","resources":{"gpus":"H100:1"}})";

TEST(BrokerJobs, AJobGoesToTheBestSiteAsTheCallerWithAKeyOfItsAttempt) {
  Fixture f;
  ASSERT_TRUE(f.db);
  auto answer = f.jobs->submit(alice(), "token-of-alice", "", kJob, 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ(answer->status, 201);
  const nlohmann::json& job = answer->body;
  EXPECT_EQ(job["id"], "1");
  EXPECT_EQ(job["site"], "a");
  EXPECT_EQ(job["site_job_id"], "41");
  EXPECT_EQ(job["state"], "PENDING");
  ASSERT_EQ(job["attempts"].size(), 1u) << job.dump();
  EXPECT_EQ(job["attempts"][0]["outcome"], "submitted");
  const std::string key = "broker:" + f.db->instance() + ":1:1";
  EXPECT_EQ(job["attempts"][0]["key"], key);
  auto posts = f.posts(*f.server_a);
  ASSERT_EQ(posts.size(), 1u);
  EXPECT_EQ(posts[0].header("authorization"), "Bearer token-of-alice");
  EXPECT_EQ(posts[0].header("idempotency-key"), key);
  // What a berthd site takes: its own job body, pinned to the class's GRES type.
  nlohmann::json sent = nlohmann::json::parse(posts[0].body);
  EXPECT_EQ(sent["image"], "x");
  EXPECT_EQ(sent["resources"]["gpu_model"], "h100") << sent.dump();
  EXPECT_TRUE(f.posts(f.server_b).empty());
}

TEST(BrokerJobs, ARefusalMovesTheJobOnAndEachCauseIsKept) {
  Fixture f;
  f.a->post_status = 403;
  auto answer = f.jobs->submit(alice(), "t", "", kJob, 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  const nlohmann::json& job = answer->body;
  EXPECT_EQ(job["site"], "b");
  ASSERT_EQ(job["attempts"].size(), 2u);
  EXPECT_EQ(job["attempts"][0]["outcome"], "refused");
  EXPECT_EQ(job["attempts"][0]["cause"], "HTTP 403: no more than 1 job at once");
  EXPECT_EQ(job["attempts"][1]["outcome"], "submitted");
  EXPECT_EQ(job["attempts"][1]["key"], "broker:" + f.db->instance() + ":1:2");
}

TEST(BrokerJobs, ASiteThatCannotSubmitOrCannotBeReachedIsPassedOver) {
  Fixture f;
  ASSERT_TRUE(f.broker->placements(nlohmann::json::parse(kJob), alice(), "t", 1000).ok());
  f.server_a.reset();  // read, then gone
  auto answer = f.jobs->submit(alice(), "t", "", kJob, 1001);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ(answer->body["site"], "b");
  EXPECT_EQ(answer->body["attempts"][0]["outcome"], "failed");
  EXPECT_EQ(answer->body["attempts"][0]["cause"].get<std::string>().rfind("site_down: ", 0), 0u)
      << answer->body.dump();
  // A site whose Slurm refused the job has no live copy of it: on to the next.
  Fixture g;
  g.a->post_state = "SUBMIT_FAILED";
  answer = g.jobs->submit(alice(), "t", "", kJob, 1000);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->body["site"], "b");
  EXPECT_EQ(answer->body["attempts"][0]["cause"], "submit_failed: no partition");
}

TEST(BrokerJobs, ASitesRefusalsLowerItsReliabilityAndEachAttemptIsObserved) {
  Fixture f;
  std::vector<std::string> seen;
  f.jobs->set_observer([&seen](const std::string& site, const std::string& outcome) {
    seen.push_back(site + " " + outcome);
  });
  f.a->post_status = 403;
  ASSERT_TRUE(f.jobs->submit(alice(), "t", "", kJob, 1000).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"a refused", "b submitted"}));
  auto answer = f.broker->placements(nlohmann::json::parse(kJob), alice(), "t", 1001);
  ASSERT_TRUE(answer.ok());
  for (const auto& c : (*answer)["candidates"])
    EXPECT_EQ(c["factors"]["reliability"], c["site"] == "a" ? 0.0 : 100.0) << c.dump();
}

TEST(BrokerJobs, AJobNoSiteTakesFailsWithEverySitesCause) {
  Fixture f;
  f.a->post_status = 403;
  f.b->post_status = 500;
  f.b->refusal = "cannot record a job";
  auto answer = f.jobs->submit(alice(), "t", "", kJob, 1000);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->body["state"], "SUBMIT_FAILED");
  EXPECT_EQ(answer->body["site"], nullptr);
  EXPECT_EQ(answer->body["reason"],
            "no site took the job: a: HTTP 403: no more than 1 job at once; b: HTTP 500: cannot "
            "record a job");
  // A job no site fits is never recorded: the placements answer, 422.
  answer = f.jobs->submit(alice(), "t", "", R"({"image":"x","resources":{"gpus":"B200:1"}})", 1000);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->status, 422);
  EXPECT_EQ(answer->body["chosen"], nullptr);
  auto listed = f.jobs->list(alice(), 100);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);
}

TEST(BrokerJobs, AnIdempotencyKeyGivesTheSameJobAndAnotherBodyIsAConflict) {
  Fixture f;
  auto first = f.jobs->submit(alice(), "t", "k1", kJob, 1000);
  ASSERT_TRUE(first.ok());
  auto again = f.jobs->submit(alice(), "t", "k1", kJob, 1001);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(again->body["id"], first->body["id"]);
  EXPECT_EQ(f.posts(*f.server_a).size(), 1u);
  auto other = f.jobs->submit(alice(), "t", "k1", R"({"image":"y"})", 1002);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::kExists);
}

TEST(BrokerJobs, AnAttemptACrashLeftUnansweredIsSentAgainWithItsKey) {
  Fixture f;
  ASSERT_TRUE(f.jobs->submit(alice(), "t", "", kJob, 1000).ok());
  // As a broker killed after writing the attempt and before reading the answer leaves it.
  auto job = f.db->broker_get(1);
  ASSERT_TRUE(job.ok() && *job);
  BrokerJobRecord rec = **job;
  nlohmann::json attempts = nlohmann::json::parse(rec.attempts);
  attempts[0]["outcome"] = "sending";
  attempts[0]["site_job_id"] = nullptr;
  rec.attempts = attempts.dump();
  rec.site.clear();
  rec.site_job_id = 0;
  rec.state = JobState::kAccepted;
  ASSERT_TRUE(f.db->broker_save(rec).ok());
  // Another user's request does not move it, nor show it.
  Account bob = alice();
  bob.user = "bob";
  bob.subject = "s-bob";
  auto seen = f.jobs->get(bob, "t", 1, 1010);
  ASSERT_TRUE(seen.ok());
  EXPECT_FALSE(*seen);
  // The owner's next look sends it again with the same key: the site's own job, not a second.
  seen = f.jobs->get(alice(), "t", 1, 1010);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ((**seen)["site"], "a");
  EXPECT_EQ((**seen)["site_job_id"], "41");
  auto posts = f.posts(*f.server_a);
  ASSERT_EQ(posts.size(), 2u);
  EXPECT_EQ(posts[0].header("idempotency-key"), posts[1].header("idempotency-key"));
  EXPECT_EQ(f.a->by_key.size(), 1u);
}

TEST(BrokerJobs, NodeFailAndAPendingTimeoutMoveTheJobToTheNextSite) {
  Fixture f;
  ASSERT_TRUE(f.jobs->submit(alice(), "t", "", kJob, 1000).ok());
  f.a->job_state = "NODE_FAIL";
  auto seen = f.jobs->get(alice(), "t", 1, 1100);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ((**seen)["site"], "b") << (**seen).dump();
  EXPECT_EQ((**seen)["attempts"][0]["outcome"], "ended");
  EXPECT_EQ((**seen)["attempts"][0]["cause"], "NODE_FAIL at a");
  // The user's own failure stays where it is.
  f.b->job_state = "FAILED";
  seen = f.jobs->get(alice(), "t", 1, 1200);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ((**seen)["state"], "FAILED");
  EXPECT_EQ((**seen)["site"], "b");

  Fixture g;
  const std::string waits =
      R"({"image":"x","resources":{"gpus":"H100:1"},"failover":{"pending_timeout_s":60}})";
  ASSERT_TRUE(g.jobs->submit(alice(), "t", "", waits, 1000).ok());
  seen = g.jobs->get(alice(), "t", 1, 1050);  // within its time
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ((**seen)["site"], "a");
  seen = g.jobs->get(alice(), "t", 1, 1100);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ(g.a->deletes, 1);  // cancelled there before it goes on
  EXPECT_EQ((**seen)["site"], "b");
  EXPECT_EQ((**seen)["attempts"][0]["outcome"], "cancelled");

  // ACCEPTED at the site (its slurmrestd has not answered yet) waits as PENDING does.
  Fixture h;
  h.a->post_state = h.a->job_state = "ACCEPTED";
  ASSERT_TRUE(h.jobs->submit(alice(), "t", "", waits, 1000).ok());
  seen = h.jobs->get(alice(), "t", 1, 1050);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ((**seen)["site"], "a");
  seen = h.jobs->get(alice(), "t", 1, 1100);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ(h.a->deletes, 1);
  EXPECT_EQ((**seen)["site"], "b");
}

// A TOSCA template of INDIGO's types (broker/tosca.h): one H100 for a Chronos job.
const std::string kTosca = R"(tosca_definitions_version: tosca_simple_yaml_1_0
topology_template:
  node_templates:
    Compute:
      type: tosca.nodes.indigo.Compute
      capabilities:
        host:
          properties: {num_gpus: 1, gpu_model: H100}
    job:
      type: tosca.nodes.indigo.Container.Application.Docker.Chronos
      properties: {command: "true"}
      requirements: [{host: Compute}]
      artifacts: {image: {file: x}}
)";

TEST(BrokerJobs, ATemplateIsKeptAsTheJobBodyItBecame) {
  Fixture f;
  auto first = f.jobs->submit(alice(), "t", "k1", kTosca, 1000);
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_EQ(first->status, 201);
  EXPECT_EQ(first->body["site"], "a");
  auto job = f.db->broker_get(1);
  ASSERT_TRUE(job.ok() && *job);
  EXPECT_EQ(nlohmann::json::parse((**job).request)["resources"],
            nlohmann::json::parse(R"({"gpus": 1, "gpu": {"model": "H100"}})"));
  // The same template under the same key is the same job.
  auto again = f.jobs->submit(alice(), "t", "k1", kTosca, 1001);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(f.posts(*f.server_a).size(), 1u);
  // What reads the job again reads its failover: a pending timeout moves it on.
  Fixture g;
  nlohmann::json wrapper = {{"template", kTosca}, {"failover", {{"pending_timeout_s", 60}}}};
  ASSERT_TRUE(g.jobs->submit(alice(), "t", "", wrapper.dump(), 1000).ok());
  auto seen = g.jobs->get(alice(), "t", 1, 1100);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ(g.a->deletes, 1);
  EXPECT_EQ((**seen)["site"], "b");
  // A bad template is the caller's mistake, named.
  auto bad = f.jobs->submit(alice(), "t", "", kTosca.substr(0, kTosca.find("    job:")), 1000);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidInput);
  EXPECT_EQ(bad.error().detail,
            "topology_template.node_templates: has no job node: Berth runs one node of type "
            "tosca.nodes.indigo.Container.Application.Docker.Marathon, "
            "tosca.nodes.indigo.Container.Application.Docker.Chronos, "
            "tosca.nodes.indigo.Container.Application.Docker or tosca.nodes.indigo.Qcg.Job");
}

const std::string kRace =
    R"({"image":"x","resources":{"gpus":"H100:1"},"placement":{"strategy":"race"}})";

TEST(BrokerJobs, ARaceSendsToTheTopSitesAndTheFirstToRunKeepsTheJob) {
  Fixture f;
  auto answer = f.jobs->submit(alice(), "t", "", kRace, 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  const nlohmann::json& job = answer->body;
  EXPECT_EQ(job["site"], nullptr);
  EXPECT_EQ(job["state"], "PENDING");
  EXPECT_EQ(job["reason"], "racing at a, b: the first to run keeps the job");
  ASSERT_EQ(job["attempts"].size(), 2u);
  EXPECT_EQ(job["attempts"][0]["outcome"], "submitted");
  EXPECT_EQ(job["attempts"][1]["outcome"], "submitted");
  // Neither runs yet: still racing.
  auto seen = f.jobs->get(alice(), "t", 1, 1010);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ((**seen)["site"], nullptr);
  // b runs first: b keeps it, a's copy is cancelled there.
  f.b->job_state = "RUNNING";
  seen = f.jobs->get(alice(), "t", 1, 1020);
  ASSERT_TRUE(seen.ok() && *seen);
  EXPECT_EQ((**seen)["site"], "b") << (**seen).dump();
  EXPECT_EQ((**seen)["state"], "RUNNING");
  EXPECT_EQ((**seen)["attempts"][0]["outcome"], "cancelled");
  EXPECT_EQ((**seen)["attempts"][0]["cause"], "lost the race to b");
  EXPECT_EQ(f.a->deletes, 1);
  EXPECT_EQ(f.b->deletes, 0);
}

TEST(BrokerJobs, ARaceWithOneTakerIsThatSitesAndACancelCallsEveryRacerOff) {
  Fixture f;
  f.a->post_status = 403;
  auto answer = f.jobs->submit(alice(), "t", "", kRace, 1000);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->body["site"], "b") << answer->body.dump();
  Fixture g;
  ASSERT_TRUE(g.jobs->submit(alice(), "t", "", kRace, 1000).ok());
  auto done = g.jobs->cancel(alice(), "t", 1, 1001);
  ASSERT_TRUE(done.ok() && *done);
  EXPECT_EQ((**done)["state"], "CANCELLED");
  EXPECT_EQ(g.a->deletes, 1);
  EXPECT_EQ(g.b->deletes, 1);
}

/// alice's token as the gateway verified it: exp 5000.
std::string alices_jwt() {
  return unsigned_jwt({{"iss", "https://a"}, {"sub", "s-alice"}, {"aud", "a"}, {"exp", 5000}});
}

/// alice's broker job 1 as the broker last read it (no site is asked).
nlohmann::json as_listed(BrokerJobs& jobs) {
  auto listed = jobs.list(alice(), 10);
  return listed.ok() && listed->size() == 1 ? (*listed)[0] : nlohmann::json();
}

TEST(BrokerJobs, TheBrokersRoundMovesAJobOnWithTheTokenItsOwnerLastCameWith) {
  Fixture f;
  const std::string token = alices_jwt();
  const std::string waits =
      R"({"image":"x","resources":{"gpus":"H100:1"},"failover":{"pending_timeout_s":60}})";
  ASSERT_TRUE(f.jobs->submit(alice(), token, "", waits, 1000).ok());
  EXPECT_EQ(f.jobs->reconcile(1050), 1);  // read at a, within its time
  EXPECT_EQ(as_listed(*f.jobs)["site"], "a");
  // Past its pending timeout, with no request of alice's: cancelled at a, sent to b as alice.
  EXPECT_EQ(f.jobs->reconcile(1100), 1);
  nlohmann::json job = as_listed(*f.jobs);
  EXPECT_EQ(job["site"], "b") << job.dump();
  EXPECT_EQ(job["attempts"][0]["outcome"], "cancelled");
  EXPECT_EQ(f.a->deletes, 1);
  ASSERT_EQ(f.posts(f.server_b).size(), 1u);
  EXPECT_EQ(f.posts(f.server_b)[0].header("authorization"), "Bearer " + token);
  // The token's last minute: no more rounds for alice's jobs until she comes back.
  f.b->job_state = "NODE_FAIL";
  EXPECT_EQ(f.jobs->reconcile(4950), 0);
  EXPECT_EQ(as_listed(*f.jobs)["site"], "b");

  // A race is settled in a round too: b runs first, a's copy is cancelled.
  Fixture g;
  ASSERT_TRUE(g.jobs->submit(alice(), token, "", kRace, 1000).ok());
  g.b->job_state = "RUNNING";
  EXPECT_EQ(g.jobs->reconcile(1020), 1);
  EXPECT_EQ(as_listed(*g.jobs)["site"], "b");
  EXPECT_EQ(g.a->deletes, 1);

  // A token that is not a JWT (or one past its exp) is not held: the job waits for its owner.
  Fixture h;
  ASSERT_TRUE(h.jobs->submit(alice(), "t", "", waits, 1000).ok());
  EXPECT_EQ(h.jobs->reconcile(1100), 0);
  EXPECT_EQ(h.a->deletes, 0);
}

TEST(BrokerJobs, TheRoundAndTheOwnersGetMoveAJobOnceBetweenThem) {
  Fixture f;
  const std::string token = alices_jwt();
  ASSERT_TRUE(f.jobs
                  ->submit(alice(), token, "",
                           R"({"image":"x","resources":{"gpus":"H100:1"},)"
                           R"("failover":{"pending_timeout_s":60}})",
                           1000)
                  .ok());
  // Past its timeout: the owner's GET reads it at a (the answer held back) while the round
  // comes for the same job; each would cancel it at a and send it to b.
  std::mutex mu;
  std::condition_variable changed;
  bool reading = false, let_go = false;
  f.a->before_read = [&] {
    std::unique_lock<std::mutex> lock(mu);
    if (reading) return;  // only the first read is held
    reading = true;
    changed.notify_all();
    changed.wait(lock, [&] { return let_go; });
  };
  std::thread owner([&] { (void)f.jobs->get(alice(), token, 1, 1100); });
  {
    std::unique_lock<std::mutex> lock(mu);
    changed.wait(lock, [&] { return reading; });
  }
  std::thread round([&] { (void)f.jobs->reconcile(1100); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // time to run into it
  {
    std::lock_guard<std::mutex> lock(mu);
    let_go = true;
  }
  changed.notify_all();
  owner.join();
  round.join();
  // Moved once: one cancel at a, one attempt at b, and the record says so.
  EXPECT_EQ(f.a->deletes, 1);
  nlohmann::json job = as_listed(*f.jobs);
  EXPECT_EQ(job["site"], "b") << job.dump();
  EXPECT_EQ(job["attempts"].size(), 2u) << job.dump();
  EXPECT_EQ(f.posts(f.server_b).size(), 1u);
}

TEST(BrokerJobs, CancelGoesToTheSiteAsTheCaller) {
  Fixture f;
  ASSERT_TRUE(f.jobs->submit(alice(), "token-of-alice", "", kJob, 1000).ok());
  auto done = f.jobs->cancel(alice(), "token-of-alice", 1, 1001);
  ASSERT_TRUE(done.ok() && *done) << (done.ok() ? "" : done.error().message());
  EXPECT_EQ((**done)["state"], "CANCELLED");
  EXPECT_EQ(f.a->deletes, 1);
  EXPECT_EQ(f.server_a->requests().back().header("authorization"), "Bearer token-of-alice");
}

TEST(BrokerJobs, AnAttemptWithNoTokenForItsSiteIsRefusedAndTheSiteIsSentNothing) {
  FakeIssuer issuer;
  TempDir dir{"broker-jobs"};
  write_text(dir.path + "/secret", "s3cret\n");
  ::chmod((dir.path + "/secret").c_str(), 0600);
  std::vector<IssuerConfig> issuers = {issuer.config(dir.path + "/secret")};
  TokenExchanger x(issuers, http_fetcher());
  auto plain = berthd_site(std::make_shared<SiteState>(), "x");
  const std::string iss = issuer.url;
  FakeHttpServer site([plain, iss](const FakeRequest& r) -> FakeResponse {
    if (r.target != "/v1/health") return plain(r);
    return {200, {}, nlohmann::json{{"issuers", {{{"issuer", iss}, {"audience", "x"}}}}}.dump()};
  });
  BrokerConfig config;
  config.enabled = true;
  BrokerSiteConfig s;
  s.name = "x";
  s.url = "http://" + site.host();
  s.token = "exchange";
  s.audience = "berthd-x";
  config.sites.push_back(s);
  auto db = JobsDb::open(dir.path + "/broker.db");
  ASSERT_TRUE(db.ok()) << db.error().message();
  BrokerService broker(config, &x);
  BrokerJobs jobs(**db, broker, config);
  Account who = alice();
  who.issuer = issuer.url;
  const std::string token = unsigned_jwt({{"iss", issuer.url}, {"sub", "s-alice"}, {"aud", "a"}});
  // The placement's exchange is granted (kept on the placement's clock, 1000); the attempt's,
  // made at the present time, is refused.
  issuer.grant_only(1, 400, R"({"error":"invalid_target","error_description":"no"})");
  auto answer = jobs.submit(who, token, "", R"({"image":"x","resources":{"gpus":1}})", 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ(answer->body["state"], "SUBMIT_FAILED") << answer->body.dump();
  ASSERT_EQ(answer->body["attempts"].size(), 1u);
  EXPECT_EQ(answer->body["attempts"][0]["outcome"], "refused");
  EXPECT_EQ(answer->body["attempts"][0]["cause"],
            "issuer_untrusted: authenticate x: token exchange for audience \"berthd-x\" failed: "
            "POST " +
                issuer.url + "/token: invalid_target: no (HTTP 400)");
  for (const FakeRequest& r : site.requests()) {
    EXPECT_NE(r.method, "POST") << r.target;
    EXPECT_NE(r.header("authorization"), "Bearer " + token) << r.target;
  }
  EXPECT_EQ(issuer.exchanges().size(), 2u);
  // A site never asked keeps its reliability.
  auto placed = broker.placements(nlohmann::json::parse(R"({"image":"x"})"), who, token, 1000);
  ASSERT_TRUE(placed.ok());
  for (const auto& c : (*placed)["candidates"])
    EXPECT_TRUE(c["verdict"] != "fit" || c["factors"]["reliability"] == 100.0) << c.dump();
}

}  // namespace
}  // namespace berth::gateway

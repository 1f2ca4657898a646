// A broker's jobs at Kubernetes, Marathon, Chronos and OpenStack sites (gateway/site_backends.h),
// against loopback recorders that answer as those APIs do: what is sent where, with which
// credential, how a resend is told apart from a new job, how each site's state reads.
#include "gateway/site_backends.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <memory>
#include <mutex>

#include "core/fs.h"
#include "fake_http_server.h"
#include "gateway/broker_jobs.h"
#include "gateway/glue.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

using nlohmann::json;
using testing::FakeHttpServer;
using testing::FakeRequest;
using testing::FakeResponse;

const std::string kKey = "broker:3f2a9c0d1e4b5a6f:7:1";
const std::string kName = "berth-3f2a9c0d1e4b5a6f-7-1";

/// What a recorder answers, changed by the test between requests.
struct Answers {
  std::mutex mu;
  std::map<std::string, FakeResponse> by_request;  ///< "METHOD target" -> the answer
  FakeResponse answer(const FakeRequest& r) {
    std::lock_guard lock(mu);
    auto it = by_request.find(r.method + " " + r.target);
    return it == by_request.end() ? FakeResponse{404, {}, R"({"message":"not here"})"} : it->second;
  }
  void set(const std::string& request, int status, std::string body) {
    std::lock_guard lock(mu);
    by_request[request] = {status, {}, std::move(body)};
  }
};

struct Recorder {
  std::shared_ptr<Answers> answers = std::make_shared<Answers>();
  FakeHttpServer server{[a = answers](const FakeRequest& r) { return a->answer(r); }};
  BrokerSiteConfig site(const std::string& kind) const {
    BrokerSiteConfig s;
    s.name = kind + "-site";
    s.kind = kind;
    s.url = "http://" + server.host();
    s.manifest.k8s_namespace = "ml";
    return s;
  }
};

json doc_of(const SiteAnswer& a) {
  return json::parse(a.body);
}

TEST(SiteBackends, ObjectNamesAreMadeOfTheAttemptsKey) {
  EXPECT_EQ(object_name(kKey), kName);
  EXPECT_EQ(object_name("broker:ABC_d:12:3"), "berth-abc-d-12-3");
  EXPECT_LE(object_name("broker:" + std::string(80, 'a') + ":1:1").size(), 63u);
  EXPECT_TRUE(submits_to("openstack"));
  EXPECT_FALSE(submits_to("static"));
}

const json kJobManifest = {{"apiVersion", "batch/v1"},
                           {"kind", "Job"},
                           {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
                           {"spec", {{"backoffLimit", 0}}}};

TEST(SiteBackends, KubernetesGetsTheJobInItsNamespaceAndAResendIsTheSameJob) {
  Recorder k8s;
  BrokerSiteConfig s = k8s.site("kubernetes");
  k8s.answers->set("POST /apis/batch/v1/namespaces/ml/jobs", 201, "{}");
  SiteAnswer a = send_attempt(s, kJobManifest, kKey, "tok", 5);
  EXPECT_EQ(a.status, 201);
  EXPECT_EQ(doc_of(a), (json{{"id", kName}, {"state", "PENDING"}, {"reason", ""}}));
  // A resend after a crash: the API server has it already.
  k8s.answers->set("POST /apis/batch/v1/namespaces/ml/jobs", 409,
                   R"({"kind":"Status","reason":"AlreadyExists","code":409})");
  a = send_attempt(s, kJobManifest, kKey, "tok", 5);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(doc_of(a)["id"], kName);
  auto got = k8s.server.requests();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].method, "POST");
  EXPECT_EQ(got[0].header("authorization"), "Bearer tok");
  EXPECT_EQ(got[0].header("idempotency-key"), "");
  json sent = json::parse(got[0].body);
  json want = kJobManifest;
  want["metadata"]["name"] = kName;
  EXPECT_EQ(sent, want);
  EXPECT_EQ(got[1].body, got[0].body);
}

TEST(SiteBackends, KubernetesStatesAndCancelWithBackgroundPropagation) {
  Recorder k8s;
  BrokerSiteConfig s = k8s.site("kubernetes");
  const std::string path = "/apis/batch/v1/namespaces/ml/jobs/" + kName;
  k8s.answers->set("GET " + path, 200, R"({"status":{"active":1,"ready":1}})");
  SiteAnswer a = read_at_site(s, kName, "tok");
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(doc_of(a)["state"], "RUNNING");
  EXPECT_EQ(doc_of(a)["site_status"], (json{{"active", 1}, {"ready", 1}}));
  k8s.answers->set("DELETE " + path + "?propagationPolicy=Background", 200,
                   R"({"kind":"Status","status":"Success"})");
  a = cancel_at_site(s, kName, "tok");
  EXPECT_EQ(a.status, 202);
  EXPECT_EQ(doc_of(a)["state"], "CANCELLED");
  EXPECT_EQ(k8s.server.requests().back().header("authorization"), "Bearer tok");
  // The API server's refusal reads as berthd's, with its message.
  k8s.answers->set("GET " + path, 403,
                   R"({"kind":"Status","message":"jobs.batch is forbidden","code":403})");
  a = read_at_site(s, kName, "tok");
  EXPECT_EQ(a.status, 403);
  EXPECT_EQ(site_error_message(a.body), "jobs.batch is forbidden");

  std::string why;
  auto state = [&why](const char* status) {
    return job_state_name(kubernetes_state(json{{"status", json::parse(status)}}, &why));
  };
  EXPECT_EQ(state("{}"), "PENDING");
  EXPECT_EQ(state(R"({"active":1,"ready":0})"), "PENDING");
  EXPECT_EQ(state(R"({"active":1})"), "RUNNING");  // a server older than `ready`
  EXPECT_EQ(state(R"({"succeeded":1,"conditions":[{"type":"Complete","status":"True"}]})"),
            "COMPLETED");
  EXPECT_EQ(state(R"({"failed":1,"conditions":[{"type":"Failed","status":"True",
                      "reason":"BackoffLimitExceeded","message":"Job has reached the limit"}]})"),
            "FAILED");
  EXPECT_EQ(why, "BackoffLimitExceeded: Job has reached the limit");
  EXPECT_EQ(state(R"({"conditions":[{"type":"Failed","status":"True",
                      "reason":"DeadlineExceeded"}]})"),
            "TIMEOUT");
  EXPECT_EQ(state(R"({"conditions":[{"type":"Failed","status":"False"}],"active":1})"), "RUNNING");
}

TEST(SiteBackends, MarathonGetsTheAppUnderTheAttemptsNameAndAResendIsTheSameApp) {
  Recorder m;
  BrokerSiteConfig s = m.site("marathon");
  json app = {{"id", "/train"}, {"instances", 1}, {"cpus", 4.0}, {"gpus", 1}};
  m.answers->set("POST /v2/apps", 201, R"({"id":"/x"})");
  SiteAnswer a = send_attempt(s, app, kKey, "tok", 5);
  EXPECT_EQ(a.status, 201);
  EXPECT_EQ(doc_of(a)["id"], kName);
  m.answers->set("POST /v2/apps", 409, R"({"message":"An app with id [/x] already exists."})");
  EXPECT_EQ(send_attempt(s, app, kKey, "tok", 5).status, 200);
  auto got = m.server.requests();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].header("authorization"), "Bearer tok");
  app["id"] = "/" + kName;
  EXPECT_EQ(json::parse(got[0].body), app);

  const std::string get = "GET /v2/apps/" + kName + "?embed=app.counts&embed=app.lastTaskFailure";
  m.answers->set(get, 200, R"({"app":{"tasksRunning":1,"tasksStaged":0}})");
  a = read_at_site(s, kName, "tok");
  EXPECT_EQ(doc_of(a)["state"], "RUNNING") << a.body;
  m.answers->set(get, 200,
                 R"({"app":{"tasksRunning":0,"lastTaskFailure":{"state":"TASK_FAILED",
                     "message":"Command exited with status 1"}}})");
  a = read_at_site(s, kName, "tok");
  EXPECT_EQ(doc_of(a)["state"], "FAILED");
  EXPECT_EQ(doc_of(a)["reason"], "TASK_FAILED: Command exited with status 1");
  m.answers->set("DELETE /v2/apps/" + kName, 200, R"({"version":"v","deploymentId":"d"})");
  EXPECT_EQ(cancel_at_site(s, kName, "tok").status, 202);

  std::string why;
  auto state = [&why](const char* app) {
    return job_state_name(marathon_state(json{{"app", json::parse(app)}}, &why));
  };
  EXPECT_EQ(state(R"({"tasksStaged":1})"), "PENDING");
  EXPECT_EQ(state(R"({"lastTaskFailure":{"state":"TASK_FINISHED"},"tasksRunning":1})"),
            "COMPLETED");
  EXPECT_EQ(state(R"({"lastTaskFailure":{"state":"TASK_LOST"}})"), "NODE_FAIL");
  EXPECT_EQ(state(R"({"lastTaskFailure":{"state":"TASK_KILLED"}})"), "CANCELLED");
}

TEST(SiteBackends, ChronosIsAskedForTheNameFirstSinceItReplacesAJobPostedTwice) {
  Recorder c;
  BrokerSiteConfig s = c.site("chronos");
  json job = {{"name", "train"}, {"schedule", "R1//PT1M"}, {"retries", 0}};
  const std::string search = "GET /v1/scheduler/jobs/search?name=" + kName;
  c.answers->set(search, 200, R"([{"name":")" + kName + R"(-2"}])");  // a substring only
  c.answers->set("POST /v1/scheduler/iso8601", 204, "");
  SiteAnswer a = send_attempt(s, job, kKey, "tok", 5);
  EXPECT_EQ(a.status, 201) << a.body;
  EXPECT_EQ(doc_of(a)["id"], kName);
  c.answers->set(search, 200, R"([{"name":")" + kName + R"(","successCount":0}])");
  EXPECT_EQ(send_attempt(s, job, kKey, "tok", 5).status, 200);
  auto got = c.server.requests();
  ASSERT_EQ(got.size(), 3u);  // search, post, search: one job
  EXPECT_EQ(got[1].method, "POST");
  EXPECT_EQ(got[1].header("authorization"), "Bearer tok");
  job["name"] = kName;
  EXPECT_EQ(json::parse(got[1].body), job);

  c.answers->set("GET /v1/scheduler/graph/csv", 200, "node," + kName + ",idle,running\n");
  EXPECT_EQ(doc_of(read_at_site(s, kName, "tok"))["state"], "RUNNING");
  c.answers->set(search, 200,
                 R"([{"name":")" + kName + R"(","errorCount":1,"lastError":"2026-12-04T10:00Z"}])");
  a = read_at_site(s, kName, "tok");
  EXPECT_EQ(doc_of(a)["state"], "FAILED");
  EXPECT_EQ(doc_of(a)["reason"], "failed at 2026-12-04T10:00Z");
  c.answers->set("DELETE /v1/scheduler/task/kill/" + kName, 204, "");
  c.answers->set("DELETE /v1/scheduler/job/" + kName, 204, "");
  EXPECT_EQ(cancel_at_site(s, kName, "tok").status, 202);
  got = c.server.requests();
  EXPECT_EQ(got[got.size() - 2].target, "/v1/scheduler/task/kill/" + kName);
  EXPECT_EQ(got.back().target, "/v1/scheduler/job/" + kName);
  // No such job: 404, in berthd's words.
  c.answers->set(search, 200, "[]");
  EXPECT_EQ(read_at_site(s, kName, "tok").status, 404);
}

TEST(SiteBackends, NovaGetsTheTokenAsXAuthTokenAndNoSecondServerOfAName) {
  Recorder n;
  BrokerSiteConfig s = n.site("openstack");
  s.url += "/v2.1";  // Nova's compute endpoint has a path, before every request's
  json server = {{"server", {{"name", "train"}, {"flavorRef", "g1"}, {"imageRef", "img"}}}};
  const std::string list = "GET /v2.1/servers?name=%5E" + kName + "%24";
  n.answers->set(list, 200, R"({"servers":[]})");
  n.answers->set("POST /v2.1/servers", 202, R"({"server":{"id":"5f1e-77","adminPass":"x"}})");
  SiteAnswer a = send_attempt(s, server, kKey, "tok", 5);
  EXPECT_EQ(a.status, 201) << a.body;
  EXPECT_EQ(doc_of(a)["id"], "5f1e-77");
  n.answers->set(list, 200, R"({"servers":[{"id":"5f1e-77","name":")" + kName + R"("}]})");
  a = send_attempt(s, server, kKey, "tok", 5);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(doc_of(a)["id"], "5f1e-77");
  auto got = n.server.requests();
  ASSERT_EQ(got.size(), 3u);  // list, post, list
  EXPECT_EQ(got[1].header("x-auth-token"), "tok");
  EXPECT_EQ(got[1].header("authorization"), "");
  server["server"]["name"] = kName;
  EXPECT_EQ(json::parse(got[1].body), server);

  n.answers->set("GET /v2.1/servers/5f1e-77", 200, R"({"server":{"status":"ACTIVE"}})");
  EXPECT_EQ(doc_of(read_at_site(s, "5f1e-77", "tok"))["state"], "RUNNING");
  // ERROR: the cloud's end (a 5xx fault: no valid host) moves a broker's job on, the
  // request's own does not.
  n.answers->set("GET /v2.1/servers/5f1e-77", 200,
                 R"({"server":{"status":"ERROR","fault":{"code":500,"message":"No valid host"}}})");
  a = read_at_site(s, "5f1e-77", "tok");
  EXPECT_EQ(doc_of(a)["state"], "NODE_FAIL");
  EXPECT_EQ(doc_of(a)["reason"], "No valid host");
  n.answers->set("GET /v2.1/servers/5f1e-77", 200,
                 R"({"server":{"status":"ERROR","fault":{"code":400,"message":"Bad disk"}}})");
  a = read_at_site(s, "5f1e-77", "tok");
  EXPECT_EQ(doc_of(a)["state"], "FAILED");
  EXPECT_EQ(doc_of(a)["reason"], "Bad disk");
  n.answers->set("DELETE /v2.1/servers/5f1e-77", 204, "");
  EXPECT_EQ(cancel_at_site(s, "5f1e-77", "tok").status, 202);
  EXPECT_EQ(n.server.requests().back().header("x-auth-token"), "tok");
  // Nova's refusal, in berthd's words.
  n.answers->set(list, 200, R"({"servers":[]})");
  n.answers->set("POST /v2.1/servers", 403,
                 R"({"forbidden":{"message":"Quota exceeded for instances","code":403}})");
  a = send_attempt(s, server, kKey, "tok", 5);
  EXPECT_EQ(a.status, 403);
  EXPECT_EQ(site_error_message(a.body), "Quota exceeded for instances");

  std::string why;
  auto state = [&why](const char* st) {
    return job_state_name(openstack_state(json{{"server", {{"status", st}}}}, &why));
  };
  EXPECT_EQ(state("BUILD"), "PENDING");
  EXPECT_EQ(state("SHUTOFF"), "COMPLETED");
  EXPECT_EQ(state("DELETED"), "CANCELLED");
}

std::string l40s_glue() {
  GlueSite s;
  s.cluster = "k8s";
  s.host = "k8s.example.org";
  s.creation_time = "2026-12-04T00:00:00Z";
  s.nodes = {{"n1", "idle", 64, 0, 512000, "l40s", 4, 0, {"gpu"}}};
  s.partitions = {{"gpu", 86400, 3600, true, 0, 0, -1}};
  s.accelerators["l40s"] = {"NVIDIA", "NVIDIA L40S", 46068, {"8.9"}, "550.54.15", "12.4"};
  return glue_document(s).dump();
}

/// A broker over one site of `kind`, named `name`, recorded by `recorder` and described by
/// l40s_glue(); its database in a folder of its own; its caller alice.
struct OneSiteBroker {
  TempDir dir{"site-backends"};
  BrokerConfig config;
  std::unique_ptr<JobsDb> db;
  std::unique_ptr<BrokerService> broker;
  std::unique_ptr<BrokerJobs> jobs;
  Account who;

  OneSiteBroker(const Recorder& recorder, const std::string& kind, const std::string& name) {
    EXPECT_TRUE(write_file_atomic(dir / "site.json", l40s_glue()).ok());
    config.enabled = true;
    BrokerSiteConfig s = recorder.site(kind);
    s.name = name;
    s.resources = dir / "site.json";
    s.info_ttl_s = 0;
    config.sites.push_back(s);
    auto opened = JobsDb::open(dir / "broker.db");
    EXPECT_TRUE(opened.ok()) << opened.error().message();
    if (opened.ok()) db = std::move(*opened);
    broker = std::make_unique<BrokerService>(config);
    EXPECT_TRUE(broker->load().ok());
    if (db) jobs = std::make_unique<BrokerJobs>(*db, *broker, config);
    who.issuer = "https://a";
    who.subject = "s-alice";
    who.user = "alice";
  }
  /// The site's object name of attempt 1 of broker job `id`.
  std::string object_of(int id) const {
    return object_name("broker:" + db->instance() + ":" + std::to_string(id) + ":1");
  }
};

TEST(SiteBackends, ABrokerJobGoesToAKubernetesSiteAndIsReadAndCancelledThere) {
  Recorder k8s;
  OneSiteBroker b(k8s, "kubernetes", "k8s");
  ASSERT_TRUE(b.jobs);
  BrokerJobs& jobs = *b.jobs;
  const Account& who = b.who;

  k8s.answers->set("POST /apis/batch/v1/namespaces/ml/jobs", 201, "{}");
  auto answer = jobs.submit(who, "tok", "", R"({"image":"x","resources":{"gpus":"L40S:1"}})", 10);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ(answer->status, 201) << answer->body.dump();
  const std::string name = b.object_of(1);
  EXPECT_EQ(answer->body["site"], "k8s");
  EXPECT_EQ(answer->body["site_job_id"], name) << answer->body.dump();
  EXPECT_EQ(answer->body["attempts"][0]["outcome"], "submitted");
  auto got = k8s.server.requests();
  ASSERT_EQ(got.size(), 1u);
  json sent = json::parse(got[0].body);
  EXPECT_EQ(sent["kind"], "Job");
  EXPECT_EQ(sent["metadata"]["name"], name);
  EXPECT_EQ(
      sent["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
      "1");

  const std::string path = "/apis/batch/v1/namespaces/ml/jobs/" + name;
  k8s.answers->set("GET " + path, 200, R"({"status":{"active":1,"ready":1}})");
  auto seen = jobs.get(who, "tok", 1, 11);
  ASSERT_TRUE(seen.ok() && seen->has_value());
  EXPECT_EQ((**seen)["state"], "RUNNING") << (**seen).dump();
  EXPECT_EQ((**seen)["site_job_id"], name);
  k8s.answers->set("DELETE " + path + "?propagationPolicy=Background", 200, "{}");
  auto cancelled = jobs.cancel(who, "tok", 1, 12);
  ASSERT_TRUE(cancelled.ok()) << cancelled.error().message();
  ASSERT_TRUE(cancelled->has_value());
  EXPECT_EQ((**cancelled)["state"], "CANCELLED");
  EXPECT_EQ(k8s.server.requests().back().method, "DELETE");
  // Its output is the site's to keep.
  auto output = jobs.output(who, "tok", 1, "");
  ASSERT_FALSE(output.ok());
  EXPECT_NE(output.error().message().find("(kubernetes) keeps its output there"), std::string::npos)
      << output.error().message();
}

TEST(SiteBackends, AMarathonAppWhoseRunEndedIsDeletedBeforeItIsSettledOrMovedOn) {
  Recorder m;
  OneSiteBroker b(m, "marathon", "m");
  ASSERT_TRUE(b.jobs);
  BrokerJobs& jobs = *b.jobs;
  const Account& who = b.who;
  m.answers->set("POST /v2/apps", 201, "{}");
  for (const char* name : {"one", "two"})
    ASSERT_TRUE(
        jobs.submit(who, "tok", "", fmt::format(R"({{"image":"x","name":"{}"}})", name), 10).ok());
  const std::string app1 = b.object_of(1), app2 = b.object_of(2);
  auto deletes = [&m](const std::string& app) {
    int n = 0;
    for (const FakeRequest& r : m.server.requests())
      n += r.method == "DELETE" && r.target == "/v2/apps/" + app;
    return n;
  };
  const std::string embed = "?embed=app.counts&embed=app.lastTaskFailure";

  // Its task finished (Marathon is relaunching it): COMPLETED only once the app is gone.
  m.answers->set("GET /v2/apps/" + app1 + embed, 200,
                 R"({"app":{"tasksRunning":1,"lastTaskFailure":{"state":"TASK_FINISHED"}}})");
  m.answers->set("DELETE /v2/apps/" + app1, 503, R"({"message":"busy"})");
  auto seen = jobs.get(who, "tok", 1, 20);
  ASSERT_TRUE(seen.ok() && seen->has_value());
  EXPECT_EQ((**seen)["state"], "PENDING") << (**seen).dump();  // as recorded: asked again
  m.answers->set("DELETE /v2/apps/" + app1, 200, "{}");
  seen = jobs.get(who, "tok", 1, 21);
  ASSERT_TRUE(seen.ok() && seen->has_value());
  EXPECT_EQ((**seen)["state"], "COMPLETED") << (**seen).dump();
  EXPECT_EQ(deletes(app1), 2);
  seen = jobs.get(who, "tok", 1, 22);  // settled: nothing more is sent
  EXPECT_EQ(deletes(app1), 2);

  // Its agent lost the task: the app is deleted before the job moves on (here, nowhere).
  m.answers->set("GET /v2/apps/" + app2 + embed, 200,
                 R"({"app":{"tasksRunning":0,"lastTaskFailure":{"state":"TASK_LOST"}}})");
  m.answers->set("DELETE /v2/apps/" + app2, 200, "{}");
  seen = jobs.get(who, "tok", 2, 30);
  ASSERT_TRUE(seen.ok() && seen->has_value());
  EXPECT_EQ(deletes(app2), 1);
  EXPECT_EQ((**seen)["attempts"][0]["outcome"], "ended") << (**seen).dump();
}

}  // namespace
}  // namespace berth::gateway

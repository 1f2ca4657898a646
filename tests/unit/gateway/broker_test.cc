// berthd's broker mode (gateway/broker.h) against sites on loopback: what it asks a berthd
// site and with whose token, what it learns from the site's answers, and file sites.
#include "gateway/broker.h"

#include <gtest/gtest.h>
#include <sys/time.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "core/fs.h"
#include "fake_http_server.h"
#include "fake_issuer.h"
#include "gateway/glue.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

using testing::FakeHttpServer;
using testing::FakeRequest;
using testing::FakeResponse;

/// One node of two H100s, idle, in partition "gpu".
std::string h100_site_glue() {
  GlueSite s;
  s.cluster = "a";
  s.host = "a.example.org";
  s.creation_time = "2026-12-04T00:00:00Z";
  s.nodes = {{"n1", "idle", 64, 0, 512000, "h100", 2, 0, {"gpu"}}};
  s.partitions = {{"gpu", 86400, 3600, true, 0, 0, -1}};
  s.accelerators["h100"] = {"NVIDIA", "NVIDIA H100 80GB HBM3", 85520, {"9.0"}, "550.54.15", "12.4"};
  return glue_document(s).dump();
}

Account caller(const std::string& issuer, const std::string& subject) {
  Account a;
  a.issuer = issuer;
  a.subject = subject;
  a.user = subject;
  return a;
}

/// A berthd site that trusts `issuers` and answers GET /v1/resources with `glue`, except to
/// the tokens of `refused` (403 with berthd's error body).
FakeHttpServer::Handler berthd_site(std::vector<std::string> issuers, std::string glue,
                                    std::set<std::string> refused = {}) {
  return [issuers, glue, refused](const FakeRequest& r) -> FakeResponse {
    if (r.target == "/v1/health") {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& i : issuers) list.push_back({{"issuer", i}, {"audience", "berth"}});
      return {200, {}, nlohmann::json{{"status", "ok"}, {"issuers", list}}.dump()};
    }
    if (r.target == "/v1/resources") {
      if (refused.count(r.header("authorization")))
        return {
            403, {}, R"({"error":{"status":403,"message":"no local account for this caller"}})"};
      return {200, {}, glue};
    }
    return {404, {}, "{}"};
  };
}

BrokerConfig one_site(const std::string& url) {
  BrokerConfig c;
  c.enabled = true;
  BrokerSiteConfig s;
  s.name = "a";
  s.url = url;
  c.sites.push_back(s);
  return c;
}

const nlohmann::json h100_job = {{"image", "x"}, {"resources", {{"gpus", "H100:1"}}}};

int resource_requests(FakeHttpServer& site) {
  int n = 0;
  for (const FakeRequest& r : site.requests()) n += r.target == "/v1/resources";
  return n;
}

TEST(BrokerService, ATokenNeverGoesWhereItsIssuerIsNotTrusted) {
  FakeHttpServer site(berthd_site({"https://a"}, h100_site_glue()));
  BrokerConfig config = one_site("http://" + site.host());
  BrokerService broker(config);
  ASSERT_TRUE(broker.load().ok());
  auto answer = broker.placements(h100_job, caller("https://b", "bob"), "token-of-b", 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ((*answer)["chosen"], nullptr);
  EXPECT_EQ((*answer)["candidates"][0]["reasons"][0],
            (nlohmann::json{{"code", "issuer_untrusted"},
                            {"message",
                             "the site does not take the caller's token (it trusts "
                             "tokens of https://a)"}}));
  for (const FakeRequest& r : site.requests()) {
    EXPECT_EQ(r.target, "/v1/health");
    EXPECT_EQ(r.header("authorization"), "");
  }
  answer = broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ((*answer)["chosen"]["site"], "a") << answer->dump();
  EXPECT_EQ((*answer)["chosen"]["partition"], "gpu");
  EXPECT_EQ(site.requests().back().header("authorization"), "Bearer token-of-a");
}

TEST(BrokerService, ACallerTheSiteRefusesIsLearntFromItsAnswerOncePerCaller) {
  FakeHttpServer site(berthd_site({"https://a"}, h100_site_glue(), {"Bearer token-of-eve"}));
  BrokerConfig config = one_site("http://" + site.host());
  BrokerService broker(config);
  auto answer = broker.placements(h100_job, caller("https://a", "eve"), "token-of-eve", 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ((*answer)["candidates"][0]["reasons"][0]["message"],
            "the site does not take the caller's token (HTTP 403: no local account for this "
            "caller)");
  answer = broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1001);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ((*answer)["chosen"]["site"], "a");
  EXPECT_EQ(resource_requests(site), 2);
  // Both known now, the information fresh: no more requests for either.
  ASSERT_TRUE(broker.placements(h100_job, caller("https://a", "eve"), "token-of-eve", 1002).ok());
  ASSERT_TRUE(broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1003).ok());
  EXPECT_EQ(resource_requests(site), 2);
  // Past info_ttl_s (300), asked again.
  ASSERT_TRUE(broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1400).ok());
  EXPECT_EQ(resource_requests(site), 3);
}

TEST(BrokerService, ASiteThatDoesNotAnswerIsDown) {
  int port;
  {
    FakeHttpServer gone([](const FakeRequest&) { return FakeResponse{}; });
    port = gone.port();
  }
  BrokerConfig config = one_site("http://127.0.0.1:" + std::to_string(port));
  BrokerService broker(config);
  auto answer = broker.placements(h100_job, caller("https://a", "alice"), "t", 1000);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ((*answer)["candidates"][0]["reasons"][0]["code"], "site_down");
  nlohmann::json sites = broker.sites(caller("https://a", "alice"), "t", 1000);
  EXPECT_EQ(sites[0]["up"], false);
  EXPECT_NE(sites[0]["error"].get<std::string>().find("127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << sites.dump();
}

TEST(BrokerService, WhatComesBetweenARefreshsCopyAndItsWriteIsKept) {
  // The site's answer to alice waits until an attempt at the site has been recorded, as a
  // submission's would be while another caller's refresh is on its way.
  std::atomic<bool> inside{false}, recorded{false};
  auto site_of_a = berthd_site({"https://a"}, h100_site_glue());
  FakeHttpServer site([&](const FakeRequest& r) {
    if (r.target == "/v1/resources" && r.header("authorization") == "Bearer token-of-a") {
      inside = true;
      while (!recorded) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return site_of_a(r);
  });
  BrokerConfig config = one_site("http://" + site.host());
  BrokerService broker(config);
  std::thread alice([&] {
    EXPECT_TRUE(broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1000).ok());
  });
  while (!inside) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  broker.record_attempt("a", false);
  recorded = true;
  alice.join();
  auto answer = broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1001);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ((*answer)["candidates"][0]["factors"]["reliability"], 0.0) << answer->dump();
  EXPECT_EQ(resource_requests(site), 1);  // and alice's own word was kept: not asked again
}

TEST(BrokerService, AFileSiteIsReadAtLoadAndAgainWhenItChanges) {
  TempDir dir{"broker"};
  const std::string file = dir.path + "/site.json";
  ASSERT_TRUE(write_file_atomic(file, h100_site_glue()).ok());
  BrokerConfig config;
  config.enabled = true;
  BrokerSiteConfig s;
  s.name = "paper";
  s.kind = "static";
  s.resources = file;
  s.info_ttl_s = 0;
  config.sites.push_back(s);
  BrokerService broker(config);
  ASSERT_TRUE(broker.load().ok());
  auto answer = broker.placements(h100_job, caller("https://a", "alice"), "", 1000);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ((*answer)["chosen"]["site"], "paper");
  // The file now says L40S; its time moves on, and the broker reads it again.
  std::string l40s = h100_site_glue();
  l40s.replace(l40s.find("NVIDIA H100 80GB HBM3"), 21, "NVIDIA L40S");
  ASSERT_TRUE(write_file_atomic(file, l40s).ok());
  timeval later[2] = {{2000000000, 0}, {2000000000, 0}};
  ASSERT_EQ(::utimes(file.c_str(), later), 0);
  answer = broker.placements(h100_job, caller("https://a", "alice"), "", 1001);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ((*answer)["candidates"][0]["reasons"][0]["code"], "no_gpu_model") << answer->dump();
  // A file that cannot be read stops load(), naming the site.
  config.sites[0].resources = dir.path + "/missing.json";
  BrokerService bad(config);
  Status st = bad.load();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("read broker site paper"), std::string::npos)
      << st.error().message();
}

TEST(BrokerService, AManifestIsWhatTheOneSiteWouldBeSentOnTheChosenClass) {
  FakeHttpServer site(berthd_site({"https://a"}, h100_site_glue()));
  TempDir dir{"broker"};
  const std::string file = dir.path + "/k8s.json";
  ASSERT_TRUE(write_file_atomic(file, h100_site_glue()).ok());
  BrokerConfig config = one_site("http://" + site.host());
  BrokerSiteConfig k8s;
  k8s.name = "k8s";
  k8s.kind = "kubernetes";
  k8s.url = "https://k8s.example.org:6443";
  k8s.resources = file;
  k8s.info_ttl_s = 0;
  k8s.manifest.k8s_namespace = "ml";
  config.sites.push_back(k8s);
  BrokerService broker(config);
  ASSERT_TRUE(broker.load().ok());
  const Account alice = caller("https://a", "alice");
  nlohmann::json job = h100_job;
  job["placement"] = {{"sites", {"a"}}};
  auto a = broker.manifest(job, alice, "token-of-a", 1000);
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->body["kind"], "berthd");
  EXPECT_EQ(a->body["partition"], "gpu");
  EXPECT_EQ(a->body["manifest"]["resources"]["gpu_model"], "h100");  // pinned to the class
  EXPECT_EQ(a->body["manifest"]["resources"]["partition"], "gpu");
  job["placement"]["sites"] = {"k8s"};
  auto m = broker.manifest(job, alice, "token-of-a", 1000);
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->body["kind"], "kubernetes");
  EXPECT_EQ(m->body["manifest"]["kind"], "Job");
  EXPECT_EQ(m->body["manifest"]["metadata"]["namespace"], "ml");
  // No class fits: 422 with the verdicts; a body naming no or two sites is the caller's error.
  nlohmann::json h200 = {
      {"image", "x"}, {"resources", {{"gpus", "H200:1"}}}, {"placement", {{"sites", {"k8s"}}}}};
  auto none = broker.manifest(h200, alice, "token-of-a", 1000);
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_EQ(none->status, 422);
  EXPECT_EQ(none->body["candidates"][0]["site"], "a");  // not asked for: excluded
  EXPECT_EQ(none->body["candidates"][1]["site"], "k8s");
  EXPECT_EQ(none->body["candidates"][1]["reasons"][0]["code"], "no_gpu_model");
  job["placement"]["sites"] = {"a", "k8s"};
  auto two = broker.manifest(job, alice, "token-of-a", 1000);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().message(),
            "parse job body: placement.sites: must name the one site whose manifest is wanted");
  job["placement"]["sites"] = {"mars"};
  EXPECT_EQ(broker.manifest(job, alice, "token-of-a", 1000).error().message(),
            "parse job body: placement.sites: \"mars\" is not a site of this broker");
}

TEST(BrokerService, ABadBodyIsTheCallersError) {
  BrokerConfig config = one_site("http://127.0.0.1:1");
  BrokerService broker(config);
  auto answer = broker.placements({{"resources", {{"gpus", 1}}}}, caller("https://a", "a"), "", 1);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().code, ErrorCode::kInvalidInput);
}

TEST(BrokerService, TheCallersLimitsAndQuotaAtASiteAreWhatItsMeSays) {
  auto plain = berthd_site({"https://a"}, h100_site_glue());
  FakeHttpServer site([plain](const FakeRequest& r) -> FakeResponse {
    if (r.target != "/v1/me") return plain(r);
    if (r.header("authorization") == "Bearer token-of-old") return {404, {}, "{}"};  // older berthd
    return {200,
            {},
            R"({"user":"alice","limits":{"max_gpus_per_job":{"value":1,"from":"default"},)"
            R"("max_walltime_s":{"value":3600,"from":"user alice"}},)"
            R"("quota":{"group":"/vo/ml","gpu_hours":10,"used_gpu_hours":10,"left_gpu_hours":0}})"};
  });
  BrokerConfig config = one_site("http://" + site.host());
  BrokerService broker(config);
  const nlohmann::json two = {{"image", "x"}, {"resources", {{"gpus", "H100:2"}}}};
  auto answer = broker.placements(two, caller("https://a", "alice"), "token-of-alice", 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  std::set<std::string> codes;
  for (const auto& r : (*answer)["candidates"][0]["reasons"]) codes.insert(r["code"]);
  EXPECT_EQ(codes, (std::set<std::string>{"max_gpus_per_job", "quota"})) << answer->dump();
  const nlohmann::json long_cpu = {{"image", "x"}, {"resources", {{"walltime_s", 7200}}}};
  answer = broker.placements(long_cpu, caller("https://a", "alice"), "token-of-alice", 1001);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(
      (*answer)["candidates"][0]["reasons"][0],
      (nlohmann::json{{"code", "walltime"},
                      {"message", "asks 7200 s; the caller's limit at this site is 3600 s"}}));
  // A site that does not say: nothing limited here, the site's own refusal decides.
  answer = broker.placements(two, caller("https://a", "old"), "token-of-old", 1002);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ((*answer)["chosen"]["site"], "a") << answer->dump();
}

TEST(BrokerService, ACallersStandingIsReadAgainOnceItIsOlderThanTheSitesTtl) {
  auto plain = berthd_site({"https://a"}, h100_site_glue());
  auto left = std::make_shared<std::atomic<int>>(10);  // bob's GPU-hours left at the site
  FakeHttpServer site([plain, left](const FakeRequest& r) -> FakeResponse {
    if (r.target != "/v1/me") return plain(r);
    const int hours = r.header("authorization") == "Bearer token-of-bob" ? left->load() : 10;
    return {200, {}, nlohmann::json{{"quota", {{"left_gpu_hours", hours}}}}.dump()};
  });
  BrokerConfig config = one_site("http://" + site.host());
  BrokerService broker(config);
  auto fits = [&](const char* who, int64_t now) {
    auto answer =
        broker.placements(h100_job, caller("https://a", who), std::string("token-of-") + who, now);
    EXPECT_TRUE(answer.ok());
    return answer.ok() && (*answer)["chosen"].is_object();
  };
  EXPECT_TRUE(fits("bob", 1000));
  *left = 0;
  EXPECT_TRUE(fits("bob", 1100));  // within info_ttl_s (300): as read at 1000
  // alice's request past the ttl reads the site's document again, for her; bob's word is as
  // old, and read again at his next request, not taken from 1000.
  EXPECT_TRUE(fits("alice", 1350));
  EXPECT_FALSE(fits("bob", 1360));
}

/// One node of two H100s in two partitions, gpu and gpu2: two classes of one site.
std::string two_partition_glue() {
  GlueSite s;
  s.cluster = "a";
  s.host = "a.example.org";
  s.creation_time = "2026-12-04T00:00:00Z";
  s.nodes = {{"n1", "idle", 64, 0, 512000, "h100", 2, 0, {"gpu", "gpu2"}}};
  s.partitions = {{"gpu", 86400, 3600, true, 0, 0, -1}, {"gpu2", 86400, 3600, true, 0, 0, -1}};
  s.accelerators["h100"] = {"NVIDIA", "NVIDIA H100 80GB HBM3", 85520, {"9.0"}, "550.54.15", "12.4"};
  return glue_document(s).dump();
}

/// Site `plain` saying it answers dry runs, answering them with `verdict(body)`.
FakeHttpServer::Handler dry_running(FakeHttpServer::Handler plain,
                                    std::function<nlohmann::json(const nlohmann::json&)> verdict) {
  return [plain, verdict](const FakeRequest& r) -> FakeResponse {
    if (r.target == "/v1/health") {
      nlohmann::json h = nlohmann::json::parse(plain(r).body);
      h["dry_run"] = true;
      return {200, {}, h.dump()};
    }
    if (r.method == "POST" && r.target == "/v1/jobs?dry_run=1")
      return {200, {}, verdict(nlohmann::json::parse(r.body)).dump()};
    return plain(r);
  };
}

std::vector<FakeRequest> dry_runs(FakeHttpServer& site) {
  std::vector<FakeRequest> out;
  for (const FakeRequest& r : site.requests())
    if (r.method == "POST") out.push_back(r);
  return out;
}

TEST(BrokerService, ASitesDryRunRefusesAClassAndItsNextIsAskedAndTimed) {
  // The site's [slurm] partitions opens gpu2 only, which its document does not say; Slurm
  // would start the job there in ten minutes (1000 is the broker's now).
  FakeHttpServer site(dry_running(
      berthd_site({"https://a"}, two_partition_glue()),
      [](const nlohmann::json& body) -> nlohmann::json {
        if (body["resources"]["partition"] == "gpu2")
          return {
              {"fits", true}, {"reason", nullptr}, {"message", nullptr}, {"start_estimate", 1600}};
        return {{"fits", false},
                {"reason", "partition"},
                {"message", "partition gpu is not open to jobs here"},
                {"start_estimate", nullptr}};
      }));
  BrokerConfig config = one_site("http://" + site.host());
  BrokerService broker(config);
  auto answer = broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ((*answer)["chosen"]["partition"], "gpu2") << answer->dump();
  EXPECT_EQ((*answer)["candidates"][0]["factors"]["wait"], 50) << answer->dump();
  EXPECT_EQ((*answer)["candidates"][1]["partition"], "gpu");
  EXPECT_EQ((*answer)["candidates"][1]["reasons"],
            (nlohmann::json::array(
                {{{"code", "excluded"},
                  {"message", "the site says: partition gpu is not open to jobs here"}}})));
  // gpu first (by name), then gpu2 in the next round: each asked once, as the caller.
  std::vector<FakeRequest> asked = dry_runs(site);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(asked[0].body)["resources"]["partition"], "gpu");
  EXPECT_EQ(nlohmann::json::parse(asked[1].body)["resources"]["partition"], "gpu2");
  EXPECT_EQ(asked[1].header("authorization"), "Bearer token-of-a");
  // Turned off: chosen on the document alone, nothing more asked.
  config.sites[0].dry_run = false;
  answer = broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1001);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ((*answer)["chosen"]["partition"], "gpu");
  EXPECT_EQ(dry_runs(site).size(), 2u);
}

TEST(BrokerService, ASitesDryRunRefusingTheCallerRejectsTheWholeSite) {
  FakeHttpServer site(dry_running(berthd_site({"https://a"}, two_partition_glue()),
                                  [](const nlohmann::json&) -> nlohmann::json {
                                    return {{"fits", false},
                                            {"reason", "limit"},
                                            {"message", "max_queued_jobs is 0"},
                                            {"start_estimate", nullptr}};
                                  }));
  BrokerConfig config = one_site("http://" + site.host());
  BrokerService broker(config);
  auto answer = broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ((*answer)["chosen"], nullptr);
  ASSERT_EQ((*answer)["candidates"].size(), 1u) << answer->dump();
  EXPECT_EQ((*answer)["candidates"][0]["class"], nullptr);
  EXPECT_EQ(
      (*answer)["candidates"][0]["reasons"][0],
      (nlohmann::json{{"code", "quota"}, {"message", "the site says: max_queued_jobs is 0"}}));
  EXPECT_EQ(dry_runs(site).size(), 1u);  // one refusal of the caller is enough
  // A site whose health does not say it answers dry runs is never sent one.
  FakeHttpServer old(berthd_site({"https://a"}, two_partition_glue()));
  BrokerConfig old_config = one_site("http://" + old.host());
  BrokerService old_broker(old_config);
  answer = old_broker.placements(h100_job, caller("https://a", "alice"), "token-of-a", 1000);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ((*answer)["chosen"]["partition"], "gpu");
  EXPECT_EQ(dry_runs(old).size(), 0u);
}

/// A broker over one berthd site of audience "berthd-b" that trusts `issuer`, exchanging the
/// callers' tokens there (token = "exchange") through `x`.
struct ExchangeRig {
  TempDir dir{"broker"};
  FakeIssuer issuer;
  std::vector<IssuerConfig> issuers;
  TokenExchanger x;
  FakeHttpServer site;
  BrokerConfig config;
  BrokerService broker;
  const std::string token;  ///< alice's, for audience "a"

  explicit ExchangeRig(const std::string& mode = "exchange")
      : issuers{issuer.config(dir.path + "/secret")},
        x(issuers, http_fetcher()),
        site(berthd_site({issuer.url}, h100_site_glue())),
        config(one_site("http://" + site.host())),
        broker(config, &x),
        token(unsigned_jwt({{"iss", issuer.url}, {"sub", "alice"}, {"aud", "a"}})) {
    write_text(dir.path + "/secret", "s3cret\n");
    ::chmod((dir.path + "/secret").c_str(), 0600);
    config.sites[0].token = mode;
    config.sites[0].audience = "berthd-b";
  }
  /// The Authorization headers the site was sent, in order ("" left out).
  std::vector<std::string> site_saw() {
    std::vector<std::string> out;
    for (const FakeRequest& r : site.requests())
      if (!r.header("authorization").empty()) out.push_back(r.header("authorization"));
    return out;
  }
};

TEST(BrokerService, AnExchangeSiteIsSentTheExchangedTokenNeverTheCallers) {
  ExchangeRig rig;
  const Account alice = caller(rig.issuer.url, "alice");
  auto answer = rig.broker.placements(h100_job, alice, rig.token, 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ((*answer)["chosen"]["site"], "a") << answer->dump();
  // GET /v1/resources and /v1/me, with one exchanged token.
  EXPECT_EQ(rig.site_saw(),
            (std::vector<std::string>{"Bearer xchg-berthd-b-1", "Bearer xchg-berthd-b-1"}));
  ASSERT_EQ(rig.issuer.exchanges().size(), 1u);
  EXPECT_EQ(parse_form(rig.issuer.exchanges()[0].body)["subject_token"], rig.token);
  // The job calls go the same way (call(), at the present time: a token of its own).
  SiteAnswer a = rig.broker.call(rig.config.sites[0], "GET", "/v1/resources", rig.token);
  EXPECT_EQ(a.status, 200) << a.error;
  EXPECT_EQ(rig.site_saw().back(), "Bearer xchg-berthd-b-2");
  for (const std::string& h : rig.site_saw()) EXPECT_NE(h, "Bearer " + rig.token);
}

TEST(BrokerService, AFailedExchangeMakesTheSiteIssuerUntrustedForThatCaller) {
  ExchangeRig rig;
  const Account alice = caller(rig.issuer.url, "alice");
  rig.issuer.refuse(400, R"({"error":"invalid_target","error_description":"no such audience"})");
  auto answer = rig.broker.placements(h100_job, alice, rig.token, 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ((*answer)["chosen"], nullptr);
  EXPECT_EQ((*answer)["candidates"][0]["reasons"][0],
            (nlohmann::json{
                {"code", "issuer_untrusted"},
                {"message",
                 "the site does not take the caller's token (token exchange for "
                 "audience \"berthd-b\" failed: POST " +
                     rig.issuer.url + "/token: invalid_target: no such audience (HTTP 400))"}}))
      << answer->dump();
  SiteAnswer a = rig.broker.call(rig.config.sites[0], "POST", "/v1/jobs", rig.token, "{}");
  EXPECT_TRUE(a.no_token);
  EXPECT_EQ(a.status, 0);
  EXPECT_NE(a.error.find("invalid_target: no such audience"), std::string::npos) << a.error;
  EXPECT_TRUE(rig.site_saw().empty());  // never the caller's token, nor any
  // Not kept: the issuer granting again, the next placement has the site.
  rig.issuer.grant();
  answer = rig.broker.placements(h100_job, alice, rig.token, 1001);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ((*answer)["chosen"]["site"], "a") << answer->dump();
  EXPECT_EQ(rig.site_saw().front(), "Bearer xchg-berthd-b-1");
}

TEST(BrokerService, AForwardedTokenGoesOnlyToASiteOfAnAudienceItNames) {
  ExchangeRig rig("forward");
  auto answer = rig.broker.placements(h100_job, caller(rig.issuer.url, "alice"), rig.token, 1000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ((*answer)["candidates"][0]["reasons"][0]["message"],
            "the site does not take the caller's token (the caller's token is not for audience "
            "\"berthd-b\" (its aud: \"a\"); token = \"exchange\" would get one)");
  EXPECT_TRUE(rig.site_saw().empty());
  const std::string both =
      unsigned_jwt({{"iss", rig.issuer.url}, {"sub", "bob"}, {"aud", {"a", "berthd-b"}}});
  answer = rig.broker.placements(h100_job, caller(rig.issuer.url, "bob"), both, 1000);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ((*answer)["chosen"]["site"], "a") << answer->dump();
  EXPECT_EQ(rig.site_saw().front(), "Bearer " + both);
  EXPECT_TRUE(rig.issuer.exchanges().empty());
}

}  // namespace
}  // namespace berth::gateway

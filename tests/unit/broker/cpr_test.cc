#include "broker/cpr.h"

#include <gtest/gtest.h>

namespace berth::broker {
namespace {

using nlohmann::json;

// CPR's own controller fixture (indigo-dc/CloudProviderRanker
// src/test/resources/RankControllerIO/cpr-request.json and cpr-response.json), re-typed: its
// seven SLAs and priorities, its monitoring with the metrics its rules read (and a few they do
// not: the Mesos masters' names, the Nova probes' names).
const char* const kBari = "provider-RECAS-BARI";
const char* const kService = "eaa07cfcceb85cd11b8adacf35";

json restrictions(int tg, int tl, int ug, int ul, int il) {
  json r = {
      {"total_guaranteed", tg}, {"total_limit", tl}, {"user_guaranteed", ug}, {"user_limit", ul}};
  if (il >= 0) r["instance_limit"] = il;
  return r;
}

/// One SLA of the fixture: a public_ip target and a computing_time one.
json sla(const std::string& id, const std::string& provider, const std::string& service,
         const json& public_ip, const json& computing_time) {
  return {{"id", id},
          {"customer", "deep-hdc"},
          {"provider", provider},
          {"start_date", "Mon Oct 08 22:00:00 UTC 2018"},
          {"services",
           {{{"type", "computing"},
             {"service_id", service},
             {"targets",
              {{{"type", "public_ip"}, {"unit", nullptr}, {"restrictions", public_ip}},
               {{"type", "computing_time"}, {"unit", "h"}, {"restrictions", computing_time}}}}}}}};
}

json metrics(const std::vector<std::pair<std::string, double>>& m) {
  json out = json::array();
  for (const auto& [name, value] : m)
    out.push_back({{"metricName", name}, {"metricValue", value}, {"metricUnit", ""}});
  return out;
}

json operations(double create_t, double create_r, double run_t, double run_r, double delete_t,
                double delete_r) {
  return metrics({{"clear_responseTime", 669},
                  {"clear_result", 1},
                  {"create_responseTime", create_t},
                  {"create_result", create_r},
                  {"run_responseTime", run_t},
                  {"run_result", run_r},
                  {"delete_responseTime", delete_t},
                  {"delete_result", delete_r},
                  {"delete_status", 503}});
}

json fixture_request() {
  const std::string s = kService;
  const std::vector<std::pair<std::string, std::string>> priorities = {
      {"5bfbc091a9a88f528bf5114b", s + "0022ce"},
      {"5bfbc096a9a88f528bf5114c", s + "004814"},
      {"5bfbc09aa9a88f528bf5114d", s + "005a71"},
      {"5bfbc0a1a9a88f528bf5114e", s + "003aae"},
      {"5bfbc0a4a9a88f528bf5114f", s + "0052b3"},
      {"5cefdd1bcb0e8f527dfb3c94", "99f82787b0522954505d2bc835008849"},
      {"5cf12da6cb0e8f527dfb3c97", s + "0066fe"}};
  json priority = json::array();
  for (const auto& [sla_id, service] : priorities)
    priority.push_back({{"sla_id", sla_id}, {"service_id", service}, {"weight", 0.5}});
  json request;
  request["preferences"] = {{{"service_type", "compute"}, {"priority", priority}},
                            {{"service_type", "storage"}, {"priority", json::array()}}};
  request["sla"] = {sla(priorities[0].first, kBari, priorities[0].second,
                        restrictions(100, 100, 5, 10, -1), restrictions(500, 1000, 10, 10, 100)),
                    sla(priorities[1].first, kBari, priorities[1].second,
                        restrictions(100, 100, 5, 10, -1), restrictions(50, 100, 5, 5, 10)),
                    sla(priorities[2].first, kBari, priorities[2].second,
                        restrictions(100, 100, 5, 10, -1), restrictions(100, 100, 5, 10, 100)),
                    sla(priorities[3].first, kBari, priorities[3].second,
                        restrictions(100, 100, 10, 10, -1), restrictions(100, 100, 5, 10, 10)),
                    sla(priorities[4].first, kBari, priorities[4].second,
                        restrictions(100, 100, 10, 10, -1), restrictions(100, 100, 50, 100, 100)),
                    sla(priorities[5].first, "provider-PSNC", priorities[5].second,
                        restrictions(0, 1, 1, 1, -1), restrictions(100, 100, 20, 20, 20)),
                    sla(priorities[6].first, "provider-IFCA-LCG2", priorities[6].second,
                        restrictions(10, 10, 1, 3, -1), restrictions(20, 5, 10, 10, 5))};
  json mesos = metrics({{"master.cpus_percent", 0.0625}, {"master.slaves_active", 4}});
  json services = {
      {{"service_id", s + "008587"}, {"type", "eu.indigo-datacloud.mesos"}, {"metrics", mesos}},
      {{"service_id", s + "008e72"}, {"type", "eu.indigo-datacloud.mesos"}, {"metrics", mesos}},
      {{"service_id", s + "0022ce"},
       {"type", "IaaS"},
       {"metrics",
        metrics({{"Openstack CreateVM Response Time", 612}, {"Openstack CreateVM Result", 200}})}},
      {{"service_id", s + "003aae"},
       {"type", "eu.indigo-datacloud.marathon"},
       {"metrics", operations(0, 0, 0, 0, 0, 0)}},
      {{"service_id", s + "0052b3"},
       {"type", "eu.indigo-datacloud.marathon"},
       {"metrics", operations(0, 0, 0, 0, 0, 0)}},
      {{"service_id", s + "004814"},
       {"type", "eu.indigo-datacloud.chronos"},
       {"metrics", operations(293, 1, 93, 0, 0, 0)}},
      {{"service_id", s + "005a71"},
       {"type", "eu.indigo-datacloud.chronos"},
       {"metrics", operations(39, 1, 25, 1, 27, 1)}}};
  request["monitoring"] = {{{"provider", kBari}, {"services", services}}};
  return request;
}

TEST(CprTest, TheControllerFixtureGetsCprsOwnAnswer) {
  // cpr-response.json, as CPR wrote it.
  const json want = json::parse(R"([
    {"provider":"provider-RECAS-BARI","rank":-1,"ranked":false,"service_id":"eaa07cfcceb85cd11b8adacf35008587","sla_weight":null,"total_score":0.0},
    {"provider":"provider-RECAS-BARI","rank":-1,"ranked":false,"service_id":"eaa07cfcceb85cd11b8adacf35008e72","sla_weight":null,"total_score":0.0},
    {"provider":"provider-PSNC","rank":7,"ranked":true,"service_id":"99f82787b0522954505d2bc835008849","sla_weight":0.5,"total_score":7.316},
    {"provider":"provider-IFCA-LCG2","rank":6,"ranked":true,"service_id":"eaa07cfcceb85cd11b8adacf350066fe","sla_weight":0.5,"total_score":24.83},
    {"provider":"provider-RECAS-BARI","rank":5,"ranked":true,"service_id":"eaa07cfcceb85cd11b8adacf35004814","sla_weight":0.5,"total_score":218.1633},
    {"provider":"provider-RECAS-BARI","rank":4,"ranked":true,"service_id":"eaa07cfcceb85cd11b8adacf35003aae","sla_weight":0.5,"total_score":223.735},
    {"provider":"provider-RECAS-BARI","rank":3,"ranked":true,"service_id":"eaa07cfcceb85cd11b8adacf35005a71","sla_weight":0.5,"total_score":227.16348},
    {"provider":"provider-RECAS-BARI","rank":2,"ranked":true,"service_id":"eaa07cfcceb85cd11b8adacf350052b3","sla_weight":0.5,"total_score":227.47},
    {"provider":"provider-RECAS-BARI","rank":1,"ranked":true,"service_id":"eaa07cfcceb85cd11b8adacf350022ce","sla_weight":0.5,"total_score":241.892}])");
  auto ranks = cpr_rank(fixture_request());
  ASSERT_TRUE(ranks.ok()) << ranks.error().message();
  EXPECT_EQ(cpr_rank_json(*ranks), want);
  // And as text: the scores print as CPR prints them.
  EXPECT_EQ(cpr_rank_json(*ranks).dump(), want.dump());
}

// ServiceComparatorTest: the weight decides before the score; equal weights go by score.
TEST(CprTest, TheWeightComesBeforeTheScore) {
  json request = fixture_request();
  // PSNC's SLA, the lowest score, weighs most.
  request["preferences"][0]["priority"][5]["weight"] = 100;
  auto ranks = cpr_rank(request);
  ASSERT_TRUE(ranks.ok()) << ranks.error().message();
  EXPECT_EQ(ranks->back().provider, "provider-PSNC");
  EXPECT_EQ(ranks->back().rank, 1);
  EXPECT_EQ((*ranks)[ranks->size() - 2].service_id, std::string(kService) + "0022ce");
  EXPECT_EQ((*ranks)[ranks->size() - 2].rank, 2);
}

// The rules as CPR wrote them, quirks kept: an unknown target type reuses the factor before
// it; Mesos counts the metric names CPR reads; a missing metric ends the score there.
TEST(CprTest, TheRulesQuirksAreCprs) {
  json request = json::parse(R"({
    "preferences": [{"service_type": "compute", "priority": [
      {"sla_id": "a", "service_id": "s1", "weight": 1},
      {"sla_id": "a", "service_id": "s2", "weight": 1}]}],
    "sla": [{"id": "a", "provider": "P", "services": [
      {"service_id": "s1", "targets": [
        {"type": "computing_time", "restrictions": {"total_limit": 1000}},
        {"type": "disk", "restrictions": {"total_limit": 1000}}]},
      {"service_id": "s2", "targets": []}]}],
    "monitoring": [{"provider": "P", "services": [
      {"service_id": "m", "type": "eu.indigo-datacloud.mesos", "metrics": [
        {"metricName": "master.cpu_total", "metricValue": 64},
        {"metricName": "master.cpu_used", "metricValue": 16},
        {"metricName": "master.gpus_total", "metricValue": 8},
        {"metricName": "master.mem_total", "metricValue": 4096},
        {"metricName": "master.mem_used", "metricValue": 2048}]},
      {"service_id": "s2", "service_parent_id": "m", "type": "eu.indigo-datacloud.marathon",
       "metrics": [{"metricName": "create_result", "metricValue": 1},
                   {"metricName": "create_responseTime", "metricValue": 50}]}]}]})");
  auto ranks = cpr_rank(request);
  ASSERT_TRUE(ranks.ok()) << ranks.error().message();
  ASSERT_EQ(ranks->size(), 3U);
  // m: 48 free CPUs + 2 GiB free memory; no SLA, so unranked.
  EXPECT_EQ((*ranks)[0], (CprRank{"P", "m", std::nullopt, 50.0F, -1, false}));
  // s1: both targets at computing_time's factor.
  EXPECT_EQ((*ranks)[1], (CprRank{"P", "s1", 1.0F, 0.0166F * 1000 + 0.0166F * 1000, 2, true}));
  // s2: an SLA of no targets (0), its create (100 / 50) stops at the missing run_result,
  // and its parent's 50.
  EXPECT_EQ((*ranks)[2], (CprRank{"P", "s2", 1.0F, 52.0F, 1, true}));
}

TEST(CprTest, WhatCprFailsOnIsAnErrorNamingTheField) {
  struct Case {
    json request;
    std::string message;
  };
  json prio = json::parse(R"({"preferences": [{"service_type": "compute",
      "priority": [{"sla_id": "x", "service_id": "s", "weight": 1}]}]})");
  json no_service = prio;
  no_service["sla"] = json::parse(R"([{"id": "x", "services": []}])");
  json dup = json::parse(R"({"monitoring": [{"services": [{"service_id": "m", "metrics": [
      {"metricName": "run_result", "metricValue": 1},
      {"metricName": "run_result", "metricValue": 0}]}]}]})");
  json no_metrics = json::parse(R"({"monitoring": [{"services": [{"service_id": "m"}]}]})");
  for (const Case& c : std::vector<Case>{
           {json::array(), "parse rank request: it is not a JSON object"},
           {prio,
            "parse rank request: preferences[0].priority[0].sla_id: \"x\" is not the id "
            "of an SLA"},
           {no_service,
            "parse rank request: preferences[0].priority[0].service_id: \"s\" is "
            "not a service of SLA \"x\""},
           {dup,
            "parse rank request: monitoring[0].services[0].metrics[1].metricName: "
            "\"run_result\" is named twice"},
           {no_metrics, "parse rank request: monitoring[0].services[0].metrics: must be a list"}}) {
    auto r = cpr_rank(c.request);
    ASSERT_FALSE(r.ok()) << c.request.dump();
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidInput);
    EXPECT_EQ(r.error().message(), c.message);
  }
}

// docs/broker.md's example.
TEST(CprTest, TheDocsExample) {
  auto r = cpr_rank(json::parse(R"({"preferences": [{"service_type": "compute", "priority": [
   {"sla_id": "sla-1", "service_id": "svc-1", "weight": 0.5}]}],
 "sla": [{"id": "sla-1", "provider": "provider-RECAS-BARI", "services": [
   {"service_id": "svc-1", "targets": [
     {"type": "public_ip", "restrictions": {"total_guaranteed": 100, "user_limit": 10}},
     {"type": "computing_time", "unit": "h", "restrictions": {"total_limit": 1000}}]}]}],
 "monitoring": [{"provider": "provider-RECAS-BARI", "services": [
   {"service_id": "svc-1", "type": "eu.indigo-datacloud.chronos", "metrics": [
     {"metricName": "create_result", "metricValue": 1},
     {"metricName": "create_responseTime", "metricValue": 39}]}]}]})"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(cpr_rank_json(*r).dump(),
            R"([{"provider":"provider-RECAS-BARI","rank":1,"ranked":true,"service_id":"svc-1",)"
            R"("sla_weight":0.5,"total_score":129.16411}])");
}

TEST(CprTest, AnEmptyRequestRanksNothing) {
  auto r = cpr_rank(json::object());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(cpr_rank_json(*r), json::array());
}

}  // namespace
}  // namespace berth::broker

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "gateway/server.h"

namespace berth::gateway {
namespace {

const Server::Route* find_route(HttpMethod method, const std::string& pattern) {
  for (const Server::Route& r : Server::route_table())
    if (r.method == method && pattern == r.pattern) return &r;
  return nullptr;
}

TEST(GatewayServer, EveryRouteIsOneRowWithAHandler) {
  std::set<std::pair<HttpMethod, std::string>> seen;
  for (const Server::Route& r : Server::route_table()) {
    ASSERT_NE(r.pattern, nullptr);
    SCOPED_TRACE(r.pattern);
    EXPECT_TRUE(r.handler != nullptr);
    EXPECT_TRUE(seen.insert({r.method, r.pattern}).second) << "two rows for one method and path";
    // An administrators' route says what it tells the others; an open one reads no setting.
    EXPECT_EQ(r.access == Access::kAdmin, r.refusal != nullptr);
    if (r.access == Access::kAnyone) {
      EXPECT_TRUE(r.open_if == nullptr);
    }
    for (const ErrorStatus& s : r.errors.codes) EXPECT_GE(s.status, 400);
  }
  EXPECT_GE(seen.size(), 13U);
}

TEST(GatewayServer, RoutesKeepTheirOwnErrorStatuses) {
  using M = HttpMethod;
  using E = ErrorCode;
  struct Case {
    M method;
    const char* pattern;
    E code;
    int status;
  };
  const Case cases[] = {
      {M::kPost, "/v1/jobs", E::kExists, 422},  // a reused Idempotency-Key, another body
      {M::kPost, "/v1/jobs", E::kBusy, 503},    // sacct unreadable for the quota check
      {M::kPost, "/v1/jobs", E::kNetwork, 500},
      {M::kGet, "/v1/jobs", E::kBusy, 500},
      {M::kGet, R"(/v1/jobs/([^/]+))", E::kOther, 502},
      {M::kDelete, R"(/v1/jobs/([^/]+))", E::kNotFound, 502},
      {M::kGet, R"(/v1/jobs/([^/]+)/output)", E::kNotFound, 404},  // no output_dir
      {M::kGet, R"(/v1/jobs/([^/]+)/output)", E::kBusy, 500},
      {M::kGet, "/v1/resources", E::kOther, 502},
      {M::kGet, "/v1/accounting", E::kBusy, 503},
      {M::kGet, "/v1/accounting", E::kInvalidInput, 500},
  };
  for (const Case& c : cases) {
    const Server::Route* r = find_route(c.method, c.pattern);
    ASSERT_NE(r, nullptr) << c.pattern;
    EXPECT_EQ(http_status(c.code, r->errors), c.status) << c.pattern;
  }
}

TEST(GatewayServer, WhatEachRouteNeeds) {
  using M = HttpMethod;
  EXPECT_EQ(find_route(M::kGet, "/v1/health")->access, Access::kAnyone);
  EXPECT_EQ(find_route(M::kGet, "/v1/me")->access, Access::kToken);
  EXPECT_EQ(find_route(M::kGet, "/v1/orphans")->access, Access::kAdmin);
  const Server::Route* metrics = find_route(M::kGet, "/metrics");
  EXPECT_EQ(metrics->access, Access::kAdmin);
  EXPECT_TRUE(metrics->open_if == &PublishConfig::metrics_public);
  EXPECT_EQ(metrics->needs, Needs::kNothing);
  EXPECT_TRUE(find_route(M::kGet, "/v1/resources")->open_if == &PublishConfig::resources_public);
  // A broker's jobs are served on the same paths as a gateway's.
  EXPECT_EQ(find_route(M::kPost, "/v1/jobs")->needs, Needs::kJobsOrBrokered);
  EXPECT_EQ(find_route(M::kGet, "/v1/systems")->needs, Needs::kJobs);
  EXPECT_EQ(find_route(M::kPost, "/v1/placements")->needs, Needs::kBroker);
  EXPECT_EQ(find_route(M::kGet, "/v1/sites")->needs, Needs::kBroker);
  EXPECT_EQ(find_route(M::kGet, "/v1/me")->needs, Needs::kNothing);
}

TEST(GatewayServer, TheOpenApiDocumentListsTheStatusesEachRouteAnswers) {
  nlohmann::ordered_json doc = openapi_document("test");
  for (const Server::Route& r : Server::route_table()) {
    // The route's pattern as an OpenAPI path: its one group is the job's {id}.
    std::string path = r.pattern;
    if (size_t group = path.find("([^/]+)"); group != std::string::npos)
      path.replace(group, 7, "{id}");
    const char* method = r.method == HttpMethod::kGet    ? "get"
                         : r.method == HttpMethod::kPost ? "post"
                                                         : "delete";
    SCOPED_TRACE(std::string(method) + " " + path);
    ASSERT_TRUE(doc["paths"].contains(path));
    ASSERT_TRUE(doc["paths"][path].contains(method));
    const auto& responses = doc["paths"][path][method]["responses"];
    // Any request may meet the connection limits (408 past request_timeout_s; 503 over
    // max_per_address or max_queued), and a route's own error statuses are its answers too.
    std::set<std::string> statuses = {"408", "503"};
    for (const ErrorStatus& e : r.errors.codes) statuses.insert(std::to_string(e.status));
    if (r.access != Access::kAnyone) statuses.insert({"401", "403"});
    for (const std::string& status : statuses) EXPECT_TRUE(responses.contains(status)) << status;
  }
}

}  // namespace
}  // namespace berth::gateway

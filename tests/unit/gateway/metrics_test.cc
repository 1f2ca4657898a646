#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "gateway/metrics.h"

namespace berth::gateway {
namespace {

TEST(GatewayMetrics, ValuesAndLabelsAreWrittenAsTheFormatAsks) {
  EXPECT_EQ(render_value(3), "3");
  EXPECT_EQ(render_value(0.25), "0.25");
  EXPECT_EQ(render_value(0.005), "0.005");
  EXPECT_EQ(render_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(render_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(render_value(std::nan("")), "NaN");
  EXPECT_EQ(render_labels({}), "");
  // Sorted by name; backslash, quote and newline escaped.
  EXPECT_EQ(render_labels({{"z", "1"}, {"a", "x\\y\"z\nw"}}), R"({a="x\\y\"z\nw",z="1"})");
}

TEST(GatewayMetrics, CountersGaugesAndHistogramsRender) {
  Metrics m;
  m.declare("berthd_requests_total", Metrics::Type::kCounter, "Requests served.");
  m.declare("berthd_jobs", Metrics::Type::kGauge, "Jobs by state.");
  m.declare("berthd_latency_seconds", Metrics::Type::kHistogram, "Latency.", {0.01, 0.1});
  m.declare("berthd_unused_total", Metrics::Type::kCounter, "Declared, never counted.");
  m.add("berthd_requests_total", {{"route", "/v1/jobs"}, {"status", "200"}});
  m.add("berthd_requests_total", {{"status", "200"}, {"route", "/v1/jobs"}}, 2);
  m.add("berthd_requests_total", {{"route", "/v1/me"}, {"status", "401"}});
  m.set("berthd_jobs", {{"state", "RUNNING"}}, 4);
  m.set("berthd_jobs", {{"state", "RUNNING"}}, 5);
  m.observe("berthd_latency_seconds", {{"route", "/v1/jobs"}}, 0.004);
  m.observe("berthd_latency_seconds", {{"route", "/v1/jobs"}}, 0.05);
  m.observe("berthd_latency_seconds", {{"route", "/v1/jobs"}}, 3);
  int scrapes = 0;
  m.on_scrape([&scrapes](Metrics& self) {
    self.set("berthd_jobs", {{"state", "PENDING"}}, ++scrapes);
  });
  EXPECT_EQ(m.render(),
            "# HELP berthd_jobs Jobs by state.\n"
            "# TYPE berthd_jobs gauge\n"
            "berthd_jobs{state=\"PENDING\"} 1\n"
            "berthd_jobs{state=\"RUNNING\"} 5\n"
            "# HELP berthd_latency_seconds Latency.\n"
            "# TYPE berthd_latency_seconds histogram\n"
            "berthd_latency_seconds_bucket{route=\"/v1/jobs\",le=\"0.01\"} 1\n"
            "berthd_latency_seconds_bucket{route=\"/v1/jobs\",le=\"0.1\"} 2\n"
            "berthd_latency_seconds_bucket{route=\"/v1/jobs\",le=\"+Inf\"} 3\n"
            "berthd_latency_seconds_sum{route=\"/v1/jobs\"} 3.054\n"
            "berthd_latency_seconds_count{route=\"/v1/jobs\"} 3\n"
            "# HELP berthd_requests_total Requests served.\n"
            "# TYPE berthd_requests_total counter\n"
            "berthd_requests_total{route=\"/v1/jobs\",status=\"200\"} 3\n"
            "berthd_requests_total{route=\"/v1/me\",status=\"401\"} 1\n"
            "# HELP berthd_unused_total Declared, never counted.\n"
            "# TYPE berthd_unused_total counter\n");
  EXPECT_NE(m.render().find("berthd_jobs{state=\"PENDING\"} 2\n"), std::string::npos);
}

TEST(GatewayMetrics, ConcurrentCountsAreAllKept) {
  Metrics m;
  m.declare("c_total", Metrics::Type::kCounter, "c");
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&m] {
      for (int i = 0; i < 1000; ++i) m.add("c_total", {{"k", "v"}});
    });
  for (auto& t : threads) t.join();
  EXPECT_NE(m.render().find("c_total{k=\"v\"} 8000\n"), std::string::npos);
}

}  // namespace
}  // namespace berth::gateway

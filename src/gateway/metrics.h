#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace berth::gateway {

/// Label pairs of one series, in the order given (rendered sorted by name).
using Labels = std::vector<std::pair<std::string, std::string>>;

/// berthd's metrics, rendered in Prometheus' text exposition format (version 0.0.4) for
/// `GET /metrics`. Families are declared once with their type and help; series appear as they
/// are first counted. Safe to use from the server's threads at once.
class Metrics {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  /// Declares a family. A histogram's `buckets` are upper bounds in ascending order (+Inf is
  /// implied). Declaring a name twice keeps the first declaration.
  void declare(const std::string& name, Type type, const std::string& help,
               std::vector<double> buckets = {});

  /// Adds `by` (>= 0) to a counter's series.
  void add(const std::string& name, const Labels& labels, double by = 1);
  /// Sets a gauge's series.
  void set(const std::string& name, const Labels& labels, double value);
  /// Records one observation in a histogram's series.
  void observe(const std::string& name, const Labels& labels, double value);

  /// A function run at each scrape to refresh gauges that are cheaper to compute on demand
  /// (jobs by state from the database, GPUs from the last sample). It may call set().
  void on_scrape(std::function<void(Metrics&)> refresh);

  /// The exposition text: every declared family, HELP and TYPE lines, series sorted.
  std::string render();

 private:
  struct Series {
    double value = 0;                               // counter, gauge
    std::vector<unsigned long long> bucket_counts;  // histogram, not cumulative
    double sum = 0;
    unsigned long long count = 0;
  };
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> buckets;
    std::map<std::string, Series> series;  // by rendered label set
  };
  Series& series_of(const std::string& name, const Labels& labels, Type want);

  std::mutex mu_;
  std::map<std::string, Family> families_;
  std::vector<std::function<void(Metrics&)>> refreshers_;
};

/// The route of a request path, for a bounded label: "/v1/jobs/{id}" for "/v1/jobs/12",
/// "other" for anything berthd does not serve.
std::string route_label(std::string_view path);

/// Why a token was refused, as a short fixed word for a label (missing, not_bearer, malformed,
/// algorithm, signature, unknown_key, issuer, audience, expired, not_yet_valid, scope, claims,
/// unmapped for a 403, invalid otherwise), from an AuthFailure's status and message.
std::string token_failure_reason(int status, std::string_view message);

/// `{a="x",b="y"}` with label names sorted and values escaped as the format asks (\\, \", \n);
/// empty for no labels.
std::string render_labels(Labels labels);

/// A sample value as the format writes it: integers without a fraction, +Inf/-Inf/NaN spelled so.
std::string render_value(double v);

}  // namespace berth::gateway

#include "gateway/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace berth::gateway {

std::string render_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // the shortest exact form
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

std::string render_labels(Labels labels) {
  if (labels.empty()) return "";
  std::stable_sort(labels.begin(), labels.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    out += labels[i].first;
    out += "=\"";
    for (char c : labels[i].second) {
      if (c == '\\')
        out += "\\\\";
      else if (c == '"')
        out += "\\\"";
      else if (c == '\n')
        out += "\\n";
      else
        out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string route_label(std::string_view path) {
  static const char* const kFixed[] = {"/v1/health",     "/v1/openapi.json", "/v1/me",
                                       "/v1/systems",    "/v1/jobs",         "/v1/resources",
                                       "/v1/accounting", "/v1/orphans",      "/metrics"};
  for (const char* r : kFixed)
    if (path == r) return r;
  constexpr std::string_view kJobs = "/v1/jobs/";
  if (!path.starts_with(kJobs)) return "other";
  std::string_view rest = path.substr(kJobs.size());
  size_t slash = rest.find('/');
  std::string_view id = rest.substr(0, slash);
  if (id.empty() || id.find_first_not_of("0123456789") != std::string_view::npos) return "other";
  if (slash == std::string_view::npos) return "/v1/jobs/{id}";
  return rest.substr(slash) == "/output" ? "/v1/jobs/{id}/output" : "other";
}

std::string token_failure_reason(int status, std::string_view m) {
  if (status == 403) return "unmapped";
  auto has = [&m](std::string_view w) { return m.find(w) != std::string_view::npos; };
  if (has("no bearer token")) return "missing";
  if (has("not a bearer token")) return "not_bearer";
  if (has("not a signed JWT") || has("longer than")) return "malformed";
  if (has("algorithm")) return "algorithm";
  if (has("has no key") || has("names no key") || has("keys of issuer")) return "unknown_key";
  if (has("signature") || has("\" is for ")) return "signature";
  if (has("issuer")) return "issuer";
  if (has("audience")) return "audience";
  if (has("expired") || has("no expiry")) return "expired";
  if (has("nbf")) return "not_yet_valid";
  if (has("scope")) return "scope";
  if (has("subject")) return "claims";
  return "invalid";
}

void Metrics::declare(const std::string& name, Type type, const std::string& help,
                      std::vector<double> buckets) {
  std::lock_guard lock(mu_);
  if (families_.contains(name)) return;
  Family f;
  f.type = type;
  f.help = help;
  f.buckets = std::move(buckets);
  families_.emplace(name, std::move(f));
}

Metrics::Series& Metrics::series_of(const std::string& name, const Labels& labels, Type want) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    // Undeclared: made here so that a forgotten declaration shows (with an empty help) rather
    // than losing the samples.
    it = families_.emplace(name, Family{want, "", {}, {}}).first;
  }
  Family& f = it->second;
  Series& s = f.series[render_labels(labels)];
  if (f.type == Type::kHistogram && s.bucket_counts.size() != f.buckets.size())
    s.bucket_counts.assign(f.buckets.size(), 0);
  return s;
}

void Metrics::add(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mu_);
  series_of(name, labels, Type::kCounter).value += by;
}

void Metrics::set(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  series_of(name, labels, Type::kGauge).value = value;
}

void Metrics::observe(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mu_);
  Series& s = series_of(name, labels, Type::kHistogram);
  const auto& bounds = families_[name].buckets;
  for (size_t i = 0; i < bounds.size(); ++i)
    if (value <= bounds[i]) {
      ++s.bucket_counts[i];
      break;
    }
  s.sum += value;
  ++s.count;
}

void Metrics::on_scrape(std::function<void(Metrics&)> refresh) {
  std::lock_guard lock(mu_);
  refreshers_.push_back(std::move(refresh));
}

namespace {

/// `{a="x"}` + `le="0.5"` → `{a="x",le="0.5"}`: the bucket label joins the series' own.
std::string with_le(const std::string& labels, const std::string& le) {
  std::string pair = "le=\"" + le + "\"";
  if (labels.empty()) return "{" + pair + "}";
  return labels.substr(0, labels.size() - 1) + "," + pair + "}";
}

const char* type_name(Metrics::Type t) {
  switch (t) {
    case Metrics::Type::kCounter:
      return "counter";
    case Metrics::Type::kGauge:
      return "gauge";
    case Metrics::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string Metrics::render() {
  std::vector<std::function<void(Metrics&)>> refreshers;
  {
    std::lock_guard lock(mu_);
    refreshers = refreshers_;
  }
  for (auto& r : refreshers) r(*this);  // outside the lock: they call set()
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    std::string help;
    for (char c : f.help)
      help += c == '\n' ? std::string("\\n") : c == '\\' ? std::string("\\\\") : std::string(1, c);
    out.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(type_name(f.type)).append("\n");
    for (const auto& [labels, s] : f.series) {
      if (f.type != Type::kHistogram) {
        out.append(name).append(labels).append(" ").append(render_value(s.value)).append("\n");
        continue;
      }
      unsigned long long cumulative = 0;
      for (size_t i = 0; i < f.buckets.size(); ++i) {
        cumulative += s.bucket_counts[i];
        out.append(name).append("_bucket").append(with_le(labels, render_value(f.buckets[i])));
        out.append(" ").append(std::to_string(cumulative)).append("\n");
      }
      out.append(name).append("_bucket").append(with_le(labels, "+Inf"));
      out.append(" ").append(std::to_string(s.count)).append("\n");
      out.append(name)
          .append("_sum")
          .append(labels)
          .append(" ")
          .append(render_value(s.sum))
          .append("\n");
      out.append(name).append("_count").append(labels).append(" ");
      out.append(std::to_string(s.count)).append("\n");
    }
  }
  return out;
}

}  // namespace berth::gateway

// CloudProviderRanker's ranking, recomputed (broker/cpr.h).
#include "broker/cpr.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace berth::broker {
namespace {

Error bad(const std::string& path, const std::string& what) {
  return make_error("parse", "rank request", path + ": " + what, ErrorCode::kInvalidInput);
}

/// A list CPR reads, absent or null read as empty.
Result<const nlohmann::json*> list_at(const nlohmann::json& j, const char* key,
                                      const std::string& path) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return &kEmpty;
  if (!it->is_array()) return bad(path + key, "must be a list");
  return &*it;
}

Result<std::string> text_at(const nlohmann::json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::string();
  if (!it->is_string()) return bad(path + key, "must be a string");
  return it->get<std::string>();
}

/// Whether `j` is an object whose `key` is the string `want`.
bool names(const nlohmann::json& j, const char* key, const std::string& want) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_string() && it->get<std::string>() == want;
}

std::string at(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

/// One restriction of a target, or nothing where CPR's sum throws (a null number).
struct Target {
  std::string type;
  bool has_type = false;
  bool has_restrictions = false;
  std::map<std::string, std::optional<float>> restrictions;
};

/// What CPR's RankedService holds, as its rules read it.
struct Service {
  std::string provider, service_id, type, parent_id;
  bool has_type = false;
  std::optional<std::vector<Target>> targets;
  std::optional<std::map<std::string, float>> metrics;
  std::optional<float> sla_weight;
  std::optional<float> sla_score, metrics_score;
  float total = 0;
  bool ranked = false;
};

Result<std::vector<Target>> read_targets(const nlohmann::json& j, const std::string& path) {
  std::vector<Target> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = at(path, i);
    if (!j[i].is_object()) return bad(p, "must be an object");
    Target t;
    if (auto type = j[i].find("type"); type != j[i].end() && !type->is_null()) {
      if (!type->is_string()) return bad(p + ".type", "must be a string");
      t.type = type->get<std::string>();
      t.has_type = true;
    }
    if (auto r = j[i].find("restrictions"); r != j[i].end() && !r->is_null()) {
      if (!r->is_object()) return bad(p + ".restrictions", "must be an object");
      t.has_restrictions = true;
      for (const auto& [key, v] : r->items()) {
        if (v.is_null()) {
          t.restrictions[key] = std::nullopt;
        } else if (v.is_number()) {
          t.restrictions[key] = static_cast<float>(v.get<double>());
        } else {
          return bad(std::string(p).append(".restrictions.").append(key), "must be a number");
        }
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::map<std::string, float>> read_metrics(const nlohmann::json& j,
                                                  const std::string& path) {
  if (!j.is_array()) return bad(path, "must be a list");
  std::map<std::string, float> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = at(path, i);
    if (!j[i].is_object()) return bad(p, "must be an object");
    std::string name = BERTH_TRY(text_at(j[i], "metricName", p + "."));
    auto v = j[i].find("metricValue");
    if (v == j[i].end() || !v->is_number()) return bad(p + ".metricValue", "must be a number");
    if (!out.emplace(name, static_cast<float>(v->get<double>())).second)
      return bad(p + ".metricName", "\"" + name + "\" is named twice");
  }
  return out;
}

/// SlaScoreRule.drl: the factor is set per known target type and kept for an unknown one;
/// a target without a type or restrictions, or a null restriction, ends the sum there.
float sla_score(const std::vector<Target>& targets) {
  float score = 0.0F;
  float factor = 1.0F;
  for (const Target& t : targets) {
    if (!t.has_type) break;
    if (t.type == "computing_time") factor = 0.0166F;
    if (t.type == "public_ip") factor = 1.0F;
    if (!t.has_restrictions) break;
    float sum = 0.0F;
    bool broke = false;
    for (const char* key : {"total_guaranteed", "total_limit", "user_guaranteed", "user_limit",
                            "instance_guaranteed", "instance_limit"}) {
      auto it = t.restrictions.find(key);
      if (it == t.restrictions.end()) continue;  // getOrDefault's 0
      if (!it->second) {
        broke = true;
        break;
      }
      sum += *it->second;
    }
    if (broke) break;
    score += factor * sum;
  }
  return score;
}

/// MetricsScoreRule.drl for Marathon, Chronos and Nova: each good operation adds 100 (10 for
/// delete) over its response time, in double precision, stored in single. A metric the rule
/// reads missing ends the score there.
float operations_score(const std::map<std::string, float>& m) {
  float score = 0.0F;
  for (const auto& [op, weight] :
       {std::pair{"create", 100.0}, std::pair{"run", 100.0}, std::pair{"delete", 10.0}}) {
    auto result = m.find(std::string(op) + "_result");
    if (result == m.end()) break;
    if (result->second != 1) continue;
    auto time = m.find(std::string(op) + "_responseTime");
    if (time == m.end()) break;
    if (time->second == 0) continue;
    score = static_cast<float>(score + 1.0 / time->second * weight);
  }
  return score;
}

/// MetricsScoreRule.drl for Mesos: free CPUs, GPUs and memory (per 1024), by the names CPR
/// reads (which the orchestrator's monitoring does not send: research/broker.md 1.2).
float mesos_score(const std::map<std::string, float>& m) {
  float score = 0.0F;
  auto freed = [&m](const char* total, const char* used) -> std::optional<float> {
    auto t = m.find(total);
    auto u = m.find(used);
    if (t == m.end() || u == m.end()) return std::nullopt;
    return t->second - u->second;
  };
  if (auto f = freed("master.cpu_total", "master.cpu_used")) score += *f;
  if (auto f = freed("master.gpu_total", "master.gpu_used")) score += *f;
  if (auto f = freed("master.mem_total", "master.mem_used")) score += *f / 1024;
  return score;
}

std::optional<float> metrics_score(const Service& s) {
  if (!s.metrics || !s.has_type) return std::nullopt;
  if (s.type == "eu.indigo-datacloud.marathon" || s.type == "eu.indigo-datacloud.chronos" ||
      s.type == "org.openstack.nova")
    return operations_score(*s.metrics);
  if (s.type == "eu.indigo-datacloud.mesos") return mesos_score(*s.metrics);
  return std::nullopt;
}

/// The shortest decimal that reads back as `f`, as a double (what CPR's JSON shows).
double shortest(float f) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf - 1, f);
  if (ec != std::errc()) return f;
  *end = '\0';
  return std::strtod(buf, nullptr);
}

Status read_preferences(const nlohmann::json& request, const nlohmann::json& slas,
                        std::map<std::string, Service>& services) {
  const nlohmann::json& prefs = *BERTH_TRY(list_at(request, "preferences", ""));
  for (size_t i = 0; i < prefs.size(); ++i) {
    const std::string p = at("preferences", i);
    if (!prefs[i].is_object()) return bad(p, "must be an object");
    std::string type = BERTH_TRY(text_at(prefs[i], "service_type", p + "."));
    const nlohmann::json& priorities = *BERTH_TRY(list_at(prefs[i], "priority", p + "."));
    for (size_t k = 0; k < priorities.size(); ++k) {
      const std::string q = at(p + ".priority", k);
      const nlohmann::json& prio = priorities[k];
      if (!prio.is_object()) return bad(q, "must be an object");
      std::string sla_id = BERTH_TRY(text_at(prio, "sla_id", q + "."));
      std::string service_id = BERTH_TRY(text_at(prio, "service_id", q + "."));
      size_t n = 0;
      while (n < slas.size() && !names(slas[n], "id", sla_id)) ++n;
      if (n == slas.size()) return bad(q + ".sla_id", "\"" + sla_id + "\" is not the id of an SLA");
      const nlohmann::json* sla = &slas[n];
      const std::string sp = at("sla", n);
      const nlohmann::json& in_sla = *BERTH_TRY(list_at(*sla, "services", sp + "."));
      size_t m = 0;
      while (m < in_sla.size() && !names(in_sla[m], "service_id", service_id)) ++m;
      if (m == in_sla.size())
        return bad(q + ".service_id", std::string("\"")
                                          .append(service_id)
                                          .append("\" is not a service of SLA \"")
                                          .append(sla_id)
                                          .append("\""));
      auto weight = prio.find("weight");
      if (weight == prio.end() || !weight->is_number())
        return bad(q + ".weight", "must be a number");
      Service s;  // a later priority of the same service replaces it, as in CPR
      s.service_id = service_id;
      s.type = type;
      s.has_type = prefs[i].contains("service_type") && !prefs[i]["service_type"].is_null();
      s.provider = BERTH_TRY(text_at(*sla, "provider", sp + "."));
      s.sla_weight = static_cast<float>(weight->get<double>());
      const nlohmann::json* service = &in_sla[m];
      const std::string tp = at(sp + ".services", m) + ".targets";
      if (auto t = service->find("targets"); t != service->end() && !t->is_null()) {
        if (!t->is_array()) return bad(tp, "must be a list");
        s.targets = BERTH_TRY(read_targets(*t, tp));
      }
      services[service_id] = std::move(s);
    }
  }
  return {};
}

Status read_monitoring(const nlohmann::json& request, std::map<std::string, Service>& services) {
  const nlohmann::json& providers = *BERTH_TRY(list_at(request, "monitoring", ""));
  for (size_t i = 0; i < providers.size(); ++i) {
    const std::string p = at("monitoring", i);
    if (!providers[i].is_object()) return bad(p, "must be an object");
    std::string provider = BERTH_TRY(text_at(providers[i], "provider", p + "."));
    const nlohmann::json& list = *BERTH_TRY(list_at(providers[i], "services", p + "."));
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string q = at(p + ".services", k);
      const nlohmann::json& m = list[k];
      if (!m.is_object()) return bad(q, "must be an object");
      std::string id = BERTH_TRY(text_at(m, "service_id", q + "."));
      Service& s = services[id];
      s.service_id = id;
      s.provider = provider;
      auto metrics = m.find("metrics");
      if (metrics == m.end() || metrics->is_null()) return bad(q + ".metrics", "must be a list");
      s.metrics = BERTH_TRY(read_metrics(*metrics, q + ".metrics"));
      s.type = BERTH_TRY(text_at(m, "type", q + "."));
      s.has_type = m.contains("type") && !m["type"].is_null();
      s.parent_id = BERTH_TRY(text_at(m, "service_parent_id", q + "."));
    }
  }
  return {};
}

}  // namespace

Result<std::vector<CprRank>> cpr_rank(const nlohmann::json& request) {
  if (!request.is_object())
    return make_error("parse", "rank request", "it is not a JSON object", ErrorCode::kInvalidInput);
  const nlohmann::json& slas = *BERTH_TRY(list_at(request, "sla", ""));
  std::map<std::string, Service> services;
  BERTH_CHECK(read_preferences(request, slas, services));
  BERTH_CHECK(read_monitoring(request, services));

  for (auto& [id, s] : services) {
    if (s.targets) s.sla_score = sla_score(*s.targets);
    s.metrics_score = metrics_score(s);
  }
  for (auto& [id, s] : services) {
    float total = s.sla_score.value_or(0) + s.metrics_score.value_or(0);
    if (!s.parent_id.empty())
      if (auto parent = services.find(s.parent_id); parent != services.end())
        total += parent->second.sla_score.value_or(0) + parent->second.metrics_score.value_or(0);
    s.total = total;
    s.ranked = total != 0 && s.sla_score.has_value();
  }

  std::vector<const Service*> order;
  order.reserve(services.size());
  for (const auto& [id, s] : services) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const Service* a, const Service* b) {
    return std::make_tuple(a->sla_weight.value_or(0), a->total) <
           std::make_tuple(b->sla_weight.value_or(0), b->total);
  });
  int rank = static_cast<int>(
      std::count_if(order.begin(), order.end(), [](const Service* s) { return s->ranked; }));
  std::vector<CprRank> out;
  for (const Service* s : order) {
    CprRank r{s->provider, s->service_id, s->sla_weight, s->total, -1, s->ranked};
    if (s->ranked) r.rank = rank--;
    out.push_back(std::move(r));
  }
  return out;
}

nlohmann::json cpr_rank_json(const std::vector<CprRank>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const CprRank& r : ranks)
    out.push_back({{"provider", r.provider},
                   {"service_id", r.service_id},
                   {"sla_weight", r.sla_weight ? nlohmann::json(shortest(*r.sla_weight))
                                               : nlohmann::json(nullptr)},
                   {"total_score", shortest(r.total_score)},
                   {"rank", r.rank},
                   {"ranked", r.ranked}});
  return out;
}

}  // namespace berth::broker

// INDIGO's CloudProviderRanker (CPR) answered by Berth (docs/broker.md, "POST /v1/rank";
// ../shared/research/broker.md 1.2): an INDIGO PaaS orchestrator that calls a ranker with its
// SLAM preferences, SLAs and Zabbix monitoring gets back CPR's own answer, so that Berth can
// stand where CPR stood. Pure: the request in, the ranked services out.
//
// CPR's steps, as its Drools rules and RankService compute them: one service per preference
// priority (its SLA's targets and weight), monitoring entries adding metrics, type and parent;
// an SLA score (the sum of a target's six restriction numbers times 0.0166 for computing_time,
// 1.0 for public_ip), a metrics score (Marathon, Chronos, Nova: 100 / response time of a good
// create and run, 10 / that of a good delete; Mesos: free CPUs + free GPUs + free memory /
// 1024); the total (plus the parent's); sorted ascending by (SLA weight, total); rank counting
// down to 1 for the best, -1 where unranked. In single precision, as CPR's Float fields are, so
// that the scores print as CPR prints them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace berth::broker {

/// One service of CPR's answer.
struct CprRank {
  std::string provider;
  std::string service_id;
  std::optional<float> sla_weight;  ///< none for a service only monitoring names
  float total_score = 0;
  int rank = -1;  ///< 1 is the best; -1 where not ranked
  bool ranked = false;
  bool operator==(const CprRank&) const = default;
};

/// Ranks CPR's request {preferences, sla, monitoring} as CPR does, in CPR's order (worst
/// first). Where CPR breaks off scoring a service (a target without a type or restrictions,
/// a metric its rule needs missing), so does this; where CPR fails the request (a priority
/// naming no SLA or service, a metric without a value), this is an error naming the field:
/// `parse rank request: preferences[0].priority[1].sla_id: "x" is not the id of an SLA`.
/// Ties CPR leaves to its hash map's order go by service_id.
Result<std::vector<CprRank>> cpr_rank(const nlohmann::json& request);

/// CPR's answer as CPR writes it: [{provider, rank, ranked, service_id, sla_weight,
/// total_score}], each score the shortest decimal of its single-precision value.
nlohmann::json cpr_rank_json(const std::vector<CprRank>& ranks);

}  // namespace berth::broker

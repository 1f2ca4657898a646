// The broker's choice (docs/broker.md, "Choosing"): every (site, partition, node class) a job
// could go to, each fitted or rejected with the reasons why, the fitting ones scored and
// ranked. Pure: what the sites published and what the broker knows of them and of the caller
// come in, the ranked list goes out; POST /v1/placements answers it as placement_json() writes
// it, and submission walks it in order (failover).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/model.h"

namespace berth::broker {

/// What a site's own dry run (POST /v1/jobs?dry_run=1) said of the job on one of its classes.
struct SiteVerdict {
  std::string partition, cls;     ///< the class the site was asked about
  std::optional<Reason> refusal;  ///< the site refused it: the broker's code, the site's words
  bool whole_site = false;        ///< the refusal holds for every class (the caller's quota, ...)
  std::optional<int64_t> wait_s;  ///< the site's start estimate, seconds from now; nullopt: none
};

/// One site as the broker sees it for one caller: what it published (info) and what the
/// broker knows beside it. The caller's account fields come from the site's GET /v1/me.
struct SiteView {
  std::string name;
  std::string kind = "berthd";  ///< berthd, kubernetes, marathon, chronos, openstack, static
  SiteInfo info;
  bool up = true;               ///< answered its last poll
  bool fresh = true;            ///< info younger than the site's info_ttl_s
  bool issuer_trusted = true;   ///< the site takes the caller's token
  std::string refusal;          ///< where it does not: the site's reason, "" unknown
  bool group_allowed = true;    ///< the caller's group is among the site's groups
  bool shares = false;          ///< takes fractions of a GPU ([share] at a berthd)
  bool gpu_jobs = true;         ///< its backend runs GPU jobs (Marathon, Chronos: when it says so)
  double weight = 1;            ///< the site's weight for the caller's group
  double reliability = 1;       ///< 0..1: how often recent attempts there were taken and started
  int max_gpus_per_job = -1;    ///< the caller's limit there; -1 none
  int64_t max_walltime_s = -1;  ///< the caller's walltime limit there; -1 none
  double gpu_hours_left = -1;   ///< the caller's GPU-hour quota left there; -1 unlimited
  std::vector<SiteVerdict> asked;  ///< what its dry runs said of this job, class by class
  /// The verdict of its dry run on class `cls` of `partition`, nullptr where not asked.
  const SiteVerdict* verdict(const std::string& partition, const std::string& cls) const {
    for (const SiteVerdict& v : asked)
      if (v.partition == partition && v.cls == cls) return &v;
    return nullptr;
  }
};

/// How much each factor counts in a candidate's score (berthd's [broker.score]).
struct ScoreWeights {
  double start_now = 3, wait = 2, free = 1, fit = 1, preference = 2, reliability = 1;
};

/// Each factor in [0, 100].
struct Factors {
  double start_now = 0, wait = 0, free = 0, fit = 0, preference = 0, reliability = 0;
};

/// One place a job could go and the verdict on it. A rejection of the whole site (down,
/// stale, untrusted, ...) is one candidate with an empty partition and class.
struct Candidate {
  std::string site, partition, cls;
  std::string gpu_type;  ///< the class's GRES type, what a submission asks Slurm for
  bool fits = false;
  std::vector<Reason> reasons;  ///< why not; empty when it fits
  double score = 0;             ///< fitting candidates only
  Factors factors;              ///< fitting candidates only
};

/// The verdict on every candidate: the fitting ones first, best first (score, then site,
/// partition and class names: deterministic), then the rejected ones by name.
struct Placement {
  std::vector<Candidate> candidates;
  /// The best fitting candidate, nullptr where none fits.
  const Candidate* chosen() const {
    return !candidates.empty() && candidates.front().fits ? &candidates.front() : nullptr;
  }
};

/// Fits job requirement `need` to every class of every site of `sites` that `where` allows,
/// and ranks what fits with `weights`.
Placement place(const Requirement& need, const PlacementRequest& where,
                const std::vector<SiteView>& sites, const ScoreWeights& weights = {});

/// The answer of POST /v1/placements: {"chosen": {"site", "partition", "class"} or null,
/// "candidates": [{"site", "partition", "class", "verdict": "fit"|"rejected", "reasons":
/// [{"code", "message"}], "score", "factors": {...}}]}; a site's own rejection has null
/// partition and class, a rejected candidate null score and factors.
nlohmann::json placement_json(const Placement& p);

}  // namespace berth::broker

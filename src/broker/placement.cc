#include "broker/placement.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "broker/gpu_names.h"
#include "core/strings.h"
#include "devices/version.h"

namespace berth::broker {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

/// "2 GPUs", "1 GPU".
std::string count_of(int64_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

/// GiB with one decimal where it has one: 81920 -> "80GB", 143771 -> "140.4GB".
std::string gib(int64_t mib) {
  int64_t tenths = (mib * 10 + 512) / 1024;
  std::string out = std::to_string(tenths / 10);
  if (tenths % 10 != 0) out += "." + std::to_string(tenths % 10);
  return out + "GB";
}

/// What a class's GPUs are called in a message: its published model, else its GRES type.
std::string gpu_name_of(const NodeClass& c) {
  if (!c.gpu_model.empty()) return c.gpu_model;
  if (!c.gpu_type.empty()) return c.gpu_type;
  return "GPUs of no published model";
}

/// The vendor of a class's GPUs, lower case: as published, else from its model's name.
std::string vendor_of(const NodeClass& c) {
  if (!c.gpu_vendor.empty()) return lower(c.gpu_vendor);
  return gpu_vendor_of(canonical_gpu_name(c.gpu_model.empty() ? c.gpu_type : c.gpu_model));
}

/// The reasons a site as a whole cannot take the job.
std::vector<Reason> site_reasons(const Requirement& need, const PlacementRequest& where,
                                 const SiteView& s) {
  std::vector<Reason> out;
  if (contains(where.exclude, s.name))
    out.push_back({"excluded", "the job's placement.exclude names this site"});
  else if (!where.sites.empty() && !contains(where.sites, s.name))
    out.push_back(
        {"excluded", "not among the job's placement.sites (" + joined(where.sites, ", ") + ")"});
  // Down, refusing the caller, stale: the first that applies, since each hides the next.
  if (!s.up)
    out.push_back({"site_down", "the site did not answer its last poll"});
  else if (s.issuer_trusted && !s.fresh)
    out.push_back({"stale_info", "what the site published is older than its info_ttl_s"});
  if (s.up && !s.issuer_trusted)
    out.push_back({"issuer_untrusted",
                   s.refusal.empty()
                       ? "the site does not take the caller's token"
                       : "the site does not take the caller's token (" + s.refusal + ")"});
  if (!s.group_allowed)
    out.push_back({"group_denied", "the caller's group is not among the site's groups"});
  if ((need.gpus > 0 || need.gpu_share > 0) && !s.gpu_jobs)
    out.push_back({"backend_unsupported", "the site's " + s.kind + " backend runs no GPU jobs"});
  if (need.gpu_share > 0 && !s.shares)
    out.push_back({"share_unsupported", "the site does not share GPUs (no [share])"});
  for (const SiteVerdict& v : s.asked)
    if (v.refusal && v.whole_site) out.push_back(*v.refusal);
  return out;
}

/// The reasons one class cannot take the job, the caller's account at its site included.
std::vector<Reason> class_reasons(const Requirement& need, const SiteView& s, const NodeClass& c) {
  std::vector<Reason> out;
  const bool wants_gpus = need.gpus > 0 || need.gpu_share > 0;
  const int per_node = need.gpu_share > 0 ? 1 : need.gpus_per_node();
  if (wants_gpus && c.gpus_per_node == 0) {
    out.push_back({"gpus_per_node", "asks " + count_of(per_node, "GPU") +
                                        " per node; nodes of this class have none"});
  } else if (wants_gpus) {
    const GpuRequirement& g = need.gpu;
    if (c.gpus_per_node < per_node)
      out.push_back({"gpus_per_node", "asks " + count_of(per_node, "GPU") + " per node; nodes " +
                                          "of this class have " + std::to_string(c.gpus_per_node)});
    if (!g.models.empty() &&
        std::none_of(g.models.begin(), g.models.end(),
                     [&c](const std::string& m) { return gpu_model_matches(m, c); }))
      out.push_back({"no_gpu_model",
                     "asks " + joined(g.models, " or ") + "; this class has " + gpu_name_of(c)});
    if (!g.vendor.empty() && lower(g.vendor) != vendor_of(c))
      out.push_back({"gpu_vendor", "asks " + g.vendor + " GPUs; this class has " +
                                       (vendor_of(c).empty() ? "GPUs of no published vendor"
                                                             : vendor_of(c) + " ones")});
    if (g.memory_mib_min > 0 && c.gpu_memory_mib < gpu_memory_floor(g.memory_mib_min))
      out.push_back(
          {"gpu_memory", "asks at least " + gib(g.memory_mib_min) + " per GPU; " +
                             (c.gpu_memory_mib > 0 ? "this class's have " + gib(c.gpu_memory_mib)
                                                   : "this class publishes none")});
    else if (g.memory_mib_max > 0 && c.gpu_memory_mib > g.memory_mib_max)
      out.push_back({"gpu_memory", "asks at most " + gib(g.memory_mib_max) +
                                       " per GPU; this class's have " + gib(c.gpu_memory_mib)});
    auto at_least = [&out](const std::string& have, const std::string& min, const char* code,
                           const char* what) {
      if (version_at_least(have, min)) return;
      out.push_back(
          {code, std::string("asks ") + what + " " + min + " or newer; this class " +
                     (have.empty() ? std::string("publishes none") : std::string("has ") + have)});
    };
    at_least(c.compute_capability, g.compute_capability_min, "compute_capability",
             "compute capability");
    at_least(c.cuda_version, g.cuda_min, "cuda_too_old", "CUDA");
    at_least(c.driver_version, g.driver_min, "driver_too_old", "driver");
  }
  const int available = c.total_nodes - c.unavailable_nodes;
  if (!c.production)
    out.push_back({"nodes", "partition " + c.partition + " takes no jobs (not in production)"});
  else if (available < need.nodes)
    out.push_back({"nodes", "asks " + count_of(need.nodes, "node") + "; this class has " +
                                std::to_string(available) + " that take work"});
  if (c.cpus_per_node < need.cpus_per_node())
    out.push_back({"cpus", "asks " + count_of(need.cpus_per_node(), "CPU") +
                               " per node; nodes of this class have " +
                               std::to_string(c.cpus_per_node)});
  if (need.memory_mb > 0 && c.memory_mb_per_node < need.memory_mb)
    out.push_back({"memory", "asks " + std::to_string(need.memory_mb) +
                                 " MB per node; nodes of this class have " +
                                 std::to_string(c.memory_mb_per_node)});
  if (need.walltime_s > 0 && c.max_walltime_s >= 0 && need.walltime_s > c.max_walltime_s)
    out.push_back({"walltime", "asks " + std::to_string(need.walltime_s) + " s; partition " +
                                   c.partition + " allows at most " +
                                   std::to_string(c.max_walltime_s)});
  if (need.walltime_s > 0 && s.max_walltime_s >= 0 && need.walltime_s > s.max_walltime_s)
    out.push_back({"walltime", "asks " + std::to_string(need.walltime_s) +
                                   " s; the caller's limit at this site is " +
                                   std::to_string(s.max_walltime_s) + " s"});
  if (need.infiniband && !c.infiniband)
    out.push_back({"no_infiniband", "asks InfiniBand; nodes of this class have none"});
  int cap = c.max_gpus_per_job;
  if (s.max_gpus_per_job >= 0 && (cap < 0 || s.max_gpus_per_job < cap)) cap = s.max_gpus_per_job;
  if (cap >= 0 && need.gpus > cap)
    out.push_back({"max_gpus_per_job", "asks " + count_of(need.gpus, "GPU") +
                                           "; the site allows at most " + std::to_string(cap) +
                                           " per job"});
  if (s.gpu_hours_left >= 0 && wants_gpus) {
    // The job's GPU-hours at its time limit; without one, any quota left is enough.
    const double gpus = need.gpu_share > 0 ? need.gpu_share * need.nodes : need.gpus;
    const double asked = gpus * static_cast<double>(need.walltime_s) / 3600.0;
    if (s.gpu_hours_left <= 0 || asked > s.gpu_hours_left)
      out.push_back({"quota", "the caller has " + std::to_string(std::lround(s.gpu_hours_left)) +
                                  " GPU-hours left at this site" +
                                  (asked > 0 ? "; the job may use " +
                                                   std::to_string(std::lround(std::ceil(asked)))
                                             : std::string())});
  }
  // What the site itself said of this class, where the broker asked (its own limits, partition
  // allow-list, GPU types): once every published fact fits, the site's word decides.
  if (const SiteVerdict* v = s.verdict(c.partition, c.name);
      out.empty() && v != nullptr && v->refusal && !v->whole_site)
    out.push_back(*v->refusal);
  return out;
}

/// Nodes of the class that run nothing now.
int idle_nodes(const NodeClass& c) {
  return std::max(0, c.total_nodes - c.unavailable_nodes - c.used_nodes);
}

/// The free GPUs (GPU jobs) or idle nodes (CPU jobs) a class offers: the `free` factor's
/// measure, normalised across the candidates.
double free_measure(const Requirement& need, const NodeClass& c) {
  if (need.gpus == 0 && need.gpu_share == 0) return idle_nodes(c);
  return c.free_gpus >= 0 ? c.free_gpus : idle_nodes(c) * c.gpus_per_node;
}

/// Whether the job could start on the class now. Counts per class are all GLUE gives: a GPU
/// job starts when the class has as many free GPUs as it asks in all and, where free GPUs
/// are not published, enough idle nodes.
bool starts_now(const Requirement& need, const NodeClass& c) {
  if (need.gpus == 0 && need.gpu_share == 0) return idle_nodes(c) >= need.nodes;
  if (c.free_gpus >= 0)
    return c.free_gpus >= std::max(1, need.gpus_per_node() * need.nodes) &&
           c.total_nodes - c.unavailable_nodes >= need.nodes;
  return idle_nodes(c) >= need.nodes;
}

/// How closely the class fits, 0..100: the mean of asked / offered over GPUs per node, CPUs
/// per node and memory per node (where asked). A CPU job on GPU nodes fits worst: it would
/// hold GPUs nobody uses.
double fit_of(const Requirement& need, const NodeClass& c) {
  double sum = 0;
  int n = 0;
  auto add = [&sum, &n](double asked, double offered) {
    sum += offered > 0 ? std::min(1.0, asked / offered) : 1.0;
    ++n;
  };
  if (need.gpus > 0)
    add(need.gpus_per_node(), c.gpus_per_node);
  else if (need.gpu_share > 0)
    add(need.gpu_share, c.gpus_per_node);
  else if (c.gpus_per_node > 0)
    add(0, c.gpus_per_node);
  if (need.gpu.memory_mib_min > 0 && c.gpu_memory_mib > 0)
    add(static_cast<double>(need.gpu.memory_mib_min), static_cast<double>(c.gpu_memory_mib));
  add(need.cpus_per_node(), c.cpus_per_node);
  if (need.memory_mb > 0)
    add(static_cast<double>(need.memory_mb), static_cast<double>(c.memory_mb_per_node));
  return 100.0 * sum / n;
}

/// A site's start estimate for the class as a factor: 100 at once, 50 after ten minutes,
/// falling towards 0. Without one, from the partition's queue: 100 with nobody waiting.
double wait_of(const SiteView& s, const NodeClass& c) {
  const SiteVerdict* v = s.verdict(c.partition, c.name);
  if (v != nullptr && v->wait_s)
    return 100.0 / (1.0 + static_cast<double>(std::max<int64_t>(0, *v->wait_s)) / 600.0);
  return 100.0 / (1.0 + c.waiting_jobs);
}

/// Min-max normalisation to 0..100 across the candidates (Karmada's); all equal: 100 each.
void normalise(std::vector<double>& v) {
  if (v.empty()) return;
  auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const double min = *lo, span = *hi - *lo;
  for (double& x : v) x = span > 0 ? 100.0 * (x - min) / span : 100.0;
}

}  // namespace

Placement place(const Requirement& need, const PlacementRequest& where,
                const std::vector<SiteView>& sites, const ScoreWeights& weights) {
  Placement p;
  std::vector<Candidate> fit, rejected;
  std::vector<double> frees, prefs;
  std::vector<const SiteView*> fit_sites;
  for (const SiteView& s : sites) {
    std::vector<Reason> whole = site_reasons(need, where, s);
    if (!whole.empty()) {
      Candidate c;
      c.site = s.name;
      c.reasons = std::move(whole);
      rejected.push_back(std::move(c));
      continue;
    }
    if (s.info.classes.empty()) {
      Candidate c;
      c.site = s.name;
      c.reasons.push_back({"nodes", "the site published no nodes"});
      rejected.push_back(std::move(c));
      continue;
    }
    for (const NodeClass& nc : s.info.classes) {
      Candidate c;
      c.site = s.name;
      c.partition = nc.partition;
      c.cls = nc.name;
      c.gpu_type = nc.gpu_type;
      c.reasons = class_reasons(need, s, nc);
      if (!c.reasons.empty()) {
        rejected.push_back(std::move(c));
        continue;
      }
      c.fits = true;
      c.factors.start_now = starts_now(need, nc) ? 100 : 0;
      c.factors.wait = wait_of(s, nc);
      c.factors.fit = fit_of(need, nc);
      c.factors.reliability = 100.0 * std::clamp(s.reliability, 0.0, 1.0);
      frees.push_back(free_measure(need, nc));
      auto pref = where.prefer.find(s.name);
      prefs.push_back(s.weight + (pref == where.prefer.end() ? 0.0 : pref->second));
      fit.push_back(std::move(c));
    }
  }
  normalise(frees);
  normalise(prefs);
  const double total = weights.start_now + weights.wait + weights.free + weights.fit +
                       weights.preference + weights.reliability;
  for (size_t i = 0; i < fit.size(); ++i) {
    Factors& f = fit[i].factors;
    f.free = frees[i];
    f.preference = prefs[i];
    const double sum = weights.start_now * f.start_now + weights.wait * f.wait +
                       weights.free * f.free + weights.fit * f.fit +
                       weights.preference * f.preference + weights.reliability * f.reliability;
    // Rounded to a thousandth, so that equal scores compare equal and ties go by name.
    fit[i].score = total > 0 ? std::round(sum / total * 1000.0) / 1000.0 : 0;
  }
  auto names = [](const Candidate& c) { return std::tie(c.site, c.partition, c.cls); };
  std::sort(fit.begin(), fit.end(), [&names](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    return names(a) < names(b);
  });
  std::sort(rejected.begin(), rejected.end(),
            [&names](const Candidate& a, const Candidate& b) { return names(a) < names(b); });
  p.candidates = std::move(fit);
  for (Candidate& c : rejected) p.candidates.push_back(std::move(c));
  return p;
}

nlohmann::json placement_json(const Placement& p) {
  using nlohmann::json;
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  json out = json::object();
  const Candidate* chosen = p.chosen();
  out["chosen"] = chosen ? json{{"site", chosen->site},
                                {"partition", or_null(chosen->partition)},
                                {"class", or_null(chosen->cls)}}
                         : json(nullptr);
  json list = json::array();
  for (const Candidate& c : p.candidates) {
    json reasons = json::array();
    for (const Reason& r : c.reasons) reasons.push_back({{"code", r.code}, {"message", r.message}});
    json j{{"site", c.site},
           {"partition", or_null(c.partition)},
           {"class", or_null(c.cls)},
           {"verdict", c.fits ? "fit" : "rejected"},
           {"reasons", std::move(reasons)}};
    if (c.fits) {
      j["score"] = c.score;
      j["factors"] = {{"start_now", c.factors.start_now},
                      {"wait", c.factors.wait},
                      {"free", c.factors.free},
                      {"fit", c.factors.fit},
                      {"preference", c.factors.preference},
                      {"reliability", c.factors.reliability}};
    } else {
      j["score"] = nullptr;
      j["factors"] = nullptr;
    }
    list.push_back(std::move(j));
  }
  out["candidates"] = std::move(list);
  return out;
}

}  // namespace berth::broker

#include "gateway/reclaim.h"

#include <ctime>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace berth::gateway {

namespace {

/// "2026-11-26T04:39:30.891Z" (RFC 3339, UTC, as `berth gpu stats` writes it) in Unix seconds;
/// 0 for anything else.
int64_t unix_time(const std::string& text) {
  struct tm tm {};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) return 0;
  if (*end == '.')
    while (*++end >= '0' && *end <= '9') {
    }
  if (std::string_view(end) != "Z") return 0;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace

std::optional<GpuSample> newest_sample(std::string_view text, double idle_below_pct) {
  // The file holds whole documents one after another (one per node and period); a document
  // cut short by a write under way ends the reading.
  // A tail of the file may begin inside a document: start at the first that begins a line
  // (`berth gpu stats --json` indents everything inside its top-level braces).
  if (!text.starts_with("{")) {
    size_t at = text.find("\n{");
    text = at == std::string_view::npos ? std::string_view() : text.substr(at + 1);
  }
  std::istringstream in{std::string(text)};
  std::optional<GpuSample> newest;
  int64_t newest_time = -1;
  std::map<int64_t, GpuSample> by_time;  // documents of one period share their second, roughly
  while (true) {
    nlohmann::json doc;
    try {
      in >> doc;
    } catch (const nlohmann::json::exception&) {
      break;
    }
    if (!doc.is_object() || !doc.contains("gpus") || !doc["gpus"].is_array()) continue;
    int64_t t = 0;
    if (auto it = doc.find("time"); it != doc.end() && it->is_string()) t = unix_time(it->get<std::string>());
    if (t <= 0) continue;
    GpuSample& s = by_time[t];
    s.time = t;
    bool all_idle = s.gpus == 0 || s.idle;
    for (const auto& g : doc["gpus"]) {
      ++s.gpus;
      double util = 100;
      const auto& w = g.value("window", nlohmann::json::object());
      if (auto m = w.find("utilization_gpu"); m != w.end() && m->is_object() && (*m)["mean"].is_number())
        util = (*m)["mean"].get<double>();
      else if (auto u = g.find("utilization"); u != g.end() && u->is_object() && (*u)["gpu"].is_number())
        util = (*u)["gpu"].get<double>();
      if (util >= idle_below_pct) all_idle = false;
    }
    s.idle = all_idle && s.gpus > 0;
    newest_time = std::max(newest_time, t);
  }
  if (newest_time < 0) return std::nullopt;
  // Nodes of one period write within a few seconds: the newest second's and those just before.
  GpuSample merged{newest_time, 0, true};
  for (const auto& [t, s] : by_time) {
    if (newest_time - t > 5) continue;
    merged.gpus += s.gpus;
    merged.idle = merged.idle && s.idle;
  }
  merged.idle = merged.idle && merged.gpus > 0;
  newest = merged;
  return newest;
}

std::string reclaim_watch_script(const std::string& berth, const std::string& samples_file,
                                 const std::string& notice_file, const std::string& err_file,
                                 const ReclaimPolicy& p) {
  std::string interval = std::to_string(p.sample_interval_s);
  // Each period: one sample per node of the job's GPUs (CUDA_VISIBLE_DEVICES of the step), its
  // utilisation averaged over a few seconds; then berthd's notice, once, into the job's stderr.
  return "( while :; do srun --overlap --ntasks-per-node=1 --quiet " + shell_quote(berth) +
         " gpu stats --json --samples 3 --interval-ms 1000 >>" + shell_quote(samples_file) +
         " 2>/dev/null; if [ -s " + shell_quote(notice_file) + " ] && [ -z \"$noticed\" ]; then cat " +
         shell_quote(notice_file) + " >>" + shell_quote(err_file) + "; noticed=1; fi; sleep " +
         interval + "; done ) &\n";
}

IdleTracker::Verdict IdleTracker::observe(int64_t job, const GpuSample& s, const ReclaimPolicy& p) {
  if (!s.idle) {
    since_.erase(job);
    return Verdict::kBusy;
  }
  auto [it, fresh] = since_.try_emplace(job, s.time);
  if (s.time - it->second >= p.idle_for_s && !flagged_.count(job)) {
    flagged_[job] = true;
    return Verdict::kFlag;
  }
  return Verdict::kIdle;
}

}  // namespace berth::gateway

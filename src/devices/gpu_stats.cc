#include "devices/gpu_stats.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cmath>

#include "core/clock.h"
#include "core/strings.h"
#include "devices/gpu_select.h"

namespace berth {
namespace {

using nlohmann::json;

json str_or_null(const std::string& s) {
  return s.empty() ? json() : json(s);
}

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json();
}

template <class T>
std::optional<double> as_double(const std::optional<T>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

/// Values of one GPU (by NVML index) across the samples, through `get`.
template <class Get>
std::vector<std::optional<double>> series(const NvmlReadings& r, int index, Get get) {
  std::vector<std::optional<double>> out;
  for (const auto& s : r.samples)
    for (const auto& g : s.gpus)
      if (g.index == index) out.push_back(get(g));
  return out;
}

json window_json(const std::optional<WindowStats>& w) {
  if (!w) return json();
  return {{"min", w->min}, {"mean", w->mean}, {"max", w->max}};
}

/// `x` rounded to the nearest integer, halves away from zero, as std::round: which is the one
/// libm function berth would call, and loading libm costs every container start about 60 us
/// (bench/results/start.md). Exact: below 2^52 the fraction `x - t` has no rounding error.
double round_half_away(double x) {
  if (!(std::fabs(x) < 4503599627370496.0)) return x;  // integral already, or NaN or infinite
  double t = static_cast<double>(static_cast<int64_t>(x));
  if (std::fabs(x - t) >= 0.5) t += x < 0 ? -1 : 1;
  return t;
}

/// "37", "30.3": a number to 0.1, without a needless ".0".
std::string num(double v) {
  return fmt::format("{:g}", round_half_away(v * 10) / 10);
}

struct Window {
  std::optional<WindowStats> util_gpu, util_memory, memory_used, power;
};

Window window_for(const NvmlReadings& r, int index) {
  Window w;
  w.util_gpu = window_of(
      series(r, index, [](const NvmlGpuReading& g) { return as_double(g.utilization_gpu); }));
  w.util_memory = window_of(
      series(r, index, [](const NvmlGpuReading& g) { return as_double(g.utilization_memory); }));
  w.memory_used = window_of(
      series(r, index, [](const NvmlGpuReading& g) { return as_double(g.memory_used_mib); }));
  w.power = window_of(series(r, index, [](const NvmlGpuReading& g) { return g.power_w; }));
  return w;
}

/// Left-aligned columns two spaces apart, the first row the header.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i)
      line += i + 1 == row.size() ? row[i] : fmt::format("{:<{}}  ", row[i], width[i]);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::optional<WindowStats> window_of(const std::vector<std::optional<double>>& values) {
  std::optional<WindowStats> w;
  double sum = 0;
  int n = 0;
  for (const auto& v : values) {
    if (!v) continue;
    if (!w) w = WindowStats{*v, 0, *v};
    w->min = std::min(w->min, *v);
    w->max = std::max(w->max, *v);
    sum += *v;
    ++n;
  }
  // To 0.001 (power has mW in it), kept within [min, max] against rounding.
  if (w) w->mean = std::clamp(round_half_away(sum / n * 1000) / 1000, w->min, w->max);
  return w;
}

Result<std::optional<std::vector<std::string>>> stats_selection(
    std::optional<std::string_view> gpus_flag, std::optional<std::string_view> cuda_visible_devices,
    const std::vector<NvidiaGpu>& gpus) {
  if (!gpus_flag && !cuda_visible_devices) return std::optional<std::vector<std::string>>();
  GpuRequest req;
  req.kind = GpuRequest::Kind::kAll;
  if (gpus_flag) req = BERTH_TRY(parse_gpus_flag(*gpus_flag));
  auto allowed = parse_cuda_visible_devices(cuda_visible_devices, gpus);
  std::vector<int> picked = BERTH_TRY(select_gpus(req, gpus, allowed));
  std::vector<std::string> uuids;
  for (int i : picked)
    for (const auto& g : gpus)
      if (g.index == i) uuids.push_back(g.uuid);
  return std::optional<std::vector<std::string>>(std::move(uuids));
}

json gpu_stats_json(const NvmlReadings& r, const NvmlOptions& o, const GpuStatsHost& host) {
  json gpus = json::array();
  const NvmlSample* last = r.samples.empty() ? nullptr : &r.samples.back();
  if (last)
    for (const auto& g : last->gpus) {
      json procs;
      if (g.processes) {
        procs = json::array();
        for (const auto& p : *g.processes) {
          auto it = host.owners.find(p.pid);
          const GpuProcessOwner who = it == host.owners.end() ? GpuProcessOwner{} : it->second;
          procs.push_back({{"pid", p.pid},
                           {"used_memory_mib", opt(p.used_memory_mib)},
                           {"uid", opt(who.uid)},
                           {"user", str_or_null(who.user)},
                           {"command", str_or_null(who.command)},
                           {"slurm_job_id", opt(who.slurm_job_id)},
                           {"slurm_job_from", str_or_null(who.slurm_job_from)}});
        }
      }
      Window w = window_for(r, g.index);
      gpus.push_back({
          {"index", g.index},
          {"uuid", str_or_null(g.uuid)},
          {"name", str_or_null(g.name)},
          {"bus_id", str_or_null(g.bus_id)},
          {"compute_capability", str_or_null(g.compute_capability)},
          {"utilization", {{"gpu", opt(g.utilization_gpu)}, {"memory", opt(g.utilization_memory)}}},
          {"memory",
           {{"total_mib", opt(g.memory_total_mib)}, {"used_mib", opt(g.memory_used_mib)}}},
          {"temperature_c", opt(g.temperature_c)},
          {"power_w", opt(g.power_w)},
          {"processes", procs},
          {"window",
           {{"utilization_gpu", window_json(w.util_gpu)},
            {"utilization_memory", window_json(w.util_memory)},
            {"memory_used_mib", window_json(w.memory_used)},
            {"power_w", window_json(w.power)}}},
          {"error", str_or_null(g.error)},
      });
    }
  return {{"node", str_or_null(host.node)},
          {"driver_version", str_or_null(r.driver_version)},
          {"time", last ? json(rfc3339_ms(last->unix_ms)) : json()},
          {"samples", r.samples.size()},
          {"interval_ms", o.interval_ms},
          {"gpus", gpus}};
}

std::string gpu_stats_text(const NvmlReadings& r, const NvmlOptions& o, const GpuStatsHost& host) {
  std::string out = "NVIDIA driver " + (r.driver_version.empty() ? "?" : r.driver_version);
  const bool windowed = r.samples.size() > 1;
  if (!r.samples.empty()) out += ", " + rfc3339_ms(r.samples.back().unix_ms);
  if (windowed)
    out += fmt::format(", {} samples {} ms apart: utilisation as mean (min-max)", r.samples.size(),
                       o.interval_ms);
  out += "\n";
  if (r.samples.empty() || r.samples.back().gpus.empty()) return out + "no GPUs\n";
  const auto& gpus = r.samples.back().gpus;
  auto percent = [windowed](const std::optional<unsigned>& now,
                            const std::optional<WindowStats>& w) {
    if (windowed && w) return fmt::format("{}% ({}-{})", num(w->mean), num(w->min), num(w->max));
    return now ? fmt::format("{}%", *now) : std::string("-");
  };
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "NAME", "BUS ID", "UTIL", "MEM UTIL", "MEMORY (MiB)", "TEMP", "POWER"}};
  std::string unreadable;
  for (const auto& g : gpus) {
    if (!g.error.empty()) {
      unreadable += fmt::format("GPU {} cannot be read: {}\n", g.index, g.error);
      continue;
    }
    Window w = window_for(r, g.index);
    std::string mem = "-";
    if (g.memory_used_mib || g.memory_total_mib)
      mem = (g.memory_used_mib ? std::to_string(*g.memory_used_mib) : "?") + " / " +
            (g.memory_total_mib ? std::to_string(*g.memory_total_mib) : "?");
    rows.push_back({std::to_string(g.index), g.name.empty() ? "-" : g.name,
                    g.bus_id.empty() ? "-" : g.bus_id, percent(g.utilization_gpu, w.util_gpu),
                    percent(g.utilization_memory, w.util_memory), mem,
                    g.temperature_c ? fmt::format("{}C", *g.temperature_c) : "-",
                    g.power_w ? fmt::format("{:.1f}W", *g.power_w) : "-"});
  }
  out += table(rows) + unreadable;
  std::vector<std::vector<std::string>> procs = {
      {"GPU", "PID", "USER", "JOB", "COMMAND", "MEMORY (MiB)"}};
  std::string unknown;
  for (const auto& g : gpus) {
    if (!g.error.empty()) continue;
    if (!g.processes) {
      unknown += (unknown.empty() ? "" : ", ") + std::to_string(g.index);
      continue;
    }
    for (const auto& p : *g.processes) {
      auto it = host.owners.find(p.pid);
      const GpuProcessOwner who = it == host.owners.end() ? GpuProcessOwner{} : it->second;
      std::string user = !who.user.empty() ? who.user : who.uid ? std::to_string(*who.uid) : "-";
      procs.push_back({std::to_string(g.index), std::to_string(p.pid), user,
                       who.slurm_job_id ? std::to_string(*who.slurm_job_id) : "-",
                       who.command.empty() ? "-" : who.command,
                       p.used_memory_mib ? std::to_string(*p.used_memory_mib) : "-"});
    }
  }
  out += "\n";
  out += procs.size() > 1 ? table(procs) : "no compute processes\n";
  if (!unknown.empty()) out += "processes unknown (NVML cannot list them) on GPU " + unknown + "\n";
  return out;
}

}  // namespace berth

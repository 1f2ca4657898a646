// A broker's job body read into a BrokerJob (broker/job_body.h).
#include "broker/job_body.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "broker/gpu_names.h"
#include "broker/gpu_spec.h"
#include "core/strings.h"
#include "devices/version.h"

namespace berth::broker {
namespace {

constexpr int64_t kMaxWalltime = int64_t{366} * 86400;

Error bad(const std::string& path, const std::string& what) {
  return make_error("parse", "job body", path + ": " + what, ErrorCode::kInvalidInput);
}

Result<int64_t> count(const nlohmann::json& j, const std::string& path, int64_t min, int64_t max) {
  if (!j.is_number_integer() || j.get<int64_t>() < min || j.get<int64_t>() > max)
    return bad(path,
               "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  return j.get<int64_t>();
}

Result<std::string> text(const nlohmann::json& j, const std::string& path) {
  if (!j.is_string()) return bad(path, "must be a string");
  std::string s = j.get<std::string>();
  if (s.find('\0') != std::string::npos) return bad(path, "holds a NUL byte");
  return s;
}

Result<std::vector<std::string>> texts(const nlohmann::json& j, const std::string& path) {
  if (!j.is_array()) return bad(path, "must be a list of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i)
    out.push_back(BERTH_TRY(text(j[i], path + "[" + std::to_string(i) + "]")));
  return out;
}

/// Site names: a list of non-empty strings.
Result<std::vector<std::string>> site_names(const nlohmann::json& j, const std::string& path) {
  std::vector<std::string> out = BERTH_TRY(texts(j, path));
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].empty()) return bad(path + "[" + std::to_string(i) + "]", "is empty");
  return out;
}

Status need_object(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) return bad(path, "must be an object");
  return {};
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// One GPU model name as resources.gpu.model gives it, canonical.
Result<std::string> model_name(const nlohmann::json& j, const std::string& path) {
  std::string name = BERTH_TRY(text(j, path));
  const bool plain = !name.empty() && std::isalpha(static_cast<unsigned char>(name[0])) != 0 &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' ||
                              c == '_' || c == '.' || c == ' ';
                     });
  if (!plain)
    return bad(
        path, "\"" + name + "\" is not a GPU name (a letter, then letters, digits, '-', '_', '.')");
  return canonical_gpu_name(name);
}

Result<std::string> version(const nlohmann::json& j, const std::string& path) {
  std::string v = BERTH_TRY(text(j, path));
  if (!v.empty() && !parse_version(v))
    return bad(path, "\"" + v + "\" is not a version (numbers between dots, such as \"12.2\")");
  return v;
}

Result<GpuRequirement> gpu_requirement(const nlohmann::json& j) {
  BERTH_CHECK(need_object(j, "resources.gpu"));
  GpuRequirement g;
  for (const auto& [key, v] : j.items()) {
    const std::string path = "resources.gpu." + key;
    if (key == "vendor") {
      g.vendor = lower(BERTH_TRY(text(v, path)));
      if (g.vendor != "nvidia" && g.vendor != "amd" && g.vendor != "intel")
        return bad(path, "\"" + v.get<std::string>() + "\" is not nvidia, amd or intel");
    } else if (key == "model") {
      if (v.is_string()) {
        g.models.push_back(BERTH_TRY(model_name(v, path)));
      } else if (v.is_array()) {
        for (size_t i = 0; i < v.size(); ++i) {
          std::string m = BERTH_TRY(model_name(v[i], path + "[" + std::to_string(i) + "]"));
          if (std::find(g.models.begin(), g.models.end(), m) == g.models.end())
            g.models.push_back(std::move(m));
        }
      } else {
        return bad(path, "must be a GPU model name or a list of them");
      }
    } else if (key == "memory_mb_min") {
      g.memory_mib_min = BERTH_TRY(count(v, path, 0, int64_t{1} << 30));
    } else if (key == "compute_capability_min") {
      g.compute_capability_min = BERTH_TRY(version(v, path));
    } else if (key == "cuda_min") {
      g.cuda_min = BERTH_TRY(version(v, path));
    } else if (key == "driver_min") {
      g.driver_min = BERTH_TRY(version(v, path));
    } else {
      return bad(path, "is not a field of resources.gpu");
    }
  }
  return g;
}

/// What resources.gpus and resources.gpu say, as read, before they are merged.
struct GpuFields {
  std::string spec_text;  ///< resources.gpus when a shorthand
  std::optional<GpuSpec> spec;
  GpuRequirement gpu;        ///< resources.gpu
  bool share_given = false;  ///< resources.gpu_share present
};

Status read_resources(const nlohmann::json& j, Requirement& need, GpuFields& f) {
  BERTH_CHECK(need_object(j, "resources"));
  for (const auto& [key, v] : j.items()) {
    const std::string path = "resources." + key;
    if (key == "nodes") {
      need.nodes = static_cast<int>(BERTH_TRY(count(v, path, 1, 10000)));
    } else if (key == "tasks") {
      need.tasks = static_cast<int>(BERTH_TRY(count(v, path, 1, 1000000)));
    } else if (key == "cpus_per_task") {
      need.cpus_per_task = static_cast<int>(BERTH_TRY(count(v, path, 1, 10000)));
    } else if (key == "gpus") {
      if (v.is_string()) {
        f.spec_text = v.get<std::string>();
        auto spec = parse_gpu_spec(f.spec_text);
        if (!spec.ok()) {
          const Error& e = spec.error();
          return bad(path, e.subject + ": " + e.detail);
        }
        f.spec = *spec;
        need.gpus = f.spec->count;
        need.gpu_share = f.spec->share;
      } else if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 10000) {
        need.gpus = v.get<int>();
      } else {
        return bad(path,
                   "must be a whole number from 0 to 10000 or a GPU spec such as \"A100:80GB:2\"");
      }
    } else if (key == "gpu_share") {
      if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() < 1))
        return bad(path, "must be a number above 0 and below 1");
      f.share_given = true;
      need.gpu_share = v.get<double>();
    } else if (key == "memory_mb") {
      need.memory_mb = BERTH_TRY(count(v, path, 0, int64_t{1} << 40));
    } else if (key == "walltime_s") {
      need.walltime_s = BERTH_TRY(count(v, path, 0, kMaxWalltime));
    } else if (key == "gpu") {
      f.gpu = BERTH_TRY(gpu_requirement(v));
    } else if (key == "infiniband") {
      if (!v.is_boolean()) return bad(path, "must be true or false");
      need.infiniband = v.get<bool>();
    } else if (key == "gpu_model") {
      // berthd's GRES type: a broker asks for models across sites, by their names.
      return bad(path, "is not a field of a broker job (name GPU models in resources.gpu.model)");
    } else {
      return bad(path, "is not a field of a broker job");
    }
  }
  return {};
}

/// resources.gpus' shorthand and resources.gpu as one requirement, its vendor settled.
Result<GpuRequirement> merge_gpu(const GpuFields& f) {
  GpuRequirement g = f.gpu;
  if (f.spec) {
    const GpuRequirement& s = f.spec->gpu;
    const std::string from = "resources.gpus (\"" + f.spec_text + "\")";
    if (!g.vendor.empty() && !s.vendor.empty() && g.vendor != s.vendor)
      return bad("resources.gpu.vendor",
                 "is " + g.vendor + ", but " + from + " asks for " + s.vendor);
    if (g.vendor.empty()) g.vendor = s.vendor;
    if (!g.models.empty() && !s.models.empty()) {
      std::vector<std::string> a = g.models;
      std::vector<std::string> b = s.models;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      if (a != b)
        return bad("resources.gpu.model", "names " + joined(g.models) + ", but " + from +
                                              " names " + joined(s.models) +
                                              ": name the models in one place");
    }
    if (g.models.empty()) g.models = s.models;
    g.memory_mib_min = std::max(g.memory_mib_min, s.memory_mib_min);
    g.memory_mib_max = s.memory_mib_max;
    if (g.memory_mib_max > 0 && g.memory_mib_min > g.memory_mib_max)
      return bad("resources.gpu.memory_mb_min", std::to_string(g.memory_mib_min) +
                                                    " is above the most " + from + " allows (" +
                                                    std::to_string(g.memory_mib_max) + " MiB)");
  }
  if (std::string contradiction = settle_gpu_vendor(g); !contradiction.empty())
    return bad("resources.gpu.model", contradiction);
  return g;
}

Status read_placement(const nlohmann::json& j, PlacementRequest& p) {
  BERTH_CHECK(need_object(j, "placement"));
  for (const auto& [key, v] : j.items()) {
    const std::string path = "placement." + key;
    if (key == "sites") {
      p.sites = BERTH_TRY(site_names(v, path));
    } else if (key == "exclude") {
      p.exclude = BERTH_TRY(site_names(v, path));
    } else if (key == "prefer") {
      BERTH_CHECK(need_object(v, path));
      for (const auto& [site, w] : v.items()) {
        if (site.empty()) return bad(path, "names an empty site");
        if (!w.is_number() || !std::isfinite(w.get<double>()))
          return bad(std::string(path).append(".").append(site), "must be a number");
        p.prefer[site] = w.get<double>();
      }
    } else if (key == "strategy") {
      p.strategy = BERTH_TRY(text(v, path));
      if (p.strategy != "rank" && p.strategy != "race")
        return bad(path, "\"" + p.strategy + "\" is not \"rank\" or \"race\"");
    } else {
      return bad(path, "is not a field of placement");
    }
  }
  for (const std::string& s : p.exclude)
    if (std::find(p.sites.begin(), p.sites.end(), s) != p.sites.end())
      return bad("placement.exclude", "names \"" + s + "\", which placement.sites asks for");
  return {};
}

Status read_failover(const nlohmann::json& j, FailoverPolicy& f) {
  BERTH_CHECK(need_object(j, "failover"));
  for (const auto& [key, v] : j.items()) {
    const std::string path = "failover." + key;
    if (key == "max_sites")
      f.max_sites = static_cast<int>(BERTH_TRY(count(v, path, 1, 100)));
    else if (key == "pending_timeout_s")
      f.pending_timeout_s = BERTH_TRY(count(v, path, 1, kMaxWalltime));
    else if (key == "deadline_s")
      f.deadline_s = BERTH_TRY(count(v, path, 1, kMaxWalltime));
    else
      return bad(path, "is not a field of failover");
  }
  return {};
}

}  // namespace

Result<BrokerJob> parse_broker_job(const nlohmann::json& body) {
  if (!body.is_object())
    return make_error("parse", "job body", "it is not a JSON object", ErrorCode::kInvalidInput);
  BrokerJob job;
  GpuFields gpu;
  for (const auto& [key, v] : body.items()) {
    if (key == "name") {
      job.name = BERTH_TRY(text(v, key));
    } else if (key == "image") {
      job.image = BERTH_TRY(text(v, key));
    } else if (key == "command") {
      job.command = BERTH_TRY(texts(v, key));
    } else if (key == "env") {
      BERTH_CHECK(need_object(v, key));
      for (const auto& [name, value] : v.items()) {
        if (name.empty() || name.find_first_of("=\0", 0, 2) != std::string::npos)
          return bad("env", "names a variable \"" + name + "\"");
        job.env[name] = BERTH_TRY(text(value, "env." + name));
      }
    } else if (key == "mounts") {
      job.mounts = BERTH_TRY(texts(v, key));
    } else if (key == "workdir") {
      job.workdir = BERTH_TRY(text(v, key));
    } else if (key == "group") {
      job.group = BERTH_TRY(text(v, key));
    } else if (key == "class") {
      job.job_class = BERTH_TRY(text(v, key));
      if (job.job_class != "batch" && job.job_class != "cloud")
        return bad(key, "is \"" + job.job_class + "\", not \"batch\" or \"cloud\"");
    } else if (key == "resources") {
      BERTH_CHECK(read_resources(v, job.need, gpu));
    } else if (key == "placement") {
      BERTH_CHECK(read_placement(v, job.placement));
    } else if (key == "failover") {
      BERTH_CHECK(read_failover(v, job.failover));
    } else {
      return bad(key, "is not a field of a broker job");
    }
  }
  if (job.image.empty()) return bad("image", "is required");
  if (gpu.spec && gpu.spec->share > 0 && gpu.share_given)
    return bad("resources.gpu_share",
               "is given, but resources.gpus (\"" + gpu.spec_text + "\") gives a share too");
  if (job.need.gpus > 0 && job.need.gpu_share > 0)
    return bad("resources", "asks for both gpus and gpu_share (a share is of one GPU)");
  job.need.gpu = BERTH_TRY(merge_gpu(gpu));
  if (job.need.gpu != GpuRequirement{} && job.need.gpus == 0 && job.need.gpu_share == 0)
    return bad("resources.gpu", "describes GPUs but resources.gpus asks for none: give both");
  return job;
}

}  // namespace berth::broker

// Kubernetes, Marathon, Chronos and OpenStack manifests of a broker job (broker/manifests.h).
#include "broker/manifests.h"

#include <algorithm>
#include <tuple>

#include "broker/gpu_names.h"
#include "core/strings.h"

namespace berth::broker {
namespace {

using nlohmann::json;

/// A DNS-1123 label made of `name` (what Kubernetes, Marathon and Chronos accept as a name):
/// lower case, every other character a dash, no dash at either end, at most 63 characters.
std::string dns_label(std::string_view name) {
  std::string out;
  for (char c : lower(name)) out += (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '-';
  auto trim_dashes = [](std::string& s) {
    s.erase(0, s.find_first_not_of('-'));
    s.erase(s.find_last_not_of('-') + 1);
  };
  trim_dashes(out);
  if (out.size() > 63) out.resize(63);
  trim_dashes(out);
  return out.empty() ? "berth-job" : out;
}

/// A label value made of `s`: what GPU Feature Discovery publishes for a product name (spaces,
/// and any other character a label value may not hold, as dashes).
std::string label_value(std::string_view s) {
  std::string out;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    out += ok ? c : '-';
  }
  return out;
}

/// `s` as a regular expression that matches exactly `s` (Marathon and Chronos LIKE).
std::string regex_literal(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

/// The leading number of a version ("535" of "535.104.05"), or -1.
int64_t major_of(std::string_view version) {
  int64_t n = 0;
  size_t i = 0;
  for (; i < version.size() && version[i] >= '0' && version[i] <= '9' && i < 9; ++i)
    n = n * 10 + (version[i] - '0');
  return i == 0 ? -1 : n;
}

std::string vendor_of(const BrokerJob& job, const NodeClass& cls) {
  return lower(job.need.gpu.vendor.empty() ? cls.gpu_vendor : job.need.gpu.vendor);
}

std::string gpu_resource(const BrokerJob& job, const NodeClass& cls, const SiteOptions& site) {
  if (!site.gpu_resource.empty()) return site.gpu_resource;
  return vendor_of(job, cls) == "amd" ? "amd.com/gpu" : "nvidia.com/gpu";
}

/// The name the site gives the class's GPUs, for a Mesos attribute: the short type, else the
/// published model.
std::string class_gpu_name(const NodeClass& cls) {
  return cls.gpu_type.empty() ? cls.gpu_model : cls.gpu_type;
}

/// Whether the job names GPU models and the class publishes one to pin it to.
bool pins_model(const BrokerJob& job, const std::string& class_name) {
  return job.need.gpus > 0 && !job.need.gpu.models.empty() && !class_name.empty();
}

/// A Mesos constraint on the GPU model attribute, or an empty array.
json mesos_constraints(const BrokerJob& job, const NodeClass& cls, const SiteOptions& site) {
  json out = json::array();
  std::string name = class_gpu_name(cls);
  if (pins_model(job, name))
    out.push_back(json::array({site.mesos_gpu_attribute, "LIKE", regex_literal(name)}));
  return out;
}

/// GPU Feature Discovery's label expressions for what the job asks of its GPUs. Versions compare
/// on their major number only (a label per part): a minimum's minor part is not enforced.
json gfd_expressions(const BrokerJob& job, const NodeClass& cls) {
  const GpuRequirement& g = job.need.gpu;
  json out = json::array();
  auto gt = [&](const std::string& key, int64_t above) {
    out.push_back(
        {{"key", key}, {"operator", "Gt"}, {"values", json::array({std::to_string(above)})}});
  };
  if (pins_model(job, cls.gpu_model))
    out.push_back({{"key", "nvidia.com/gpu.product"},
                   {"operator", "In"},
                   {"values", json::array({label_value(cls.gpu_model)})}});
  if (g.memory_mib_min > 0) gt("nvidia.com/gpu.memory", g.memory_mib_min - 1);
  if (g.memory_mib_max > 0)
    out.push_back({{"key", "nvidia.com/gpu.memory"},
                   {"operator", "Lt"},
                   {"values", json::array({std::to_string(g.memory_mib_max + 1)})}});
  if (int64_t m = major_of(g.compute_capability_min); m > 0)
    gt("nvidia.com/gpu.compute.major", m - 1);
  if (int64_t m = major_of(g.cuda_min); m > 0) gt("nvidia.com/cuda.runtime.major", m - 1);
  if (int64_t m = major_of(g.driver_min); m > 0) gt("nvidia.com/cuda.driver.major", m - 1);
  return out;
}

}  // namespace

json kubernetes_job(const BrokerJob& job, const NodeClass& cls, const SiteOptions& site) {
  const Requirement& need = job.need;
  std::string name = dns_label(job.name);
  json labels = {{"app.kubernetes.io/managed-by", "berth"}, {"app.kubernetes.io/name", name}};

  json container = {{"name", "job"}, {"image", job.image}};
  if (!job.command.empty()) container["args"] = job.command;  // the image's entrypoint stays
  if (!job.env.empty()) {
    json env = json::array();
    for (const auto& [k, v] : job.env) env.push_back({{"name", k}, {"value", v}});
    container["env"] = env;
  }
  json limits = {{"cpu", std::to_string(need.cpus_per_node())}};
  if (need.memory_mb > 0) limits["memory"] = std::to_string(need.memory_mb) + "Mi";
  std::string resource = gpu_resource(job, cls, site);
  if (need.gpus > 0) limits[resource] = std::to_string(need.gpus_per_node());
  container["resources"] = {{"limits", limits}, {"requests", limits}};

  json pod = {{"restartPolicy", "Never"}, {"containers", json::array({container})}};
  if (!site.runtime_class.empty()) pod["runtimeClassName"] = site.runtime_class;
  if (need.gpus > 0) {
    if (resource == "nvidia.com/gpu") {
      json expressions = gfd_expressions(job, cls);
      if (!expressions.empty())
        pod["affinity"] = {
            {"nodeAffinity",
             {{"requiredDuringSchedulingIgnoredDuringExecution",
               {{"nodeSelectorTerms", json::array({{{"matchExpressions", expressions}}})}}}}}};
    }
    pod["tolerations"] =
        json::array({{{"key", resource}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  }

  json spec = {{"backoffLimit", 0},
               {"ttlSecondsAfterFinished", site.ttl_seconds_after_finished},
               {"template", {{"metadata", {{"labels", labels}}}, {"spec", pod}}}};
  if (need.walltime_s > 0) spec["activeDeadlineSeconds"] = need.walltime_s;
  if (need.nodes > 1) {  // one pod per node, all at once
    spec["completions"] = need.nodes;
    spec["parallelism"] = need.nodes;
  }
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", name}, {"namespace", site.k8s_namespace}, {"labels", labels}}},
          {"spec", spec}};
}

json marathon_app(const BrokerJob& job, const NodeClass& cls, const SiteOptions& site) {
  const Requirement& need = job.need;
  json app = {{"id", "/" + dns_label(job.name)},
              {"instances", need.nodes},
              {"cpus", static_cast<double>(need.cpus_per_node())},
              {"gpus", need.gpus > 0 ? need.gpus_per_node() : 0},
              {"networks", json::array({{{"mode", "host"}}})},
              {"portDefinitions", json::array()},
              {"labels", {{"created_by", "berth"}}}};
  if (need.memory_mb > 0) app["mem"] = static_cast<double>(need.memory_mb);
  if (site.disk_mb > 0) app["disk"] = static_cast<double>(site.disk_mb);
  if (!job.command.empty()) app["args"] = job.command;
  if (!job.env.empty()) app["env"] = job.env;
  // Marathon refuses GPUs under the Docker containerizer (AppValidation.complyWithGpuRules).
  app["container"] = {{"type", need.gpus > 0 ? "MESOS" : "DOCKER"},
                      {"docker", {{"image", job.image}}}};
  if (json c = mesos_constraints(job, cls, site); !c.empty()) app["constraints"] = c;
  return app;
}

json chronos_job(const BrokerJob& job, const NodeClass& cls, const SiteOptions& site) {
  const Requirement& need = job.need;
  bool gpus = need.gpus > 0 && site.chronos_gpus;
  // Run once, now (an empty start); the period of a single run is never used.
  json j = {{"name", dns_label(job.name)},
            {"schedule", "R1//PT1M"},
            {"retries", 0},
            {"shell", false},
            {"cpus", static_cast<double>(need.cpus_per_node())},
            {"container",
             {{"type", gpus ? "MESOS" : "DOCKER"}, {"image", job.image}, {"network", "HOST"}}}};
  if (!job.command.empty()) j["arguments"] = job.command;  // the image's entrypoint stays
  if (need.memory_mb > 0) j["mem"] = static_cast<double>(need.memory_mb);
  if (site.disk_mb > 0) j["disk"] = static_cast<double>(site.disk_mb);
  if (gpus) j["gpus"] = need.gpus_per_node();
  if (need.walltime_s > 0) j["maxCompletionTime"] = need.walltime_s;
  if (!job.env.empty()) {
    json env = json::array();
    for (const auto& [k, v] : job.env) env.push_back({{"name", k}, {"value", v}});
    j["environmentVariables"] = env;
  }
  if (json c = mesos_constraints(job, cls, site); !c.empty()) j["constraints"] = c;
  return j;
}

namespace {

/// Whether a flavour's GPU model is one of `wanted` (broker/gpu_names.h's matching, the
/// flavour's memory telling its variant).
bool flavour_model_matches(const Flavour& f, const std::vector<std::string>& wanted) {
  if (wanted.empty()) return true;
  NodeClass c;
  c.gpu_model = f.gpu_model;
  c.gpu_memory_mib = f.gpu_memory_mib;
  return std::any_of(wanted.begin(), wanted.end(),
                     [&c](const std::string& w) { return gpu_model_matches(w, c); });
}

bool holds(const Flavour& f, const Requirement& need) {
  if (f.vcpus < need.cpus_per_node() || f.ram_mb < need.memory_mb) return false;
  if (need.gpus <= 0) return true;
  const GpuRequirement& g = need.gpu;
  return f.gpus >= need.gpus_per_node() && flavour_model_matches(f, g.models) &&
         (g.memory_mib_min <= 0 || f.gpu_memory_mib >= gpu_memory_floor(g.memory_mib_min)) &&
         (g.memory_mib_max <= 0 || (f.gpu_memory_mib > 0 && f.gpu_memory_mib <= g.memory_mib_max));
}

/// What a node of `need` asks, in words: "2 GPUs (H100 or A100-80GB, at least 40960 MiB),
/// 16 vCPUs and 65536 MB of RAM".
std::string asked(const Requirement& need) {
  std::string out;
  if (need.gpus > 0) {
    int n = need.gpus_per_node();
    out = std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
    std::vector<std::string> what;
    if (!need.gpu.models.empty()) {
      std::string models;
      for (const auto& m : need.gpu.models) models += (models.empty() ? "" : " or ") + m;
      what.push_back(models);
    }
    if (need.gpu.memory_mib_min > 0)
      what.push_back("at least " + std::to_string(need.gpu.memory_mib_min) + " MiB");
    if (need.gpu.memory_mib_max > 0)
      what.push_back("at most " + std::to_string(need.gpu.memory_mib_max) + " MiB");
    for (size_t i = 0; i < what.size(); ++i) out += (i == 0 ? " (" : ", ") + what[i];
    if (!what.empty()) out += ")";
    out += ", ";
  }
  int cpus = need.cpus_per_node();
  out += std::to_string(cpus) + (cpus == 1 ? " vCPU" : " vCPUs");
  out += " and " + std::to_string(need.memory_mb) + " MB of RAM";
  return out;
}

}  // namespace

const Flavour* smallest_flavour(const Requirement& need, const std::vector<Flavour>& flavours) {
  const Flavour* best = nullptr;
  for (const Flavour& f : flavours) {
    if (!holds(f, need)) continue;
    if (best == nullptr ||
        std::tie(f.gpus, f.ram_mb, f.name) < std::tie(best->gpus, best->ram_mb, best->name))
      best = &f;
  }
  return best;
}

Result<json> openstack_server(const BrokerJob& job, const NodeClass& /*cls*/,
                              const SiteOptions& site) {
  const Flavour* f = smallest_flavour(job.need, site.flavours);
  if (f == nullptr)
    return make_error(
        "check requirement", "OpenStack flavours",
        "none of " + std::to_string(site.flavours.size()) + " holds " + asked(job.need),
        ErrorCode::kUnsupported);
  json server = {{"name", job.name},
                 {"imageRef", site.image_ref},
                 {"flavorRef", f->id},
                 {"metadata", {{"created_by", "berth"}, {"berth_image", job.image}}}};
  if (site.network_id.empty())
    server["networks"] = "auto";
  else
    server["networks"] = json::array({{{"uuid", site.network_id}}});
  if (!site.key_name.empty()) server["key_name"] = site.key_name;
  if (job.need.nodes > 1) {  // one server per node
    server["min_count"] = job.need.nodes;
    server["max_count"] = job.need.nodes;
  }
  return json{{"server", server}};
}

json berthd_job(const BrokerJob& job, const NodeClass& cls) {
  json resources = {{"nodes", job.need.nodes},
                    {"tasks", job.need.tasks},
                    {"cpus_per_task", job.need.cpus_per_task}};
  if (job.need.gpus > 0) resources["gpus"] = job.need.gpus;
  if (job.need.gpu_share > 0) resources["gpu_share"] = job.need.gpu_share;
  // The class's GRES type pins the model the broker chose: gpus of any type would let Slurm
  // start the job on another model of the site.
  if ((job.need.gpus > 0 || job.need.gpu_share > 0) && !cls.gpu_type.empty())
    resources["gpu_model"] = cls.gpu_type;
  if (job.need.memory_mb > 0) resources["memory_mb"] = job.need.memory_mb;
  if (job.need.walltime_s > 0) resources["walltime_s"] = job.need.walltime_s;
  if (!cls.partition.empty()) resources["partition"] = cls.partition;
  json body = {{"name", job.name}, {"image", job.image}, {"resources", std::move(resources)}};
  if (!job.command.empty()) body["command"] = job.command;
  if (!job.env.empty()) body["env"] = job.env;
  if (!job.mounts.empty()) body["mounts"] = job.mounts;
  if (!job.workdir.empty()) body["workdir"] = job.workdir;
  if (!job.group.empty()) body["group"] = job.group;
  if (job.job_class != "batch") body["class"] = job.job_class;
  return body;
}

Result<json> manifest_for(std::string_view kind, const BrokerJob& job, const NodeClass& cls,
                          const SiteOptions& site) {
  if (kind == "berthd") return berthd_job(job, cls);
  bool known =
      kind == "kubernetes" || kind == "marathon" || kind == "chronos" || kind == "openstack";
  if (known && job.need.gpu_share > 0 && job.need.gpus == 0)  // not silently none
    return make_error("check requirement", std::string(kind),
                      "asks a share of a GPU; this kind of site gives whole GPUs only",
                      ErrorCode::kUnsupported);
  if (kind == "kubernetes") return kubernetes_job(job, cls, site);
  if (kind == "marathon") return marathon_app(job, cls, site);
  if (kind == "chronos") {
    if (job.need.gpus > 0 && !site.chronos_gpus)
      return make_error("check requirement", "Chronos",
                        "asks " + std::to_string(job.need.gpus) +
                            " GPUs; this site's Chronos has no GPU support (chronos_gpus)",
                        ErrorCode::kUnsupported);
    return chronos_job(job, cls, site);
  }
  if (kind == "openstack") return openstack_server(job, cls, site);
  return make_error(
      "parse", "manifest kind",
      "\"" + std::string(kind) + "\" is not berthd, kubernetes, marathon, chronos or openstack",
      ErrorCode::kInvalidInput);
}

}  // namespace berth::broker

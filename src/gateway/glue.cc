#include "gateway/glue.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <tuple>

namespace berth::gateway {
namespace {

using nlohmann::json;

/// A node that takes no work (GLUE's "unavailable instances"): the Slurm adapter has already
/// folded Slurm's down, drained, failing, ... states into one (slurm_v0038.cc, node_state).
bool unavailable(const std::string& state) {
  return state == "unavailable";
}

struct NodeClass {
  int cpus;
  long long memory_mb;
  std::string gpu_model;
  int gpus;
  bool infiniband;
  auto key() const { return std::tie(cpus, memory_mb, gpu_model, gpus, infiniband); }
  bool operator<(const NodeClass& o) const { return key() < o.key(); }
  /// "64cpu-512000mb-ib-4xh100": "-ib" before the GPUs, so that the GRES type stays last.
  std::string name() const {
    std::string n = std::to_string(cpus) + "cpu-" + std::to_string(memory_mb) + "mb";
    if (infiniband) n += "-ib";
    if (gpus > 0) n += "-" + std::to_string(gpus) + "x" + (gpu_model.empty() ? "gpu" : gpu_model);
    return n;
  }
};

NodeClass class_of(const GlueNode& n) {
  return {n.cpus, n.memory_mb, n.gpu_model, n.gpus, n.infiniband};
}

}  // namespace

json glue_document(const GlueSite& site) {
  const std::string suffix = "@" + site.cluster + "." + site.host;
  auto id = [&suffix](const char* entity, const std::string& name) {
    return std::string("urn:glue2:") + entity + ":" + name + suffix;
  };
  auto entity = [&site](const std::string& entity_id, const std::string& name) {
    return json{{"ID", entity_id},
                {"Name", name},
                {"CreationTime", site.creation_time},
                {"Validity", site.validity_s}};
  };
  const std::string service_id = id("ComputingService", site.cluster);
  const std::string manager_id = id("ComputingManager", site.cluster);

  // Execution environments: one per node class; a node counts as used when it runs anything.
  std::map<NodeClass, json> classes;
  long long total_cpus = 0, used_cpus = 0;
  int total_gpus = 0, available_gpus = 0, used_gpus = 0;
  for (const GlueNode& n : site.nodes) {
    NodeClass c = class_of(n);
    auto [it, fresh] = classes.try_emplace(c);
    json& e = it->second;
    if (fresh) {
      e = entity(id("ExecutionEnvironment", c.name()), c.name());
      e["Platform"] = "amd64";
      e["OSFamily"] = "linux";
      e["LogicalCPUs"] = c.cpus;
      e["MainMemorySize"] = c.memory_mb;
      e["TotalInstances"] = 0;
      e["UsedInstances"] = 0;
      e["UnavailableInstances"] = 0;
      if (c.infiniband)
        e["NetworkInfo"] = json::array({"infiniband"});  // GLUE's NetworkInfo_t word
      e["Associations"] = {{"ComputingManagerID", manager_id}};
    }
    const bool down = unavailable(n.state);
    e["TotalInstances"] = e["TotalInstances"].get<int>() + 1;
    if (down)
      e["UnavailableInstances"] = e["UnavailableInstances"].get<int>() + 1;
    else if (n.alloc_cpus > 0 || n.gpus_used > 0)
      e["UsedInstances"] = e["UsedInstances"].get<int>() + 1;
    total_cpus += n.cpus;
    used_cpus += n.alloc_cpus;
    total_gpus += n.gpus;
    if (!down) available_gpus += n.gpus;
    used_gpus += n.gpus_used;
  }

  json doc = json::object();
  json envs = json::array(), accs = json::array();
  for (auto& [c, e] : classes) {
    if (c.gpus > 0) {
      std::string acc_id = id("AcceleratorEnvironment", c.name());
      json a = entity(acc_id, c.name());
      a["Type"] = "GPU";
      a["Numbers"] = c.gpus;
      auto known = site.accelerators.find(c.gpu_model);
      const GlueAccelerator* info = known == site.accelerators.end() ? nullptr : &known->second;
      a["Model"] = info && !info->model.empty() ? info->model : c.gpu_model;
      // Slurm's GRES type is what a job names (gpu:a100:2), and Model may be NVML's long name:
      // a broker needs both.
      json other = json::array();
      if (!c.gpu_model.empty()) other.push_back("GRESType=" + c.gpu_model);
      if (info) {
        if (!info->vendor.empty()) a["Vendor"] = info->vendor;
        if (info->memory_mb > 0) a["Memory"] = info->memory_mb;
        if (!info->compute_capability.empty()) a["ComputeCapability"] = info->compute_capability;
        if (!info->driver_version.empty()) a["Version"] = info->driver_version;
        if (!info->cuda_version.empty()) other.push_back("CUDAVersion=" + info->cuda_version);
      }
      if (!other.empty()) a["OtherInfo"] = std::move(other);
      a["Associations"] = {{"ExecutionEnvironmentID", e["ID"]}};
      e["Associations"]["AcceleratorEnvironmentID"] = {acc_id};
      accs.push_back(std::move(a));
    }
    envs.push_back(e);
  }

  // Shares: one per partition, slots counted over its available nodes.
  json shares = json::array(), share_accs = json::array();
  int running = 0, waiting = 0;
  for (const GluePartition& p : site.partitions) {
    std::string share_id = id("ComputingShare", p.name);
    json s = entity(share_id, p.name);
    s["MappingQueue"] = p.name;
    if (p.max_walltime_s >= 0) s["MaxWallTime"] = p.max_walltime_s;
    if (p.default_walltime_s >= 0) s["DefaultWallTime"] = p.default_walltime_s;
    s["ServingState"] = p.up ? "production" : "closed";
    s["RunningJobs"] = p.running_jobs;
    s["WaitingJobs"] = p.waiting_jobs;
    s["TotalJobs"] = p.running_jobs + p.waiting_jobs;
    long long slots = 0, used = 0;
    int gpus = 0, gpus_used = 0;
    std::set<std::string> env_ids;
    for (const GlueNode& n : site.nodes) {
      if (std::find(n.partitions.begin(), n.partitions.end(), p.name) == n.partitions.end())
        continue;
      env_ids.insert(classes[class_of(n)]["ID"].get<std::string>());
      used += n.alloc_cpus;
      gpus_used += n.gpus_used;
      if (unavailable(n.state)) continue;
      slots += n.cpus;
      gpus += n.gpus;
    }
    s["UsedSlots"] = used;
    s["FreeSlots"] = std::max(0LL, slots - used);
    s["Associations"] = {
        {"ComputingServiceID", service_id},
        {"ExecutionEnvironmentID", json(std::vector<std::string>(env_ids.begin(), env_ids.end()))}};
    shares.push_back(std::move(s));
    if (gpus > 0 || gpus_used > 0) {
      json a = entity(id("ComputingShareAccelerator", p.name + ".gpu"), p.name + " GPUs");
      a["Type"] = "GPU";
      a["UsedSlots"] = gpus_used;
      a["FreeSlots"] = std::max(0, gpus - gpus_used);
      if (p.max_gpus_per_job >= 0) a["MaxSlotsPerJob"] = p.max_gpus_per_job;
      a["Associations"] = {{"ComputingShareID", share_id}};
      share_accs.push_back(std::move(a));
    }
    running += p.running_jobs;
    waiting += p.waiting_jobs;
  }

  json service = entity(service_id, site.cluster);
  service["Type"] = "org.ogf.glue.computing";
  service["QualityLevel"] = "production";
  service["TotalJobs"] = running + waiting;
  service["RunningJobs"] = running;
  service["WaitingJobs"] = waiting;
  json share_ids = json::array();
  for (const auto& s : shares) share_ids.push_back(s["ID"]);
  service["Associations"] = {{"ComputingShareID", share_ids}, {"ComputingManagerID", {manager_id}}};

  // Where to submit: GLUE's Endpoint, named by the interface a broker speaks to it.
  json endpoints = json::array();
  if (!site.endpoint_url.empty()) {
    std::string endpoint_id = id("ComputingEndpoint", site.cluster);
    json ep = entity(endpoint_id, site.cluster + " berthd");
    ep["URL"] = site.endpoint_url;
    ep["InterfaceName"] = "org.berth.berthd";
    ep["InterfaceVersion"] = "1";
    ep["Technology"] = "rest";
    ep["QualityLevel"] = "production";
    ep["HealthState"] = "ok";
    ep["ServingState"] = "production";
    ep["Associations"] = {{"ComputingServiceID", service_id}};
    service["Associations"]["ComputingEndpointID"] = json::array({endpoint_id});
    endpoints.push_back(std::move(ep));
  }

  json manager = entity(manager_id, site.cluster);
  manager["ProductName"] = "SLURM";
  if (!site.slurm_version.empty()) manager["ProductVersion"] = site.slurm_version;
  manager["TotalLogicalCPUs"] = total_cpus;
  manager["TotalSlots"] = total_cpus;
  manager["SlotsUsedByLocalJobs"] = used_cpus;
  json env_ids = json::array();
  for (const auto& e : envs) env_ids.push_back(e["ID"]);
  manager["Associations"] = {{"ComputingServiceID", service_id},
                             {"ExecutionEnvironmentID", env_ids}};

  doc["ComputingService"] = {service};
  doc["ComputingEndpoint"] = endpoints;
  doc["ComputingManager"] = {manager};
  if (total_gpus > 0) {
    json a =
        entity(id("ComputingManagerAccelerator", site.cluster + ".gpu"), site.cluster + " GPUs");
    a["Type"] = "GPU";
    a["TotalNumbers"] = total_gpus;
    a["TotalSlots"] = available_gpus;
    a["UsedSlots"] = used_gpus;
    a["Associations"] = {{"ComputingManagerID", manager_id}};
    doc["ComputingManagerAccelerator"] = {a};
  } else {
    doc["ComputingManagerAccelerator"] = json::array();
  }
  doc["ComputingShare"] = shares;
  doc["ComputingShareAccelerator"] = share_accs;
  doc["ExecutionEnvironment"] = envs;
  doc["AcceleratorEnvironment"] = accs;
  return doc;
}

}  // namespace berth::gateway

// The broker's vocabulary (layer 6, docs/broker.md): what a job asks of a site (Requirement),
// what a site offers, one node class at a time (NodeClass, SiteInfo), and why a class cannot
// take a job (Reason). Every other broker header speaks these; none of them does I/O.
//
// Fit is decided per node class, never on a site's totals: four free GPUs spread over four
// nodes do not run a job asking for four GPUs on one node (the aggregate trap of Liqo and
// karmada#4284, ../shared/research/broker.md 4.4 and 7.4).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace berth::broker {

/// What a job asks of its GPUs beyond their count: resources.gpu of a job body, or what the
/// shorthand ("H100,A100-80GB:80GB:2", broker/gpu_spec.h) and a TOSCA template say. Empty or
/// zero fields ask nothing.
struct GpuRequirement {
  std::string vendor;                  ///< "nvidia", "amd", "intel"; "" any
  std::vector<std::string> models;     ///< canonical names (broker/gpu_names.h); empty: any model
  int64_t memory_mib_min = 0;          ///< per GPU; GiB in a spec is 1024 MiB
  int64_t memory_mib_max = 0;          ///< 0: no upper bound (a spec's "16GB..32GB")
  std::string compute_capability_min;  ///< "8.0"; compared as a version
  std::string cuda_min;                ///< "12.2": the site's CUDA (driver API) version, at least
  std::string driver_min;              ///< "535": the driver's version, at least
  bool operator==(const GpuRequirement&) const = default;
};

/// What a job needs, normalised: counts per job as berthd's job body states them
/// (gateway/job_request.h), GPUs spread over the nodes.
struct Requirement {
  int nodes = 1;
  int tasks = 1;
  int cpus_per_task = 1;
  int gpus = 0;            ///< GPUs of the whole job
  double gpu_share = 0;    ///< 0 < share < 1: a fraction of one GPU per node (not with gpus)
  int64_t memory_mb = 0;   ///< per node; 0 for the site's default
  int64_t walltime_s = 0;  ///< 0 for the partition's default
  GpuRequirement gpu;
  bool infiniband = false;

  /// ceil(gpus / nodes): what each node of one class must hold.
  int gpus_per_node() const { return nodes > 0 ? (gpus + nodes - 1) / nodes : gpus; }
  /// CPUs each node must hold: ceil(tasks / nodes) * cpus_per_task.
  int cpus_per_node() const {
    return (nodes > 0 ? (tasks + nodes - 1) / nodes : tasks) * cpus_per_task;
  }
  bool operator==(const Requirement&) const = default;
};

/// Where a job may go and how the broker tries: a job body's "placement".
struct PlacementRequest {
  std::vector<std::string> sites;        ///< only these; empty: any
  std::vector<std::string> exclude;      ///< never these
  std::map<std::string, double> prefer;  ///< site -> extra weight
  std::string strategy = "rank";         ///< "rank" or "race"
  bool operator==(const PlacementRequest&) const = default;
};

/// When the broker moves a job on: a job body's "failover".
struct FailoverPolicy {
  int max_sites = 3;
  int64_t pending_timeout_s = 300;
  int64_t deadline_s = 86400;
  bool operator==(const FailoverPolicy&) const = default;
};

/// A job as a client posts it to a broker: berthd's job body (gateway/job_request.h) with the
/// broker's requirements (docs/broker.md), read by parse_broker_job() (broker/job_body.h).
struct BrokerJob {
  std::string name = "berthd-job";
  std::string image;
  std::vector<std::string> command;  ///< empty: the image's own
  std::map<std::string, std::string> env;
  /// berthd's own fields, passed to the site as given (the site's policy checks the mounts).
  std::vector<std::string> mounts;
  std::string workdir;
  std::string group;
  std::string job_class = "batch";
  Requirement need;
  PlacementRequest placement;
  FailoverPolicy failover;
  bool operator==(const BrokerJob&) const = default;
};

/// One kind of node of one partition (GLUE: ComputingShare x ExecutionEnvironment x
/// AcceleratorEnvironment): the unit a job is fitted to. Counts are nodes of this class.
struct NodeClass {
  std::string partition;  ///< ComputingShare's MappingQueue; "" where the site has none
  std::string name;       ///< the ExecutionEnvironment's Name ("64cpu-512000mb-4xh100")
  /// The ExecutionEnvironment's ID, a CMDB flavour's flavor_id (what a server is booted on).
  std::string id;
  std::string gpu_vendor;  ///< as published ("NVIDIA"); "" for none
  std::string gpu_model;   ///< as published ("NVIDIA H100 80GB HBM3"); "" for none or untyped
  std::string gpu_type;    ///< Slurm's GRES type ("h100" of gpu:h100:4); "" if untyped
  int gpus_per_node = 0;
  int64_t gpu_memory_mib = 0;      ///< per GPU; 0 where not published
  std::string compute_capability;  ///< the highest published ("9.0"); "" unknown
  std::string cuda_version;        ///< "12.4"; "" unknown
  std::string driver_version;      ///< "550.54.15"; "" unknown
  int cpus_per_node = 0;
  int64_t memory_mb_per_node = 0;
  int total_nodes = 0;
  int unavailable_nodes = 0;
  int used_nodes = 0;           ///< running anything
  int free_gpus = -1;           ///< free GPUs of this class; -1 unknown
  int64_t max_walltime_s = -1;  ///< the partition's; -1 unlimited
  bool production = true;       ///< the partition's ServingState
  int max_gpus_per_job = -1;    ///< -1 none
  int waiting_jobs = 0;
  int running_jobs = 0;
  bool infiniband = false;
  bool operator==(const NodeClass&) const = default;
};

/// What one site published, as the broker read it.
struct SiteInfo {
  std::string site;
  std::string creation_time;  ///< RFC 3339, the document's CreationTime
  int64_t validity_s = 0;     ///< the document's Validity
  std::vector<NodeClass> classes;
  bool operator==(const SiteInfo&) const = default;
};

/// Why a (site, class) cannot take a job: one code of the fixed list (docs/broker.md) and a
/// sentence naming what was asked and what the class has.
struct Reason {
  std::string code;     ///< "no_gpu_model", "gpus_per_node", ...
  std::string message;  ///< "asks 4 GPUs per node; nodes of this class have 2"
  bool operator==(const Reason&) const = default;
};

}  // namespace berth::broker

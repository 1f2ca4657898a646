#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace berth::gateway {

/// One Slurm node as the GLUE document needs it (from slurmrestd's /nodes).
struct GlueNode {
  std::string name;
  std::string state;  ///< as SlurmNode's: idle, mixed, allocated or unavailable
  int cpus = 0;
  int alloc_cpus = 0;
  long long memory_mb = 0;
  std::string gpu_model;  ///< the GRES type ("a100" of gpu:a100:4), "" if untyped
  int gpus = 0;           ///< GRES gpu count on the node
  int gpus_used = 0;
  std::vector<std::string> partitions;
  /// The node's jobs reach the others over InfiniBand. A node's fact, not the site's: sites mix
  /// nodes with and without an HCA (GPU racks on IB, service or CPU nodes on Ethernet), and a
  /// site-wide flag would promise IB on nodes without it. Nodes that differ in it are of
  /// different classes.
  bool infiniband = false;
};

/// One partition (from slurmrestd's /partitions) and its jobs.
struct GluePartition {
  std::string name;
  long long max_walltime_s = -1;      ///< -1: unlimited
  long long default_walltime_s = -1;  ///< -1: none
  bool up = true;
  int running_jobs = 0;
  int waiting_jobs = 0;
  int max_gpus_per_job = -1;  ///< from the gateway's limits; -1: none
};

/// What is known of one GPU model beyond Slurm's count: what NVML measured on the nodes
/// (gateway/gpu_facts.h; the compute capability only so) or the gateway's configuration.
/// Empty fields are left out.
struct GlueAccelerator {
  std::string vendor;  ///< "NVIDIA"
  std::string model;   ///< "NVIDIA H100 80GB HBM3"
  long long memory_mb = 0;
  std::vector<std::string> compute_capability;  ///< ["9.0"]
  std::string driver_version;
  std::string cuda_version;
};

struct GlueSite {
  std::string cluster;  ///< Slurm's ClusterName
  std::string host;     ///< the gateway's public name, part of the IDs
  std::string slurm_version;
  std::string creation_time;  ///< RFC 3339
  long long validity_s = 300;
  std::vector<GlueNode> nodes;
  std::vector<GluePartition> partitions;
  std::map<std::string, GlueAccelerator> accelerators;  ///< by GRES type ("" for untyped)
  /// berthd's public base URL ("https://gw.example.org:8443"): published as a ComputingEndpoint
  /// so that a broker reading the document finds where to submit; "" publishes none.
  std::string endpoint_url;
};

/// The site as GLUE 2.1 entities in JSON: ComputingService, ComputingEndpoint (berthd's URL,
/// InterfaceName "org.berth.berthd"; none without endpoint_url), ComputingManager,
/// ComputingManagerAccelerator, ComputingShare (one per partition), ComputingShareAccelerator,
/// ExecutionEnvironment (one per homogeneous node class: CPUs, memory, GPU model and count,
/// InfiniBand, the last as NetworkInfo ["infiniband"]) and AcceleratorEnvironment (OtherInfo
/// "GRESType=<type>" for a typed GRES). Attribute names are GLUE 2.1's; each entity has an "ID"
/// (urn:glue2:<Entity>:<name>@<cluster>.<host>) and "Associations" by the other's ID.
nlohmann::json glue_document(const GlueSite& site);

}  // namespace berth::gateway

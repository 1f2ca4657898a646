// What the broker submits to a site that is not Slurm: a Kubernetes batch/v1 Job, a Marathon
// app, a Chronos run-once job, an OpenStack server (../shared/research/broker.md 5 and 7.7).
// Each emitter is a pure function of the job, the node class the broker fitted it to, and the
// site's settings; none does I/O. GPU model and memory become what each backend selects on:
// GPU Feature Discovery node labels (Kubernetes), a Mesos agent attribute (Marathon, Chronos),
// a flavour (OpenStack).
//
// Retries are the broker's (it moves a job to another site), so every manifest asks its backend
// for none: backoffLimit 0, Chronos retries 0.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "broker/model.h"
#include "core/error.h"

namespace berth::broker {

/// One OpenStack flavour as the site's Nova lists it, with the GPUs its PCI alias or vGPU
/// resources give a server.
struct Flavour {
  std::string id;    ///< the flavorRef
  std::string name;  ///< "g1.h100x2"
  int vcpus = 0;
  int64_t ram_mb = 0;
  int gpus = 0;
  std::string gpu_model;       ///< "H100", matched as broker/gpu_names.h matches models
  int64_t gpu_memory_mib = 0;  ///< per GPU; 0 where not known
  bool operator==(const Flavour&) const = default;
};

/// What a manifest needs to know of its site beyond the node class.
struct SiteOptions {
  // Kubernetes
  std::string k8s_namespace = "default";
  std::string runtime_class;  ///< the pods' runtimeClassName ("nvidia"); "" none
  /// The extended resource of the GPUs; "" chosen from the vendor (the job's, else the class's):
  /// "amd.com/gpu" for AMD, "nvidia.com/gpu" otherwise.
  std::string gpu_resource;
  int64_t ttl_seconds_after_finished = 86400;  ///< how long a finished Job stays readable
  // Mesos: Marathon and Chronos
  std::string mesos_gpu_attribute = "gpu_model";  ///< the agents' attribute naming their GPUs
  int64_t disk_mb = 0;                            ///< scratch disk per task; 0 the default
  /// Whether the site's Chronos is DEEP's, with GPU support (mesos/chronos ebaa23e7, PR #810):
  /// upstream Chronos has no `gpus` field.
  bool chronos_gpus = false;
  // OpenStack
  std::vector<Flavour> flavours;
  std::string image_ref;   ///< the Glance image servers boot
  std::string network_id;  ///< "" lets Nova pick ("networks": "auto")
  std::string key_name;    ///< "" none
};

/// The Kubernetes batch/v1 Job for `job` on a node of class `cls`: GPUs as the extended
/// resource (limits = requests), the GPU model, memory and driver as node affinity on GPU
/// Feature Discovery's labels (NVIDIA only), walltime as activeDeadlineSeconds.
nlohmann::json kubernetes_job(const BrokerJob& job, const NodeClass& cls, const SiteOptions& site);

/// The Marathon app (POST /v2/apps) for `job`: integer gpus with the Mesos containerizer (a
/// Docker image under MESOS), the Docker containerizer without GPUs, host networking, the GPU
/// model as a LIKE constraint on the site's attribute.
nlohmann::json marathon_app(const BrokerJob& job, const NodeClass& cls, const SiteOptions& site);

/// The Chronos job (POST /v1/scheduler/iso8601) that runs `job` once, now, without retries;
/// gpus and the Mesos containerizer only where site.chronos_gpus (the caller refuses a GPU job
/// elsewhere: manifest_for does).
nlohmann::json chronos_job(const BrokerJob& job, const NodeClass& cls, const SiteOptions& site);

/// The smallest of `flavours` that holds one node of `need` (enough GPUs of a wanted model and
/// memory, vCPUs and RAM; smallest: fewest GPUs, then least RAM, then name), or nullptr.
const Flavour* smallest_flavour(const Requirement& need, const std::vector<Flavour>& flavours);

/// The OpenStack server create request ({"server": {...}}) for `job` on the smallest adequate
/// flavour of site.flavours; an error naming what was asked when none fits.
Result<nlohmann::json> openstack_server(const BrokerJob& job, const NodeClass& cls,
                                        const SiteOptions& site);

/// The POST /v1/jobs body a berthd site is sent for `job` on a node of class `cls`: berthd's
/// own fields as the job gave them, GPUs as a count of the class's GRES type (resources.gpu_model)
/// and the class's partition, so that the site's Slurm starts it where the broker chose.
nlohmann::json berthd_job(const BrokerJob& job, const NodeClass& cls);

/// The manifest of `kind` ("berthd", "kubernetes", "marathon", "chronos", "openstack") for `job`; a
/// one-line error for another kind, a flavour-less OpenStack, a GPU job on an upstream Chronos,
/// a share of a GPU (gpu_share: none of these backends gives one).
Result<nlohmann::json> manifest_for(std::string_view kind, const BrokerJob& job,
                                    const NodeClass& cls, const SiteOptions& site);

}  // namespace berth::broker

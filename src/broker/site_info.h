// What a site offers, read from what it publishes (../shared/research/broker.md 3, 7.3): a GLUE
// 2.x JSON document (a berthd's GET /v1/resources, or the file of a site without one) or an EGI
// cloud-info-provider CMDB JSON file, turned into node classes (broker/model.h). Pure functions
// over parsed JSON; fetching, caching and freshness are the caller's.
//
// GLUE dialects read. All three share the document shape {"<Entity>": [{"ID": ..., ...}]} and
// GLUE's attribute names; they differ in how an entity names the others:
//  - berthd's (gateway/glue.h): "Associations": {"<Entity>ID": ID or [IDs]};
//  - EGI cloud-info-provider's GLUE21Json: "Associations": {"<Entity>": [IDs]};
//  - OGF GLUE 2.0 JSON (OGF-GLUE/JSON schema): plain attributes, a ComputingShare's "Resource"
//    ([ExecutionEnvironment IDs]) and an ExecutionEnvironment's "Share" ([ComputingShare IDs]);
//    GLUE 2.1's accelerators in that style name theirs by "ExecutionEnvironment" (an
//    AcceleratorEnvironment) and "ComputingShare" or "Share" (a ComputingShareAccelerator), and
//    an ExecutionEnvironment may list its "AcceleratorEnvironment" IDs.
// A link counts from either end, and a link to an ID the document lacks is an error.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/model.h"
#include "core/error.h"

namespace berth::broker {

/// The node classes of a GLUE 2.x JSON document of `site`: one per (ComputingShare) x
/// (ExecutionEnvironment of that share) x (its GPU AcceleratorEnvironment, if any), in the
/// document's order of shares, then of environments; an environment in no share gives one class
/// with partition "", after the rest. What each field is read from:
///  - partition: the share's MappingQueue (else its Name); name: the environment's Name (else ID);
///  - cpus and memory per node: LogicalCPUs, MainMemorySize (MB); total, unavailable and used
///    nodes: TotalInstances, UnavailableInstances, UsedInstances (GLUE counts an environment over
///    the whole site, not per share); infiniband: NetworkInfo holds "infiniband";
///  - from the AcceleratorEnvironment of Type GPU (no Type: GPU; others are left out): Vendor,
///    Model, Numbers (EGI: Number) per node, Memory (MB, turned into MiB, rounded up so that
///    berthd's MiB come back exact), the highest ComputeCapability, Version (the driver's), and
///    OtherInfo ("Key=Value" strings, or an object) CUDAVersion and GRESType;
///  - from the share: MaxWallTime (absent: -1), ServingState ("production", or absent, is in
///    production), RunningJobs, WaitingJobs; from its GPU ComputingShareAccelerator:
///    MaxSlotsPerJob (max_gpus_per_job; absent: -1);
///  - free_gpus: 0 for a class without GPUs; the share accelerator's FreeSlots where the share
///    holds one GPU class; else all GPUs of available nodes where no node of the class is used;
///    else -1.
/// SiteInfo's creation_time and validity_s are the first ComputingService's CreationTime and
/// Validity (else the first ExecutionEnvironment's). "UNKNOWN", GLUE's placeholder, reads as "".
/// A malformed document is one kInvalidInput error, "parse GLUE document of site S: <what>".
Result<SiteInfo> read_glue(std::string_view site, const nlohmann::json& doc);

/// The node classes of an EGI cloud-info-provider CMDB JSON document of `site` (formatters
/// compute.cmdb.json: a list of {"type", "data"}): one class per flavour ("flavor" entries,
/// deduplicated by flavor_id, as each tenant repeats them), GPU or not, partition "" (a cloud
/// has no queues: a class is picked by its name, the flavour's flavor_name). num_vcpus, ram (MB),
/// num_gpus, gpu_vendor, gpu_model and infiniband_support are the flavour's; cuda_version and
/// driver_version come from the service's properties (gpu_cuda_version, gpu_driver_version), for
/// GPU flavours. The CMDB publishes no capacity: each class is one node that can be started
/// (total_nodes 1), free_gpus unknown (-1), no limits, no queue; creation_time is "" and
/// validity_s 0 (the caller's info_ttl_s applies). Other entries are skipped. A malformed
/// document is one kInvalidInput error, "parse CMDB document of site S: <what>".
Result<SiteInfo> read_cmdb(std::string_view site, const nlohmann::json& doc);

}  // namespace berth::broker

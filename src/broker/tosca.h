// TOSCA templates of INDIGO's types as broker job bodies (docs/broker.md, "TOSCA templates";
// ../shared/research/broker.md 2, paas-gateway.md 1.1-1.4): what a DEEP user posts to the
// INDIGO orchestrator, posted to a broker instead. Pure: the template and its inputs in, the
// job body of broker/job_body.h out.
//
// One job node is read: a tosca.nodes.indigo.Container.Application.Docker(.Marathon|.Chronos)
// with its image artifact, command and environment, or a tosca.nodes.indigo.Qcg.Job with its
// executable, cores, memory, gpus and wall_clock. Its host chain (requirements: host, to a
// Container.Runtime.Docker, to a tosca.nodes.indigo.Compute) gives the resources: host num_cpus,
// mem_size (a TOSCA scalar-unit.size, "8 GB"), num_gpus (per host), gpu_vendor, gpu_model,
// infiniband_support; os cuda_min_version, a real minimum; scalable count, the hosts. Inputs
// are the template's defaults, overridden by the request's; get_input and concat are
// evaluated; a value known only once deployed (get_attribute) drops the environment variable
// it sets and is an error anywhere else.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace berth::broker {

/// Translates TOSCA template `tmpl` (parsed YAML) with `inputs` (name -> value; may be null)
/// into a broker job body. Errors are one line naming the node and the property: `parse TOSCA
/// template: node Docker: capabilities.host.num_gpus: must be a whole number from 0 to 10000`.
Result<nlohmann::json> tosca_job_body(const nlohmann::json& tmpl, const nlohmann::json& inputs);

/// A body as posted to a broker, read.
struct PostedBody {
  nlohmann::json body;      ///< a job body; discarded where the text is neither JSON nor TOSCA
  bool from_tosca = false;  ///< translated from a TOSCA template
};

/// Reads the body of POST /v1/jobs, /v1/placements or /v1/manifests on a broker: a JSON job
/// body as it is; a TOSCA template as YAML (whatever the Content-Type says), or as JSON
/// {"template": YAML text or object, "inputs": {...}, "name", "group", "placement",
/// "failover"}, translated by tosca_job_body() with the wrapper's fields set on the result.
/// Text that is neither JSON nor a TOSCA template comes back discarded, for the caller's
/// own "not a JSON object".
Result<PostedBody> read_job_body(std::string_view text);

}  // namespace berth::broker

// A job as a client posts it to a broker (docs/broker.md, ../shared/research/broker.md 7.2):
// berthd's job body (gateway/job_request.h: name, image, command, env, resources) with what the
// broker adds to it: resources.gpus as a count or a GPU shorthand (broker/gpu_spec.h),
// resources.gpu {vendor, model, memory_mb_min, compute_capability_min, cuda_min, driver_min},
// resources.infiniband, placement {sites, exclude, prefer, strategy} and failover {max_sites,
// pending_timeout_s, deadline_s}.
#pragma once

#include <nlohmann/json.hpp>

#include "broker/model.h"
#include "core/error.h"

namespace berth::broker {

/// Reads a broker's job body. Model names come back canonical (broker/gpu_names.h); a
/// shorthand's requirements merge with resources.gpu (two vendors, or two different lists of
/// models, are an error). Every field is checked; an unknown one is an error. Errors are one
/// line naming the field's JSON path: `parse job body: resources.gpu.cuda_min: "12.x" is not a
/// version`.
Result<BrokerJob> parse_broker_job(const nlohmann::json& body);

}  // namespace berth::broker

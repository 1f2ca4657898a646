// Reading slurmrestd's answers: the JSON reads every version file (gateway/slurm_v*.cc) makes,
// none of which throws (a field of the wrong type reads as absent), and the fields every
// version names alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/slurm_types.h"

namespace berth::gateway {

/// The integer at j[key], or 0 when `j` is not an object or it is absent or not an integer.
int64_t int_field(const nlohmann::json& j, const char* key);
/// Whether j[key] is the boolean true.
bool true_field(const nlohmann::json& j, const char* key);
/// The strings of the list at j[key] (other items passed over); empty when it is not a list.
std::vector<std::string> strings_field(const nlohmann::json& j, const char* key);
/// The object at j[key], or an empty object.
const nlohmann::json& object_field(const nlohmann::json& j, const char* key);
/// The first item of an answer's non-empty "errors" list; nullopt when it lists none (or the
/// body is not a JSON object).
std::optional<nlohmann::json> first_error(std::string_view body);

/// A job object's fields that every version names alike: its reason ("None" read as ""),
/// nodes, partition, and the GPUs allocated (`gres_detail`, one GRES string per allocated node,
/// while the job holds them; Slurm empties it when the job ends: then `tres_alloc_str`'s
/// "gres/gpu=N", there only where AccountingStorageTRES lists gres/gpu, which needs slurmdbd).
/// Its state, times and exit code are the version's to read.
SlurmJobInfo job_fields(const nlohmann::json& job);
/// A node object's fields that every version names alike (name, partitions, cpus,
/// alloc_cpus, gres, gres_used, real_memory); its state is the version's to read.
SlurmNode node_fields(const nlohmann::json& node);

}  // namespace berth::gateway

// Reading slurmrestd's answers (gateway/slurm_answer.h).
#include "gateway/slurm_answer.h"

#include "core/json.h"

namespace berth::gateway {

int64_t int_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

bool true_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::vector<std::string> strings_field(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.is_object()) return out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const nlohmann::json& v : *it)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

const nlohmann::json& object_field(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNone = nlohmann::json::object();
  if (!j.is_object()) return kNone;
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kNone;
}

std::optional<nlohmann::json> first_error(std::string_view body) {
  nlohmann::json j = parse_json_or_discarded(body);
  if (!j.is_object()) return std::nullopt;
  auto errors = j.find("errors");
  if (errors == j.end() || !errors->is_array() || errors->empty()) return std::nullopt;
  return (*errors)[0];
}

SlurmJobInfo job_fields(const nlohmann::json& job) {
  SlurmJobInfo info;
  info.reason = string_field(job, "state_reason");
  if (info.reason == "None") info.reason.clear();
  info.nodes = string_field(job, "nodes");
  info.partition = string_field(job, "partition");
  info.gres_detail = strings_field(job, "gres_detail");
  for (const std::string& g : info.gres_detail) info.gpus += gres_gpus(g);
  if (info.gres_detail.empty()) info.gpus = tres_gpus(string_field(job, "tres_alloc_str"));
  // An ended job has no gres_detail any more, and tres_alloc_str counts GPUs only where
  // AccountingStorageTRES tracks gres/gpu: a job Slurm gave nodes got the GPUs it asked for
  // (tres_per_job, tres_per_node on each node), which its record keeps.
  if (info.gpus == 0 && info.gres_detail.empty() && !info.nodes.empty()) {
    int64_t nodes = int_field(job, "node_count");  // a number in v0.0.38, {"number": N} later
    if (nodes == 0) nodes = int_field(object_field(job, "node_count"), "number");
    info.gpus = tres_per_gpus(string_field(job, "tres_per_job")) +
                tres_per_gpus(string_field(job, "tres_per_node")) * static_cast<int>(nodes);
  }
  return info;
}

SlurmNode node_fields(const nlohmann::json& n) {
  SlurmNode node;
  node.name = string_field(n, "name");
  node.partitions = strings_field(n, "partitions");
  node.cpus = static_cast<int>(int_field(n, "cpus"));
  node.alloc_cpus = static_cast<int>(int_field(n, "alloc_cpus"));
  node.gpus = gres_gpus(string_field(n, "gres"));
  node.gpus_used = gres_gpus(string_field(n, "gres_used"));
  node.memory_mb = int_field(n, "real_memory");
  node.gpu_model = gres_gpu_type(string_field(n, "gres"));
  return node;
}

}  // namespace berth::gateway

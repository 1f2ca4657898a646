// slurmrestd v0.0.38's shapes (gateway/slurm_v0038.h).
#include "gateway/slurm_v0038.h"

#include "core/json.h"
#include "core/strings.h"
#include "gateway/slurm_answer.h"

namespace berth::gateway {

nlohmann::json submit_body_v0038(const SlurmJobSpec& s) {
  nlohmann::json job = {{"name", s.name},
                        {"environment", s.environment},  // an object in v0.0.38, mandatory
                        {"current_working_directory", s.workdir},
                        {"comment", s.comment},
                        // A string: Slurm 22.05's slurmrestd ignores the [min, max] array its
                        // own OpenAPI document describes (the job then gets one node), and
                        // takes "N" or "MIN-MAX" as sbatch's -N does (FIELD-NOTES).
                        {"nodes", std::to_string(s.nodes)},
                        {"tasks", s.tasks},
                        {"cpus_per_task", s.cpus_per_task}};
  if (!s.partition.empty()) job["partition"] = s.partition;
  if (!s.account.empty()) job["account"] = s.account;
  if (!s.standard_output.empty()) job["standard_output"] = s.standard_output;
  if (!s.standard_error.empty()) job["standard_error"] = s.standard_error;
  if (s.memory_mb > 0) job["memory_per_node"] = s.memory_mb;
  // A string in v0.0.38, sbatch's --gpus=[TYPE:]N.
  if (s.gpus > 0)
    job["gpus"] = (s.gpu_type.empty() ? "" : s.gpu_type + ":") + std::to_string(s.gpus);
  // --gres: Slurm keeps it as the job's TresPerNode ("gres:shard:2"); v0.0.38 has no
  // tres_per_node key to submit.
  if (!s.gres.empty()) job["gres"] = s.gres;
  if (s.time_limit_min > 0) job["time_limit"] = s.time_limit_min;
  return {{"script", s.script}, {"job", job}};
}

SlurmJobInfo job_v0038(const nlohmann::json& job) {
  SlurmJobInfo info = job_fields(job);
  info.state = job_state_from_slurm(string_field(job, "job_state"));
  info.submit_time = int_field(job, "submit_time");
  info.start_time = int_field(job, "start_time");
  info.end_time = int_field(job, "end_time");
  // exit_code is the wait status (WEXITSTATUS in the high byte, the signal in the low bits).
  auto code = job.find("exit_code");
  if (code != job.end() && code->is_number_integer()) {
    int raw = code->get<int>();
    info.exit_code = shown_exit_code((raw >> 8) & 0xff, raw & 0x7f);
  }
  return info;
}

std::string node_state_v0038(const nlohmann::json& node) {
  // The base state in lower case ("idle", "mixed", "down", ...), the rest as state_flags.
  return node_availability(string_field(node, "state"), strings_field(node, "state_flags"));
}

SlurmPartition partition_v0038(const nlohmann::json& p) {
  SlurmPartition part;
  part.name = string_field(p, "name");
  part.state = string_field(p, "state");
  part.is_default = false;
  for (const std::string& flag : strings_field(p, "flags"))
    if (lower(flag) == "default") part.is_default = true;
  part.nodes = static_cast<int>(int_field(p, "total_nodes"));
  part.cpus = static_cast<int>(int_field(p, "total_cpus"));
  // Minutes; Slurm's INFINITE (0xffffffff) and NO_VAL (0xfffffffe) mean no limit / none.
  auto minutes = [&p](const char* key) -> int64_t {
    int64_t m = int_field(p, key);
    return m <= 0 || m >= 0xfffffffeLL ? -1 : m * 60;
  };
  part.max_time_s = minutes("max_time_limit");
  part.default_time_s = minutes("default_time_limit");
  return part;
}

bool ping_v0038(const nlohmann::json& ping) {
  return string_field(ping, "ping") == "UP";
}

std::string slurm_error_v0038(std::string_view body) {
  std::optional<nlohmann::json> e = first_error(body);
  if (!e) return "";
  std::string text = string_field(*e, "description");
  if (text.empty()) text = string_field(*e, "error");
  return text.empty() ? "error" : text;
}

}  // namespace berth::gateway

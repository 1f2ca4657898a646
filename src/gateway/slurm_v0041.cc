// slurmrestd v0.0.41's shapes (gateway/slurm_v0041.h).
#include "gateway/slurm_v0041.h"

#include "core/json.h"
#include "core/strings.h"
#include "gateway/slurm_answer.h"

namespace berth::gateway {
namespace {

/// A number that may be unset or infinite: {"set": true, "infinite": false, "number": 5}.
struct Number {
  bool set = false, infinite = false;
  int64_t number = 0;
};

Number number_field(const nlohmann::json& j, const char* key) {
  const nlohmann::json& n = object_field(j, key);
  return {true_field(n, "set"), true_field(n, "infinite"), int_field(n, "number")};
}

/// A number's value when set and finite, else 0 (a time not yet reached).
int64_t time_field(const nlohmann::json& j, const char* key) {
  Number n = number_field(j, key);
  return n.set && !n.infinite ? n.number : 0;
}

/// Minutes as seconds; unset or infinite: -1 (no limit, or none).
int64_t minutes_field(const nlohmann::json& j, const char* key) {
  Number m = number_field(j, key);
  return !m.set || m.infinite || m.number <= 0 ? -1 : m.number * 60;
}

nlohmann::json set_number(int64_t n) {
  return {{"set", true}, {"infinite", false}, {"number", n}};
}

/// "gres/" before each entry of a GRES list ("shard:2" -> "gres/shard:2"): TRES names.
std::string gres_tres(std::string_view gres) {
  std::string out;
  for (std::string_view entry : split(gres, ','))
    out.append(out.empty() ? "gres/" : ",gres/").append(entry);
  return out;
}

}  // namespace

nlohmann::json submit_body_v0041(const SlurmJobSpec& s) {
  nlohmann::json env = nlohmann::json::array();
  for (const auto& [k, v] : s.environment) env.push_back(std::string(k).append("=").append(v));
  // "nodes": "N" or "MIN-MAX", as sbatch -N takes it.
  nlohmann::json job = {{"name", s.name},       {"script", s.script},
                        {"environment", env},   {"current_working_directory", s.workdir},
                        {"comment", s.comment}, {"nodes", std::to_string(s.nodes)},
                        {"tasks", s.tasks},     {"cpus_per_task", s.cpus_per_task}};
  if (!s.partition.empty()) job["partition"] = s.partition;
  if (!s.account.empty()) job["account"] = s.account;
  if (!s.standard_output.empty()) job["standard_output"] = s.standard_output;
  if (!s.standard_error.empty()) job["standard_error"] = s.standard_error;
  if (s.memory_mb > 0) job["memory_per_node"] = set_number(s.memory_mb);
  // sbatch --gpus=[TYPE:]N and --gres=shard:2, as Slurm keeps them.
  if (s.gpus > 0)
    job["tres_per_job"] =
        "gres/gpu:" + (s.gpu_type.empty() ? "" : s.gpu_type + ":") + std::to_string(s.gpus);
  if (!s.gres.empty()) job["tres_per_node"] = gres_tres(s.gres);
  if (s.time_limit_min > 0) job["time_limit"] = set_number(s.time_limit_min);
  return {{"job", job}};
}

SlurmJobInfo job_v0041(const nlohmann::json& job) {
  SlurmJobInfo info = job_fields(job);
  info.state = job_state_from_slurm_list(strings_field(job, "job_state"));
  info.submit_time = time_field(job, "submit_time");
  info.start_time = time_field(job, "start_time");
  info.end_time = time_field(job, "end_time");
  // {"status": ["SIGNALED"], "return_code": {"set": false, ...}, "signal": {"id": {"set":
  // true, ..., "number": 9}, "name": "KILL"}}
  const nlohmann::json& code = object_field(job, "exit_code");
  Number status = number_field(code, "return_code");
  Number signal = number_field(object_field(code, "signal"), "id");
  if (signal.set && signal.number > 0)
    info.exit_code = shown_exit_code(0, static_cast<int>(signal.number));
  else if (status.set)
    info.exit_code = shown_exit_code(static_cast<int>(status.number), 0);
  return info;
}

std::string node_state_v0041(const nlohmann::json& node) {
  std::vector<std::string> state = strings_field(node, "state");
  return node_availability(state.empty() ? "" : state[0], state);
}

SlurmPartition partition_v0041(const nlohmann::json& p) {
  SlurmPartition part;
  part.name = string_field(p, "name");
  std::vector<std::string> state = strings_field(object_field(p, "partition"), "state");
  part.state = state.empty() ? "" : state[0];
  part.nodes = static_cast<int>(int_field(object_field(p, "nodes"), "total"));
  part.cpus = static_cast<int>(int_field(object_field(p, "cpus"), "total"));
  part.max_time_s = minutes_field(object_field(p, "maximums"), "time");
  part.default_time_s = minutes_field(object_field(p, "defaults"), "time");
  return part;
}

bool ping_v0041(const nlohmann::json& ping) {
  return string_field(ping, "pinged") == "UP";
}

std::string slurm_error_v0041(std::string_view body) {
  std::optional<nlohmann::json> e = first_error(body);
  if (!e) return "";
  std::string text = string_field(*e, "description");
  std::string why = string_field(*e, "error");
  if (text.empty())
    text = why;
  else if (!why.empty() && text.find(why) == std::string::npos)
    text += ": " + why;
  return text.empty() ? "error" : text;
}

}  // namespace berth::gateway

// slurmrestd v0.0.38's shapes (gateway/slurm_v0038.h).
#include "gateway/slurm_v0038.h"

#include "core/json.h"

namespace berth::gateway {
namespace {

Result<nlohmann::json> parse_answer(std::string_view body, const std::string& url) {
  nlohmann::json j = BERTH_TRY(parse_json(body, "slurmrestd answer " + url));
  if (!j.is_object())
    return make_error("parse", url, "slurmrestd's answer is not an object",
                      ErrorCode::kInvalidInput);
  std::string err = slurm_error_v0038(body);
  if (!err.empty()) return make_error("parse", url, "slurmrestd: " + err);
  return j;
}

SlurmJobInfo job_info(const nlohmann::json& job) {
  SlurmJobInfo info;
  info.state = string_field(job, "job_state");
  info.reason = string_field(job, "state_reason");
  if (info.reason == "None") info.reason.clear();
  info.nodes = string_field(job, "nodes");
  auto num = [&](const char* key) -> int64_t {
    auto it = job.find(key);
    return it != job.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  info.start_time = num("start_time");
  info.end_time = num("end_time");
  // exit_code is the wait status (WEXITSTATUS in the high byte, the signal in the low bits),
  // meaningful once the job has ended.
  bool ended = info.state != "PENDING" && info.state != "RUNNING" &&
               info.state != "SUSPENDED" && info.state != "CONFIGURING" &&
               info.state != "COMPLETING";
  auto code = job.find("exit_code");
  if (ended && code != job.end() && code->is_number_integer()) {
    int raw = code->get<int>();
    info.exit_code = (raw & 0x7f) != 0 ? 128 + (raw & 0x7f) : (raw >> 8) & 0xff;
  }
  return info;
}

}  // namespace

nlohmann::json submit_body_v0038(const SlurmJobSpec& s) {
  nlohmann::json job = {{"name", s.name},
                        {"environment", s.environment},  // an object in v0.0.38, mandatory
                        {"current_working_directory", s.workdir},
                        {"comment", s.comment},
                        {"nodes", {s.nodes, s.nodes}},
                        {"tasks", s.tasks},
                        {"cpus_per_task", s.cpus_per_task}};
  if (!s.partition.empty()) job["partition"] = s.partition;
  if (s.memory_mb > 0) job["memory_per_node"] = s.memory_mb;
  if (s.gpus > 0) job["gpus"] = std::to_string(s.gpus);  // a string in v0.0.38
  if (s.time_limit_min > 0) job["time_limit"] = s.time_limit_min;
  return {{"script", s.script}, {"job", job}};
}

Result<int64_t> parse_submit_v0038(std::string_view body, const std::string& url) {
  nlohmann::json j = BERTH_TRY(parse_answer(body, url));
  auto id = j.find("job_id");
  if (id == j.end() || !id->is_number_integer() || id->get<int64_t>() <= 0)
    return make_error("parse", url, "slurmrestd's answer has no job_id",
                      ErrorCode::kInvalidInput);
  return id->get<int64_t>();
}

Result<SlurmJobInfo> parse_job_v0038(std::string_view body, const std::string& url) {
  nlohmann::json j = BERTH_TRY(parse_answer(body, url));
  auto jobs = j.find("jobs");
  if (jobs == j.end() || !jobs->is_array() || jobs->empty() || !(*jobs)[0].is_object())
    return make_error("parse", url, "slurmrestd's answer has no job", ErrorCode::kNotFound);
  return job_info((*jobs)[0]);
}

Result<std::vector<SlurmJobEntry>> parse_jobs_v0038(std::string_view body,
                                                    const std::string& url) {
  nlohmann::json j = BERTH_TRY(parse_answer(body, url));
  auto jobs = j.find("jobs");
  if (jobs == j.end() || !jobs->is_array())
    return make_error("parse", url, "slurmrestd's answer has no job list",
                      ErrorCode::kInvalidInput);
  std::vector<SlurmJobEntry> out;
  for (const nlohmann::json& job : *jobs) {
    if (!job.is_object() || !job.contains("job_id") || !job["job_id"].is_number_integer())
      continue;
    out.push_back({job["job_id"].get<int64_t>(), string_field(job, "comment"),
                   string_field(job, "user_name"), job_info(job)});
  }
  return out;
}

std::string slurm_error_v0038(std::string_view body) {
  nlohmann::json j = parse_json_or_discarded(body);
  if (!j.is_object()) return "";
  auto errors = j.find("errors");
  if (errors == j.end() || !errors->is_array() || errors->empty()) return "";
  const nlohmann::json& e = (*errors)[0];
  std::string text = string_field(e, "description");
  if (text.empty()) text = string_field(e, "error");
  return text.empty() ? "error" : text;
}

}  // namespace berth::gateway

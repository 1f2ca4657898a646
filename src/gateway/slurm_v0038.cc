// slurmrestd v0.0.38's shapes (gateway/slurm_v0038.h).
#include "gateway/slurm_v0038.h"

#include <algorithm>
#include <cctype>

#include "core/json.h"
#include "core/strings.h"

namespace berth::gateway {
namespace {

int64_t int_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::vector<std::string> strings_field(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const nlohmann::json& v : *it)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

/// A node's state as /v1/systems counts it: v0.0.38 gives the base state in lower case
/// ("idle", "mixed", "allocated", "down", ...) and the rest as `state_flags` ("DRAIN", ...).
std::string node_state(const nlohmann::json& node) {
  std::string base = lower(string_field(node, "state"));
  for (const std::string& flag : strings_field(node, "state_flags")) {
    std::string f = lower(flag);
    if (f == "drain" || f == "fail" || f == "maintenance" || f == "not_responding" ||
        f == "powered_down" || f == "powering_down" || f == "reboot_issued")
      return "unavailable";
  }
  if (base == "idle" || base == "mixed" || base == "allocated") return base;
  if (base == "completing") return "allocated";
  return "unavailable";
}

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
  info.partition = string_field(job, "partition");
  info.submit_time = int_field(job, "submit_time");
  // start_time of a pending job is Slurm's estimate, end_time of a running one its time limit:
  // only facts are reported.
  if (info.state != "PENDING") info.start_time = int_field(job, "start_time");
  // GPUs allocated: gres_detail, one GRES string per allocated node ("gpu:fake:1(IDX:0)"),
  // while the job holds them; Slurm empties it when the job ends. Then tres_alloc_str's
  // "gres/gpu=N", which is there only where AccountingStorageTRES lists gres/gpu (it needs
  // slurmdbd).
  info.gres_detail = strings_field(job, "gres_detail");
  for (const std::string& g : info.gres_detail) info.gpus += gres_gpus(g);
  if (info.gres_detail.empty()) {
    std::string tres = string_field(job, "tres_alloc_str");
    for (size_t pos = 0; pos < tres.size();) {
      size_t end = std::min(tres.find(',', pos), tres.size());
      std::string_view item = std::string_view(tres).substr(pos, end - pos);
      pos = end + 1;
      std::string_view digits = item.substr(std::min(item.size(), sizeof("gres/gpu=") - 1));
      if (item.starts_with("gres/gpu=") && !digits.empty() && digits.size() <= 6 &&
          digits.find_first_not_of("0123456789") == std::string_view::npos)
        info.gpus = std::stoi(std::string(digits));
    }
  }
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
  if (ended) info.end_time = int_field(job, "end_time");
  return info;
}

}  // namespace

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
  if (s.gpus > 0) job["gpus"] = std::to_string(s.gpus);  // a string in v0.0.38
  // --gres: Slurm keeps it as the job's TresPerNode ("gres:shard:2"); v0.0.38 has no
  // tres_per_node key to submit.
  if (!s.gres.empty()) job["gres"] = s.gres;
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

int gres_gpus(std::string_view gres) {
  // Entries are separated by commas outside parentheses: NAME[:TYPE]:COUNT[(...)].
  int total = 0;
  size_t pos = 0;
  while (pos < gres.size()) {
    size_t end = pos;
    int depth = 0;
    while (end < gres.size() && (gres[end] != ',' || depth > 0)) {
      if (gres[end] == '(') ++depth;
      if (gres[end] == ')' && depth > 0) --depth;
      ++end;
    }
    std::string_view entry = gres.substr(pos, end - pos);
    pos = end + 1;
    entry = entry.substr(0, entry.find('('));
    if (entry.substr(0, entry.find(':')) != "gpu") continue;
    size_t colon = entry.rfind(':');
    if (colon == std::string_view::npos) {
      total += 1;  // "gpu" alone is one
      continue;
    }
    std::string_view digits = entry.substr(colon + 1);
    if (digits.empty() || digits.size() > 6 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos)
      continue;  // "gpu:a100" (a type without count) or "N/A"
    total += std::stoi(std::string(digits));
  }
  return total;
}

std::string gres_gpu_type(std::string_view gres) {
  for (size_t pos = 0; pos < gres.size();) {
    size_t end = std::min(gres.find(',', pos), gres.size());
    std::string_view entry = gres.substr(pos, end - pos);
    pos = end + 1;
    entry = entry.substr(0, entry.find('('));
    if (!entry.starts_with("gpu:")) continue;
    entry.remove_prefix(4);
    size_t colon = entry.find(':');
    if (colon == std::string_view::npos) continue;  // "gpu:4": untyped
    return std::string(entry.substr(0, colon));
  }
  return "";
}

Result<std::vector<SlurmNode>> parse_nodes_v0038(std::string_view body, const std::string& url) {
  nlohmann::json j = BERTH_TRY(parse_answer(body, url));
  auto nodes = j.find("nodes");
  if (nodes == j.end() || !nodes->is_array())
    return make_error("parse", url, "slurmrestd's answer has no node list",
                      ErrorCode::kInvalidInput);
  std::vector<SlurmNode> out;
  for (const nlohmann::json& n : *nodes) {
    if (!n.is_object()) continue;
    SlurmNode node;
    node.name = string_field(n, "name");
    node.state = node_state(n);
    node.partitions = strings_field(n, "partitions");
    node.cpus = static_cast<int>(int_field(n, "cpus"));
    node.alloc_cpus = static_cast<int>(int_field(n, "alloc_cpus"));
    node.gpus = gres_gpus(string_field(n, "gres"));
    node.gpus_used = gres_gpus(string_field(n, "gres_used"));
    node.memory_mb = int_field(n, "real_memory");
    node.gpu_model = gres_gpu_type(string_field(n, "gres"));
    out.push_back(std::move(node));
  }
  return out;
}

Result<std::vector<SlurmPartition>> parse_partitions_v0038(std::string_view body,
                                                           const std::string& url) {
  nlohmann::json j = BERTH_TRY(parse_answer(body, url));
  auto parts = j.find("partitions");
  if (parts == j.end() || !parts->is_array())
    return make_error("parse", url, "slurmrestd's answer has no partition list",
                      ErrorCode::kInvalidInput);
  std::vector<SlurmPartition> out;
  for (const nlohmann::json& p : *parts) {
    if (!p.is_object()) continue;
    SlurmPartition part;
    part.name = string_field(p, "name");
    part.state = string_field(p, "state");
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
    out.push_back(std::move(part));
  }
  return out;
}

Result<bool> parse_ping_v0038(std::string_view body, const std::string& url) {
  nlohmann::json j = BERTH_TRY(parse_answer(body, url));
  auto pings = j.find("pings");
  if (pings == j.end() || !pings->is_array())
    return make_error("parse", url, "slurmrestd's answer has no pings", ErrorCode::kInvalidInput);
  for (const nlohmann::json& p : *pings)
    if (p.is_object() && string_field(p, "ping") == "UP") return true;
  return false;
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

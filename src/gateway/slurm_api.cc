// The slurmrestd versions berthd speaks, and the answers they share (gateway/slurm_api.h).
#include "gateway/slurm_api.h"

#include <algorithm>
#include <array>
#include <set>

#include "core/json.h"
#include "gateway/slurm_answer.h"
#include "gateway/slurm_v0038.h"
#include "gateway/slurm_v0041.h"

namespace berth::gateway {
namespace {

// clang-format off
constexpr std::array<SlurmApi, 2> kSlurmApis = {{
    {"v0.0.41", "/slurm/v0.0.41", submit_body_v0041, job_v0041, node_state_v0041,
     partition_v0041, ping_v0041, slurm_error_v0041},
    {"v0.0.38", "/slurm/v0.0.38", submit_body_v0038, job_v0038, node_state_v0038,
     partition_v0038, ping_v0038, slurm_error_v0038},
}};
// clang-format on

/// The version a path of slurmctld's API names: "/slurm/v0.0.40/jobs" -> "v0.0.40", else "".
std::string_view path_version(std::string_view path) {
  constexpr std::string_view kPrefix = "/slurm/v";
  if (!path.starts_with(kPrefix)) return "";
  size_t end = path.find('/', kPrefix.size());
  if (end == std::string_view::npos) return "";
  std::string_view version = path.substr(kPrefix.size() - 1, end - kPrefix.size() + 1);
  if (version.find_first_not_of("v0123456789.") != std::string_view::npos) return "";
  return version;
}

/// The object answered at `url`, or an error: not JSON, not an object (kInvalidInput), or an
/// answer listing errors ("slurmrestd: " + what the version reads of them).
Result<nlohmann::json> answer(const SlurmApi& api, std::string_view body, const std::string& url) {
  nlohmann::json j = BERTH_TRY(parse_json(body, "slurmrestd answer " + url));
  if (!j.is_object())
    return make_error("parse", url, "slurmrestd's answer is not an object",
                      ErrorCode::kInvalidInput);
  std::string err = api.error_text(body);
  if (!err.empty()) return make_error("parse", url, "slurmrestd: " + err);
  return j;
}

/// `info` with only facts (parse_job()).
SlurmJobInfo facts_only(SlurmJobInfo info) {
  if (info.state == JobState::kPending) info.start_time = 0;
  if (!job_state_facts(info.state).ended) {
    info.end_time = 0;
    info.exit_code.reset();
  }
  return info;
}

/// The objects of the list at j[key] of an answer (other items passed over), or an error
/// (kInvalidInput) saying the answer has no `what`.
Result<std::vector<const nlohmann::json*>> objects(const nlohmann::json& j, const char* key,
                                                   const std::string& url,
                                                   const std::string& what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array())
    return make_error("parse", url, "slurmrestd's answer has no " + what, ErrorCode::kInvalidInput);
  std::vector<const nlohmann::json*> out;
  for (const nlohmann::json& item : *it)
    if (item.is_object()) out.push_back(&item);
  return out;
}

}  // namespace

std::span<const SlurmApi> slurm_apis() {
  return kSlurmApis;
}

const SlurmApi* slurm_api(std::string_view version) {
  for (const SlurmApi& api : kSlurmApis)
    if (api.version == version) return &api;
  return nullptr;
}

std::string slurm_api_names() {
  std::vector<std::string> names;
  names.reserve(kSlurmApis.size());
  for (const SlurmApi& api : kSlurmApis) names.emplace_back(api.version);
  return join_versions(names);
}

std::string join_versions(const std::vector<std::string>& versions) {
  std::string out;
  for (const std::string& v : versions) out += (out.empty() ? "" : ", ") + v;
  return out;
}

Result<int64_t> parse_submit(const SlurmApi& api, std::string_view body, const std::string& url) {
  nlohmann::json j = BERTH_TRY(answer(api, body, url));
  int64_t id = int_field(j, "job_id");
  if (id <= 0)
    return make_error("parse", url, "slurmrestd's answer has no job_id", ErrorCode::kInvalidInput);
  return id;
}

Result<SlurmJobInfo> parse_job(const SlurmApi& api, std::string_view body, const std::string& url) {
  nlohmann::json j = BERTH_TRY(answer(api, body, url));
  auto jobs = j.find("jobs");
  if (jobs == j.end() || !jobs->is_array() || jobs->empty() || !(*jobs)[0].is_object())
    return make_error("parse", url, "slurmrestd's answer has no job", ErrorCode::kNotFound);
  return facts_only(api.read_job((*jobs)[0]));
}

Result<std::vector<SlurmJobEntry>> parse_jobs(const SlurmApi& api, std::string_view body,
                                              const std::string& url) {
  nlohmann::json j = BERTH_TRY(answer(api, body, url));
  std::vector<SlurmJobEntry> out;
  for (const nlohmann::json* job : BERTH_TRY(objects(j, "jobs", url, "job list"))) {
    auto id = job->find("job_id");
    if (id == job->end() || !id->is_number_integer()) continue;
    out.push_back({id->get<int64_t>(), string_field(*job, "comment"),
                   string_field(*job, "user_name"), facts_only(api.read_job(*job))});
  }
  return out;
}

Result<std::vector<SlurmNode>> parse_nodes(const SlurmApi& api, std::string_view body,
                                           const std::string& url) {
  nlohmann::json j = BERTH_TRY(answer(api, body, url));
  std::vector<SlurmNode> out;
  for (const nlohmann::json* n : BERTH_TRY(objects(j, "nodes", url, "node list"))) {
    SlurmNode node = node_fields(*n);
    node.state = api.read_node_state(*n);
    out.push_back(std::move(node));
  }
  return out;
}

Result<std::vector<SlurmPartition>> parse_partitions(const SlurmApi& api, std::string_view body,
                                                     const std::string& url) {
  nlohmann::json j = BERTH_TRY(answer(api, body, url));
  std::vector<SlurmPartition> out;
  for (const nlohmann::json* p : BERTH_TRY(objects(j, "partitions", url, "partition list")))
    out.push_back(api.read_partition(*p));
  return out;
}

Result<bool> parse_ping(const SlurmApi& api, std::string_view body, const std::string& url) {
  nlohmann::json j = BERTH_TRY(answer(api, body, url));
  for (const nlohmann::json* p : BERTH_TRY(objects(j, "pings", url, "pings")))
    if (api.read_ping(*p)) return true;
  return false;
}

std::vector<std::string> offered_slurm_apis(std::string_view openapi_body) {
  nlohmann::json doc = parse_json_or_discarded(openapi_body);
  std::set<std::string> versions;
  if (!doc.is_object()) return {};
  auto paths = doc.find("paths");
  if (paths == doc.end() || !paths->is_object()) return {};
  for (const auto& [path, item] : paths->items())
    if (std::string_view v = path_version(path); !v.empty()) versions.emplace(v);
  return {versions.begin(), versions.end()};
}

const SlurmApi* choose_slurm_api(const std::vector<std::string>& offered) {
  for (const SlurmApi& api : kSlurmApis)
    if (std::find(offered.begin(), offered.end(), api.version) != offered.end()) return &api;
  return nullptr;
}

}  // namespace berth::gateway

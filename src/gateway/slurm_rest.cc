// slurmrestd calls as the mapped user (gateway/slurm_rest.h).
#include "gateway/slurm_rest.h"

#include <httplib.h>

#include <chrono>
#include <ctime>

#include "core/json.h"
#include "core/sha256.h"
#include "gateway/jwt.h"

namespace berth::gateway {
namespace {

constexpr time_t kTimeoutS = 30;

}  // namespace

std::string mint_slurm_token(const std::string& key, const std::string& user, int64_t now,
                             int64_t lifespan_s) {
  std::string input =
      base64url_encode(R"({"alg":"HS256","typ":"JWT"})") + "." +
      base64url_encode(to_text(nlohmann::ordered_json{
          {"iat", now}, {"exp", now + lifespan_s}, {"sun", user}}));
  return input + "." + base64url_encode(hmac_sha256(key, input));
}

Result<SlurmRest::Answer> SlurmRest::call(Op op, const std::string& user,
                                          const std::string& path, const std::string& body) {
  httplib::Client client(url_);
  client.set_connection_timeout(kTimeoutS);
  client.set_read_timeout(kTimeoutS);
  client.set_tcp_nodelay(true);  // the body is a write of its own: no wait for an ACK
  httplib::Headers headers = {
      {"X-SLURM-USER-NAME", user},
      {"X-SLURM-USER-TOKEN", mint_slurm_token(key_, user, std::time(nullptr), lifespan_s_)}};
  std::string full = std::string(kSlurmApiPrefix) + path;
  auto started = std::chrono::steady_clock::now();
  httplib::Result res = op == Op("POST")     ? client.Post(full, headers, body, "application/json")
                        : op == Op("DELETE") ? client.Delete(full, headers)
                                             : client.Get(full, headers);
  if (observer_)
    observer_(op.word(), res ? res->status : 0,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (!res)
    return make_error(op, url_ + full, "slurmrestd: " + httplib::to_string(res.error()),
                      ErrorCode::kNetwork);
  return Answer{res->status, res->body};
}

Result<int64_t> SlurmRest::submit(const std::string& user, const SlurmJobSpec& spec) {
  std::string url = url_ + kSlurmApiPrefix + "/job/submit";
  Answer a = BERTH_TRY(call("POST", user, "/job/submit", to_text(submit_body_v0038(spec))));
  if (a.status != 200) {
    std::string why = slurm_error_v0038(a.body);
    return http_error("POST", url, a.status, why.empty() ? "slurmrestd refused the job" : why);
  }
  return parse_submit_v0038(a.body, url);
}

Result<SlurmJobInfo> SlurmRest::job(const std::string& user, int64_t id) {
  std::string path = "/job/" + std::to_string(id);
  Answer a = BERTH_TRY(call("GET", user, path, ""));
  std::string url = url_ + kSlurmApiPrefix + path;
  if (a.status != 200) {
    std::string why = slurm_error_v0038(a.body);
    return http_error("GET", url, a.status, why.empty() ? "slurmrestd error" : why);
  }
  return parse_job_v0038(a.body, url);
}

Result<std::vector<SlurmJobEntry>> SlurmRest::jobs(const std::string& user) {
  Answer a = BERTH_TRY(call("GET", user, "/jobs", ""));
  std::string url = url_ + kSlurmApiPrefix + "/jobs";
  if (a.status != 200) {
    std::string why = slurm_error_v0038(a.body);
    return http_error("GET", url, a.status, why.empty() ? "slurmrestd error" : why);
  }
  return parse_jobs_v0038(a.body, url);
}

Result<std::string> SlurmRest::get(const std::string& user, const std::string& path) {
  Answer a = BERTH_TRY(call("GET", user, path, ""));
  if (a.status != 200) {
    std::string why = slurm_error_v0038(a.body);
    return http_error("GET", url_ + kSlurmApiPrefix + path, a.status,
                      why.empty() ? "slurmrestd error" : why);
  }
  return std::move(a.body);
}

Result<std::vector<SlurmNode>> SlurmRest::nodes(const std::string& user) {
  std::string body = BERTH_TRY(get(user, "/nodes"));
  return parse_nodes_v0038(body, url_ + kSlurmApiPrefix + "/nodes");
}

Result<std::vector<SlurmPartition>> SlurmRest::partitions(const std::string& user) {
  std::string body = BERTH_TRY(get(user, "/partitions"));
  return parse_partitions_v0038(body, url_ + kSlurmApiPrefix + "/partitions");
}

Result<bool> SlurmRest::ping(const std::string& user) {
  std::string body = BERTH_TRY(get(user, "/ping"));
  return parse_ping_v0038(body, url_ + kSlurmApiPrefix + "/ping");
}

Status SlurmRest::cancel(const std::string& user, int64_t id) {
  std::string path = "/job/" + std::to_string(id);
  Answer a = BERTH_TRY(call("DELETE", user, path, ""));
  if (a.status != 200) {
    std::string why = slurm_error_v0038(a.body);
    return http_error("DELETE", url_ + kSlurmApiPrefix + path, a.status,
                      why.empty() ? "slurmrestd error" : why);
  }
  return {};
}

}  // namespace berth::gateway

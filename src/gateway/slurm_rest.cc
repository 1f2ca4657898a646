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
/// Where slurmrestd lists its paths, every version's among them.
constexpr const char* kOpenApiPath = "/openapi/v3";

}  // namespace

std::string mint_slurm_token(const std::string& key, const std::string& user, int64_t now,
                             int64_t lifespan_s) {
  std::string input = base64url_encode(R"({"alg":"HS256","typ":"JWT"})") + "." +
                      base64url_encode(to_text(nlohmann::ordered_json{
                          {"iat", now}, {"exp", now + lifespan_s}, {"sun", user}}));
  return input + "." + base64url_encode(hmac_sha256(key, input));
}

Result<SlurmRest::Answer> SlurmRest::call(Op op, const std::string& user, const std::string& path,
                                          const std::string& body) {
  httplib::Client client(url_);
  client.set_connection_timeout(kTimeoutS);
  client.set_read_timeout(kTimeoutS);
  client.set_tcp_nodelay(true);  // the body is a write of its own: no wait for an ACK
  httplib::Headers headers = {
      {"X-SLURM-USER-NAME", user},
      {"X-SLURM-USER-TOKEN", mint_slurm_token(key_, user, std::time(nullptr), lifespan_s_)}};
  auto started = std::chrono::steady_clock::now();
  httplib::Result res = op == Op("POST")     ? client.Post(path, headers, body, "application/json")
                        : op == Op("DELETE") ? client.Delete(path, headers)
                                             : client.Get(path, headers);
  if (observer_)
    observer_(op.word(), res ? res->status : 0,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (!res)
    return make_error(op, url_ + path, "slurmrestd: " + httplib::to_string(res.error()),
                      ErrorCode::kNetwork);
  return Answer{res->status, res->body};
}

Result<std::string> SlurmRest::exchange(Op op, const std::string& user, const SlurmApi& api,
                                        const std::string& path, const std::string& body,
                                        const char* fallback) {
  std::string full = std::string(api.prefix) + path;
  Answer a = BERTH_TRY(call(op, user, full, body));
  if (a.status != 200) {
    std::string why = api.error_text(a.body);
    // Not a path of any version it serves: a configured version it does not offer.
    if (why.empty() && a.status == 404)
      why = "slurmrestd does not serve " + std::string(api.version) + " ([slurm] api_version)";
    return http_error(op, url_ + full, a.status, why.empty() ? fallback : why);
  }
  return std::move(a.body);
}

Result<const SlurmApi*> SlurmRest::api(const std::string& user) {
  std::unique_lock<std::mutex> lock(choice_->mu);
  if (choice_->api != nullptr) return choice_->api;
  Answer a = BERTH_TRY(call("GET", user, kOpenApiPath, ""));
  std::string url = url_ + kOpenApiPath;
  if (a.status != 200)
    return http_error("GET", url, a.status, "slurmrestd does not list its API versions");
  std::vector<std::string> offered = offered_slurm_apis(a.body);
  const SlurmApi* chosen = choose_slurm_api(offered);
  if (chosen == nullptr)
    return make_error("GET", url,
                      (offered.empty() ? std::string("slurmrestd lists no Slurm API version")
                                       : "slurmrestd offers " + join_versions(offered)) +
                          "; berthd speaks " + slurm_api_names(),
                      ErrorCode::kUnsupported);
  choice_->api = chosen;
  lock.unlock();
  if (api_observer_) api_observer_(*chosen, offered);
  return chosen;
}

std::string SlurmRest::api_version() const {
  std::lock_guard<std::mutex> lock(choice_->mu);
  return choice_->api != nullptr ? std::string(choice_->api->version) : "";
}

Result<int64_t> SlurmRest::submit(const std::string& user, const SlurmJobSpec& spec) {
  const SlurmApi* api = BERTH_TRY(this->api(user));
  std::string body =
      BERTH_TRY(exchange("POST", user, *api, "/job/submit", to_text(api->submit_body(spec)),
                         "slurmrestd refused the job"));
  return parse_submit(*api, body, url_ + std::string(api->prefix) + "/job/submit");
}

/// GET `path` of the version spoken, as `user`, its answer read by `parse`.
template <class T>
Result<T> SlurmRest::read(const std::string& user, const std::string& path,
                          Result<T> (*parse)(const SlurmApi&, std::string_view,
                                             const std::string&)) {
  const SlurmApi* api = BERTH_TRY(this->api(user));
  std::string body = BERTH_TRY(exchange("GET", user, *api, path, "", "slurmrestd error"));
  return parse(*api, body, url_ + std::string(api->prefix) + path);
}

Result<SlurmJobInfo> SlurmRest::job(const std::string& user, int64_t id) {
  return read(user, "/job/" + std::to_string(id), parse_job);
}

Result<std::vector<SlurmJobEntry>> SlurmRest::jobs(const std::string& user) {
  return read(user, "/jobs", parse_jobs);
}

Result<std::vector<SlurmNode>> SlurmRest::nodes(const std::string& user) {
  return read(user, "/nodes", parse_nodes);
}

Result<std::vector<SlurmPartition>> SlurmRest::partitions(const std::string& user) {
  return read(user, "/partitions", parse_partitions);
}

Result<bool> SlurmRest::ping(const std::string& user) {
  return read(user, "/ping", parse_ping);
}

Status SlurmRest::cancel(const std::string& user, int64_t id) {
  const SlurmApi* api = BERTH_TRY(this->api(user));
  (void)BERTH_TRY(
      exchange("DELETE", user, *api, "/job/" + std::to_string(id), "", "slurmrestd error"));
  return {};
}

}  // namespace berth::gateway

// The routes of /v1 (gateway/server.h).
#include "gateway/server.h"

#include <fmt/core.h>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>

#include <fmt/core.h>

#include "broker/cpr.h"
#include "broker/tosca.h"
#include "core/json.h"
#include "gateway/connections.h"
#include "gateway/output.h"

namespace berth::gateway {
namespace {

// The access log's per-request facts, kept on the worker thread that serves the request
// (the connection's request loop, the handler and the logger run on one thread).
// GuardedServer::on_request sets them at a request's first byte and the logger resets them: a
// request refused before routing (headers too large, timed out) reaches the logger without the
// pre-routing handler and must not inherit the previous one's user and start.
thread_local std::optional<std::chrono::steady_clock::time_point> request_start;
thread_local std::string request_user;
thread_local std::string request_auth_failure;  ///< why a token was refused ("" if it was not)

/// `s` with bytes outside printable ASCII written as \xHH, for a log line.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x21 && c < 0x7f && c != '\\')
      out.push_back(static_cast<char>(c));
    else
      out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(to_text(body) + "\n", "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, {{"error", {{"status", status}, {"message", message}}}});
}

/// A quoted-string of an HTTP header parameter (RFC 9110 section 5.6.4): no quote or
/// backslash, no control characters.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s)
    if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) out.push_back(c);
  return out + "\"";
}

/// A new request id: berthd's start time and a counter, both in hex ("65a1f3c0-2a").
std::string next_request_id() {
  static const auto start = static_cast<uint64_t>(std::time(nullptr));
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{:x}-{:x}", start, ++counter);
}

}  // namespace

/// One request's part in the audit log: its id (sent back as X-Request-Id) and route, and
/// the caller once known.
class RequestAudit {
 public:
  RequestAudit(AuditLog* log, const httplib::Request& req, httplib::Response& res) : log_(log) {
    base_.request_id = next_request_id();
    base_.route = req.method + " " + req.path;
    res.set_header("X-Request-Id", base_.request_id);
  }
  void caller(const std::string& issuer, const std::string& subject, const std::string& user) {
    base_.issuer = issuer;
    base_.subject = subject;
    base_.user = user;
  }
  /// Writes one line; a failed write is reported on stderr and the request goes on (the
  /// gateway keeps serving when its audit disk fills).
  void record(const std::string& event, const std::string& outcome,
              nlohmann::json detail = nlohmann::json::object()) {
    if (log_ == nullptr) return;
    AuditEvent e = base_;
    e.event = event;
    e.outcome = outcome;
    e.detail = std::move(detail);
    Status written = log_->write(e);
    if (!written.ok()) std::fprintf(stderr, "berthd: %s\n", written.error().message().c_str());
  }

 private:
  AuditLog* log_;
  AuditEvent base_;
};

namespace {

/// The caller's account, or nullptr after answering 401 or 403; audited either way.
std::optional<Account> authorize(Authenticator& auth, const httplib::Request& req,
                                 httplib::Response& res, RequestAudit& audit) {
  auto who = auth.authenticate(req.get_header_value("Authorization"), std::time(nullptr));
  if (const auto* fail = std::get_if<AuthFailure>(&who)) {
    // RFC 6750 section 3: a request without a token gets the challenge alone.
    std::string challenge = "Bearer realm=\"berthd\"";
    if (req.has_header("Authorization") && fail->status == 401)
      challenge += ", error=\"invalid_token\", error_description=" + quoted(fail->message);
    if (fail->status == 401) res.set_header("WWW-Authenticate", challenge);
    request_auth_failure = token_failure_reason(fail->status, fail->message);
    send_error(res, fail->status, fail->message);
    audit.caller(fail->issuer, fail->subject, "");
    audit.record(fail->status == 401 ? "token" : "mapping", "refused", {{"reason", fail->message}});
    return std::nullopt;
  }
  const Account& a = std::get<Account>(who);
  audit.caller(a.issuer, a.subject, a.user);
  audit.record("token", "accepted");
  request_user = a.user;
  return std::get<Account>(std::move(who));
}

/// The 403 of a request over a limit: the usual error, plus the limit, its value and what the
/// request asked for ("requested") or the account already has ("current").
nlohmann::json limit_error(const LimitRefusal& no) {
  nlohmann::json e = {
      {"status", 403}, {"message", no.message}, {"limit", limit_name(no.key)}, {"value", no.value}};
  e[no.count ? "current" : "requested"] = no.requested;
  return {{"error", e}};
}

/// The 403 of a GPU job over its group's quota: the usual error, plus the quota's key, group,
/// budget, what the group used and the period it used it in.
nlohmann::json quota_error(const QuotaRefusal& no) {
  return {{"error",
           {{"status", 403},
            {"message", no.message},
            {"quota", no.key},
            {"group", no.group},
            {"budget_gpu_hours", no.budget},
            {"used_gpu_hours", no.used},
            {"period", no.period},
            {"since", no.since}}}};
}

/// The bearer token of request `req`, "" for none: what a broker passes on as the caller's.
std::string caller_token(const httplib::Request& req) {
  return bearer_token(req.get_header_value("Authorization")).value_or("");
}

/// The job id of a path's {id}, or -1.
int64_t job_id(const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(text);
}

}  // namespace

Server::Server(const GatewayConfig& config, Authenticator& auth, JobService* jobs,
               std::string version, AuditLog* audit, BrokerService* broker, BrokerJobs* brokered)
    : config_(config),
      auth_(auth),
      jobs_(jobs),
      version_(std::move(version)),
      audit_(audit),
      broker_(broker),
      brokered_(jobs == nullptr && broker != nullptr ? brokered : nullptr) {
  auto guarded = std::make_unique<GuardedServer>(config_.connections, kWorkerThreads,
                                                 config_.tls_cert, config_.tls_key);
  guarded->on_request = [] {
    request_start = std::chrono::steady_clock::now();
    request_user.clear();
    request_auth_failure.clear();
  };
  guarded->on_refused = [this](const char* reason) {
    metrics_.add("berthd_connections_refused_total", {{"reason", reason}});
  };
  http_ = std::move(guarded);
  routes();
}

Server::~Server() = default;

void Server::routes() {
  http_->set_payload_max_length(size_t{1} << 20);
  // cpp-httplib writes an answer's headers and body with two calls: without TCP_NODELAY the
  // body waits for the client's delayed ACK (40 ms on Linux).
  http_->set_tcp_nodelay(true);
  http_->set_keep_alive_max_count(kKeepAliveRequests);
  // The listening socket is made inside cpp-httplib; its descriptor is kept here so that bind()
  // can raise the backlog (listen() again on a listening socket only changes that).
  http_->set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = sock;
  });
  if (jobs_ != nullptr)
    resources_ = std::make_unique<ResourcesService>(config_.slurm.cluster, config_.publish,
                                                    &jobs_->gpu_facts());
  declare_metrics();
  // The access log: one line per request on stderr, written with one call so that lines of
  // concurrent requests do not interleave.
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    // A request past request_timeout_s was answered 408 by the connection (gateway/connections.h)
    // while cpp-httplib, whose read failed, counts it as its 400.
    int status = request_timed_out() ? 408 : res.status;
    std::string route = route_label(req.path);
    metrics_.add("berthd_http_requests_total",
                 {{"method", req.method}, {"route", route}, {"status", std::to_string(status)}});
    std::string took = "-";
    if (request_start) {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                            *request_start)
                      .count();
      metrics_.observe("berthd_http_request_duration_seconds", {{"route", route}}, ms / 1000);
      took = fmt::format("{:.2f}ms", ms);
    }
    if (!request_auth_failure.empty())
      metrics_.add("berthd_token_failures_total", {{"reason", request_auth_failure}});
    std::string line = "berthd: access " + printable(req.method) + " " + printable(req.path) + " " +
                       std::to_string(status) + " " + took + " " +
                       (request_user.empty() ? "-" : printable(request_user)) + "\n";
    std::fputs(line.c_str(), stderr);
    request_start.reset();
    request_user.clear();
    request_auth_failure.clear();
  });

  for (const Route& r : route_table()) {
    if (r.needs == Needs::kJobs && jobs_ == nullptr) continue;
    if (r.needs == Needs::kBroker && broker_ == nullptr) continue;
    if (r.needs == Needs::kJobsOrBrokered && jobs_ == nullptr && brokered_ == nullptr) continue;
    auto serve = [this, &r](const httplib::Request& req, httplib::Response& res) {
      Call call{nullptr, nullptr, &r.errors};
      bool open =
          r.access == Access::kAnyone || (r.open_if != nullptr && config_.publish.*r.open_if);
      if (open) return (this->*r.handler)(req, res, call);
      RequestAudit audit(audit_, req, res);
      auto who = authorize(auth_, req, res, audit);
      if (!who) return;
      if (r.access == Access::kAdmin && !who->admin) return send_error(res, 403, r.refusal);
      call.who = &*who;
      call.audit = &audit;
      (this->*r.handler)(req, res, call);
    };
    switch (r.method) {
      case HttpMethod::kGet:
        http_->Get(r.pattern, serve);
        break;
      case HttpMethod::kPost:
        http_->Post(r.pattern, serve);
        break;
      case HttpMethod::kDelete:
        http_->Delete(r.pattern, serve);
        break;
    }
  }
  http_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty())
      send_error(res, res.status, res.status == 404 ? "no such resource" : "request failed");
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, const std::exception_ptr&) {
        send_error(res, 500, "internal error");
      });
}

const std::vector<Server::Route>& Server::route_table() {
  using M = HttpMethod;
  using A = Access;
  using E = ErrorCode;
  using N = Needs;
  // Columns: method, path, access, the [publish] setting that opens it, the refusal of a
  // non-administrator, the service it needs (jobs, broker), handler, error statuses that differ
  // from http_status() (codes listed, then `otherwise`).
  static const std::vector<Route> table = {
      {M::kGet, "/v1/health", A::kAnyone, nullptr, nullptr, N::kNothing, &Server::health},
      {M::kGet, "/v1/openapi.json", A::kAnyone, nullptr, nullptr, N::kNothing, &Server::openapi},
      // The usage a quota is read from unreadable (sacct failing): 503.
      {M::kGet,
       "/v1/me",
       A::kToken,
       nullptr,
       nullptr,
       N::kNothing,
       &Server::me,
       {{{E::kBusy, 503}}, 500}},
      // A conflicting Idempotency-Key is 422; sacct unreadable for the quota check is 503; a
      // "group" not among the caller's token groups is 403 (with dry_run=1 too).
      {M::kPost,
       "/v1/jobs",
       A::kToken,
       nullptr,
       nullptr,
       N::kJobsOrBrokered,
       &Server::submit,
       {{{E::kExists, 422}, {E::kBusy, 503}, {E::kPermission, 403}}, 500}},
      {M::kGet,
       "/v1/jobs",
       A::kToken,
       nullptr,
       nullptr,
       N::kJobsOrBrokered,
       &Server::list,
       {{}, 500}},
      // Slurm's refresh or cancel failing: the gateway's upstream failed.
      {M::kGet,
       R"(/v1/jobs/([^/]+))",
       A::kToken,
       nullptr,
       nullptr,
       N::kJobsOrBrokered,
       &Server::get_job,
       {{}, 502}},
      {M::kDelete,
       R"(/v1/jobs/([^/]+))",
       A::kToken,
       nullptr,
       nullptr,
       N::kJobsOrBrokered,
       &Server::cancel_job,
       {{}, 502}},
      // No output_dir configured: 404.
      {M::kGet,
       R"(/v1/jobs/([^/]+)/output)",
       A::kToken,
       nullptr,
       nullptr,
       N::kJobsOrBrokered,
       &Server::output,
       {{{E::kNotFound, 404}}, 500}},
      // Orphan GPU processes name other users' processes.
      {M::kGet, "/v1/orphans", A::kAdmin, nullptr, "/v1/orphans is for administrators", N::kJobs,
       &Server::orphans},
      {M::kGet, "/v1/systems", A::kToken, nullptr, nullptr, N::kJobs, &Server::systems},
      {M::kGet, "/metrics", A::kAdmin, &PublishConfig::metrics_public,
       "/metrics is for administrators (or set metrics_public)", N::kNothing, &Server::metrics},
      {M::kGet,
       "/v1/resources",
       A::kToken,
       &PublishConfig::resources_public,
       nullptr,
       N::kJobs,
       &Server::resources,
       {{}, 502}},
      // sacct failing ([accounting] source sacct): 503.
      {M::kGet,
       "/v1/accounting",
       A::kToken,
       nullptr,
       nullptr,
       N::kJobs,
       &Server::accounting,
       {{{E::kBusy, 503}}, 500}},
      // The broker's (docs/broker.md): a job no site takes is the placements answer, 422.
      {M::kPost, "/v1/placements", A::kToken, nullptr, nullptr, N::kBroker, &Server::placements},
      {M::kGet, "/v1/sites", A::kToken, nullptr, nullptr, N::kBroker, &Server::broker_sites},
      // INDIGO's CloudProviderRanker (broker/cpr.h): open, as CPR is; it reads only the request.
      {M::kPost, "/v1/rank", A::kAnyone, nullptr, nullptr, N::kBroker, &Server::rank},
      // What a site would be sent; a manifest its backend cannot run (no flavour fits, a GPU job
      // on an upstream Chronos) is the caller's 422.
      {M::kPost,
       "/v1/manifests",
       A::kToken,
       nullptr,
       nullptr,
       N::kBroker,
       &Server::manifests,
       {{{E::kUnsupported, 422}}, 0}},
  };
  return table;
}

// A dry run of the broker's choice: every site's verdict. A job no site takes is 422 with the
// same answer, so that a client sees why in one request.
void Server::placements(const httplib::Request& req, httplib::Response& res, const Call& call) {
  auto posted = broker::read_job_body(req.body);  // JSON, or a TOSCA template (broker/tosca.h)
  if (!posted.ok()) return fail(res, call, posted.error());
  const nlohmann::json& body = posted->body;
  auto answer = broker_->placements(body, *call.who, caller_token(req), std::time(nullptr));
  if (!answer.ok()) return fail(res, call, answer.error());
  call.audit->record("broker.place", (*answer)["chosen"].is_null() ? "none" : "chosen",
                     {{"chosen", (*answer)["chosen"]}});
  send_json(res, (*answer)["chosen"].is_null() ? 422 : 200, *answer);
}

// CloudProviderRanker's answer to CPR's request, so that an INDIGO orchestrator can use a broker
// as its ranker (docs/broker.md).
void Server::rank(const httplib::Request& req, httplib::Response& res, const Call& call) {
  nlohmann::json body = parse_json_or_discarded(req.body, size_t{1} << 20);
  auto ranks = broker::cpr_rank(body);
  if (!ranks.ok()) return fail(res, call, ranks.error());
  send_json(res, 200, broker::cpr_rank_json(*ranks));
}

void Server::manifests(const httplib::Request& req, httplib::Response& res, const Call& call) {
  auto posted = broker::read_job_body(req.body);  // JSON, or a TOSCA template (broker/tosca.h)
  if (!posted.ok()) return fail(res, call, posted.error());
  const nlohmann::json& body = posted->body;
  auto answer = broker_->manifest(body, *call.who, caller_token(req), std::time(nullptr));
  if (!answer.ok()) return fail(res, call, answer.error());
  send_json(res, answer->status, answer->body);
}

// POST /v1/jobs of a broker: placed, recorded, sent to the best site and on where it is refused.
void Server::broker_submit(const httplib::Request& req, httplib::Response& res, const Call& call) {
  RequestAudit& audit = *call.audit;
  std::string key = req.get_header_value("Idempotency-Key");
  if (key.size() > 255) {
    audit.record("broker.submit", "invalid", {{"reason", "Idempotency-Key too long"}});
    return send_error(res, 400, "Idempotency-Key is longer than 255 bytes");
  }
  if (req.has_param("dry_run"))
    return send_error(res, 400, "a broker's dry run is POST /v1/placements");
  auto answer = brokered_->submit(*call.who, caller_token(req), key, req.body, std::time(nullptr));
  if (!answer.ok()) {
    bool bad = answer.error().code == ErrorCode::kInvalidInput;
    audit.record("broker.submit", bad ? "invalid" : "error",
                 {{"reason", bad ? answer.error().detail : answer.error().message()}});
    if (bad) return send_error(res, 400, answer.error().detail);
    return fail(res, call, answer.error());
  }
  const nlohmann::json& job = answer->body;
  if (answer->status == 422) {
    audit.record("broker.submit", "none", {{"chosen", nullptr}});
    return send_json(res, 422, job);
  }
  audit.record("broker.submit", answer->status == 200 ? "replayed" : "accepted",
               {{"id", job["id"]},
                {"state", job["state"]},
                {"site", job["site"]},
                {"site_job_id", job["site_job_id"]},
                {"attempts", job["attempts"].size()}});
  if (answer->status == 200) res.set_header("Idempotent-Replayed", "true");
  send_json(res, answer->status, job);
}

void Server::broker_list(const httplib::Request& req, httplib::Response& res, const Call& call) {
  (void)req;
  auto jobs = brokered_->list(*call.who, 1000);
  if (!jobs.ok()) return fail(res, call, jobs.error());
  send_json(res, 200, {{"jobs", std::move(*jobs)}});
}

void Server::broker_one_job(const httplib::Request& req, httplib::Response& res, const Call& call,
                            bool cancel) {
  int64_t id = job_id(req.matches[1]);
  std::string name = req.matches[1];
  std::string token = caller_token(req);
  auto job = id < 0   ? Result<std::optional<nlohmann::json>>(std::optional<nlohmann::json>())
             : cancel ? brokered_->cancel(*call.who, token, id, std::time(nullptr))
                      : brokered_->get(*call.who, token, id, std::time(nullptr));
  if (!job.ok()) {
    if (cancel)
      call.audit->record("broker.cancel", "error",
                         {{"id", name}, {"reason", job.error().message()}});
    return fail(res, call, job.error());
  }
  if (!*job) {
    if (cancel) call.audit->record("broker.cancel", "not_found", {{"id", name}});
    return send_error(res, 404, "no job " + name);
  }
  if (cancel)
    call.audit->record("broker.cancel", "accepted",
                       {{"id", name}, {"site", (**job)["site"]}, {"state", (**job)["state"]}});
  send_json(res, cancel ? 202 : 200, **job);
}

// The output of a broker's job is its site's answer, as it is.
void Server::broker_output(const httplib::Request& req, httplib::Response& res, const Call& call) {
  int64_t id = job_id(req.matches[1]);
  std::string query = req.has_param("tail") ? "tail=" + req.get_param_value("tail") : "";
  auto out = id < 0 ? Result<std::optional<SiteAnswer>>(std::optional<SiteAnswer>())
                    : brokered_->output(*call.who, caller_token(req), id, query);
  if (!out.ok()) return fail(res, call, out.error());
  if (!*out) return send_error(res, 404, "no job " + std::string(req.matches[1]));
  res.status = (*out)->status;
  res.body = std::move((*out)->body);
  res.set_header("Content-Type",
                 (*out)->content_type.empty() ? "application/json" : (*out)->content_type);
}

void Server::broker_sites(const httplib::Request& req, httplib::Response& res, const Call& call) {
  send_json(res, 200,
            {{"sites", broker_->sites(*call.who, caller_token(req), std::time(nullptr))}});
}

void Server::fail(httplib::Response& res, const Call& call, const Error& e) {
  int status = http_status(e.code, *call.errors);
  send_error(res, status, error_text(e, status));
}

// The issuers and audiences the gateway takes tokens of, so that a broker knows before it asks
// whose callers a site can serve (docs/broker.md), and whether it answers POST
// /v1/jobs?dry_run=1 (where it takes jobs): a broker asks no berthd that does not say so, as
// one older than the dry run would take it for a submission. Public, as an issuer's discovery is.
void Server::health(const httplib::Request&, httplib::Response& res, const Call&) {
  nlohmann::json trusted = nlohmann::json::array();
  for (const IssuerConfig& i : config_.issuers)
    trusted.push_back({{"issuer", i.issuer}, {"audience", i.audience}});
  send_json(res, 200,
            {{"status", "ok"},
             {"version", version_},
             {"issuers", std::move(trusted)},
             {"broker", config_.broker.enabled},
             {"dry_run", jobs_ != nullptr}});
}

void Server::openapi(const httplib::Request&, httplib::Response& res, const Call&) {
  res.status = 200;
  res.set_content(to_text(openapi_document(version_)) + "\n", "application/json");
}

// Who the caller is here and, where berthd takes jobs, the limits and quota they stand under
// (what a broker reads before it sends them a job, docs/broker.md).
void Server::me(const httplib::Request&, httplib::Response& res, const Call& call) {
  const Account& a = *call.who;
  nlohmann::json out = {{"issuer", a.issuer}, {"subject", a.subject}, {"user", a.user},
                        {"uid", a.uid},       {"gid", a.gid},         {"groups", a.groups},
                        {"admin", a.admin}};
  if (jobs_ != nullptr) {
    auto standing = jobs_->standing(a, std::time(nullptr));
    if (!standing.ok()) return fail(res, call, standing.error());
    nlohmann::json limits = nlohmann::json::object();
    for (size_t i = 0; i < kLimitKeys; ++i)
      if (const auto& l = standing->limits[i])
        limits[limit_name(static_cast<LimitKey>(i))] = {{"value", l->value}, {"from", l->from}};
    out["limits"] = std::move(limits);
    out["quota"] = nullptr;
    if (const auto& q = standing->quota)
      out["quota"] = {
          {"group", q->group},         {"gpu_hours", q->budget},
          {"used_gpu_hours", q->used}, {"left_gpu_hours", std::max(0.0, q->budget - q->used)},
          {"period", q->period},       {"since", q->since}};
  }
  send_json(res, 200, out);
}

void Server::submit(const httplib::Request& req, httplib::Response& res, const Call& call) {
  if (jobs_ == nullptr) return broker_submit(req, res, call);
  RequestAudit& audit = *call.audit;
  // A dry run (dry_run=1) is audited as one, and so is a request asking for one wrongly.
  const bool dry_run_only = req.has_param("dry_run") && req.get_param_value("dry_run") != "0";
  auto invalid = [&](const std::string& message) {
    audit.record(dry_run_only ? "job.dry_run" : "job.submit", "invalid", {{"reason", message}});
    send_error(res, 400, message);
  };
  if (dry_run_only && req.get_param_value("dry_run") != "1")
    return invalid("dry_run is not 1 or 0");
  nlohmann::json body = parse_json_or_discarded(req.body, size_t{1} << 20);
  auto request = parse_job_request(body);
  if (!request.ok()) return invalid(request.error().detail);
  if (dry_run_only) return dry_run(*request, res, call);
  if (auto taken = jobs_->admissible(*request); !taken.ok()) return invalid(taken.error().detail);
  std::string key = req.get_header_value("Idempotency-Key");
  if (key.size() > 255) return invalid("Idempotency-Key is longer than 255 bytes");
  auto done = jobs_->submit(*call.who, key, req.body, *request);
  if (!done.ok()) {
    bool conflict = done.error().code == ErrorCode::kExists;
    audit.record("job.submit", conflict ? "conflict" : "error",
                 {{"reason", conflict ? done.error().detail : done.error().message()}});
    return fail(res, call, done.error());
  }
  if (done->refused) {
    const LimitRefusal& no = *done->refused;
    nlohmann::json detail = {{"limit", limit_name(no.key)},
                             {"value", no.value},
                             {no.count ? "current" : "requested", no.requested},
                             {"from", no.from}};
    audit.record("job.submit", "refused", detail);
    metrics_.add("berthd_limit_refusals_total", {{"limit", limit_name(no.key)}});
    return send_json(res, 403, limit_error(no));
  }
  if (done->over_quota) {
    const QuotaRefusal& no = *done->over_quota;
    audit.record("job.submit", "refused",
                 {{"quota", no.key},
                  {"group", no.group},
                  {"budget_gpu_hours", no.budget},
                  {"used_gpu_hours", no.used},
                  {"period", no.period},
                  {"since", no.since}});
    metrics_.add("berthd_quota_refusals_total", {{"group", no.group}});
    return send_json(res, 403, quota_error(no));
  }
  const JobRecord& job = done->job;
  audit.record("job.submit", done->replayed ? "replayed" : "accepted",
               {{"id", std::to_string(job.id)},
                {"slurm_job_id", job.slurm_job_id},
                {"state", job.state},
                {"class", request->job_class},
                {"walltime_s", job.time_limit_s}});
  if (done->replayed) res.set_header("Idempotent-Replayed", "true");
  send_json(res, done->replayed ? 200 : 201, job_json(job));
}

// POST /v1/jobs?dry_run=1: whether the job would be taken now, in the broker's reason codes
// (docs/broker.md), after the checks a submission makes; nothing is recorded or sent to Slurm.
// A request refused by the site or a limit is a 200 too: the answer is the verdict.
void Server::dry_run(const JobRequest& request, httplib::Response& res, const Call& call) {
  auto fit = jobs_->dry_run(*call.who, request);
  if (!fit.ok()) {
    call.audit->record("job.dry_run", "error", {{"reason", fit.error().message()}});
    return fail(res, call, fit.error());
  }
  nlohmann::json reason = nullptr, message = nullptr;
  if (!fit->fits()) {
    reason = fit->reason;
    message = fit->message;
  }
  // start_estimate: when the job would start, as the site's start estimate says ([slurm]
  // start_estimate); null where none is configured, the job does not fit, or Slurm could not
  // tell (the reason then goes to the audit line only: the verdict stands without it).
  nlohmann::json estimate = nullptr, estimate_error = nullptr;
  if (fit->fits()) {
    auto when = jobs_->start_estimate(request);
    if (!when.ok())
      estimate_error = when.error().message();
    else if (when->has_value())
      estimate = **when;
  }
  nlohmann::json detail = {{"reason", reason}, {"message", message}, {"class", request.job_class}};
  if (!estimate.is_null()) detail["start_estimate"] = estimate;
  if (!estimate_error.is_null()) detail["estimate_error"] = estimate_error;
  call.audit->record("job.dry_run", fit->fits() ? "fits" : "refused", std::move(detail));
  send_json(res, 200,
            {{"fits", fit->fits()},
             {"reason", reason},
             {"message", message},
             {"start_estimate", estimate}});
}

void Server::list(const httplib::Request& req, httplib::Response& res, const Call& call) {
  if (jobs_ == nullptr) return broker_list(req, res, call);
  int64_t since = 0;
  if (req.has_param("since")) {
    since = job_id(req.get_param_value("since"));
    if (since < 0) return send_error(res, 400, "since is not a Unix time in seconds");
  }
  auto jobs = jobs_->list(*call.who, req.get_param_value("state"), since);
  if (!jobs.ok()) return fail(res, call, jobs.error());
  // Up to 1000 jobs: written as text, each straight from its row (append_job_text()), and
  // moved into the answer rather than copied.
  std::string text = "{\"jobs\":[";
  text.reserve(jobs->size() * 512 + 16);
  for (size_t i = 0; i < jobs->size(); ++i) {
    if (i > 0) text.push_back(',');
    append_job_text(text, (*jobs)[i]);
  }
  text += "]}\n";
  res.status = 200;
  res.body = std::move(text);
  res.set_header("Content-Type", "application/json");
}

void Server::get_job(const httplib::Request& req, httplib::Response& res, const Call& call) {
  one_job(req, res, call, false);
}

void Server::cancel_job(const httplib::Request& req, httplib::Response& res, const Call& call) {
  one_job(req, res, call, true);
}

void Server::one_job(const httplib::Request& req, httplib::Response& res, const Call& call,
                     bool cancel) {
  if (jobs_ == nullptr) return broker_one_job(req, res, call, cancel);
  RequestAudit& audit = *call.audit;
  int64_t id = job_id(req.matches[1]);
  auto job = id < 0   ? Result<std::optional<JobRecord>>(std::optional<JobRecord>())
             : cancel ? jobs_->cancel(*call.who, id)
                      : jobs_->get(*call.who, id);
  std::string name = req.matches[1];
  if (!job.ok()) {
    if (cancel)
      audit.record("job.cancel", "error", {{"id", name}, {"reason", job.error().message()}});
    return fail(res, call, job.error());
  }
  // Another user's job is as absent as a job that never was.
  if (!*job) {
    if (cancel) audit.record("job.cancel", "not_found", {{"id", name}});
    return send_error(res, 404, "no job " + name);
  }
  if (cancel)
    audit.record("job.cancel", "accepted",
                 {{"id", name},
                  {"slurm_job_id", (*job)->slurm_job_id},
                  {"state", (*job)->state},
                  {"owner", (*job)->owner}});
  nlohmann::json out = job_json(**job);
  out["idle_gpus"] = jobs_->idle_flagged((*job)->id);
  send_json(res, cancel ? 202 : 200, out);
}

void Server::output(const httplib::Request& req, httplib::Response& res, const Call& call) {
  if (jobs_ == nullptr) return broker_output(req, res, call);
  int lines = kDefaultTailLines;
  if (req.has_param("tail")) {
    int64_t n = job_id(req.get_param_value("tail"));
    if (n < 1 || n > kMaxTailLines)
      return send_error(res, 400,
                        "tail is not a number of lines from 1 to " + std::to_string(kMaxTailLines));
    lines = static_cast<int>(n);
  }
  int64_t id = job_id(req.matches[1]);
  auto out = id < 0 ? Result<std::optional<JobService::Output>>(std::optional<JobService::Output>())
                    : jobs_->output(*call.who, id, lines);
  if (!out.ok()) return fail(res, call, out.error());
  if (!*out) return send_error(res, 404, "no job " + std::string(req.matches[1]));
  const JobService::Output& o = **out;
  send_json(res, 200,
            {{"id", std::to_string(o.job.id)},
             {"state", o.job.state},
             {"tail", lines},
             {"stdout", o.stdout_text},
             {"stdout_truncated", o.stdout_truncated},
             {"stderr", o.stderr_text},
             {"stderr_truncated", o.stderr_truncated}});
}

void Server::orphans(const httplib::Request&, httplib::Response& res, const Call&) {
  nlohmann::json list = nlohmann::json::array();
  for (const GpuOrphan& o : jobs_->orphans()) list.push_back(orphan_json(o));
  send_json(res, 200, {{"watching", config_.slurm.reclaim}, {"orphans", list}});
}

void Server::systems(const httplib::Request&, httplib::Response& res, const Call& call) {
  send_json(res, 200, {{"systems", nlohmann::json::array({jobs_->system(*call.who)})}});
}

void Server::declare_metrics() {
  using T = Metrics::Type;
  const std::vector<double> latency = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                       0.25,  0.5,    1,     2.5,  5,     10};
  metrics_.declare("berthd_http_requests_total", T::kCounter,
                   "HTTP requests answered, by method, route and status.");
  metrics_.declare("berthd_http_request_duration_seconds", T::kHistogram,
                   "Time to answer a request, by route.", latency);
  metrics_.declare("berthd_connections_refused_total", T::kCounter,
                   "Connections closed at once, by reason: per_address (max_per_address) or "
                   "queue_full (max_queued).");
  metrics_.declare("berthd_token_failures_total", T::kCounter,
                   "Requests refused for their token (401) or identity (403), by reason.");
  metrics_.declare("berthd_slurm_requests_total", T::kCounter,
                   "Exchanges with slurmrestd, by method and status (0: no answer).");
  metrics_.declare("berthd_slurm_request_duration_seconds", T::kHistogram,
                   "Round trips to slurmrestd, by method.", latency);
  metrics_.declare("berthd_jobs", T::kGauge, "Jobs in berthd's database, by state.");
  metrics_.declare("berthd_gpus", T::kGauge,
                   "GPUs of the cluster by model and state (total, used, idle), as of the last GET "
                   "/v1/resources.");
  metrics_.declare("berthd_idle_gpu_jobs", T::kGauge, "Running GPU jobs flagged for idle GPUs.");
  metrics_.declare("berthd_limit_refusals_total", T::kCounter,
                   "Jobs refused for a limit ([limits]), by the limit's key.");
  metrics_.declare("berthd_quota_refusals_total", T::kCounter,
                   "GPU jobs refused for their group's GPU-hour quota, by group.");
  metrics_.declare("berthd_reclaim_actions_total", T::kCounter,
                   "Idle-GPU reclaim actions taken, by action (flag, notify, cancel).");
  metrics_.declare("berthd_gpu_orphan_processes", T::kGauge,
                   "GPU processes that belong to no running job, by node, as the running GPU jobs' "
                   "samples show them.");
  metrics_.declare("berthd_broker_attempts_total", T::kCounter,
                   "A broker's attempts to send a job to a site, by site and outcome (submitted, "
                   "refused, failed, cancelled, ended).");
  if (brokered_ != nullptr)
    brokered_->set_observer([this](const std::string& site, const std::string& outcome) {
      metrics_.add("berthd_broker_attempts_total", {{"site", site}, {"outcome", outcome}});
    });
  if (jobs_ == nullptr) return;
  jobs_->slurm().set_observer([this](std::string_view method, int status, double seconds) {
    metrics_.add("berthd_slurm_requests_total",
                 {{"method", std::string(method)}, {"status", std::to_string(status)}});
    metrics_.observe("berthd_slurm_request_duration_seconds", {{"method", std::string(method)}},
                     seconds);
  });
  jobs_->set_reclaim_observer(
      [this](const char* action, const JobRecord& job, const std::string& detail) {
        metrics_.add("berthd_reclaim_actions_total", {{"action", action}});
        if (audit_ == nullptr) return;
        AuditEvent e;
        e.event = "job.reclaim";
        e.outcome = action;
        e.user = job.owner;
        e.route = "reconcile";
        e.detail = {
            {"id", std::to_string(job.id)}, {"slurm_job_id", job.slurm_job_id}, {"notice", detail}};
        (void)audit_->write(e);  // deliberate: a full disk must not stop the reclaim
      });
  jobs_->set_orphan_observer([this](const GpuOrphan& o) {
    if (audit_ == nullptr) return;
    AuditEvent e;
    e.event = "gpu.orphan";
    e.outcome = "found";
    e.route = "reconcile";
    e.detail = orphan_json(o);
    (void)audit_->write(e);  // deliberate: a full disk must not stop the reconciliation
  });
  metrics_.on_scrape([this](Metrics& m) {
    for (const auto& [node, n] : jobs_->orphans_by_node())
      m.set("berthd_gpu_orphan_processes", {{"node", node}}, n);
    if (auto counts = jobs_->count_by_state(); counts.ok())
      for (const auto& [state, n] : *counts)
        m.set("berthd_jobs", {{"state", std::string(job_state_name(state))}}, n);
    if (resources_ != nullptr)
      for (const auto& [model, tu] : resources_->gpus_by_model()) {
        m.set("berthd_gpus", {{"model", model}, {"state", "total"}}, tu.first);
        m.set("berthd_gpus", {{"model", model}, {"state", "used"}}, tu.second);
        m.set("berthd_gpus", {{"model", model}, {"state", "idle"}}, tu.first - tu.second);
      }
    m.set("berthd_idle_gpu_jobs", {}, static_cast<double>(jobs_->idle_flagged_count()));
  });
}

// Prometheus' text format; administrators only unless the site opens it (metrics_public).
void Server::metrics(const httplib::Request&, httplib::Response& res, const Call&) {
  res.status = 200;
  res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
}

void Server::resources(const httplib::Request&, httplib::Response& res, const Call& call) {
  std::string user = call.who != nullptr ? call.who->user : config_.publish.public_user;
  auto doc = resources_->document(jobs_->slurm(), user, std::time(nullptr));
  if (!doc.ok()) return fail(res, call, doc.error());
  send_json(res, 200, *doc);
}

// Usage: the caller's own, everyone's for administrators; JSON, or CSV with format=csv.
void Server::accounting(const httplib::Request& req, httplib::Response& res, const Call& call) {
  const Account& who = *call.who;
  int64_t now = std::time(nullptr), until = now, since = now - int64_t{30} * 86400;
  for (auto [name, value] : {std::pair{"since", &since}, std::pair{"until", &until}})
    if (req.has_param(name)) {
      *value = job_id(req.get_param_value(name));
      if (*value < 0)
        return send_error(res, 400, std::string(name) + " is not a Unix time in seconds");
    }
  if (since >= until) return send_error(res, 400, "since is not before until");
  auto by = parse_group_by(req.has_param("group_by") ? req.get_param_value("group_by") : "user");
  if (!by) return send_error(res, 400, "group_by is not user, group or gpu_model");
  std::string format = req.has_param("format") ? req.get_param_value("format") : "json";
  if (format != "json" && format != "csv") return send_error(res, 400, "format is not json or csv");
  auto usage = jobs_->accounting(who.admin ? "" : who.user, since, until);
  if (!usage.ok()) return fail(res, call, usage.error());
  auto rows = aggregate_usage(usage->records, since, until, now, *by);
  if (format == "csv") {
    res.status = 200;
    return res.set_content(usage_csv(rows, *by), "text/csv; charset=utf-8");
  }
  nlohmann::json body = usage_json(rows, *by, since, until);
  body["source"] = usage->source;
  send_json(res, 200, body);
}

Result<int> Server::bind() {
  if (!http_->is_valid())
    return make_error("listen", config_.tls_cert,
                      "cannot load the TLS certificate and key (tls_cert, tls_key)",
                      ErrorCode::kInvalidInput);
  int port = config_.listen_port;
  if (port == 0) {
    port = http_->bind_to_any_port(config_.listen_host);
    if (port < 0) return sys_error("listen", config_.listen_host + ":0");
  } else if (!http_->bind_to_port(config_.listen_host, port)) {
    return sys_error("listen", config_.listen_host + ":" + std::to_string(port));
  }
  if (listen_fd_ >= 0 && ::listen(listen_fd_, kListenBacklog) != 0)
    return sys_error("listen", config_.listen_host + ":" + std::to_string(port));
  return port;
}

Status Server::serve() {
  if (!http_->listen_after_bind())
    return make_error("listen", config_.listen_host, "the server stopped on an error");
  return {};
}

void Server::stop() {
  http_->stop();
}

}  // namespace berth::gateway

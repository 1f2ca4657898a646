// berthd's HTTP side: the routes of /v1, their JSON answers and errors, on cpp-httplib.
//
// cpp-httplib (Debian's libcpp-httplib-dev) rather than Boost.Beast, Pistache or a hand-written
// server: it is packaged in Debian 12 with OpenSSL built in (TLS is a constructor argument),
// synchronous, and small enough to read; a job gateway's load (hundreds of requests a second,
// each a token check and a database read) needs no asynchronous I/O. Threading: cpp-httplib
// accepts on one thread and hands each connection to berthd's fixed pool (kWorkerThreads,
// gateway/connections.h: per-address and queue limits, request deadlines, TLS); handlers share
// the Authenticator (its key cache has its own lock) and nothing else mutable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gateway/audit.h"
#include "gateway/auth.h"
#include "gateway/broker.h"
#include "gateway/broker_jobs.h"
#include "gateway/config.h"
#include "gateway/jobs.h"
#include "gateway/metrics.h"
#include "gateway/resources.h"
#include "gateway/routes.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace berth::gateway {

/// Worker threads serving connections. cpp-httplib holds a worker for as long as a keep-alive
/// connection lasts, so this bounds the clients served at once; the others wait their turn.
inline constexpr int kWorkerThreads = 128;
/// Requests served on one keep-alive connection before it is closed (cpp-httplib's default, 5,
/// makes clients reconnect all the time), so that waiting connections get a worker.
inline constexpr int kKeepAliveRequests = 100;
/// The listening socket's backlog. cpp-httplib 0.11 listens with 5: 64 clients connecting at
/// once overflow it and some first requests fail.
inline constexpr int kListenBacklog = 1024;

/// The OpenAPI 3 document of the API, served at /v1/openapi.json (docs/api.md summarises it).
nlohmann::ordered_json openapi_document(const std::string& version);

class RequestAudit;

/// What a route is served with: nothing more, the job service ([slurm] and a database), the
/// broker ([broker]), or either the job service or a broker's jobs ([broker] and a database,
/// gateway/broker_jobs.h); without it the route is not there (404).
enum class Needs : uint8_t { kNothing, kJobs, kBroker, kJobsOrBrokered };

/// The gateway: routes bound to a configuration and an authenticator.
class Server {
 public:
  /// One request as a route's handler sees it: the caller's account and the request's audit
  /// (both null on a route open to anyone), and the route's error statuses.
  struct Call {
    const Account* who = nullptr;
    RequestAudit* audit = nullptr;
    const ErrorStatuses* errors = nullptr;
  };
  using Handler = void (Server::*)(const httplib::Request&, httplib::Response&, const Call&);
  /// One route: its row in route_table().
  struct Route {
    HttpMethod method;
    const char* pattern;  ///< the path, a regular expression whose groups are req.matches
    Access access;
    /// With kToken or kAdmin: the [publish] setting that opens the route to anyone when true
    /// (no token is read then); nullptr: none.
    bool PublishConfig::*open_if = nullptr;
    const char* refusal = nullptr;  ///< with kAdmin: the 403's message to others
    Needs needs = Needs::kNothing;  ///< the service it is served with (else 404, as no route)
    Handler handler = nullptr;
    /// Where the route's answer to an error differs from http_status() (gateway/routes.h).
    ErrorStatuses errors = {};
  };
  /// The routes, in the order they are registered: the one place that says what each route
  /// needs and how it answers errors.
  static const std::vector<Route>& route_table();

  /// `jobs` may be null: the job endpoints then answer 404; so may `broker`, the broker's.
  /// `audit` may be null: no audit log. `brokered` (with `broker`, without `jobs`): the job
  /// endpoints are the broker's jobs.
  Server(const GatewayConfig& config, Authenticator& auth, JobService* jobs, std::string version,
         AuditLog* audit = nullptr, BrokerService* broker = nullptr,
         BrokerJobs* brokered = nullptr);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds the configured address (port 0: any free port); the port bound.
  Result<int> bind();
  /// Serves until stop(); call after bind().
  Status serve();
  /// Makes serve() return; safe from another thread.
  void stop();

 private:
  void routes();
  void declare_metrics();
  /// Answers error `e` with the status the route gives its code.
  static void fail(httplib::Response& res, const Call& call, const Error& e);

  // The handlers of route_table(), one per route.
  void health(const httplib::Request& req, httplib::Response& res, const Call& call);
  void openapi(const httplib::Request& req, httplib::Response& res, const Call& call);
  void me(const httplib::Request& req, httplib::Response& res, const Call& call);
  void submit(const httplib::Request& req, httplib::Response& res, const Call& call);
  void list(const httplib::Request& req, httplib::Response& res, const Call& call);
  void get_job(const httplib::Request& req, httplib::Response& res, const Call& call);
  void cancel_job(const httplib::Request& req, httplib::Response& res, const Call& call);
  void dry_run(const JobRequest& request, httplib::Response& res, const Call& call);
  void one_job(const httplib::Request& req, httplib::Response& res, const Call& call, bool cancel);
  void output(const httplib::Request& req, httplib::Response& res, const Call& call);
  void orphans(const httplib::Request& req, httplib::Response& res, const Call& call);
  void systems(const httplib::Request& req, httplib::Response& res, const Call& call);
  void metrics(const httplib::Request& req, httplib::Response& res, const Call& call);
  void resources(const httplib::Request& req, httplib::Response& res, const Call& call);
  void accounting(const httplib::Request& req, httplib::Response& res, const Call& call);
  void placements(const httplib::Request& req, httplib::Response& res, const Call& call);
  void broker_sites(const httplib::Request& req, httplib::Response& res, const Call& call);
  void manifests(const httplib::Request& req, httplib::Response& res, const Call& call);
  void rank(const httplib::Request& req, httplib::Response& res, const Call& call);
  // The job endpoints of a broker (gateway/broker_jobs.h), from the handlers above.
  void broker_submit(const httplib::Request& req, httplib::Response& res, const Call& call);
  void broker_list(const httplib::Request& req, httplib::Response& res, const Call& call);
  void broker_one_job(const httplib::Request& req, httplib::Response& res, const Call& call,
                      bool cancel);
  void broker_output(const httplib::Request& req, httplib::Response& res, const Call& call);

  const GatewayConfig& config_;
  Authenticator& auth_;
  JobService* jobs_;
  std::string version_;
  AuditLog* audit_;
  BrokerService* broker_;
  BrokerJobs* brokered_;
  Metrics metrics_;
  std::unique_ptr<ResourcesService> resources_;  ///< with the job endpoints
  std::unique_ptr<httplib::Server> http_;
  int listen_fd_ = -1;  ///< the listening socket, once made (to raise its backlog)
};

}  // namespace berth::gateway

// The routes of /v1 (gateway/server.h).
#include "gateway/server.h"

#include <httplib.h>

#include <ctime>

#include "core/json.h"

namespace berth::gateway {
namespace {

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

}  // namespace

Server::Server(const GatewayConfig& config, Authenticator& auth, std::string version)
    : config_(config), auth_(auth), version_(std::move(version)) {
  if (config_.tls())
    http_ = std::make_unique<httplib::SSLServer>(config_.tls_cert.c_str(), config_.tls_key.c_str());
  else
    http_ = std::make_unique<httplib::Server>();
  routes();
}

Server::~Server() = default;

void Server::routes() {
  http_->new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  http_->set_payload_max_length(size_t{1} << 20);

  http_->Get("/v1/health", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}, {"version", version_}});
  });
  http_->Get("/v1/openapi.json", [this](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(to_text(openapi_document(version_)) + "\n", "application/json");
  });
  http_->Get("/v1/me", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = auth_.authenticate(req.get_header_value("Authorization"), std::time(nullptr));
    if (const auto* fail = std::get_if<AuthFailure>(&who)) {
      // RFC 6750 section 3: a request without a token gets the challenge alone.
      std::string challenge = "Bearer realm=\"berthd\"";
      if (req.has_header("Authorization") && fail->status == 401)
        challenge += ", error=\"invalid_token\", error_description=" + quoted(fail->message);
      if (fail->status == 401) res.set_header("WWW-Authenticate", challenge);
      send_error(res, fail->status, fail->message);
      return;
    }
    const Account& a = std::get<Account>(who);
    send_json(res, 200,
              {{"issuer", a.issuer}, {"subject", a.subject}, {"user", a.user}, {"uid", a.uid},
               {"gid", a.gid}, {"groups", a.groups}, {"admin", a.admin}});
  });
  http_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty())
      send_error(res, res.status, res.status == 404 ? "no such resource" : "request failed");
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        send_error(res, 500, "internal error");
      });
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
  return port;
}

Status Server::serve() {
  if (!http_->listen_after_bind())
    return make_error("listen", config_.listen_host, "the server stopped on an error");
  return {};
}

void Server::stop() { http_->stop(); }

}  // namespace berth::gateway

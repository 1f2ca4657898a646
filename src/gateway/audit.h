// berthd's audit log (`audit_log = "PATH"`, docs/gateway.md "Audit log"): one JSON object per
// line for every decision the gateway takes about a request: a token accepted or refused, an
// identity without an account, a job accepted, replayed, refused (by a limit, as invalid, as a
// reused Idempotency-Key) or cancelled.
//
// The file is opened O_APPEND and each line goes out in one write(2) under a lock, with no
// buffer in between: a line is in the file when the request is answered, and lines of
// concurrent requests never interleave. berthd keeps the file open, so rotation is logrotate's
// copytruncate. Lines are not fsynced: a crash of the machine may lose the last ones.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace berth::gateway {

/// One decision, as the audit log records it.
struct AuditEvent {
  std::string event;    ///< "token", "mapping", "job.submit", "job.cancel"
  std::string outcome;  ///< "accepted", "refused", "replayed", "invalid", "conflict", ...
  std::string issuer, subject, user;  ///< what is known of the caller ("" before a token)
  std::string request_id;             ///< also the answer's X-Request-Id
  std::string route;                  ///< "POST /v1/jobs"
  nlohmann::json detail = nlohmann::json::object();
};

/// The log line of `e` at `t`, ending in "\n": {"time", "event", "outcome", "issuer", "sub",
/// "user", "request_id", "route", "detail"} in that order.
std::string audit_line(const AuditEvent& e, std::chrono::system_clock::time_point t);

/// The audit log file; safe to use from many threads.
class AuditLog {
 public:
  /// Opens (creating, mode 0600) the log at `path` for appending.
  static Result<std::unique_ptr<AuditLog>> open(const std::string& path);
  /// Appends the line of `e`, timed now.
  Status write(const AuditEvent& e);
  const std::string& path() const { return path_; }

 private:
  AuditLog(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

  UniqueFd fd_;
  std::string path_;
  std::mutex mu_;
};

}  // namespace berth::gateway

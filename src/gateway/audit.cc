// The audit log (gateway/audit.h).
#include "gateway/audit.h"

#include <fcntl.h>

#include <chrono>

#include "core/clock.h"
#include "core/json.h"

namespace berth::gateway {

std::string audit_line(const AuditEvent& e, std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  nlohmann::ordered_json line = {
      {"time", rfc3339_ms(ms)},     {"event", e.event}, {"outcome", e.outcome},
      {"issuer", e.issuer},         {"sub", e.subject}, {"user", e.user},
      {"request_id", e.request_id}, {"route", e.route}, {"detail", e.detail}};
  // to_text() escapes every control character, so the line holds no newline of its own.
  return to_text(line) + "\n";
}

Result<std::unique_ptr<AuditLog>> AuditLog::open(const std::string& path) {
  UniqueFd fd = BERTH_TRY(open_file(path, O_WRONLY | O_CREAT | O_APPEND, 0600));
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(fd), path));
}

Status AuditLog::write(const AuditEvent& e) {
  std::string line = audit_line(e, std::chrono::system_clock::now());
  std::lock_guard<std::mutex> lock(mu_);
  return write_all(fd_.get(), line, path_);
}

}  // namespace berth::gateway

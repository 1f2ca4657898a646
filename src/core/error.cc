#include "core/error.h"

#include <cstring>

namespace berth {

std::string Error::message() const {
  std::string out;
  for (auto it = context.rbegin(); it != context.rend(); ++it) {
    out += *it;
    out += ": ";
  }
  out += op;
  if (!subject.empty()) {
    out += ' ';
    out += subject;
  }
  if (!detail.empty()) {
    out += ": ";
    out += detail;
  }
  if (sys_errno != 0) {
    out += ": ";
    out += std::strerror(sys_errno);
  }
  if (http_status != 0) {
    out += " (HTTP " + std::to_string(http_status) + ")";
  }
  return out;
}

Error Error::with_context(std::string ctx) && {
  context.push_back(std::move(ctx));
  return std::move(*this);
}

Error Error::with_hint(std::string h) && {
  hint = std::move(h);
  return std::move(*this);
}

Error sys_error(std::string op, std::string subject) {
  int err = errno;
  return sys_error(std::move(op), std::move(subject), err);
}

Error sys_error(std::string op, std::string subject, int err) {
  Error e;
  e.op = std::move(op);
  e.subject = std::move(subject);
  e.sys_errno = err;
  return e;
}

Error make_error(std::string op, std::string subject, std::string detail) {
  Error e;
  e.op = std::move(op);
  e.subject = std::move(subject);
  e.detail = std::move(detail);
  return e;
}

Error http_error(std::string op, std::string url, int status, std::string detail) {
  Error e;
  e.op = std::move(op);
  e.subject = std::move(url);
  e.http_status = status;
  e.detail = std::move(detail);
  return e;
}

}  // namespace berth

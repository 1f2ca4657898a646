#include "core/error.h"

#include <cstring>

namespace berth {

std::string Error::message() const {
  std::string out;
  for (auto it = context.rbegin(); it != context.rend(); ++it) {
    out += *it;
    out += ": ";
  }
  out += op.word();
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

namespace error_internal {
void op_word_not_in_kOpWords() {}
}  // namespace error_internal

ErrorCode code_for_errno(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ESRCH:
      return ErrorCode::kNotFound;
    case EEXIST:
    case ENOTEMPTY:
      return ErrorCode::kExists;
    case EACCES:
    case EPERM:
    case EROFS:
      return ErrorCode::kPermission;
    case EBUSY:
    case EAGAIN:
    case ETXTBSY:
      return ErrorCode::kBusy;
    case ENOSYS:
    case EOPNOTSUPP:
      return ErrorCode::kUnsupported;
    default:
      return ErrorCode::kOther;
  }
}

Error sys_error(Op op, std::string subject) {
  int err = errno;
  return sys_error(op, std::move(subject), err);
}

Error sys_error(Op op, std::string subject, int err) {
  Error e;
  e.op = op;
  e.subject = std::move(subject);
  e.sys_errno = err;
  e.code = code_for_errno(err);
  return e;
}

Error make_error(Op op, std::string subject, std::string detail, ErrorCode code) {
  Error e;
  e.op = op;
  e.subject = std::move(subject);
  e.detail = std::move(detail);
  e.code = code;
  return e;
}

Error http_error(Op op, std::string url, int status, std::string detail) {
  Error e;
  e.op = op;
  e.subject = std::move(url);
  e.http_status = status;
  e.detail = std::move(detail);
  e.code = ErrorCode::kHttp;
  return e;
}

}  // namespace berth

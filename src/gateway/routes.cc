// How an error becomes an HTTP status (gateway/routes.h).
#include "gateway/routes.h"

namespace berth::gateway {

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidInput:
      return 400;
    case ErrorCode::kPermission:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kExists:
      return 409;
    case ErrorCode::kNetwork:
    case ErrorCode::kHttp:
      return 502;
    case ErrorCode::kBusy:
      return 503;
    case ErrorCode::kOther:
    case ErrorCode::kUnsupported:
    case ErrorCode::kIntegrity:
    case ErrorCode::kCancelled:
      return 500;
  }
  return 500;
}

int http_status(ErrorCode code, const ErrorStatuses& route) {
  for (const ErrorStatus& s : route.codes)
    if (s.code == code) return s.status;
  return route.otherwise != 0 ? route.otherwise : http_status(code);
}

std::string error_text(const Error& e, int status) {
  return status < 500 ? e.detail : e.message();
}

}  // namespace berth::gateway

// What berthd's routes have in common: how an error becomes an HTTP status, and the facts of a
// route that its row in the server's table gives (gateway/server.h's Server::route_table()).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace berth::gateway {

/// The HTTP methods berthd routes.
enum class HttpMethod : uint8_t { kGet, kPost, kDelete };

/// What a route needs of its caller before its handler runs.
enum class Access : uint8_t {
  kAnyone,  ///< nothing: no token is read, no audit line is written
  kToken,   ///< a token mapped to an account (else 401 or 403)
  kAdmin,   ///< a token of an administrator (else 401, or 403 with the route's refusal)
};

/// The HTTP status of error code `code` (core/error.h), where a route does not say otherwise:
///   kInvalidInput 400, kPermission 403, kNotFound 404, kExists 409, kNetwork and kHttp 502
///   (the server berthd asked failed), kBusy 503, any other 500.
int http_status(ErrorCode code);

/// A route's answer to one error code, where it differs from http_status().
struct ErrorStatus {
  ErrorCode code;
  int status;
};

/// The statuses a route answers for errors where they differ from http_status(): those of
/// `codes` first, then `otherwise` for any code not listed (0: http_status()'s).
struct ErrorStatuses {
  std::vector<ErrorStatus> codes;
  int otherwise = 0;
};

/// The status of error code `code` on a route whose overrides are `route`.
int http_status(ErrorCode code, const ErrorStatuses& route);

/// The message an error answer shows: the error's detail for a client error (4xx: what the
/// request got wrong), its whole message for a server error (5xx: what failed, and where).
std::string error_text(const Error& e, int status);

}  // namespace berth::gateway

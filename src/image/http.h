// A small libcurl wrapper for the registry client: one easy handle per
// request (so requests from several threads never share state), headers of
// the final response collected by lowercase name, the body either buffered
// (with a size cap) or streamed to a sink when the status is 2xx.
// Redirects are not followed here: the registry client follows them itself, deciding
// where credentials may go (registry.cc). The registry client's, and the berth client of berthd's
// (cli/gateway_client.cc), whose few JSON requests need nothing more; not a general HTTP client.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace berth {

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  ///< of the final response, names lowercased
  std::string body;                            ///< buffered body (non-2xx bodies when streaming)

  /// A header's value, or "" when absent.
  std::string header(const std::string& lower_name) const;
};

struct HttpRequest {
  Op method = "GET";  ///< "GET", "POST" or "PUT"
  std::string url;
  std::vector<std::string> headers;  ///< "Name: value" lines
  std::string post_body;             ///< request body for POST and PUT
  size_t max_body = 1 << 20;         ///< cap on a buffered body; larger is an error
  /// When set, a 2xx body goes here instead of being buffered; `head` holds
  /// the final status and headers (no body), known before the first byte.
  std::function<Status(const HttpResponse& head, const char* data, size_t len)> sink;
  std::string ca_file;
  long connect_timeout_s = 30;
  long low_speed_limit = 1024;  ///< bytes per second...
  long low_speed_time_s = 60;   ///< ...over this many seconds, else the transfer is cut off
  long timeout_ms = 0;          ///< the whole request's limit; 0 for none
};

/// Performs one request. Network failures are an error naming the URL with
/// curl's message; any HTTP status is a success here. An error returned by
/// the sink aborts the transfer and is returned unchanged.
Result<HttpResponse> http_perform(const HttpRequest& req);

/// URL-escapes a query value.
std::string url_escape(std::string_view s);

}  // namespace berth

// A client for the OCI distribution (Docker registry HTTP API v2), on libcurl.
//
// HTTPS by default; plain HTTP only for registries in `insecure` (and always
// for 127.0.0.1, ::1 and localhost). Authentication follows the challenge the
// registry sends: Basic with stored credentials, or the Bearer token flow
// (GET realm?service=..&scope=.., anonymous or with Basic credentials), the
// token cached per scope and reused until it expires. All methods are safe to
// call from several threads at once (one curl handle per call).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "image/auth.h"

namespace berth {

struct RegistryOptions {
  std::vector<std::string> insecure;  ///< registries (host[:port]) allowed over plain HTTP
  std::string ca_file;                ///< extra CA bundle for HTTPS, empty for the system's
  long connect_timeout_s = 30;
  /// A transfer slower than low_speed_limit bytes per second for low_speed_time_s seconds is
  /// cut off (a transfer failure: pull retries it, resuming where it stopped).
  long low_speed_limit = 1024;
  long low_speed_time_s = 60;
  /// When set, no request of this client runs past it (a pull's overall deadline).
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

struct FetchedManifest {
  std::string body;
  std::string media_type;  ///< as detected by detect_manifest_media_type
  std::string digest;      ///< sha256 of body (checked against Docker-Content-Digest when sent)
};

/// A registry API answer, whatever its status.
struct ApiResponse {
  long status = 0;
  std::string body;
  std::string link;  ///< the Link header (pagination), "" when absent
};

/// Receives blob bytes as they arrive; an error aborts the transfer.
using ByteSink = std::function<Status(const char* data, size_t len)>;

class RegistryClient {
 public:
  /// `registry` as in Reference::registry; `creds` may be empty (anonymous).
  RegistryClient(std::string registry, RegistryOptions opts, std::optional<Credentials> creds);
  ~RegistryClient();
  RegistryClient(const RegistryClient&) = delete;
  RegistryClient& operator=(const RegistryClient&) = delete;

  /// GET /v2/<repo>/manifests/<ref> with Accept for all manifest types.
  /// A digest `ref` is verified against the body.
  Result<FetchedManifest> get_manifest(const std::string& repo, const std::string& ref);

  /// GET /v2/<repo>/blobs/<digest>, from byte `offset` (Range) when > 0.
  /// Sets *restarted when the registry ignored the Range and sent the whole
  /// blob from byte 0, before the first byte reaches the sink, so the sink
  /// can check it and discard what it had. With restarted null that is an error.
  Status get_blob(const std::string& repo, const std::string& digest, uint64_t offset,
                  const ByteSink& sink, bool* restarted);

  /// GET `path_and_query` ("/v2/_catalog?n=100") with authentication for `scope` (may be
  /// empty); any HTTP status is returned, not an error. Bodies are capped at 4 MiB.
  Result<ApiResponse> get_api(const std::string& path_and_query, const std::string& scope);

  /// GET /v2/ with authentication: checks that credentials are accepted
  /// (used by `berth login`).
  Status check_login();

  /// "https://host" or "http://host" as chosen for this registry.
  std::string base_url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// True when `registry` may be spoken to over plain HTTP under `opts`.
bool registry_is_insecure(const std::string& registry, const RegistryOptions& opts);

}  // namespace berth

// Registry credentials and the WWW-Authenticate challenge.
//
// Credentials come from Berth's own file ($BERTH_CONFIG_DIR/auth.json,
// written by `berth login`) and then from Docker's ~/.docker/config.json
// (or $DOCKER_CONFIG/config.json): the "auths" map with base64 "auth"
// "user:password" entries, or "username"/"password", or "identitytoken".
// Credential helpers (credsStore) are not run.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace berth {

struct Credentials {
  std::string username;
  std::string password;
  std::string identity_token;  ///< OAuth2 refresh token, used instead of the password
};

/// A parsed `WWW-Authenticate` header: scheme plus its key="value" parameters.
struct AuthChallenge {
  std::string scheme;                         ///< "Bearer" or "Basic" (as sent)
  std::map<std::string, std::string> params;  ///< realm, service, scope, error ...
};

/// Parses a WWW-Authenticate value such as
/// `Bearer realm="https://auth.example/token",service="reg",scope="repository:a:pull"`.
Result<AuthChallenge> parse_www_authenticate(std::string_view header);

/// The key a registry is stored under: docker.io's names fold to
/// "https://index.docker.io/v1/" as Docker does; others are the host[:port].
std::string credential_key(std::string_view registry);

class CredentialStore {
 public:
  /// Loads Berth's auth.json and Docker's config.json (missing files are fine;
  /// unreadable or malformed ones are an error naming the file).
  static Result<CredentialStore> load();
  /// Credentials for a registry: Berth's file first, then Docker's.
  std::optional<Credentials> find(std::string_view registry) const;
  /// Saves credentials into Berth's auth.json (mode 0600, atomic write).
  Status save(std::string_view registry, const Credentials& c);
  /// Removes a registry's entry from Berth's auth.json; false when there was none.
  Result<bool> erase(std::string_view registry);
  /// The registries Berth's auth.json holds credentials for (Docker's file is not Berth's to
  /// empty): the keys erase() takes.
  std::vector<std::string> berth_registries() const;

  std::string berth_file;   ///< path of Berth's auth.json
  std::string docker_file;  ///< path of Docker's config.json

 private:
  std::map<std::string, Credentials> berth_;
  std::map<std::string, Credentials> docker_;
};

}  // namespace berth

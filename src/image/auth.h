// Registry credentials and the WWW-Authenticate challenge.
//
// Credentials come from Berth's own file ($BERTH_CONFIG_DIR/auth.json,
// written by `berth login`) and then from Docker's ~/.docker/config.json
// (or $DOCKER_CONFIG/config.json): the "auths" map with base64 "auth"
// "user:password" entries, or "username"/"password", or "identitytoken".
// Credential helpers (credsStore) are not run.
//
// Several users per registry (enroot's credentials file keeps one line per login; pyxis's
// `--container-image=USER@...` picks one): Berth's file also has a "users" map,
// {"users": {"HOST": {"USER": {"auth": ...}}}}, one entry per user that logged in there.
// "auths" keeps the registry's default (the last login), so that Docker, and Berth before
// "users", read the same file as before; a file without "users" is read as one user each.
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
  /// Credentials for a registry: Berth's file first, then Docker's. With `user` set (below),
  /// that user's, or nullopt when neither file holds a login of that user there.
  std::optional<Credentials> find(std::string_view registry) const;
  /// Credentials of `user` at `registry` (find_user(r, "") is the registry's default).
  std::optional<Credentials> find_user(std::string_view registry, std::string_view user) const;
  /// Saves credentials into Berth's auth.json (mode 0600, atomic write): the registry's
  /// default, and the entry of their user.
  Status save(std::string_view registry, const Credentials& c);
  /// Removes a registry's entries (every user's) from Berth's auth.json; false when there was
  /// none.
  Result<bool> erase(std::string_view registry);
  /// Removes one user's entry; when it was the default, another user's (if any) becomes it.
  /// False when there was none.
  Result<bool> erase_user(std::string_view registry, const std::string& user);
  /// The registries Berth's auth.json holds credentials for (Docker's file is not Berth's to
  /// empty): the keys erase() takes.
  std::vector<std::string> berth_registries() const;

  std::string berth_file;   ///< path of Berth's auth.json
  std::string docker_file;  ///< path of Docker's config.json
  /// The login find() takes (`pull --creds-user`, pyxis's USER@); empty: each registry's
  /// default.
  std::string user;

  /// A registry's users, by name.
  using Users = std::map<std::string, Credentials>;

 private:
  std::map<std::string, Credentials> berth_;
  std::map<std::string, Users> berth_users_;
  std::map<std::string, Credentials> docker_;
};

}  // namespace berth

// Who a request comes from: its bearer token validated locally against the trusted issuers'
// keys (gateway/jwt.h), then mapped to a local account.
//
// Keys come from each issuer's JWKS, found through its OpenID Provider metadata
// (ISSUER/.well-known/openid-configuration, whose "issuer" must be the configured one), fetched
// on first use and cached. A token naming a kid the cache lacks triggers a new fetch (the issuer
// has rotated its keys), at most once per jwks_min_refresh_s per issuer, so a stream of tokens
// with made-up kids cannot make berthd hammer the issuer. The token's (unverified) iss picks the
// issuer and only that issuer's keys are tried: a key of another trusted issuer never verifies.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gateway/config.h"
#include "gateway/jwt.h"

namespace berth::gateway {

/// Fetches a URL's body over HTTP(S); an error for a failure or a status other than 200.
using Fetcher = std::function<Result<std::string>(const std::string& url)>;
/// The Fetcher berthd uses: cpp-httplib's client, 5 s timeouts, certificates verified.
Fetcher http_fetcher();

/// The OpenID Provider metadata of `issuer` (ISSUER/.well-known/openid-configuration) read
/// with `fetch`; an error unless it is a JSON object whose "issuer" is exactly `issuer`
/// (OpenID Connect Discovery 1.0 section 4.3).
Result<nlohmann::json> fetch_discovery(const Fetcher& fetch, const std::string& issuer);

/// The issuers' keys, fetched on demand and cached; safe to use from many threads.
class KeyCache {
 public:
  KeyCache(Fetcher fetch, int64_t min_refresh_s)
      : fetch_(std::move(fetch)), min_refresh_s_(min_refresh_s) {}
  /// The key `kid` of `issuer` at Unix time `now`, fetching the issuer's JWKS when it is not
  /// cached yet, or when `kid` is unknown and the last fetch is at least min_refresh_s old.
  Result<Jwk> key(const std::string& issuer, const std::string& kid, int64_t now);
  /// How many times the JWKS of `issuer` has been fetched (for tests and metrics).
  int fetches(const std::string& issuer) const;
  /// How many JWKS fetches of any issuer have been tried: a verdict reached with the keys of
  /// an earlier count may rest on a key since withdrawn.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    std::vector<Jwk> keys;
    int64_t fetched_at = 0;
    int fetches = 0;
    bool loaded = false;
  };
  Status refresh(const std::string& issuer, Entry& e, int64_t now);

  Fetcher fetch_;
  int64_t min_refresh_s_;
  mutable std::mutex mu_;  // held across a fetch: one fetch per issuer at a time
  std::map<std::string, Entry> entries_;
  std::atomic<uint64_t> generation_{0};
};

/// Tokens already verified, by their exact bytes, each with its claims: a client sends the same
/// token with every request until it expires, and checking its signature each time was most of
/// the cost of a token. Safe because a token's bytes fix everything the check reads but the
/// time and the issuer's keys: an entry is used only while the token's exp (with the leeway)
/// has not passed and the clock has not gone back since it was verified (nbf held then, so it
/// holds later), and only while no JWKS has been fetched since (a withdrawn key fails again).
/// Refusals are never kept. Bounded: full, it drops the expired entries, else all of them.
class VerifiedTokens {
 public:
  /// The claims of `token` verified at or before `now` with keys of `generation`, or null.
  std::shared_ptr<const nlohmann::json> find(const std::string& token, int64_t now,
                                             uint64_t generation) const;
  /// Keeps `claims`, verified at `now` with keys of `generation`, until `until` (exp + leeway).
  void keep(const std::string& token, std::shared_ptr<const nlohmann::json> claims, int64_t now,
            int64_t until, uint64_t generation);

  static constexpr size_t kMaxEntries = 4096;

 private:
  struct Entry {
    std::shared_ptr<const nlohmann::json> claims;
    int64_t verified_at = 0, until = 0;
    uint64_t generation = 0;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

/// The local account an identity runs as, and what the gateway knows of it.
struct Account {
  std::string issuer, subject;  ///< the identity
  std::string user;             ///< the local account's name
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<std::string> groups;  ///< from the token's group claims, as given
  bool admin = false;               ///< a member of one of the admin_groups
};

/// Looks a local account up by name: its uid and gid, or nullopt when there is none.
using UserLookup = std::function<std::optional<std::pair<uid_t, gid_t>>(const std::string&)>;
/// The UserLookup berthd uses: the system's user database (getpwnam_r).
UserLookup system_user_lookup();

/// The groups a token's claims name: `groups`, `wlcg.groups` and `eduperson_entitlement`
/// (each a string or a list of strings), in that order, without repeats. An AARC entitlement
/// (AARC-G002: `urn:NID:DELEGATED:group:GROUP[:SUBGROUP...][:role=ROLE]#AUTHORITY`) counts as
/// the group it names, written as a path ("/GROUP/SUBGROUP"), its role and authority dropped,
/// as EGI Check-in and WLCG read them; other entitlements are kept as given.
std::vector<std::string> token_groups(const nlohmann::json& claims);

/// The group path of AARC entitlement `urn` ("/gpu-vo" for
/// "urn:geant:example.org:group:gpu-vo:role=member#aai.example.org"), or nullopt when `urn`
/// is not one.
std::optional<std::string> aarc_group(const std::string& urn);

/// The accounts no token may map to besides root and those outside [accounts]' uid range:
/// facts of the running system, not of the configuration.
struct ServiceAccounts {
  /// berthd's own uid (it can read Slurm's JWT key); -1 for none (unit tests).
  uid_t own_uid = static_cast<uid_t>(-1);
  /// Slurm's SlurmUser (slurm.conf), a Slurm administrator, and its uid when it is local.
  std::string slurm_user = "root";
  std::optional<uid_t> slurm_uid;
};

/// Slurm's SlurmUser as slurm.conf `path` names it ("root" when it does not, Slurm's
/// default); an error when the file cannot be read.
Result<std::string> read_slurm_user(const std::string& path);

/// Maps verified `claims` of `issuer` to a local account: the [[users]] row for (iss, sub)
/// first, else the issuer's username_claim. The account's name must be free of control
/// characters, and it must exist locally, not be root, berthd's own account or SlurmUser
/// (`services`), and have a uid in [accounts]' range. Errors (code kPermission) say why the
/// identity has no account.
Result<Account> map_identity(const nlohmann::json& claims, const IssuerConfig& issuer,
                             const GatewayConfig& config, const UserLookup& lookup,
                             const ServiceAccounts& services = {});

/// Why a request was refused: 401 (no valid token) or 403 (a valid token with no account).
struct AuthFailure {
  int status = 401;
  std::string message;
  std::string issuer, subject;  ///< the verified identity of a 403; "" for a 401
};

/// The token of an Authorization header's value `authorization` ("Bearer TOKEN", the scheme in
/// any case, RFC 6750 section 2.1), spaces before it dropped; nullopt for another scheme.
std::optional<std::string> bearer_token(const std::string& authorization);

/// Validates bearer tokens and maps them; one per gateway, shared by the server's threads.
class Authenticator {
 public:
  Authenticator(const GatewayConfig& config, Fetcher fetch, UserLookup lookup,
                ServiceAccounts services = {})
      : config_(config),
        keys_(std::move(fetch), config.jwks_min_refresh_s),
        lookup_(std::move(lookup)),
        services_(std::move(services)) {}
  /// The account of the request whose Authorization header is `authorization`, at `now`.
  std::variant<Account, AuthFailure> authenticate(const std::string& authorization, int64_t now);
  /// The token's verified claims, or the reason it is not valid (message of a 401).
  Result<nlohmann::json> verify(const std::string& token, int64_t now);
  KeyCache& keys() { return keys_; }

 private:
  /// verify()'s claims, from verified_ when the token is there (VerifiedTokens says when).
  Result<std::shared_ptr<const nlohmann::json>> verified(const std::string& token, int64_t now);

  const GatewayConfig& config_;
  KeyCache keys_;
  VerifiedTokens verified_;
  UserLookup lookup_;
  ServiceAccounts services_;
};

}  // namespace berth::gateway

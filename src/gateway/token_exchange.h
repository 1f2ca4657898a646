// OAuth 2.0 Token Exchange (RFC 8693) for a broker's sites of `token = "exchange"`
// (docs/broker.md): the caller's access token is traded at its issuer's token endpoint for one
// whose `aud` is the site's audience, the same user's, so that the site sees the real user
// though it trusts only tokens meant for it.
//
// The token endpoint is the `token_endpoint` of the issuer's OpenID Provider metadata, read
// with the fetcher that reads its keys (gateway/auth.h) and kept once read. The broker
// authenticates as the client of its issuer's `exchange_client_id` with the secret in
// `exchange_client_secret_file` (HTTP Basic, RFC 6749 section 2.3.1). Each exchanged token is
// kept by (caller token, audience) until shortly before its `expires_in`. A refusal is never
// kept: the next request tries again. An issuer whose token endpoint does not answer (no
// connection, a timeout, HTTP 5xx or 429) is not asked again for 1 s, then 2, 4, ... up to
// 60 s while it stays so: a broker whose issuer is down answers at once, not after a timeout
// for every site of every request.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "gateway/auth.h"
#include "gateway/config.h"

namespace berth::gateway {

class TokenExchanger {
 public:
  /// `issuers` outlive the exchanger; `fetch` reads their discovery documents.
  TokenExchanger(const std::vector<IssuerConfig>& issuers, Fetcher fetch)
      : issuers_(issuers), fetch_(std::move(fetch)) {}

  /// A token of issuer `issuer` for `audience` in exchange for `subject_token` (the caller's
  /// access token, of that issuer), at Unix time `now`: the kept one while it lives, else a new
  /// one from the issuer's token endpoint. An error says in one line why none was had: the
  /// issuer's own error and description where it answered.
  Result<std::string> exchange(const std::string& issuer, const std::string& subject_token,
                               const std::string& audience, int64_t now);

  /// A token kept this long before its expires_in ends is asked for again (halved for a
  /// shorter life), so that a site never receives one about to expire.
  static constexpr int64_t kMarginS = 30;
  static constexpr size_t kMaxEntries = 4096;
  /// The first and the longest wait after an issuer's token endpoint did not answer.
  static constexpr int64_t kFirstBackoffS = 1;
  static constexpr int64_t kMaxBackoffS = 60;

 private:
  struct Kept {
    std::string token;
    int64_t until = 0;  ///< used while now < until
  };
  /// An issuer whose token endpoint did not answer: its error, given again until `until`.
  struct Down {
    Error error;
    int64_t wait = 0;   ///< this wait's length, doubled by the next failure
    int64_t until = 0;  ///< asked again from then on
  };
  /// Exchanges at `issuer` (its secret, endpoint and POST), without the back-off.
  Result<std::string> ask(const IssuerConfig& issuer, const std::string& subject_token,
                          const std::string& audience, int64_t now);
  /// The token endpoint of `issuer` (discovered once, then kept).
  Result<std::string> endpoint(const IssuerConfig& issuer);

  const std::vector<IssuerConfig>& issuers_;
  Fetcher fetch_;
  std::mutex mu_;                                 // guards the maps, never held across a request
  std::map<std::string, std::string> endpoints_;  // issuer -> token endpoint
  std::map<std::pair<std::string, std::string>, Kept> kept_;  // (token, audience)
  std::map<std::string, Down> down_;                          // by issuer
};

/// The secret of `issuer`'s exchange client: the first line of exchange_client_secret_file,
/// which others than its owner and group may not read.
Result<std::string> read_exchange_secret(const IssuerConfig& issuer);

}  // namespace berth::gateway

// berthd's client of slurmrestd (rest_auth/jwt): every call runs as the mapped local user, with
// a token berthd mints for that user alone from the site's Slurm JWT key (auth/jwt's HS256 key,
// AuthAltParameters=jwt_key=...): claims {iat, exp, sun}, living token_lifespan_s. berthd never
// holds a token of SlurmUser or root, so a flaw in berthd cannot act for another user in Slurm
// beyond the one its caller was mapped to.
//
// It speaks one slurmrestd API version (gateway/slurm_api.h): the one [slurm] api_version
// names, or, with "auto", the one chosen at its first call from the versions slurmrestd lists
// in GET /openapi/v3 (asked, like every call, as that call's user). A slurmrestd that cannot be
// reached is asked again at the next call; one that offers none of berthd's versions fails
// every call with one line naming what it offers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gateway/slurm_api.h"
#include "gateway/slurm_types.h"

namespace berth::gateway {

/// An HS256 JWT for Slurm's auth/jwt: {"iat": now, "exp": now + lifespan_s, "sun": user}.
std::string mint_slurm_token(const std::string& key, const std::string& user, int64_t now,
                             int64_t lifespan_s);

class SlurmRest {
 public:
  /// `url`: slurmrestd's "http://host:port"; `key`: the JWT key's bytes; `api`: the version to
  /// speak, or nullptr to choose one from what slurmrestd offers ("auto").
  SlurmRest(std::string url, std::string key, int64_t lifespan_s, const SlurmApi* api)
      : url_(std::move(url)),
        key_(std::move(key)),
        lifespan_s_(lifespan_s),
        choice_(std::make_unique<Choice>()) {
    choice_->api = api;
  }
  /// Submits `spec` as `user`; the Slurm job id.
  Result<int64_t> submit(const std::string& user, const SlurmJobSpec& spec);
  /// The Slurm job `id` as `user` sees it.
  Result<SlurmJobInfo> job(const std::string& user, int64_t id);
  /// The Slurm jobs `user` sees (GET /jobs).
  Result<std::vector<SlurmJobEntry>> jobs(const std::string& user);
  /// Cancels the Slurm job `id` as `user`.
  Status cancel(const std::string& user, int64_t id);
  /// The cluster's nodes as `user` sees them (GET /nodes).
  Result<std::vector<SlurmNode>> nodes(const std::string& user);
  /// The cluster's partitions as `user` sees them (GET /partitions).
  Result<std::vector<SlurmPartition>> partitions(const std::string& user);
  /// Whether a slurmctld answers slurmrestd's ping (GET /ping), asked as `user`.
  Result<bool> ping(const std::string& user);

  /// A token for `user` as every call sends it, for Slurm's own commands (SLURM_JWT).
  std::string token(const std::string& user, int64_t now) const {
    return mint_slurm_token(key_, user, now, lifespan_s_);
  }

  /// The API version in use ("v0.0.41"); "" while it is still to be chosen.
  std::string api_version() const;

  /// Told of every exchange with slurmrestd: the method, the status (0: no answer) and the
  /// seconds it took (berthd's /metrics). Set before the server's threads start.
  using Observer = std::function<void(std::string_view method, int status, double seconds)>;
  void set_observer(Observer o) { observer_ = std::move(o); }
  /// Told once, when the version is chosen from the versions slurmrestd offers (`offered`,
  /// ascending). Set before the server's threads start.
  using ApiObserver =
      std::function<void(const SlurmApi& chosen, const std::vector<std::string>& offered)>;
  void set_api_observer(ApiObserver o) { api_observer_ = std::move(o); }

 private:
  struct Answer {
    int status;
    std::string body;
  };
  /// One exchange: `op` on `path` (from the server's root) as `user`.
  Result<Answer> call(Op op, const std::string& user, const std::string& path,
                      const std::string& body);
  /// The body of `op` on the version's `path` answered 200; otherwise an error with
  /// slurmrestd's reason, or `fallback` when it gives none.
  Result<std::string> exchange(Op op, const std::string& user, const SlurmApi& api,
                               const std::string& path, const std::string& body,
                               const char* fallback);
  /// The version to speak, chosen (as `user`) when not yet known.
  Result<const SlurmApi*> api(const std::string& user);
  template <class T>
  Result<T> read(const std::string& user, const std::string& path,
                 Result<T> (*parse)(const SlurmApi&, std::string_view, const std::string&));

  std::string url_;
  std::string key_;
  int64_t lifespan_s_;
  Observer observer_;
  ApiObserver api_observer_;
  struct Choice {
    std::mutex mu;  ///< held while the version is being chosen
    const SlurmApi* api = nullptr;
  };
  std::unique_ptr<Choice> choice_;  ///< behind a pointer: a SlurmRest moves
};

}  // namespace berth::gateway

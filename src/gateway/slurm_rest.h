// berthd's client of slurmrestd (rest_auth/jwt): every call runs as the mapped local user, with
// a token berthd mints for that user alone from the site's Slurm JWT key (auth/jwt's HS256 key,
// AuthAltParameters=jwt_key=...): claims {iat, exp, sun}, living token_lifespan_s. berthd never
// holds a token of SlurmUser or root, so a flaw in berthd cannot act for another user in Slurm
// beyond the one its caller was mapped to.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "gateway/slurm_v0038.h"

namespace berth::gateway {

/// An HS256 JWT for Slurm's auth/jwt: {"iat": now, "exp": now + lifespan_s, "sun": user}.
std::string mint_slurm_token(const std::string& key, const std::string& user, int64_t now,
                             int64_t lifespan_s);

class SlurmRest {
 public:
  /// `url`: slurmrestd's "http://host:port"; `key`: the JWT key's bytes.
  SlurmRest(std::string url, std::string key, int64_t lifespan_s)
      : url_(std::move(url)), key_(std::move(key)), lifespan_s_(lifespan_s) {}
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

  /// Told of every exchange with slurmrestd: the method, the status (0: no answer) and the
  /// seconds it took (berthd's /metrics). Set before the server's threads start.
  using Observer = std::function<void(std::string_view method, int status, double seconds)>;
  void set_observer(Observer o) { observer_ = std::move(o); }

 private:
  struct Answer {
    int status;
    std::string body;
  };
  Result<Answer> call(Op op, const std::string& user, const std::string& path,
                      const std::string& body);
  /// The body of a GET answered 200; otherwise an error with slurmrestd's reason.
  Result<std::string> get(const std::string& user, const std::string& path);

  std::string url_;
  std::string key_;
  int64_t lifespan_s_;
  Observer observer_;
};

}  // namespace berth::gateway

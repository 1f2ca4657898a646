// A broker's jobs ([broker] with a `database`, docs/broker.md): POST /v1/jobs on a broker places
// the job (gateway/broker.h), writes it and the sites it may go to, then sends it to the first,
// and on to the next where a site refuses it, fails to submit it or cannot be reached; GET,
// DELETE and the output of a broker job go to the site that has it, as the caller.
//
// Every attempt is written (and synced) before it is sent, with an Idempotency-Key of its own,
// "broker:INSTANCE:ID:N": a broker killed at any moment, asked again, sends the same attempt
// with the same key, and the site answers with the job it already has instead of making a
// second. The broker keeps no token on disk: it acts at a site with the owner's own token, at
// the owner's request about the job (GET /v1/jobs/ID) and, while the token the owner last
// came with is valid (held in memory only), in its own rounds (reconcile()), so that a site
// always sees the real user. One of those at a time moves a job (gateway/job_locks.h).
//
// An attempt: {"n", "site", "partition", "class", "key", "at", "outcome", "cause",
// "site_job_id"}; outcome "sending" (written, its answer not yet read), "submitted", "refused"
// (the site said no: a limit, its quota, its identity checks), "failed" (no answer, a 5xx, the
// site could not submit it to Slurm), "cancelled" (pending there longer than the job's
// failover.pending_timeout_s) or "ended" (the site's nodes failed it: NODE_FAIL). Only the
// first four of those before a site has the job, and the last two after, move it on; a job that
// failed through its own fault stays where it failed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gateway/auth.h"
#include "gateway/broker.h"
#include "gateway/config.h"
#include "gateway/job_locks.h"
#include "gateway/jobs_db.h"

namespace berth::gateway {

class BrokerJobs {
 public:
  /// `db`, `broker` and `config` outlive the service.
  BrokerJobs(JobsDb& db, BrokerService& broker, const BrokerConfig& config);

  using Answer = BrokerService::Answer;

  /// POST /v1/jobs: places job body `body_text` of `who` (bearer token `token`) and sends it:
  /// 201 with the job, 200 with the earlier job of the same `idempotency_key`, 422 with the
  /// placements answer when no site fits. An error (kInvalidInput) is the body's.
  Result<Answer> submit(const Account& who, const std::string& token,
                        const std::string& idempotency_key, const std::string& body_text,
                        int64_t now);
  /// GET /v1/jobs/ID: the job as its site says now, moved on first where the site's nodes
  /// failed it or it waited there too long; nullopt for a job that is not `who`'s.
  Result<std::optional<nlohmann::json>> get(const Account& who, const std::string& token,
                                            int64_t id, int64_t now);
  /// The broker's round (berthd/main.cc, every reconcile_interval_s): each unfinished job whose
  /// owner's token the broker holds (remember()) is read at its site and moved on as the
  /// owner's GET would, so that a crash's leftovers, pending timeouts, NODE_FAIL and races
  /// settle while no one asks. How many jobs were read.
  int reconcile(int64_t now);
  /// Holds `who`'s bearer token `token` in memory until it expires, for reconcile(); the
  /// latest of each caller's tokens replaces the one before. Every endpoint that takes a
  /// caller's token calls it.
  void remember(const Account& who, const std::string& token, int64_t now);

  /// GET /v1/jobs: `who`'s jobs as last read, newest first.
  Result<nlohmann::json> list(const Account& who, int limit);
  /// DELETE /v1/jobs/ID: cancelled at its site (or, not sent yet, here); nullopt as get().
  Result<std::optional<nlohmann::json>> cancel(const Account& who, const std::string& token,
                                               int64_t id, int64_t now);
  /// GET /v1/jobs/ID/output?`query`: the site's answer as it is; nullopt as get(), and 404 for
  /// a job no site has.
  Result<std::optional<SiteAnswer>> output(const Account& who, const std::string& token, int64_t id,
                                           const std::string& query);

  /// Called with the site and outcome of every attempt that ends ("submitted", "refused",
  /// "failed", "cancelled", "ended"), for berthd's metrics; set before serving.
  using AttemptObserver = std::function<void(const std::string& site, const std::string& outcome)>;
  void set_observer(AttemptObserver o) { observer_ = std::move(o); }

  /// The job as the broker answers it: the site's document of it where given, with the
  /// broker's id, state, site, site_job_id and attempts.
  static nlohmann::json job_json(const BrokerJobRecord& job, const nlohmann::json& at_site = {});

 private:
  /// Sends `job` to its ranked sites, from its next attempt on, until one has it or none is
  /// left; each attempt written before it goes.
  Status advance(BrokerJobRecord& job, const std::string& token, int64_t now);
  /// Attempt number `index` (from 0) of `job`, to `target` (an entry of its ranked sites),
  /// "sending".
  nlohmann::json new_attempt(const BrokerJobRecord& job, size_t index, const nlohmann::json& target,
                             int64_t now) const;
  /// Sends `attempt` (written already) to its site with `token`, and sets its outcome from the
  /// answer (left "sending" where none came); whether the site took it, its document in
  /// `*doc`.
  bool send(nlohmann::json& attempt, const nlohmann::json& target, const std::string& token,
            nlohmann::json* doc);
  /// `job` is at the site of `attempt`, as its document `doc` says.
  static void place_at(BrokerJobRecord& job, const nlohmann::json& attempt,
                       const nlohmann::json& doc);
  /// A job no site has and none will: SUBMIT_FAILED, with every attempt's cause.
  static void settle_unplaced(BrokerJobRecord& job, const nlohmann::json& attempts);
  /// placement.strategy "race": sends `job` to its first kRaceSites sites at once (each attempt
  /// written before any goes); the first to run keeps it (refresh_race()). Where none takes
  /// it, on down the list as advance() goes.
  Status race(BrokerJobRecord& job, const std::string& token, int64_t now);
  static constexpr size_t kRaceSites = 3;
  /// Whether `job` races and no site has won it yet.
  static bool racing(const BrokerJobRecord& job);
  /// Reads every live racer of `job` at its site: the first in rank order that runs wins, and
  /// the others are cancelled; the winner's document, or null while none has.
  nlohmann::json refresh_race(BrokerJobRecord& job, const std::string& token, int64_t now);
  /// Reads `job` at its site and moves it on where that site cannot run it; the site's
  /// document, or null where the site did not answer.
  nlohmann::json refresh(BrokerJobRecord& job, const Account& who, const std::string& token,
                         int64_t now);
  /// Whether `who` may act on `job` at its site: its owner, with the owner's token.
  static bool owns(const Account& who, const BrokerJobRecord& job);

  /// `call` (a site_backends call) with the token site `s` is sent for the caller's
  /// `caller_token` (BrokerService::token_for()); where there is none, an answer with no_token
  /// set, the site not asked.
  SiteAnswer as_caller(const BrokerSiteConfig& s, const std::string& caller_token,
                       const std::function<SiteAnswer(const std::string&)>& call);
  /// Counts an attempt that ended: the site's reliability, the observer.
  void ended(const std::string& site, const std::string& outcome);

  /// A caller's latest token, until `expires` (its exp).
  struct HeldToken {
    Account who;
    std::string token;
    int64_t expires = 0;
  };
  /// The token held for `job`'s owner that is good for a round at `now`, or nullopt.
  std::optional<HeldToken> token_of_owner(const BrokerJobRecord& job, int64_t now);

  JobsDb& db_;
  BrokerService& broker_;
  JobLocks locks_;  ///< one mover at a time per broker job
  std::mutex tokens_mu_;
  std::map<std::string, HeldToken> tokens_;  ///< by caller: issuer, subject, user
  AttemptObserver observer_;
  const BrokerConfig& config_;
};

}  // namespace berth::gateway

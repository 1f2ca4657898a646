// berthd's job database: one SQLite file in WAL mode. Every accepted request is written (and
// synced) before it is sent to Slurm, so a crash at any moment leaves a row saying how far the
// job got: ACCEPTED (maybe sent: the Slurm job's comment "berthd:INSTANCE:ID" tells, on
// reconciliation), or Slurm's state with its Slurm job id. INSTANCE is a random name the database
// is given when created (table meta): the jobs of another gateway, or of an earlier database,
// in the same cluster never pass for this one's.
//
// Schema (one table; docs/gateway.md says why each column is there):
//   jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, owner, issuer, subject, idempotency_key,
//        request JSON, state, slurm_job_id, reason, exit_code, nodes, created_at, updated_at,
//        start_time, end_time, gpus, gres_detail JSON, time_limit_s, time_limit_from, gres, vo,
//        UNIQUE(owner, idempotency_key))
// (the last eight added to databases made before them when opened; an older row's vo is "").
// Ids are never reused (AUTOINCREMENT), so a client's old id never names another job.
//
// A broker ([broker], gateway/broker_jobs.h) keeps its jobs in a second table of the same
// file, written before any site is asked, and again before each attempt:
//   broker_jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, owner, issuer, subject, idempotency_key,
//               request JSON, state, site, site_job_id, reason, ranked JSON, attempts JSON,
//               created_at, updated_at, UNIQUE(owner, idempotency_key))
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "gateway/job_state.h"

struct sqlite3;
struct sqlite3_stmt;

namespace berth::gateway {

/// One job as the database keeps it.
struct JobRecord {
  int64_t id = 0;
  std::string owner;  ///< the local account
  std::string issuer, subject;
  std::string idempotency_key;  ///< "" when the request had none
  std::string request;          ///< the request body as accepted (JSON text)
  /// ACCEPTED, SUBMIT_FAILED, or Slurm's job state; kept as its name (gateway/job_state.h)
  JobState state = JobState::kAccepted;
  int64_t slurm_job_id = 0;  ///< 0 until submitted
  std::string reason;
  std::optional<int> exit_code;
  std::string nodes;
  int64_t created_at = 0, updated_at = 0;
  int64_t start_time = 0, end_time = 0;  ///< Slurm's; 0: not yet
  int gpus = 0;                          ///< GPUs allocated
  std::vector<std::string> gres_detail;  ///< Slurm's GRES per allocated node
  /// The walltime the limits gave the job (its Slurm time limit), 0 for none, and where it
  /// came from (WalltimeDecision::from in gateway/limits.h).
  int64_t time_limit_s = 0;
  std::string time_limit_from;
  /// The GRES per node a GPU share asked Slurm for ("shard:2"), "" for none; set on acceptance.
  std::string gres;
  /// The group the job is accounted to (its VO, job_vo() in gateway/job_usage.h), fixed at
  /// acceptance; "" for a job recorded before berthd kept it (accounted as before: to its
  /// owner's Unix primary group).
  std::string vo;
};

/// One job of a broker: the sites it may go to, each attempt, and the site that has it.
struct BrokerJobRecord {
  int64_t id = 0;
  std::string owner;  ///< the local account
  std::string issuer, subject;
  std::string idempotency_key;  ///< "" when the request had none
  std::string request;          ///< the body as posted (JSON text)
  /// ACCEPTED until a site has it, then that site's state of it as last read; SUBMIT_FAILED
  /// when no site took it.
  JobState state = JobState::kAccepted;
  std::string site;  ///< the site that has it; "" for none yet
  int64_t site_job_id = 0;
  std::string reason;
  std::string ranked = "[]";    ///< JSON: the sites to try in order, [{site, partition, class}]
  std::string attempts = "[]";  ///< JSON: every attempt (gateway/broker_jobs.h)
  int64_t created_at = 0, updated_at = 0;
};

/// The job database; one connection, used under one lock (mu_) by the server's threads.
class JobsDb {
 public:
  /// Opens (creating when missing) the database at `path`, in WAL mode with full syncs.
  static Result<std::unique_ptr<JobsDb>> open(const std::string& path);
  ~JobsDb();
  JobsDb(const JobsDb&) = delete;
  JobsDb& operator=(const JobsDb&) = delete;

  /// This database's random name (16 hex digits), made when it was created.
  const std::string& instance() const { return instance_; }
  /// The value stored under `key` in the database's own table (meta), or nullopt; berthd's
  /// facts of the site kept across restarts (gateway/gpu_facts.h) live there.
  Result<std::optional<std::string>> meta(const std::string& key);
  /// Stores `value` under `key` (replacing the one there). The keys "instance" and "secret"
  /// are the database's identity: never set them.
  Status set_meta(const std::string& key, const std::string& value);
  /// `owner`'s job with the non-empty idempotency key `key`, or nullopt.
  Result<std::optional<JobRecord>> find(const std::string& owner, const std::string& key);
  /// How many jobs `owner` has in each state.
  Result<std::map<JobState, int64_t>> count_states(const std::string& owner);
  /// Records a new ACCEPTED job, or, when `job.owner` already has a job with the same
  /// non-empty idempotency key, returns that one and sets `*existing`.
  Result<JobRecord> accept(const JobRecord& job, int64_t now, bool* existing);
  /// Sets a job's Slurm id and state.
  Status submitted(int64_t id, int64_t slurm_job_id, JobState state, int64_t now);
  /// Sets a job's state, reason, exit code and nodes (from Slurm, or SUBMIT_FAILED).
  Status update(int64_t id, JobState state, const std::string& reason, std::optional<int> exit_code,
                const std::string& nodes, int64_t now);
  /// Writes what Slurm said of job `job.id`: state, reason, exit code, nodes, times, GPUs and
  /// updated_at.
  Status record(const JobRecord& job);
  /// This database's secret (32 hex digits), made when it was created; names the jobs' output
  /// files so that no other user can guess them.
  const std::string& secret() const { return secret_; }
  /// The job `id`, or nullopt.
  Result<std::optional<JobRecord>> get(int64_t id);
  /// Jobs, newest first: of `owner` ("" for all), in `state` (nullopt for any), created at or
  /// after `since`, at most `limit`.
  Result<std::vector<JobRecord>> list(const std::string& owner, std::optional<JobState> state,
                                      int64_t since, int limit);
  /// How many jobs are in each state (counted by SQLite, not read row by row).
  Result<std::map<JobState, int>> count_by_state();

  /// A broker's jobs (table broker_jobs): a new one, ACCEPTED, or `owner`'s earlier one of the
  /// same non-empty idempotency key (then `*existing` is set).
  Result<BrokerJobRecord> broker_accept(const BrokerJobRecord& job, int64_t now, bool* existing);
  /// `owner`'s broker job with the non-empty idempotency key `key`, or nullopt.
  Result<std::optional<BrokerJobRecord>> broker_find(const std::string& owner,
                                                     const std::string& key);
  /// Writes a broker job's state, site, site job id, reason, ranked sites, attempts and
  /// updated_at.
  Status broker_save(const BrokerJobRecord& job);
  /// The broker job `id`, or nullopt.
  Result<std::optional<BrokerJobRecord>> broker_get(int64_t id);
  /// Broker jobs, newest first: of `owner` ("" for all), at most `limit`.
  Result<std::vector<BrokerJobRecord>> broker_list(const std::string& owner, int limit);

 private:
  JobsDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Error error(const std::string& what) const;
  /// Statement `query` (an index of jobs_db.cc's table), prepared on first use and kept for
  /// the connection's life; nullptr when it cannot be prepared. Used under mu_, by one caller
  /// at a time, which resets it when done.
  sqlite3_stmt* statement(int query);
  /// broker_find(), under mu_ already.
  Result<std::optional<BrokerJobRecord>> broker_find_locked(const std::string& owner,
                                                            const std::string& key);

  static constexpr int kQueries = 10;
  sqlite3* db_;
  sqlite3_stmt* statements_[kQueries] = {};
  std::string path_;
  std::string instance_;
  std::string secret_;
  std::mutex mu_;
};

}  // namespace berth::gateway

// The job database on SQLite (gateway/jobs_db.h).
#include "gateway/jobs_db.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <openssl/rand.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "core/json.h"

namespace berth::gateway {
namespace {

constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  owner TEXT NOT NULL,
  issuer TEXT NOT NULL,
  subject TEXT NOT NULL,
  idempotency_key TEXT,
  request TEXT NOT NULL,
  state TEXT NOT NULL,
  slurm_job_id INTEGER NOT NULL DEFAULT 0,
  reason TEXT NOT NULL DEFAULT '',
  exit_code INTEGER,
  nodes TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (owner, idempotency_key)
);
CREATE INDEX IF NOT EXISTS jobs_by_owner ON jobs (owner, id);
CREATE INDEX IF NOT EXISTS jobs_by_owner_state ON jobs (owner, state);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS broker_jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  owner TEXT NOT NULL,
  issuer TEXT NOT NULL,
  subject TEXT NOT NULL,
  idempotency_key TEXT,
  request TEXT NOT NULL,
  state TEXT NOT NULL,
  site TEXT NOT NULL DEFAULT '',
  site_job_id INTEGER NOT NULL DEFAULT 0,
  reason TEXT NOT NULL DEFAULT '',
  ranked TEXT NOT NULL DEFAULT '[]',
  attempts TEXT NOT NULL DEFAULT '[]',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (owner, idempotency_key)
);
CREATE INDEX IF NOT EXISTS broker_jobs_by_owner ON broker_jobs (owner, id);
)";

constexpr const char* kBrokerColumns =
    "id, owner, issuer, subject, coalesce(idempotency_key, ''), request, state, site, "
    "site_job_id, reason, ranked, attempts, created_at, updated_at";

/// Columns added after the first schema, with their definitions: added to an older database
/// when it is opened.
constexpr std::pair<const char*, const char*> kAddedColumns[] = {
    {"start_time", "INTEGER NOT NULL DEFAULT 0"},   {"end_time", "INTEGER NOT NULL DEFAULT 0"},
    {"gpus", "INTEGER NOT NULL DEFAULT 0"},         {"gres_detail", "TEXT NOT NULL DEFAULT '[]'"},
    {"time_limit_s", "INTEGER NOT NULL DEFAULT 0"}, {"time_limit_from", "TEXT NOT NULL DEFAULT ''"},
    {"gres", "TEXT NOT NULL DEFAULT ''"},           {"vo", "TEXT NOT NULL DEFAULT ''"},
};

constexpr const char* kColumns =
    "id, owner, issuer, subject, coalesce(idempotency_key, ''), request, state, slurm_job_id, "
    "reason, exit_code, nodes, created_at, updated_at, start_time, end_time, gpus, gres_detail, "
    "time_limit_s, time_limit_from, gres, vo";

/// The statements run after open(), each prepared once on the connection and kept
/// (JobsDb::statement()): a request's read then compiles no SQL. Listing one owner's jobs and
/// everyone's are two statements, so that the first walks the (owner, id) index.
enum Query : int {
  kFind,
  kCountStates,
  kInsert,
  kSubmitted,
  kUpdate,
  kRecord,
  kGet,
  kListOwner,
  kListAll,
  kCountByState,
  kQueryCount
};

const std::string& query_sql(int query) {
  static const std::string kSelect = std::string("SELECT ") + kColumns + " FROM jobs ";
  // The statements of several lines are adjacent literals on purpose, not missing commas
  // (the static_assert below counts the entries).
  // NOLINTBEGIN(bugprone-suspicious-missing-comma)
  static const std::string kSql[] = {
      kSelect + "WHERE owner = ?1 AND idempotency_key = ?2",
      "SELECT state, COUNT(*) FROM jobs WHERE owner = ?1 GROUP BY state",
      "INSERT INTO jobs (owner, issuer, subject, idempotency_key, request, state, created_at, "
      "updated_at, time_limit_s, time_limit_from, gres, vo) "
      "VALUES (?1, ?2, ?3, ?4, ?5, 'ACCEPTED', ?6, ?6, ?7, ?8, ?9, ?10)",
      "UPDATE jobs SET slurm_job_id = ?2, state = ?3, updated_at = ?4 WHERE id = ?1",
      "UPDATE jobs SET state = ?2, reason = ?3, exit_code = ?4, nodes = ?5, updated_at = ?6 "
      "WHERE id = ?1",
      "UPDATE jobs SET state = ?2, reason = ?3, exit_code = ?4, nodes = ?5, updated_at = ?6, "
      "start_time = ?7, end_time = ?8, gpus = ?9, gres_detail = ?10 WHERE id = ?1",
      kSelect + "WHERE id = ?1",
      kSelect +
          "WHERE owner = ?1 AND (?2 = '' OR state = ?2) AND created_at >= ?3 "
          "ORDER BY id DESC LIMIT ?4",
      kSelect + "WHERE (?2 = '' OR state = ?2) AND created_at >= ?3 ORDER BY id DESC LIMIT ?4",
      "SELECT state, COUNT(*) FROM jobs GROUP BY state",
  };
  // NOLINTEND(bugprone-suspicious-missing-comma)
  static_assert(std::size(kSql) == kQueryCount);
  return kSql[query];
}

/// A prepared statement: made for one use and finalized at the end of its scope, or one of the
/// connection's statements (JobsDb::statement()), reset and unbound at the end of its scope.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : owned_(true) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr);
  }
  explicit Stmt(sqlite3_stmt* kept) : s_(kept), rc_(kept != nullptr ? SQLITE_OK : SQLITE_ERROR) {}
  ~Stmt() {
    if (owned_) {
      sqlite3_finalize(s_);
    } else if (s_ != nullptr) {
      sqlite3_reset(s_);
      sqlite3_clear_bindings(s_);
    }
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  Stmt& text(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& text_or_null(int i, const std::string& v) {
    if (v.empty())
      sqlite3_bind_null(s_, i);
    else
      text(i, v);
    return *this;
  }
  Stmt& integer(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  int step() { return sqlite3_step(s_); }
  sqlite3_stmt* get() { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
  bool owned_ = false;
  int rc_ = SQLITE_OK;
};

std::string column_text(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t == nullptr ? ""
                      : std::string(reinterpret_cast<const char*>(t),
                                    static_cast<size_t>(sqlite3_column_bytes(s, i)));
}

/// The state a row's column names; kUnknown for a word the table lacks (never written by berthd).
JobState stored_state(const std::string& name) {
  return parse_job_state(name).value_or(JobState::kUnknown);
}

JobRecord read_row(sqlite3_stmt* s) {
  JobRecord j;
  j.id = sqlite3_column_int64(s, 0);
  j.owner = column_text(s, 1);
  j.issuer = column_text(s, 2);
  j.subject = column_text(s, 3);
  j.idempotency_key = column_text(s, 4);
  j.request = column_text(s, 5);
  j.state = stored_state(column_text(s, 6));
  j.slurm_job_id = sqlite3_column_int64(s, 7);
  j.reason = column_text(s, 8);
  if (sqlite3_column_type(s, 9) != SQLITE_NULL) j.exit_code = sqlite3_column_int(s, 9);
  j.nodes = column_text(s, 10);
  j.created_at = sqlite3_column_int64(s, 11);
  j.updated_at = sqlite3_column_int64(s, 12);
  j.start_time = sqlite3_column_int64(s, 13);
  j.end_time = sqlite3_column_int64(s, 14);
  j.gpus = sqlite3_column_int(s, 15);
  // Most rows hold "[]" (no GPUs, or not started): no parser for those.
  std::string detail_text = column_text(s, 16);
  if (detail_text != "[]") {
    nlohmann::json detail = parse_json_or_discarded(detail_text);
    if (detail.is_array())
      for (const nlohmann::json& d : detail)
        if (d.is_string()) j.gres_detail.push_back(d.get<std::string>());
  }
  j.time_limit_s = sqlite3_column_int64(s, 17);
  j.time_limit_from = column_text(s, 18);
  j.gres = column_text(s, 19);
  j.vo = column_text(s, 20);
  return j;
}

BrokerJobRecord read_broker_row(sqlite3_stmt* s) {
  BrokerJobRecord j;
  j.id = sqlite3_column_int64(s, 0);
  j.owner = column_text(s, 1);
  j.issuer = column_text(s, 2);
  j.subject = column_text(s, 3);
  j.idempotency_key = column_text(s, 4);
  j.request = column_text(s, 5);
  j.state = stored_state(column_text(s, 6));
  j.site = column_text(s, 7);
  j.site_job_id = sqlite3_column_int64(s, 8);
  j.reason = column_text(s, 9);
  j.ranked = column_text(s, 10);
  j.attempts = column_text(s, 11);
  j.created_at = sqlite3_column_int64(s, 12);
  j.updated_at = sqlite3_column_int64(s, 13);
  return j;
}

std::string random_hex(int bytes) {
  unsigned char random[32];
  if (bytes > 32 || RAND_bytes(random, bytes) != 1) return "";
  std::string out;
  for (int i = 0; i < bytes; ++i) out += fmt::format("{:02x}", random[i]);
  return out;
}

}  // namespace

Error JobsDb::error(const std::string& what) const {
  return make_error("write", path_, what + ": " + sqlite3_errmsg(db_));
}

Result<std::unique_ptr<JobsDb>> JobsDb::open(const std::string& path) {
  // The requests hold users' environments: the file is berthd's alone (SQLite would create it,
  // and its -wal and -shm files, with the umask's mode; those follow the main file's).
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return sys_error("open", path);
  ::close(fd);
  sqlite3* db = nullptr;
  // NOMUTEX: every use of the connection is under mu_ already; SQLite's own lock per call
  // (FULLMUTEX) took and released a mutex for every column of every row read.
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return make_error("open", path, "cannot open the job database: " + msg);
  }
  std::unique_ptr<JobsDb> out(new JobsDb(db, path));
  sqlite3_busy_timeout(db, 5000);
  // WAL: readers never wait for the writer; synchronous=FULL: a COMMIT is on disk when it
  // returns, so an acknowledged job survives a crash of berthd or of the machine.
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", kSchema})
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
      return out->error("cannot set the job database up");
  for (const auto& [column, definition] : kAddedColumns) {
    Stmt has(db, "SELECT 1 FROM pragma_table_info('jobs') WHERE name = ?1");
    if (!has.ok()) return out->error("cannot read the job table's columns");
    int rc = has.text(1, column).step();
    if (rc == SQLITE_ROW) continue;
    if (rc != SQLITE_DONE) return out->error("cannot read the job table's columns");
    std::string sql = std::string("ALTER TABLE jobs ADD COLUMN ") + column + " " + definition;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
      return out->error(std::string("cannot add column ") + column);
  }
  for (const auto& [key, bytes] : {std::pair<const char*, int>{"instance", 8}, {"secret", 16}}) {
    std::string value = random_hex(bytes);
    if (value.empty()) return make_error("open", path, "no random bytes for the database");
    Stmt put(db, "INSERT OR IGNORE INTO meta (key, value) VALUES (?1, ?2)");
    if (!put.ok() || put.text(1, key).text(2, value).step() != SQLITE_DONE)
      return out->error("cannot write the database's " + std::string(key));
    Stmt read(db, "SELECT value FROM meta WHERE key = ?1");
    if (!read.ok() || read.text(1, key).step() != SQLITE_ROW)
      return out->error("cannot read the database's " + std::string(key));
    (std::string_view(key) == "instance" ? out->instance_ : out->secret_) =
        column_text(read.get(), 0);
  }
  return out;
}

JobsDb::~JobsDb() {
  for (sqlite3_stmt* s : statements_) sqlite3_finalize(s);
  sqlite3_close(db_);
}

sqlite3_stmt* JobsDb::statement(int query) {
  static_assert(kQueryCount == kQueries);
  sqlite3_stmt*& s = statements_[query];
  // SQLITE_PREPARE_PERSISTENT: kept for the connection's life, so SQLite allocates it apart.
  if (s == nullptr && sqlite3_prepare_v3(db_, query_sql(query).c_str(), -1,
                                         SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
    sqlite3_finalize(s);
    s = nullptr;
  }
  return s;
}

Result<std::optional<JobRecord>> JobsDb::find(const std::string& owner, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(statement(kFind));
  if (!q.ok()) return error("cannot read jobs");
  q.text(1, owner).text(2, key);
  int rc = q.step();
  if (rc == SQLITE_ROW) return std::optional<JobRecord>(read_row(q.get()));
  if (rc != SQLITE_DONE) return error("cannot read jobs");
  return std::optional<JobRecord>();
}

Result<std::map<JobState, int64_t>> JobsDb::count_states(const std::string& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(statement(kCountStates));
  if (!q.ok()) return error("cannot read jobs");
  q.text(1, owner);
  std::map<JobState, int64_t> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW)
    out[stored_state(column_text(q.get(), 0))] += sqlite3_column_int64(q.get(), 1);
  if (rc != SQLITE_DONE) return error("cannot read jobs");
  return out;
}

Result<JobRecord> JobsDb::accept(const JobRecord& job, int64_t now, bool* existing) {
  std::lock_guard<std::mutex> lock(mu_);
  *existing = false;
  if (!job.idempotency_key.empty()) {
    Stmt find(statement(kFind));
    if (!find.ok()) return error("cannot read jobs");
    find.text(1, job.owner).text(2, job.idempotency_key);
    if (find.step() == SQLITE_ROW) {
      *existing = true;
      return read_row(find.get());
    }
  }
  Stmt ins(statement(kInsert));
  if (!ins.ok()) return error("cannot record a job");
  ins.text(1, job.owner)
      .text(2, job.issuer)
      .text(3, job.subject)
      .text_or_null(4, job.idempotency_key)
      .text(5, job.request)
      .integer(6, now)
      .integer(7, job.time_limit_s)
      .text(8, job.time_limit_from)
      .text(9, job.gres)
      .text(10, job.vo);
  if (ins.step() != SQLITE_DONE) return error("cannot record a job");
  JobRecord out = job;
  out.id = sqlite3_last_insert_rowid(db_);
  out.state = JobState::kAccepted;
  out.created_at = out.updated_at = now;
  return out;
}

Status JobsDb::submitted(int64_t id, int64_t slurm_job_id, JobState state, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt up(statement(kSubmitted));
  if (!up.ok()) return error("cannot update a job");
  up.integer(1, id).integer(2, slurm_job_id).text(3, job_state_name(state)).integer(4, now);
  if (up.step() != SQLITE_DONE) return error("cannot update a job");
  return {};
}

Status JobsDb::update(int64_t id, JobState state, const std::string& reason,
                      std::optional<int> exit_code, const std::string& nodes, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt up(statement(kUpdate));
  if (!up.ok()) return error("cannot update a job");
  up.integer(1, id).text(2, job_state_name(state)).text(3, reason).text(5, nodes).integer(6, now);
  if (exit_code) up.integer(4, *exit_code);
  if (up.step() != SQLITE_DONE) return error("cannot update a job");
  return {};
}

Status JobsDb::record(const JobRecord& job) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt up(statement(kRecord));
  if (!up.ok()) return error("cannot update a job");
  up.integer(1, job.id)
      .text(2, job_state_name(job.state))
      .text(3, job.reason)
      .text(5, job.nodes)
      .integer(6, job.updated_at)
      .integer(7, job.start_time)
      .integer(8, job.end_time)
      .integer(9, job.gpus)
      .text(10, to_text(nlohmann::json(job.gres_detail)));
  if (job.exit_code) up.integer(4, *job.exit_code);
  if (up.step() != SQLITE_DONE) return error("cannot update a job");
  return {};
}

Result<std::optional<JobRecord>> JobsDb::get(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(statement(kGet));
  if (!q.ok()) return error("cannot read jobs");
  q.integer(1, id);
  int rc = q.step();
  if (rc == SQLITE_ROW) return std::optional<JobRecord>(read_row(q.get()));
  if (rc != SQLITE_DONE) return error("cannot read jobs");
  return std::optional<JobRecord>();
}

Result<std::vector<JobRecord>> JobsDb::list(const std::string& owner, std::optional<JobState> state,
                                            int64_t since, int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(statement(owner.empty() ? kListAll : kListOwner));
  if (!q.ok()) return error("cannot read jobs");
  q.text(1, owner)
      .text(2, state ? job_state_name(*state) : std::string_view(""))
      .integer(3, since)
      .integer(4, limit);
  std::vector<JobRecord> out;
  out.reserve(static_cast<size_t>(std::clamp(limit, 0, 1000)));
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(read_row(q.get()));
  if (rc != SQLITE_DONE) return error("cannot read jobs");
  return out;
}

Result<std::map<JobState, int>> JobsDb::count_by_state() {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(statement(kCountByState));
  if (!q.ok()) return error("cannot count jobs");
  std::map<JobState, int> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW)
    out[stored_state(column_text(q.get(), 0))] += sqlite3_column_int(q.get(), 1);
  if (rc != SQLITE_DONE) return error("cannot count jobs");
  return out;
}

Result<std::optional<std::string>> JobsDb::meta(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt q(db_, "SELECT value FROM meta WHERE key = ?1");
  if (!q.ok()) return error("cannot read the database's " + key);
  int rc = q.text(1, key).step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return error("cannot read the database's " + key);
  return std::optional<std::string>(column_text(q.get(), 0));
}

Status JobsDb::set_meta(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt put(db_, "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)");
  if (!put.ok() || put.text(1, key).text(2, value).step() != SQLITE_DONE)
    return error("cannot write the database's " + key);
  return {};
}

// A broker's jobs are few next to a site's and read one at a time: their statements are
// prepared per call.
Result<std::optional<BrokerJobRecord>> JobsDb::broker_find(const std::string& owner,
                                                           const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return broker_find_locked(owner, key);
}

Result<std::optional<BrokerJobRecord>> JobsDb::broker_find_locked(const std::string& owner,
                                                                  const std::string& key) {
  std::string sql = std::string("SELECT ") + kBrokerColumns +
                    " FROM broker_jobs WHERE owner = ?1 AND idempotency_key = ?2";
  Stmt find(db_, sql.c_str());
  if (!find.ok()) return error("cannot read broker jobs");
  int rc = find.text(1, owner).text(2, key).step();
  if (rc == SQLITE_ROW) return std::optional<BrokerJobRecord>(read_broker_row(find.get()));
  if (rc != SQLITE_DONE) return error("cannot read broker jobs");
  return std::optional<BrokerJobRecord>();
}

Result<BrokerJobRecord> JobsDb::broker_accept(const BrokerJobRecord& job, int64_t now,
                                              bool* existing) {
  std::lock_guard<std::mutex> lock(mu_);
  *existing = false;
  if (!job.idempotency_key.empty()) {
    std::optional<BrokerJobRecord> earlier =
        BERTH_TRY(broker_find_locked(job.owner, job.idempotency_key));
    if (earlier) {
      *existing = true;
      return std::move(*earlier);
    }
  }
  Stmt ins(db_,
           "INSERT INTO broker_jobs (owner, issuer, subject, idempotency_key, request, state, "
           "ranked, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 'ACCEPTED', ?6, ?7, ?7)");
  if (!ins.ok()) return error("cannot record a broker job");
  ins.text(1, job.owner)
      .text(2, job.issuer)
      .text(3, job.subject)
      .text_or_null(4, job.idempotency_key)
      .text(5, job.request)
      .text(6, job.ranked)
      .integer(7, now);
  if (ins.step() != SQLITE_DONE) return error("cannot record a broker job");
  BrokerJobRecord out = job;
  out.id = sqlite3_last_insert_rowid(db_);
  out.state = JobState::kAccepted;
  out.created_at = out.updated_at = now;
  return out;
}

Status JobsDb::broker_save(const BrokerJobRecord& job) {
  std::lock_guard<std::mutex> lock(mu_);
  Stmt up(db_,
          "UPDATE broker_jobs SET state = ?2, site = ?3, site_job_id = ?4, reason = ?5, "
          "ranked = ?6, attempts = ?7, updated_at = ?8 WHERE id = ?1");
  if (!up.ok()) return error("cannot update a broker job");
  up.integer(1, job.id)
      .text(2, job_state_name(job.state))
      .text(3, job.site)
      .integer(4, job.site_job_id)
      .text(5, job.reason)
      .text(6, job.ranked)
      .text(7, job.attempts)
      .integer(8, job.updated_at);
  if (up.step() != SQLITE_DONE) return error("cannot update a broker job");
  return {};
}

Result<std::optional<BrokerJobRecord>> JobsDb::broker_get(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string sql = std::string("SELECT ") + kBrokerColumns + " FROM broker_jobs WHERE id = ?1";
  Stmt q(db_, sql.c_str());
  if (!q.ok()) return error("cannot read broker jobs");
  int rc = q.integer(1, id).step();
  if (rc == SQLITE_ROW) return std::optional<BrokerJobRecord>(read_broker_row(q.get()));
  if (rc != SQLITE_DONE) return error("cannot read broker jobs");
  return std::optional<BrokerJobRecord>();
}

Result<std::vector<BrokerJobRecord>> JobsDb::broker_list(const std::string& owner, int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string sql = std::string("SELECT ") + kBrokerColumns +
                    " FROM broker_jobs WHERE (?1 = '' OR owner = ?1) ORDER BY id DESC LIMIT ?2";
  Stmt q(db_, sql.c_str());
  if (!q.ok()) return error("cannot read broker jobs");
  q.text(1, owner).integer(2, limit);
  std::vector<BrokerJobRecord> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) out.push_back(read_broker_row(q.get()));
  if (rc != SQLITE_DONE) return error("cannot read broker jobs");
  return out;
}

}  // namespace berth::gateway

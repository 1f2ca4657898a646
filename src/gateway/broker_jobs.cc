// A broker's jobs (gateway/broker_jobs.h).
#include "gateway/broker_jobs.h"

#include <fmt/core.h>

#include <ctime>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/job_body.h"
#include "broker/manifests.h"
#include "broker/tosca.h"
#include "core/json.h"
#include "gateway/jwt.h"
#include "gateway/site_backends.h"

namespace berth::gateway {
namespace {

/// A site's submission may wait for its slurmrestd (whose own timeouts are 30 s).
constexpr time_t kSubmitTimeoutS = 40;
/// A site's answer about one job is at most this large.
constexpr size_t kMaxAnswerBytes = size_t{4} << 20;
/// A held token is not used in its last minute: a site checks its exp with its own leeway,
/// and a round's calls take time.
constexpr int64_t kTokenMarginS = 60;

/// The key of a caller's held token: the identity and the local account it maps to.
std::string caller_key(const std::string& issuer, const std::string& subject,
                       const std::string& user) {
  return issuer + '\n' + subject + '\n' + user;
}

Error invalid(const std::string& what) {
  return make_error("parse", "job body", what, ErrorCode::kInvalidInput);
}

std::string text_of(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

/// The site job id of a berthd job document ({"id": "12"}), 0 for none.
int64_t site_id_of(const nlohmann::json& doc) {
  std::string id = text_of(doc, "id");
  if (id.empty() || id.size() > 18 || id.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return std::stoll(id);
}

/// The state a site's document gives, kUnknown for none.
JobState state_of(const nlohmann::json& doc) {
  return parse_job_state(text_of(doc, "state")).value_or(JobState::kUnknown);
}

/// "HTTP 403: no more than 1 job at once" for a site's error answer.
std::string cause_of(const SiteAnswer& a) {
  std::string why = site_error_message(a.body);
  return "HTTP " + std::to_string(a.status) + (why.empty() ? "" : ": " + why);
}

/// Whether a site took a cancel: berthd answers 202, the other kinds 202 or 200.
bool cancel_taken(const SiteAnswer& a) {
  return a.status == 202 || a.status == 200;
}

/// The job a broker job's record holds (its request, stored as JSON).
Result<broker::BrokerJob> stored_job(const BrokerJobRecord& job) {
  return broker::parse_broker_job(parse_json_or_discarded(job.request));
}

nlohmann::json array_of(const std::string& text) {
  nlohmann::json j = parse_json_or_discarded(text);
  return j.is_array() ? j : nlohmann::json::array();
}

}  // namespace

BrokerJobs::BrokerJobs(JobsDb& db, BrokerService& broker, const BrokerConfig& config)
    : db_(db), broker_(broker), config_(config) {}

void BrokerJobs::ended(const std::string& site, const std::string& outcome) {
  broker_.record_attempt(site, outcome == "submitted");
  if (observer_) observer_(site, outcome);
}

SiteAnswer BrokerJobs::as_caller(const BrokerSiteConfig& s, const std::string& caller_token,
                                 const std::function<SiteAnswer(const std::string&)>& call) {
  auto token = broker_.token_for(s, caller_token, static_cast<int64_t>(std::time(nullptr)));
  if (!token.ok()) {
    SiteAnswer out;
    out.no_token = true;
    out.error = token.error().message();
    return out;
  }
  return call(*token);
}

void BrokerJobs::remember(const Account& who, const std::string& token, int64_t now) {
  auto jws = parse_jws(token);
  int64_t exp = 0;
  if (!jws.ok() || !numeric_date(jws->payload, "exp", exp) || exp <= now + kTokenMarginS) return;
  std::lock_guard<std::mutex> lock(tokens_mu_);
  HeldToken& held = tokens_[caller_key(who.issuer, who.subject, who.user)];
  if (exp >= held.expires) held = HeldToken{who, token, exp};
}

std::optional<BrokerJobs::HeldToken> BrokerJobs::token_of_owner(const BrokerJobRecord& job,
                                                                int64_t now) {
  std::lock_guard<std::mutex> lock(tokens_mu_);
  auto it = tokens_.find(caller_key(job.issuer, job.subject, job.owner));
  if (it == tokens_.end() || it->second.expires <= now + kTokenMarginS) return std::nullopt;
  return it->second;
}

int BrokerJobs::reconcile(int64_t now) {
  {
    // Only callers whose tokens are still good are held.
    std::lock_guard<std::mutex> lock(tokens_mu_);
    std::erase_if(tokens_, [&](const auto& t) { return t.second.expires <= now + kTokenMarginS; });
    if (tokens_.empty()) return 0;
  }
  auto jobs = db_.broker_list("", 100000);
  int read = 0;
  for (const BrokerJobRecord& listed : jobs.ok() ? *jobs : std::vector<BrokerJobRecord>{}) {
    if (job_state_final(listed.state)) continue;
    std::optional<HeldToken> held = token_of_owner(listed, now);
    if (!held) continue;
    const JobLocks::Held moving(locks_, listed.id);
    auto job = db_.broker_get(listed.id);  // as it is now that no one else moves it
    if (!job.ok() || !*job || job_state_final((*job)->state)) continue;
    (void)refresh(**job, held->who, held->token, now);  // a site not answering: next round
    ++read;
  }
  return read;
}

bool BrokerJobs::owns(const Account& who, const BrokerJobRecord& job) {
  return who.user == job.owner && who.issuer == job.issuer && who.subject == job.subject;
}

nlohmann::json BrokerJobs::job_json(const BrokerJobRecord& job, const nlohmann::json& at_site) {
  nlohmann::json out = at_site.is_object() ? at_site : nlohmann::json::object();
  if (!at_site.is_object()) {
    // Not read from a site: what the request said.
    nlohmann::json request = parse_json_or_discarded(job.request);
    for (const char* key : {"name", "image"})
      if (!text_of(request, key).empty()) out[key] = text_of(request, key);
  }
  out["id"] = std::to_string(job.id);
  out["state"] = job_state_name(job.state);
  out["reason"] = job.reason;
  out["site"] = job.site.empty() ? nlohmann::json(nullptr) : nlohmann::json(job.site);
  const std::string at_site_id = site_job_ref(job);  // site_backends.h: a name, where not berthd
  out["site_job_id"] = at_site_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(at_site_id);
  out["attempts"] = array_of(job.attempts);
  out["created_at"] = job.created_at;
  out["updated_at"] = job.updated_at;
  return out;
}

Result<BrokerJobs::Answer> BrokerJobs::submit(const Account& who, const std::string& token,
                                              const std::string& idempotency_key,
                                              const std::string& body_text, int64_t now) {
  // A TOSCA template (broker/tosca.h) is kept as the job body it became, for what reads the
  // job again; a JSON body as it came, for its Idempotency-Key.
  remember(who, token, now);
  broker::PostedBody posted = BERTH_TRY(broker::read_job_body(body_text));
  const nlohmann::json& body = posted.body;
  if (!body.is_object()) return invalid("not a JSON object");
  const std::string request = posted.from_tosca ? to_text(body) : body_text;
  if (!idempotency_key.empty()) {
    // A replay is answered from the database, without placing the job again.
    std::optional<BrokerJobRecord> earlier = BERTH_TRY(db_.broker_find(who.user, idempotency_key));
    if (earlier) {
      if (earlier->request != request)
        return make_error(
            "parse", "Idempotency-Key",
            "was used for another job body (broker job " + std::to_string(earlier->id) + ")",
            ErrorCode::kExists);
      if (earlier->state == JobState::kAccepted && owns(who, *earlier)) {
        const JobLocks::Held moving(locks_, earlier->id);
        if (auto again = BERTH_TRY(db_.broker_get(earlier->id))) earlier = std::move(again);
        if (earlier->state == JobState::kAccepted)
          BERTH_CHECK(racing(*earlier) ? race(*earlier, token, now)
                                       : advance(*earlier, token, now));
      }
      return Answer{200, job_json(*earlier)};
    }
  }
  BrokerService::Decision d = BERTH_TRY(broker_.decide(body, who, token, now));
  // The sites to try, best first: each site once, at its best class, as many as the job allows.
  nlohmann::json ranked = nlohmann::json::array();
  std::set<std::string> seen;
  for (const broker::Candidate& c : d.placement.candidates) {
    if (!c.fits || seen.count(c.site) > 0) continue;
    // --- site_backends: every kind but static is sent jobs, each its own manifest ---
    const BrokerSiteConfig* site = config_.find_site(c.site);
    if (site == nullptr || !submits_to(site->kind)) continue;
    Result<nlohmann::json> manifest = BrokerService::manifest_of(d, c, *site);
    if (!manifest.ok()) continue;  // this kind cannot run it (manifest_for says why)
    seen.insert(c.site);
    ranked.push_back({{"site", c.site},
                      {"partition", c.partition},
                      {"class", c.cls},
                      {"body", std::move(*manifest)}});
    // --- end site_backends ---
    if (static_cast<int>(ranked.size()) >= std::max(1, d.job.failover.max_sites)) break;
  }
  if (ranked.empty()) {
    nlohmann::json answer = broker::placement_json(d.placement);
    if (!answer["chosen"].is_null())
      answer["error"] = {{"status", 422},
                         {"message",
                          "the sites that fit take manifests, not jobs (kind static): "
                          "POST /v1/manifests"}};
    return Answer{422, std::move(answer)};
  }
  BrokerJobRecord rec;
  rec.owner = who.user;
  rec.issuer = who.issuer;
  rec.subject = who.subject;
  rec.idempotency_key = idempotency_key;
  rec.request = request;
  rec.ranked = to_text(ranked);
  bool existing = false;
  rec = BERTH_TRY(db_.broker_accept(rec, now, &existing));
  if (existing) return Answer{200, job_json(rec)};  // a request of the same key, just before
  // Listed from its record on: a round of reconcile() may have sent it meanwhile, once.
  const JobLocks::Held moving(locks_, rec.id);
  if (auto again = BERTH_TRY(db_.broker_get(rec.id))) rec = std::move(*again);
  if (rec.state == JobState::kAccepted && array_of(rec.attempts).empty())
    BERTH_CHECK(d.job.placement.strategy == "race" ? race(rec, token, now)
                                                   : advance(rec, token, now));
  return Answer{201, job_json(rec)};
}

nlohmann::json BrokerJobs::new_attempt(const BrokerJobRecord& job, size_t index,
                                       const nlohmann::json& target, int64_t now) const {
  return {{"n", index + 1},
          {"site", target.value("site", "")},
          {"partition", target.value("partition", "")},
          {"class", target.value("class", "")},
          {"key", fmt::format("broker:{}:{}:{}", db_.instance(), job.id, index + 1)},
          {"at", now},
          {"outcome", "sending"},
          {"cause", ""},
          {"site_job_id", nullptr}};
}

bool BrokerJobs::send(nlohmann::json& attempt, const nlohmann::json& target,
                      const std::string& token, nlohmann::json* doc) {
  const std::string site_name = attempt.value("site", "");
  const BrokerSiteConfig* site = config_.find_site(site_name);
  SiteAnswer a;
  if (site == nullptr) {
    a.error = "the site is no longer in [broker]";
  } else {
    a = as_caller(*site, token, [&](const std::string& t) {
      return send_attempt(*site, target["body"], attempt.value("key", ""), t, kSubmitTimeoutS);
    });
  }
  *doc = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  if (a.status == 0 && a.sent) {
    // Sent, no answer: the site may have it. The attempt stays "sending", to be sent again
    // with its key (never to another site) at the owner's next request.
    attempt["cause"] = "no answer (" + a.error + ")";
    return false;
  }
  // A berthd's job id is a number; another kind's is its object's name or id (site_backends).
  bool has_id = site_id_of(*doc) != 0 ||
                (site != nullptr && site->kind != "berthd" && !text_of(*doc, "id").empty());
  if ((a.status == 200 || a.status == 201) && has_id && state_of(*doc) != JobState::kSubmitFailed) {
    attempt["outcome"] = "submitted";
    attempt["cause"] = "";
    attempt["site_job_id"] = text_of(*doc, "id");
  } else if (a.no_token) {
    attempt["outcome"] = "refused";  // not sent: no token the site may be given
    attempt["cause"] = "issuer_untrusted: " + a.error;
  } else if (a.status == 0) {
    attempt["outcome"] = "failed";
    attempt["cause"] = "site_down: " + a.error;
  } else if (a.status == 200 || a.status == 201) {
    attempt["outcome"] = "failed";
    attempt["cause"] = "submit_failed: " + text_of(*doc, "reason");
  } else if (a.status >= 400 && a.status < 500) {
    attempt["outcome"] = "refused";
    attempt["cause"] = cause_of(a);
  } else {
    attempt["outcome"] = "failed";
    attempt["cause"] = cause_of(a);
  }
  // A site never asked (no token for it) says nothing of its reliability.
  if (!a.no_token) ended(site_name, attempt.value("outcome", ""));
  return attempt.value("outcome", "") == "submitted";
}

void BrokerJobs::place_at(BrokerJobRecord& job, const nlohmann::json& attempt,
                          const nlohmann::json& doc) {
  job.site = attempt.value("site", "");
  job.site_job_id = site_id_of(doc);
  job.state = state_of(doc) == JobState::kUnknown ? JobState::kAccepted : state_of(doc);
  job.reason = text_of(doc, "reason");
}

Status BrokerJobs::advance(BrokerJobRecord& job, const std::string& token, int64_t now) {
  nlohmann::json ranked = array_of(job.ranked);
  nlohmann::json attempts = array_of(job.attempts);
  while (true) {
    // The attempt to make: the one a crash left unanswered, or the next site's.
    bool resend = !attempts.empty() && attempts.back().value("outcome", "") == "sending";
    size_t next = attempts.size() - (resend ? 1 : 0);
    if (next >= ranked.size()) break;
    if (!resend) {
      attempts.push_back(new_attempt(job, next, ranked[next], now));
      job.attempts = to_text(attempts);
      job.reason = "sending to " + ranked[next].value("site", "");
      job.updated_at = now;
      BERTH_CHECK(db_.broker_save(job));  // written before it goes
    }
    nlohmann::json& attempt = attempts.back();
    nlohmann::json doc;
    if (send(attempt, ranked[next], token, &doc)) {
      place_at(job, attempt, doc);
      break;
    }
    if (attempt.value("outcome", "") == "sending") {
      job.reason = attempt.value("site", "") + " did not answer; the broker asks it again";
      break;
    }
  }
  settle_unplaced(job, attempts);
  job.attempts = to_text(attempts);
  job.updated_at = now;
  return db_.broker_save(job);
}

void BrokerJobs::settle_unplaced(BrokerJobRecord& job, const nlohmann::json& attempts) {
  if (!job.site.empty() || attempts.empty()) return;
  std::string causes;
  for (const nlohmann::json& a : attempts) {
    std::string outcome = a.value("outcome", "");
    if (outcome == "sending" || outcome == "submitted") return;  // still going somewhere
    causes += (causes.empty() ? "" : "; ") + a.value("site", "") + ": " + a.value("cause", "");
  }
  if (attempts.size() < array_of(job.ranked).size()) return;  // more sites to try
  job.state = JobState::kSubmitFailed;
  job.reason = "no site took the job: " + causes;
}

Status BrokerJobs::race(BrokerJobRecord& job, const std::string& token, int64_t now) {
  nlohmann::json ranked = array_of(job.ranked);
  nlohmann::json attempts = array_of(job.attempts);
  const size_t racers = std::min(kRaceSites, ranked.size());
  if (racers <= 1) return advance(job, token, now);
  if (attempts.empty()) {
    // Every racer's attempt is written before any is sent.
    for (size_t i = 0; i < racers; ++i) attempts.push_back(new_attempt(job, i, ranked[i], now));
    job.attempts = to_text(attempts);
    job.reason = "sending to the first " + std::to_string(racers) + " sites";
    job.updated_at = now;
    BERTH_CHECK(db_.broker_save(job));
  }
  std::vector<size_t> live;
  nlohmann::json last_doc;  // the site's answer to the last racer sent now
  std::optional<size_t> last_sent;
  for (size_t i = 0; i < attempts.size() && i < racers; ++i) {
    nlohmann::json& attempt = attempts[i];
    if (attempt.value("outcome", "") == "sending") {
      nlohmann::json doc;
      if (send(attempt, ranked[i], token, &doc)) {
        last_doc = std::move(doc);
        last_sent = i;
      }
    }
    std::string outcome = attempt.value("outcome", "");
    if (outcome == "submitted" || outcome == "sending") live.push_back(i);
  }
  // One racer left, just sent: it has the job, as with "rank".
  if (live.size() == 1 && last_sent == live[0]) place_at(job, attempts[live[0]], last_doc);
  job.attempts = to_text(attempts);
  if (live.empty()) return advance(job, token, now);  // on down the list, one at a time
  if (job.site.empty()) {
    job.state = JobState::kPending;
    std::string names;
    for (size_t i : live) names += (names.empty() ? "" : ", ") + attempts[i].value("site", "");
    job.reason = "racing at " + names + ": the first to run keeps the job";
  }
  job.updated_at = now;
  return db_.broker_save(job);
}

bool BrokerJobs::racing(const BrokerJobRecord& job) {
  if (!job.site.empty() || job_state_final(job.state)) return false;
  auto parsed = stored_job(job);
  return parsed.ok() && parsed->placement.strategy == "race";
}

nlohmann::json BrokerJobs::refresh_race(BrokerJobRecord& job, const std::string& token,
                                        int64_t now) {
  (void)race(job, token, now);  // what a crash left unsent goes now; a write failing: next time
  if (!job.site.empty() || job.state != JobState::kPending) return nullptr;
  nlohmann::json attempts = array_of(job.attempts);
  // Each live racer as its site says now; the first in rank order that runs (or has already
  // ended, other than on its nodes) wins.
  std::optional<size_t> winner;
  nlohmann::json winner_doc;
  for (size_t i = 0; i < attempts.size(); ++i) {
    nlohmann::json& a = attempts[i];
    if (a.value("outcome", "") != "submitted") continue;
    const BrokerSiteConfig* site = config_.find_site(a.value("site", ""));
    if (site == nullptr) continue;
    SiteAnswer r = as_caller(*site, token, [&](const std::string& t) {
      return read_at_site(*site, a.value("site_job_id", ""), t);
    });
    nlohmann::json doc = parse_json_or_discarded(r.body, kMaxAnswerBytes);
    if (r.status != 200 || !doc.is_object()) continue;
    JobState state = state_of(doc);
    if (state == JobState::kNodeFail) {
      a["outcome"] = "ended";
      a["cause"] = "NODE_FAIL at " + a.value("site", "");
      ended(a.value("site", ""), "ended");
    } else if (!winner && (state == JobState::kRunning || job_state_final(state))) {
      winner = i;
      winner_doc = std::move(doc);
    }
  }
  if (winner) {
    const std::string won = attempts[*winner].value("site", "");
    for (size_t i = 0; i < attempts.size(); ++i) {
      nlohmann::json& a = attempts[i];
      if (i == *winner || a.value("outcome", "") != "submitted") continue;
      const BrokerSiteConfig* site = config_.find_site(a.value("site", ""));
      SiteAnswer c =
          site == nullptr ? SiteAnswer{} : as_caller(*site, token, [&](const std::string& t) {
            return cancel_at_site(*site, a.value("site_job_id", ""), t);
          });
      if (!cancel_taken(c)) continue;  // asked again at the next look
      a["outcome"] = "cancelled";
      a["cause"] = "lost the race to " + won;
      ended(a.value("site", ""), "cancelled");
    }
    place_at(job, attempts[*winner], winner_doc);
  }
  job.attempts = to_text(attempts);
  job.updated_at = now;
  bool any_live = false;
  for (const nlohmann::json& a : attempts)
    any_live = any_live || a.value("outcome", "") == "submitted";
  if (!winner && !any_live) {
    job.state = JobState::kAccepted;
    (void)advance(job, token, now);  // a write failing here is retried next time
    return nullptr;
  }
  (void)db_.broker_save(job);  // the sites' word stands even where the write fails
  return winner ? winner_doc : nlohmann::json(nullptr);
}

nlohmann::json BrokerJobs::refresh(BrokerJobRecord& job, const Account& who,
                                   const std::string& token, int64_t now) {
  if (job.site.empty() && owns(who, job) && racing(job)) return refresh_race(job, token, now);
  if (job.state == JobState::kAccepted && job.site.empty() && owns(who, job))
    (void)advance(job, token, now);  // a write failing here is retried next time
  if (job.site.empty() || !owns(who, job)) return nullptr;
  const BrokerSiteConfig* site = config_.find_site(job.site);
  if (site == nullptr) return nullptr;
  SiteAnswer a = as_caller(*site, token, [&](const std::string& t) {
    return read_at_site(*site, site_job_ref(job), t);
  });
  if (a.status != 200) return nullptr;
  nlohmann::json doc = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  if (!doc.is_object()) return nullptr;
  JobState state = state_of(doc);
  if (removed_when_over(site->kind, state)) {
    // Settled or moved on only once it is gone there: a Marathon app relaunched after it
    // would be a second copy. Not taken yet: the next look tries again.
    SiteAnswer c = as_caller(*site, token, [&](const std::string& t) {
      return cancel_at_site(*site, site_job_ref(job), t);
    });
    if (!cancel_taken(c)) return doc;
  }
  nlohmann::json attempts = array_of(job.attempts);
  std::string moved;  // why the job goes on to the next site
  if (state == JobState::kNodeFail) {
    moved = "ended";
  } else if ((state == JobState::kPending || state == JobState::kAccepted) && !attempts.empty()) {
    // ACCEPTED: the site has it but its Slurm has not answered yet; as pending as PENDING.
    auto parsed = stored_job(job);
    int64_t limit = parsed.ok() ? parsed->failover.pending_timeout_s : 0;
    int64_t since = attempts.back().value("at", now);
    if (limit > 0 && now - since > limit) {
      SiteAnswer c = as_caller(*site, token, [&](const std::string& t) {
        return cancel_at_site(*site, site_job_ref(job), t);
      });
      if (cancel_taken(c)) moved = "cancelled";
    }
  }
  if (moved.empty() || attempts.empty()) {
    job.state = state == JobState::kUnknown ? job.state : state;
    job.reason = text_of(doc, "reason");
    job.updated_at = now;
    (void)db_.broker_save(job);  // the site's word stands even where the write fails
    return doc;
  }
  nlohmann::json& last = attempts.back();
  last["outcome"] = moved;
  ended(job.site, moved);
  last["cause"] = moved == "ended" ? "NODE_FAIL at " + job.site
                                   : fmt::format("pending at {} longer than {} s", job.site,
                                                 now - last.value("at", now));
  job.attempts = to_text(attempts);
  job.site.clear();
  job.site_job_id = 0;
  job.state = JobState::kAccepted;
  (void)advance(job, token, now);
  return nullptr;
}

Result<std::optional<nlohmann::json>> BrokerJobs::get(const Account& who, const std::string& token,
                                                      int64_t id, int64_t now) {
  remember(who, token, now);
  std::optional<BrokerJobRecord> job = BERTH_TRY(db_.broker_get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<nlohmann::json>();
  if (job_state_final(job->state)) return std::optional<nlohmann::json>(job_json(*job));
  const JobLocks::Held moving(locks_, id);
  if (auto again = BERTH_TRY(db_.broker_get(id))) job = std::move(again);
  nlohmann::json doc =
      job_state_final(job->state) ? nlohmann::json(nullptr) : refresh(*job, who, token, now);
  return std::optional<nlohmann::json>(job_json(*job, doc));
}

Result<nlohmann::json> BrokerJobs::list(const Account& who, int limit) {
  std::vector<BrokerJobRecord> jobs = BERTH_TRY(db_.broker_list(who.admin ? "" : who.user, limit));
  nlohmann::json out = nlohmann::json::array();
  for (const BrokerJobRecord& j : jobs) out.push_back(job_json(j));
  return out;
}

Result<std::optional<nlohmann::json>> BrokerJobs::cancel(const Account& who,
                                                         const std::string& token, int64_t id,
                                                         int64_t now) {
  remember(who, token, now);
  std::optional<BrokerJobRecord> job = BERTH_TRY(db_.broker_get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<nlohmann::json>();
  if (job_state_final(job->state)) return std::optional<nlohmann::json>(job_json(*job));
  const JobLocks::Held moving(locks_, id);
  if (auto again = BERTH_TRY(db_.broker_get(id))) job = std::move(again);
  if (job_state_final(job->state)) return std::optional<nlohmann::json>(job_json(*job));
  if (job->site.empty()) {
    // Not at one site yet: nothing more is sent, and a race's racers are called off.
    nlohmann::json attempts = array_of(job->attempts);
    for (nlohmann::json& a : attempts) {
      const BrokerSiteConfig* site = config_.find_site(a.value("site", ""));
      if (a.value("outcome", "") != "submitted" || site == nullptr) continue;
      SiteAnswer c = as_caller(*site, token, [&](const std::string& t) {
        return cancel_at_site(*site, a.value("site_job_id", ""), t);
      });
      if (!cancel_taken(c))
        return make_error("DELETE", site->url, c.status == 0 ? c.error : cause_of(c),
                          c.status == 0 ? ErrorCode::kNetwork : ErrorCode::kHttp);
      a["outcome"] = "cancelled";
      a["cause"] = "the job was cancelled";
    }
    job->attempts = to_text(attempts);
    job->state = JobState::kCancelled;
    job->reason = "cancelled before a site had it";
    job->updated_at = now;
    BERTH_CHECK(db_.broker_save(*job));
    return std::optional<nlohmann::json>(job_json(*job));
  }
  const BrokerSiteConfig* site = config_.find_site(job->site);
  if (site == nullptr)
    return make_error("DELETE", job->site, "the site is no longer in [broker]", ErrorCode::kHttp);
  SiteAnswer a = as_caller(*site, token, [&](const std::string& t) {
    return cancel_at_site(*site, site_job_ref(*job), t);
  });
  if (a.status == 0) return make_error("DELETE", job->site, a.error, ErrorCode::kNetwork);
  if (!cancel_taken(a)) return http_error("DELETE", site->url, a.status, cause_of(a));
  nlohmann::json doc = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  if (JobState s = state_of(doc); s != JobState::kUnknown) job->state = s;
  job->reason = text_of(doc, "reason");
  job->updated_at = now;
  BERTH_CHECK(db_.broker_save(*job));
  return std::optional<nlohmann::json>(job_json(*job, doc));
}

Result<std::optional<SiteAnswer>> BrokerJobs::output(const Account& who, const std::string& token,
                                                     int64_t id, const std::string& query) {
  remember(who, token, static_cast<int64_t>(std::time(nullptr)));
  std::optional<BrokerJobRecord> job = BERTH_TRY(db_.broker_get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<SiteAnswer>();
  const BrokerSiteConfig* site = job->site.empty() ? nullptr : config_.find_site(job->site);
  if (site == nullptr)
    return make_error("GET", "job " + std::to_string(id), "no site has the job (yet)",
                      ErrorCode::kNotFound);
  if (site->kind != "berthd")  // site_backends: only a berthd serves a job's output
    return make_error("GET", "job " + std::to_string(id),
                      "its site " + site->name + " (" + site->kind + ") keeps its output there",
                      ErrorCode::kNotFound);
  std::string path = "/v1/jobs/" + std::to_string(job->site_job_id) + "/output";
  if (!query.empty()) path += "?" + query;
  SiteAnswer a = broker_.call(*site, "GET", path, token);
  if (a.status == 0) return make_error("GET", site->url + path, a.error, ErrorCode::kNetwork);
  return std::optional<SiteAnswer>(std::move(a));
}

}  // namespace berth::gateway

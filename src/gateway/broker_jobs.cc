// A broker's jobs (gateway/broker_jobs.h).
#include "gateway/broker_jobs.h"

#include <fmt/core.h>

#include <set>
#include <string>
#include <utility>

#include "broker/job_body.h"
#include "broker/manifests.h"
#include "core/json.h"

namespace berth::gateway {
namespace {

/// A site's submission may wait for its slurmrestd (whose own timeouts are 30 s).
constexpr time_t kSubmitTimeoutS = 40;
/// A site's answer about one job is at most this large.
constexpr size_t kMaxAnswerBytes = size_t{4} << 20;

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
  out["site_job_id"] = job.site_job_id == 0 ? nlohmann::json(nullptr)
                                            : nlohmann::json(std::to_string(job.site_job_id));
  out["attempts"] = array_of(job.attempts);
  out["created_at"] = job.created_at;
  out["updated_at"] = job.updated_at;
  return out;
}

Result<BrokerJobs::Answer> BrokerJobs::submit(const Account& who, const std::string& token,
                                              const std::string& idempotency_key,
                                              const std::string& body_text, int64_t now) {
  nlohmann::json body = parse_json_or_discarded(body_text, size_t{1} << 20);
  if (!body.is_object()) return invalid("not a JSON object");
  if (!idempotency_key.empty()) {
    // A replay is answered from the database, without placing the job again.
    std::optional<BrokerJobRecord> earlier = BERTH_TRY(db_.broker_find(who.user, idempotency_key));
    if (earlier) {
      if (earlier->request != body_text)
        return make_error(
            "parse", "Idempotency-Key",
            "was used for another job body (broker job " + std::to_string(earlier->id) + ")",
            ErrorCode::kExists);
      if (earlier->state == JobState::kAccepted && owns(who, *earlier))
        BERTH_CHECK(advance(*earlier, token, now));
      return Answer{200, job_json(*earlier)};
    }
  }
  BrokerService::Decision d = BERTH_TRY(broker_.decide(body, who, token, now));
  // The sites to try, best first: each site once, at its best class, as many as the job allows.
  nlohmann::json ranked = nlohmann::json::array();
  std::set<std::string> seen;
  for (const broker::Candidate& c : d.placement.candidates) {
    if (!c.fits || seen.count(c.site) > 0) continue;
    const BrokerSiteConfig* site = config_.find_site(c.site);
    // Only berthd sites are sent jobs; the others are placed and given manifests.
    if (site == nullptr || site->kind != "berthd") continue;
    const broker::NodeClass* cls = BrokerService::class_of(d, c);
    if (cls == nullptr) continue;
    seen.insert(c.site);
    ranked.push_back({{"site", c.site},
                      {"partition", c.partition},
                      {"class", c.cls},
                      {"body", broker::berthd_job(d.job, *cls)}});
    if (static_cast<int>(ranked.size()) >= std::max(1, d.job.failover.max_sites)) break;
  }
  if (ranked.empty()) {
    nlohmann::json answer = broker::placement_json(d.placement);
    if (!answer["chosen"].is_null())
      answer["error"] = {{"status", 422},
                         {"message",
                          "the sites that fit take manifests, not jobs (kind is not "
                          "berthd): POST /v1/manifests"}};
    return Answer{422, std::move(answer)};
  }
  BrokerJobRecord rec;
  rec.owner = who.user;
  rec.issuer = who.issuer;
  rec.subject = who.subject;
  rec.idempotency_key = idempotency_key;
  rec.request = body_text;
  rec.ranked = to_text(ranked);
  bool existing = false;
  rec = BERTH_TRY(db_.broker_accept(rec, now, &existing));
  if (existing) return Answer{200, job_json(rec)};  // a request of the same key, just before
  BERTH_CHECK(advance(rec, token, now));
  return Answer{201, job_json(rec)};
}

Status BrokerJobs::advance(BrokerJobRecord& job, const std::string& token, int64_t now) {
  nlohmann::json ranked = array_of(job.ranked);
  nlohmann::json attempts = array_of(job.attempts);
  std::string causes;  // of this call's attempts, for a job no site took
  for (const nlohmann::json& a : attempts)
    if (a.value("outcome", "") != "submitted" && a.value("outcome", "") != "sending")
      causes += (causes.empty() ? "" : "; ") + a.value("site", "") + ": " + a.value("cause", "");
  while (true) {
    // The attempt to make: the one a crash left unanswered, or the next site's.
    bool resend = !attempts.empty() && attempts.back().value("outcome", "") == "sending";
    size_t next = attempts.size() - (resend ? 1 : 0);
    if (next >= ranked.size()) break;
    const nlohmann::json& target = ranked[next];
    const std::string site_name = target.value("site", "");
    if (!resend) {
      attempts.push_back({{"n", next + 1},
                          {"site", site_name},
                          {"partition", target.value("partition", "")},
                          {"class", target.value("class", "")},
                          {"key", fmt::format("broker:{}:{}:{}", db_.instance(), job.id, next + 1)},
                          {"at", now},
                          {"outcome", "sending"},
                          {"cause", ""},
                          {"site_job_id", nullptr}});
      job.attempts = to_text(attempts);
      job.reason = "sending to " + site_name;
      job.updated_at = now;
      BERTH_CHECK(db_.broker_save(job));  // written before it goes
    }
    nlohmann::json& attempt = attempts.back();
    const BrokerSiteConfig* site = config_.find_site(site_name);
    SiteAnswer a;
    if (site == nullptr) {
      a.error = "the site is no longer in [broker]";
    } else {
      a = call_site(*site, "POST", "/v1/jobs", token, to_text(target["body"]),
                    attempt.value("key", ""), kSubmitTimeoutS);
    }
    nlohmann::json doc = parse_json_or_discarded(a.body, kMaxAnswerBytes);
    if (a.status == 0 && a.sent) {
      // Sent, no answer: the site may have it. The attempt stays "sending", to be sent again
      // with its key (never to another site) at the owner's next request.
      job.reason = site_name + " did not answer (" + a.error + "); the broker asks it again";
      break;
    }
    if ((a.status == 200 || a.status == 201) && site_id_of(doc) != 0 &&
        state_of(doc) != JobState::kSubmitFailed) {
      attempt["outcome"] = "submitted";
      attempt["site_job_id"] = text_of(doc, "id");
      job.site = site_name;
      job.site_job_id = site_id_of(doc);
      job.state = state_of(doc) == JobState::kUnknown ? JobState::kAccepted : state_of(doc);
      job.reason = text_of(doc, "reason");
      ended(site_name, "submitted");
      break;
    }
    if (a.status == 0) {
      attempt["outcome"] = "failed";
      attempt["cause"] = "site_down: " + a.error;
    } else if (a.status == 200 || a.status == 201) {
      attempt["outcome"] = "failed";
      attempt["cause"] = "submit_failed: " + text_of(doc, "reason");
    } else if (a.status >= 400 && a.status < 500) {
      attempt["outcome"] = "refused";
      attempt["cause"] = cause_of(a);
    } else {
      attempt["outcome"] = "failed";
      attempt["cause"] = cause_of(a);
    }
    causes += (causes.empty() ? "" : "; ") + site_name + ": " + attempt.value("cause", "");
    ended(site_name, attempt.value("outcome", ""));
  }
  if (job.site.empty() && !attempts.empty() && attempts.back().value("outcome", "") != "sending") {
    job.state = JobState::kSubmitFailed;
    job.reason = "no site took the job: " + causes;
  }
  job.attempts = to_text(attempts);
  job.updated_at = now;
  return db_.broker_save(job);
}

nlohmann::json BrokerJobs::refresh(BrokerJobRecord& job, const Account& who,
                                   const std::string& token, int64_t now) {
  if (job.state == JobState::kAccepted && job.site.empty() && owns(who, job))
    (void)advance(job, token, now);  // a write failing here is retried next time
  if (job.site.empty() || !owns(who, job)) return nullptr;
  const BrokerSiteConfig* site = config_.find_site(job.site);
  if (site == nullptr) return nullptr;
  SiteAnswer a = call_site(*site, "GET", "/v1/jobs/" + std::to_string(job.site_job_id), token);
  if (a.status != 200) return nullptr;
  nlohmann::json doc = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  if (!doc.is_object()) return nullptr;
  JobState state = state_of(doc);
  nlohmann::json attempts = array_of(job.attempts);
  std::string moved;  // why the job goes on to the next site
  if (state == JobState::kNodeFail) {
    moved = "ended";
  } else if (state == JobState::kPending && !attempts.empty()) {
    nlohmann::json request = parse_json_or_discarded(job.request);
    auto parsed = broker::parse_broker_job(request);
    int64_t limit = parsed.ok() ? parsed->failover.pending_timeout_s : 0;
    int64_t since = attempts.back().value("at", now);
    if (limit > 0 && now - since > limit) {
      SiteAnswer c =
          call_site(*site, "DELETE", "/v1/jobs/" + std::to_string(job.site_job_id), token);
      if (c.status == 202 || c.status == 200) moved = "cancelled";  // berthd answers 202
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
  std::optional<BrokerJobRecord> job = BERTH_TRY(db_.broker_get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<nlohmann::json>();
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
  std::optional<BrokerJobRecord> job = BERTH_TRY(db_.broker_get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<nlohmann::json>();
  if (job_state_final(job->state)) return std::optional<nlohmann::json>(job_json(*job));
  if (job->site.empty()) {
    // Not at a site yet: nothing more is sent.
    job->state = JobState::kCancelled;
    job->reason = "cancelled before a site had it";
    job->updated_at = now;
    BERTH_CHECK(db_.broker_save(*job));
    return std::optional<nlohmann::json>(job_json(*job));
  }
  const BrokerSiteConfig* site = config_.find_site(job->site);
  if (site == nullptr)
    return make_error("DELETE", job->site, "the site is no longer in [broker]", ErrorCode::kHttp);
  SiteAnswer a = call_site(*site, "DELETE", "/v1/jobs/" + std::to_string(job->site_job_id), token);
  if (a.status == 0) return make_error("DELETE", job->site, a.error, ErrorCode::kNetwork);
  if (a.status != 202 && a.status != 200)
    return http_error("DELETE", site->url, a.status, cause_of(a));
  nlohmann::json doc = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  if (JobState s = state_of(doc); s != JobState::kUnknown) job->state = s;
  job->reason = text_of(doc, "reason");
  job->updated_at = now;
  BERTH_CHECK(db_.broker_save(*job));
  return std::optional<nlohmann::json>(job_json(*job, doc));
}

Result<std::optional<SiteAnswer>> BrokerJobs::output(const Account& who, const std::string& token,
                                                     int64_t id, const std::string& query) {
  std::optional<BrokerJobRecord> job = BERTH_TRY(db_.broker_get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<SiteAnswer>();
  const BrokerSiteConfig* site = job->site.empty() ? nullptr : config_.find_site(job->site);
  if (site == nullptr)
    return make_error("GET", "job " + std::to_string(id), "no site has the job (yet)",
                      ErrorCode::kNotFound);
  std::string path = "/v1/jobs/" + std::to_string(job->site_job_id) + "/output";
  if (!query.empty()) path += "?" + query;
  SiteAnswer a = call_site(*site, "GET", path, token);
  if (a.status == 0) return make_error("GET", site->url + path, a.error, ErrorCode::kNetwork);
  return std::optional<SiteAnswer>(std::move(a));
}

}  // namespace berth::gateway

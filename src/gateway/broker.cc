#include "gateway/broker.h"

#include <httplib.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <future>
#include <optional>
#include <set>
#include <vector>

#include "broker/job_body.h"
#include "broker/manifests.h"
#include "broker/site_info.h"
#include "core/fs.h"
#include "core/json.h"
#include "gateway/jwt.h"

namespace berth::gateway {
namespace {

/// A site that does not answer within this long is down for this decision.
constexpr time_t kFetchTimeoutS = 5;
/// A site's GLUE document is at most this large.
constexpr size_t kMaxDocBytes = size_t{16} << 20;
/// A site found down is asked again no sooner than this.
constexpr int64_t kRetryDownS = 5;
/// A site's dry run may take this long: its start estimate runs Slurm's sbatch --test-only.
constexpr time_t kDryRunTimeoutS = 10;
/// At most this many rounds of dry runs per decision: a site whose best class it refuses is
/// asked about its next one, up to this many classes.
constexpr int kDryRunRounds = 3;

/// Whether site `s` describes itself (GET /v1/resources) rather than through a file.
bool fetched(const BrokerSiteConfig& s) {
  return s.kind == "berthd";
}

/// The document of file site `s`: GLUE 2.1 (an object of entities) or a cloud-info-provider
/// CMDB document (a list of typed entries).
Result<broker::SiteInfo> read_site_file(const BrokerSiteConfig& s) {
  std::string text = BERTH_TRY(read_file(s.resources));
  nlohmann::json doc = BERTH_TRY(parse_json(text, s.resources, kMaxDocBytes));
  if (doc.is_array()) return broker::read_cmdb(s.name, doc);
  return broker::read_glue(s.name, doc);
}

/// GET `path` of berthd site `s` (with `token` where given): the answer of any status, or a
/// kNetwork error naming the URL.
Result<SiteAnswer> site_get(const BrokerSiteConfig& s, const std::string& path,
                            const std::string& token = "") {
  SiteAnswer res = call_site(s, "GET", path, token, "", "", kFetchTimeoutS);
  if (res.status == 0) return make_error("GET", s.url + path, res.error, ErrorCode::kNetwork);
  return res;
}

/// GET URL/v1/resources of berthd site `s` with the caller's token.
Result<broker::SiteInfo> fetch_site(const BrokerSiteConfig& s, const std::string& token) {
  const std::string url = s.url + "/v1/resources";
  SiteAnswer res = BERTH_TRY(site_get(s, "/v1/resources", token));
  if (res.status == 401 || res.status == 403) {
    std::string why = site_error_message(res.body);
    return http_error("GET", url, res.status, why.empty() ? "token refused" : why);
  }
  if (res.status != 200) return http_error("GET", url, res.status, "not 200 OK");
  nlohmann::json doc = BERTH_TRY(parse_json(res.body, url, kMaxDocBytes));
  return broker::read_glue(s.name, doc);
}

/// What berthd site `s` says of itself in its GET /v1/health (public).
struct Health {
  /// The token issuers it trusts; nullopt where it does not say (a berthd older than the broker).
  std::optional<std::vector<std::string>> trusted;
  bool dry_run = false;  ///< it answers POST /v1/jobs?dry_run=1
};
Result<Health> fetch_health(const BrokerSiteConfig& s) {
  const std::string url = s.url + "/v1/health";
  SiteAnswer res = BERTH_TRY(site_get(s, "/v1/health"));
  if (res.status != 200) return http_error("GET", url, res.status, "not 200 OK");
  nlohmann::json doc = BERTH_TRY(parse_json(res.body, url, kMaxDocBytes));
  Health out;
  if (!doc.is_object()) return out;
  out.dry_run =
      doc.contains("dry_run") && doc["dry_run"].is_boolean() && doc["dry_run"].get<bool>();
  if (!doc.contains("issuers") || !doc["issuers"].is_array()) return out;
  out.trusted.emplace();
  for (const nlohmann::json& i : doc["issuers"])
    if (i.is_object() && i.contains("issuer") && i["issuer"].is_string())
      out.trusted->push_back(i["issuer"].get<std::string>());
  return out;
}

/// What berthd site `s` says the caller of `token` stands under (GET /v1/me): the limits and
/// quota a broker fits a job to. Where the site does not say (an older berthd, or an error),
/// nothing is limited: the site's own refusal then moves the job on.
BrokerService::CallerStanding fetch_standing(const BrokerSiteConfig& s, const std::string& token) {
  BrokerService::CallerStanding out;
  auto res = site_get(s, "/v1/me", token);
  if (!res.ok() || res->status != 200) return out;
  nlohmann::json me = parse_json_or_discarded(res->body, kMaxDocBytes);
  if (!me.is_object()) return out;
  auto limit = [&me](const char* key) -> int64_t {
    if (!me.contains("limits") || !me["limits"].is_object() || !me["limits"].contains(key))
      return -1;
    const nlohmann::json& l = me["limits"][key];
    return l.is_object() && l.contains("value") && l["value"].is_number_integer()
               ? l["value"].get<int64_t>()
               : -1;
  };
  out.max_gpus_per_job = static_cast<int>(std::min<int64_t>(limit("max_gpus_per_job"), 1 << 20));
  out.max_walltime_s = limit("max_walltime_s");
  if (me.contains("quota") && me["quota"].is_object() && me["quota"].contains("left_gpu_hours") &&
      me["quota"]["left_gpu_hours"].is_number())
    out.gpu_hours_left = me["quota"]["left_gpu_hours"].get<double>();
  return out;
}

/// The broker's reason code for a refusal code of a berthd site's dry run, and whether it holds
/// for every class of the site (the caller's own limits and quota) rather than the one asked.
std::pair<std::string, bool> broker_reason(const std::string& site_code) {
  if (site_code == "no_gpu_model") return {site_code, false};
  if (site_code == "partition") return {"excluded", false};  // the site's partition allow-list
  if (site_code == "limit") return {"quota", true};          // a count limit: nothing starts now
  return {site_code, true};  // max_gpus_per_job, walltime, quota, share_unsupported
}

/// What berthd site answer `res` to a dry run on class `cls` of `partition` says, at `now`:
/// the site's refusal or start estimate; an answer that is not a verdict (no answer, no token,
/// an error status) says nothing, and the failover handles the site as it would without it.
broker::SiteVerdict verdict_of(const SiteAnswer& res, const std::string& partition,
                               const std::string& cls, int64_t now) {
  broker::SiteVerdict v;
  v.partition = partition;
  v.cls = cls;
  if (res.status != 200) return v;
  nlohmann::json a = parse_json_or_discarded(res.body, kMaxDocBytes);
  if (!a.is_object() || !a.contains("fits") || !a["fits"].is_boolean()) return v;
  if (!a["fits"].get<bool>()) {
    const std::string code = a.contains("reason") && a["reason"].is_string()
                                 ? a["reason"].get<std::string>()
                                 : std::string("quota");
    const std::string why = a.contains("message") && a["message"].is_string()
                                ? a["message"].get<std::string>()
                                : std::string("it refused the job");
    auto [reason, whole_site] = broker_reason(code);
    v.refusal = broker::Reason{reason, "the site says: " + why};
    v.whole_site = whole_site;
  } else if (a.contains("start_estimate") && a["start_estimate"].is_number_integer()) {
    v.wait_s = std::max<int64_t>(0, a["start_estimate"].get<int64_t>() - now);
  }
  return v;
}

/// How the broker tells callers apart: their issuer and subject.
std::string caller_key(const Account& who) {
  return who.issuer + "\n" + who.subject;
}

/// The modification time of `path`, 0 when it cannot be read.
int64_t mtime_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtime) : 0;
}

}  // namespace

SiteAnswer call_site(const BrokerSiteConfig& s, std::string_view method, const std::string& path,
                     const std::string& token, const std::string& body,
                     const std::string& idempotency_key, time_t timeout_s,
                     std::string_view token_header) {
  // A URL with a path (Nova's compute endpoint, ".../v2.1") puts it before every request's.
  const size_t host_end = s.url.find('/', s.url.find("://") + 3);
  const std::string target = host_end == std::string::npos ? path : s.url.substr(host_end) + path;
  httplib::Client client(s.url.substr(0, host_end));
  client.set_connection_timeout(kFetchTimeoutS);
  client.set_read_timeout(timeout_s);
  client.set_write_timeout(timeout_s);
  client.set_follow_location(false);
  client.enable_server_certificate_verification(true);
  httplib::Headers headers;
  if (!token.empty() && token_header == "Authorization")
    headers.emplace("Authorization", "Bearer " + token);
  else if (!token.empty())
    headers.emplace(std::string(token_header), token);
  if (!idempotency_key.empty()) headers.emplace("Idempotency-Key", idempotency_key);
  httplib::Result res = method == "POST" ? client.Post(target, headers, body, "application/json")
                        : method == "DELETE" ? client.Delete(target, headers)
                                             : client.Get(target, headers);
  SiteAnswer out;
  if (!res) {
    httplib::Error e = res.error();
    out.sent = e != httplib::Error::Connection && e != httplib::Error::ConnectionTimeout &&
               e != httplib::Error::SSLConnection && e != httplib::Error::SSLServerVerification;
    out.error = std::string(method) + " " + s.url + path + ": " + httplib::to_string(e);
    return out;
  }
  out.sent = true;
  out.status = res->status;
  out.body = std::move(res->body);
  out.content_type = res->get_header_value("Content-Type");
  return out;
}

std::string site_error_message(const std::string& body) {
  // berthd's error body: {"error": {"status", "message"}}.
  nlohmann::json e = parse_json_or_discarded(body, kMaxDocBytes);
  if (!e.is_object() || !e.contains("error") || !e["error"].is_object()) return "";
  const nlohmann::json& m = e["error"];
  return m.contains("message") && m["message"].is_string() ? m["message"].get<std::string>() : "";
}

BrokerService::BrokerService(const BrokerConfig& config, TokenExchanger* exchanger)
    : config_(config), exchanger_(exchanger) {}

Result<std::string> BrokerService::token_for(const BrokerSiteConfig& s,
                                             const std::string& caller_token, int64_t now) {
  if (s.token != "exchange" && s.audience.empty()) return caller_token;
  // The token was verified on its way in: its claims are read here, not checked again.
  auto jws = parse_jws(caller_token);
  if (!jws.ok())
    return make_error("authenticate", s.name, "the caller's token is not a JWT",
                      ErrorCode::kPermission);
  const nlohmann::json& claims = jws->payload;
  if (s.token == "exchange") {
    if (exchanger_ == nullptr)
      return make_error("authenticate", s.name, "the broker exchanges no tokens",
                        ErrorCode::kPermission);
    auto token = exchanger_->exchange(string_field(claims, "iss"), caller_token, s.audience, now);
    if (!token.ok())
      return make_error(
          "authenticate", s.name,
          "token exchange for audience \"" + s.audience + "\" failed: " + token.error().message(),
          ErrorCode::kPermission);
    return token;
  }
  // Forwarded: only where the site is its audience, so that a token never goes to a site
  // that would refuse it (or could replay it where it is meant).
  const nlohmann::json aud = claims.contains("aud") ? claims["aud"] : nlohmann::json();
  bool names = aud == s.audience;
  if (aud.is_array())
    for (const nlohmann::json& a : aud) names = names || a == s.audience;
  if (!names)
    return make_error("authenticate", s.name,
                      "the caller's token is not for audience \"" + s.audience +
                          "\" (its aud: " + (aud.is_null() ? std::string("none") : aud.dump()) +
                          "); token = \"exchange\" would get one",
                      ErrorCode::kPermission);
  return caller_token;
}

SiteAnswer BrokerService::call(const BrokerSiteConfig& s, std::string_view method,
                               const std::string& path, const std::string& caller_token,
                               const std::string& body, const std::string& idempotency_key,
                               time_t timeout_s) {
  auto token = token_for(s, caller_token, static_cast<int64_t>(std::time(nullptr)));
  if (!token.ok()) {
    SiteAnswer out;
    out.no_token = true;
    out.error = token.error().message();
    return out;
  }
  return call_site(s, method, path, *token, body, idempotency_key, timeout_s);
}

bool BrokerService::trusts(const Known& k, const Account& who) {
  return !k.trusted ||
         std::find(k.trusted->begin(), k.trusted->end(), who.issuer) != k.trusted->end();
}

const BrokerService::Known::CallerWord* BrokerService::word_of(const Known& k, const Account& who) {
  auto it = k.callers.find(caller_key(who));
  return it == k.callers.end() ? nullptr : &it->second;
}

bool BrokerService::recent(const BrokerSiteConfig& s, const Known::CallerWord& w, int64_t now) {
  return now - w.at < std::max<int64_t>(s.info_ttl_s, 1);
}

Status BrokerService::load() {
  std::lock_guard lock(mu_);
  for (const BrokerSiteConfig& s : config_.sites) {
    if (fetched(s)) continue;
    Known& k = known_[s.name];
    k.read_at = mtime_of(s.resources);
    k.info = BERTH_TRY(read_site_file(s).with_context("read broker site " + s.name));
    k.read = true;
  }
  return {};
}

void BrokerService::refresh(const BrokerSiteConfig& s, Known& k, const Account& who,
                            const std::string& token, int64_t now) {
  k.tried_at = now;
  if (fetched(s)) {
    auto health = fetch_health(s);
    if (!health.ok()) {
      k.up = false;
      k.error = health.error().message();
      return;
    }
    k.trusted = std::move(health->trusted);
    k.dry_run = health->dry_run;
    // A token never goes where its issuer is not trusted.
    if (!trusts(k, who)) return;
  }
  std::string site_token;  // what the site is sent: never the caller's where it may not be
  if (fetched(s)) {
    auto t = token_for(s, token, now);
    if (!t.ok()) {
      Known::CallerWord& w = k.callers[caller_key(who)];
      w.no_token = t.error().detail;
      w.at = now;
      return;
    }
    k.callers[caller_key(who)].no_token.clear();
    site_token = std::move(*t);
  }
  Result<broker::SiteInfo> info = fetched(s) ? fetch_site(s, site_token) : read_site_file(s);
  if (!info.ok()) {
    const Error& e = info.error();
    if (e.code == ErrorCode::kHttp && (e.http_status == 401 || e.http_status == 403)) {
      // Up, but not for this caller: the site's own words say why.
      k.callers[caller_key(who)] = {
          now, true, "HTTP " + std::to_string(e.http_status) + ": " + e.detail, {}, ""};
      return;
    }
    k.up = false;
    k.error = e.message();
    return;
  }
  if (fetched(s)) k.callers[caller_key(who)] = {now, true, "", fetch_standing(s, site_token), ""};
  k.info = std::move(*info);
  k.read = true;
  k.up = true;
  k.error.clear();
  k.read_at = fetched(s) ? now : mtime_of(s.resources);
}

void BrokerService::merge(const BrokerSiteConfig& s, Known& live, Known&& read,
                          const std::string& key, int64_t now) {
  // Between the copy and now, another caller's refresh of the site may have written its word
  // and a submission its attempt: those are kept, and the read's own caller is the only one it
  // speaks for.
  std::map<std::string, Known::CallerWord> callers = std::move(live.callers);
  std::deque<bool> attempts = std::move(live.attempts);
  if (auto it = read.callers.find(key); it != read.callers.end())
    callers[key] = std::move(it->second);
  std::erase_if(callers, [&](const auto& c) { return !recent(s, c.second, now); });
  live = std::move(read);
  live.callers = std::move(callers);
  live.attempts = std::move(attempts);
}

bool BrokerService::stale(const BrokerSiteConfig& s, const Known& k, const Account& who,
                          int64_t now) {
  if (!fetched(s)) return mtime_of(s.resources) != k.read_at;  // the file changed
  const Known::CallerWord* w = word_of(k, who);
  // No token for this caller last time: tried again, a failure is never kept.
  if (trusts(k, who) && w != nullptr && !w->no_token.empty()) return true;
  // A caller the site has not answered for lately is asked about at once, fresh information or
  // not.
  if (trusts(k, who) && (w == nullptr || !w->heard || !recent(s, *w, now)) &&
      now - k.tried_at >= (k.up ? 0 : kRetryDownS))
    return true;
  // Older than its ttl; a site found down is asked again after kRetryDownS.
  return (!k.read || now - k.read_at >= std::max<int64_t>(s.info_ttl_s, 1)) &&
         now - k.tried_at >= (k.up ? 0 : kRetryDownS);
}

void BrokerService::bring_up_to_date(const Account& who, const std::string& token, int64_t now) {
  std::vector<const BrokerSiteConfig*> todo;
  {
    std::lock_guard lock(mu_);
    for (const BrokerSiteConfig& s : config_.sites)
      if (stale(s, known_[s.name], who, now)) todo.push_back(&s);
  }
  auto one = [this, &who, &token, now](const BrokerSiteConfig* s) {
    Known k;
    {
      std::lock_guard lock(mu_);
      k = known_[s->name];
    }
    refresh(*s, k, who, token, now);
    std::lock_guard lock(mu_);
    merge(*s, known_[s->name], std::move(k), caller_key(who), now);
  };
  // In parallel where several must be asked: one slow site costs its timeout once, not once
  // per site; the common case, nothing to ask, starts no thread.
  if (todo.size() == 1) return one(todo[0]);
  std::vector<std::future<void>> pending;
  pending.reserve(todo.size());
  for (const BrokerSiteConfig* s : todo) pending.push_back(std::async(std::launch::async, one, s));
  for (auto& f : pending) f.get();
}

broker::SiteView BrokerService::view(const BrokerSiteConfig& s, const Known& k, const Account& who,
                                     int64_t now) {
  broker::SiteView v;
  v.name = s.name;
  v.kind = s.kind;
  v.info = k.info;
  v.up = k.up;  // answered, even where it has not been read for this caller
  v.fresh = k.read && (s.info_ttl_s == 0 || now - k.read_at <= s.info_ttl_s);
  v.group_allowed =
      s.groups.empty() || std::any_of(who.groups.begin(), who.groups.end(), [&s](const auto& g) {
        return std::find(s.groups.begin(), s.groups.end(), g) != s.groups.end();
      });
  if (!trusts(k, who)) {
    v.issuer_trusted = false;
    std::string list;
    for (const std::string& i : *k.trusted) list += (list.empty() ? "" : ", ") + i;
    v.refusal = "it trusts tokens of " + (list.empty() ? std::string("no issuer") : list);
  } else if (const Known::CallerWord* w = word_of(k, who); w != nullptr && !w->no_token.empty()) {
    v.issuer_trusted = false;
    v.refusal = w->no_token;
  } else if (w != nullptr && w->heard && !w->refused.empty()) {
    v.issuer_trusted = false;
    v.refusal = w->refused;
  } else if (w != nullptr && w->heard) {
    v.max_gpus_per_job = w->standing.max_gpus_per_job;
    v.max_walltime_s = w->standing.max_walltime_s;
    v.gpu_hours_left = w->standing.gpu_hours_left;
  }
  if (!k.attempts.empty())
    v.reliability = static_cast<double>(std::count(k.attempts.begin(), k.attempts.end(), true)) /
                    static_cast<double>(k.attempts.size());
  v.shares = s.shares;
  v.gpu_jobs = s.gpu_jobs;
  v.weight = s.weight;
  for (const std::string& g : who.groups)
    if (auto w = s.weights.find(g); w != s.weights.end()) {
      v.weight = w->second;
      break;
    }
  return v;
}

Result<BrokerService::Decision> BrokerService::decide(const nlohmann::json& body,
                                                      const Account& who, const std::string& token,
                                                      int64_t now) {
  Decision d;
  d.job = BERTH_TRY(broker::parse_broker_job(body));
  bring_up_to_date(who, token, now);
  std::vector<broker::SiteView>& sites = d.sites;
  sites.reserve(config_.sites.size());
  std::vector<bool> answers_dry_runs;  // by site: a berthd that says it does, not turned off
  {
    std::lock_guard lock(mu_);
    for (const BrokerSiteConfig& s : config_.sites) {
      const Known& k = known_[s.name];
      sites.push_back(view(s, k, who, now));
      answers_dry_runs.push_back(fetched(s) && s.dry_run && k.dry_run);
    }
  }
  broker::ScoreWeights w{config_.score_start_now,  config_.score_wait,
                         config_.score_free,       config_.score_fit,
                         config_.score_preference, config_.score_reliability};
  d.placement = broker::place(d.job.need, d.job.placement, sites, w);
  // The published facts cannot say everything: a berthd site's own limits, partition allow-list
  // and start estimate. Each fitting berthd site is asked for a dry run of its best class (in
  // parallel), and the job placed again on what they said; a refused class makes the site's
  // next one its best, asked in the next round.
  for (int round = 0; round < kDryRunRounds; ++round) {
    std::vector<std::pair<size_t, const broker::Candidate*>> ask;  // site index, its best class
    std::set<std::string> seen;
    for (const broker::Candidate& c : d.placement.candidates) {
      if (!c.fits) break;  // the fitting ones come first
      if (!seen.insert(c.site).second) continue;
      for (size_t i = 0; i < sites.size(); ++i)
        if (sites[i].name == c.site && answers_dry_runs[i] &&
            sites[i].verdict(c.partition, c.cls) == nullptr)
          ask.emplace_back(i, &c);
    }
    if (ask.empty()) break;
    // The threads only read d: what they said is written once every one has answered.
    auto one = [this, &d, &token, now](size_t i, const broker::Candidate* c) {
      const broker::NodeClass* cls = class_of(d, *c);
      if (cls == nullptr) return broker::SiteVerdict{c->partition, c->cls, {}, false, {}};
      const std::string body = to_text(broker::berthd_job(d.job, *cls));
      return verdict_of(
          call(config_.sites[i], "POST", "/v1/jobs?dry_run=1", token, body, "", kDryRunTimeoutS),
          c->partition, c->cls, now);
    };
    std::vector<std::future<broker::SiteVerdict>> pending;
    pending.reserve(ask.size());
    for (const auto& [i, c] : ask) pending.push_back(std::async(std::launch::async, one, i, c));
    std::vector<broker::SiteVerdict> said;
    said.reserve(pending.size());
    for (auto& f : pending) said.push_back(f.get());
    for (size_t k = 0; k < ask.size(); ++k) sites[ask[k].first].asked.push_back(said[k]);
    d.placement = broker::place(d.job.need, d.job.placement, sites, w);
  }
  return d;
}

void BrokerService::record_attempt(const std::string& site, bool good) {
  std::lock_guard lock(mu_);
  std::deque<bool>& a = known_[site].attempts;
  a.push_back(good);
  while (a.size() > kReliabilityWindow) a.pop_front();
}

const broker::NodeClass* BrokerService::class_of(const Decision& d, const broker::Candidate& c) {
  for (const broker::SiteView& v : d.sites)
    if (v.name == c.site)
      for (const broker::NodeClass& n : v.info.classes)
        if (n.partition == c.partition && n.name == c.cls) return &n;
  return nullptr;
}

Result<nlohmann::json> BrokerService::manifest_of(const Decision& d, const broker::Candidate& c,
                                                  const BrokerSiteConfig& site) {
  const broker::SiteView* view = nullptr;
  for (const broker::SiteView& v : d.sites)
    if (v.name == c.site) view = &v;
  const broker::NodeClass* cls = class_of(d, c);
  if (view == nullptr || cls == nullptr)
    return make_error("check requirement", c.site, "the broker has no class " + c.cls + " of it",
                      ErrorCode::kNotFound);
  broker::SiteOptions options = site.manifest;
  // An OpenStack site's flavours are what it published: its node classes.
  for (const broker::NodeClass& n : view->info.classes)
    options.flavours.push_back({n.id, n.name, n.cpus_per_node, n.memory_mb_per_node,
                                n.gpus_per_node, n.gpu_model, n.gpu_memory_mib});
  return broker::manifest_for(site.kind, d.job, *cls, options);
}

Result<BrokerService::Answer> BrokerService::manifest(const nlohmann::json& body,
                                                      const Account& who, const std::string& token,
                                                      int64_t now) {
  auto invalid = [](const std::string& what) {
    return make_error("parse", "job body", what, ErrorCode::kInvalidInput);
  };
  if (!body.is_object() || !body.contains("placement") || !body["placement"].is_object() ||
      !body["placement"].contains("sites") || !body["placement"]["sites"].is_array() ||
      body["placement"]["sites"].size() != 1 || !body["placement"]["sites"][0].is_string())
    return invalid("placement.sites: must name the one site whose manifest is wanted");
  const std::string name = body["placement"]["sites"][0].get<std::string>();
  const BrokerSiteConfig* site = config_.find_site(name);
  if (site == nullptr)
    return invalid("placement.sites: \"" + name + "\" is not a site of this broker");
  Decision d = BERTH_TRY(decide(body, who, token, now));
  const broker::Candidate* chosen = d.placement.chosen();
  if (chosen == nullptr) return Answer{422, broker::placement_json(d.placement)};
  nlohmann::json manifest = BERTH_TRY(manifest_of(d, *chosen, *site));
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
  };
  return Answer{200,
                {{"site", site->name},
                 {"kind", site->kind},
                 {"partition", or_null(chosen->partition)},
                 {"class", chosen->cls},
                 {"manifest", std::move(manifest)}}};
}

Result<nlohmann::json> BrokerService::placements(const nlohmann::json& body, const Account& who,
                                                 const std::string& token, int64_t now) {
  Decision d = BERTH_TRY(decide(body, who, token, now));
  return broker::placement_json(d.placement);
}

nlohmann::json BrokerService::sites(const Account& who, const std::string& token, int64_t now) {
  nlohmann::json out = nlohmann::json::array();
  bring_up_to_date(who, token, now);
  std::lock_guard lock(mu_);
  for (const BrokerSiteConfig& s : config_.sites) {
    const Known& k = known_[s.name];
    broker::SiteView v = view(s, k, who, now);
    std::map<std::string, std::pair<int, int>> gpus;  // model -> total, free
    for (const broker::NodeClass& c : v.info.classes) {
      if (c.gpus_per_node == 0) continue;
      auto& [total, free] = gpus[c.gpu_model.empty() ? c.gpu_type : c.gpu_model];
      total += c.gpus_per_node * c.total_nodes;
      free += std::max(0, c.free_gpus);
    }
    nlohmann::json models = nlohmann::json::object();
    for (const auto& [model, n] : gpus) models[model] = {{"total", n.first}, {"free", n.second}};
    out.push_back({{"name", s.name},
                   {"kind", s.kind},
                   {"url", s.url.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.url)},
                   {"up", v.up},
                   {"fresh", v.fresh},
                   {"age_s", k.read ? nlohmann::json(now - k.read_at) : nlohmann::json(nullptr)},
                   {"error", k.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(k.error)},
                   {"gpus", std::move(models)},
                   {"classes", v.info.classes.size()}});
  }
  return out;
}

}  // namespace berth::gateway

// A broker's jobs at each kind of site (gateway/site_backends.h).
#include "gateway/site_backends.h"

#include <string>
#include <utility>

#include "core/json.h"

namespace berth::gateway {
namespace {

using nlohmann::json;

/// A site's answer about one object is at most this large.
constexpr size_t kMaxAnswerBytes = size_t{4} << 20;
/// The longest plain-text error body quoted from a site.
constexpr size_t kMaxQuoted = 200;

std::string text_of(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

int64_t int_of(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0;
}

/// The message of a backend's error body: Kubernetes' Status and Marathon's {"message"},
/// Nova's {"itemNotFound": {"message"}}, berthd's {"error": {"message"}}, or a short plain
/// text (Chronos); "" for none.
std::string backend_message(const std::string& body) {
  json e = parse_json_or_discarded(body, kMaxAnswerBytes);
  if (e.is_object()) {
    if (!text_of(e, "message").empty()) return text_of(e, "message");
    for (const auto& [key, value] : e.items())
      if (!text_of(value, "message").empty()) return text_of(value, "message");
    return "";
  }
  if (!e.is_discarded()) return "";
  std::string line = body.substr(0, body.find('\n'));
  return line.size() > kMaxQuoted ? line.substr(0, kMaxQuoted) + "..." : line;
}

/// `a` with its body as berthd's error body, where `a` is a site's error answer.
SiteAnswer as_error(SiteAnswer a) {
  if (a.status == 0) return a;
  std::string why = backend_message(a.body);
  a.body = to_text(json{{"error", {{"status", a.status}, {"message", why}}}});
  a.content_type = "application/json";
  return a;
}

/// An answer of `status` with berthd's job document of `id` in `state`.
SiteAnswer job_answer(int status, const std::string& id, JobState state,
                      const std::string& reason = "", json site_status = nullptr) {
  SiteAnswer a;
  a.status = status;
  a.sent = true;
  a.content_type = "application/json";
  json doc = {{"id", id}, {"state", job_state_name(state)}, {"reason", reason}};
  if (!site_status.is_null()) doc["site_status"] = std::move(site_status);
  a.body = to_text(doc);
  return a;
}

/// `path` with `value` appended, its reserved characters percent-encoded.
std::string with_escaped(std::string path, std::string_view value) {
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : value) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      path += static_cast<char>(c);
    } else {
      path += '%';
      path += hex[c >> 4];
      path += hex[c & 15];
    }
  }
  return path;
}

// --- Kubernetes: batch/v1 Jobs in the site's namespace ---

std::string k8s_jobs(const BrokerSiteConfig& s) {
  return with_escaped("/apis/batch/v1/namespaces/", s.manifest.k8s_namespace) + "/jobs";
}

SiteAnswer k8s_send(const BrokerSiteConfig& s, const json& body, const std::string& name,
                    const std::string& token, time_t timeout_s) {
  SiteAnswer a = call_site(s, "POST", k8s_jobs(s), token, to_text(body), "", timeout_s);
  if (a.status == 201 || a.status == 200) return job_answer(201, name, JobState::kPending);
  if (a.status == 409) return job_answer(200, name, JobState::kPending);  // a resend: it has it
  return as_error(std::move(a));
}

SiteAnswer k8s_read(const BrokerSiteConfig& s, const std::string& name, const std::string& token) {
  SiteAnswer a = call_site(s, "GET", with_escaped(k8s_jobs(s) + "/", name), token);
  if (a.status != 200) return as_error(std::move(a));
  json job = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  std::string reason;
  JobState state = kubernetes_state(job, &reason);
  return job_answer(200, name, state, reason,
                    job.is_object() && job.contains("status") ? job["status"] : json::object());
}

SiteAnswer k8s_cancel(const BrokerSiteConfig& s, const std::string& name,
                      const std::string& token) {
  // Background: the Job goes at once, its pods after it (the default, orphan, would leave
  // them running).
  SiteAnswer a = call_site(
      s, "DELETE", with_escaped(k8s_jobs(s) + "/", name) + "?propagationPolicy=Background", token);
  if (a.status == 200 || a.status == 202 || a.status == 404)
    return job_answer(202, name, JobState::kCancelled);
  return as_error(std::move(a));
}

// --- Marathon: apps ---

SiteAnswer marathon_send(const BrokerSiteConfig& s, const json& body, const std::string& name,
                         const std::string& token, time_t timeout_s) {
  SiteAnswer a = call_site(s, "POST", "/v2/apps", token, to_text(body), "", timeout_s);
  if (a.status == 201 || a.status == 200) return job_answer(201, name, JobState::kPending);
  if (a.status == 409) return job_answer(200, name, JobState::kPending);  // a resend: it has it
  return as_error(std::move(a));
}

SiteAnswer marathon_read(const BrokerSiteConfig& s, const std::string& name,
                         const std::string& token) {
  SiteAnswer a = call_site(
      s, "GET", with_escaped("/v2/apps/", name) + "?embed=app.counts&embed=app.lastTaskFailure",
      token);
  if (a.status != 200) return as_error(std::move(a));
  json app = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  std::string reason;
  JobState state = marathon_state(app, &reason);
  json status = json::object();
  if (app.is_object() && app.contains("app") && app["app"].is_object())
    for (const char* key : {"tasksRunning", "tasksStaged", "lastTaskFailure"})
      if (app["app"].contains(key)) status[key] = app["app"][key];
  return job_answer(200, name, state, reason, std::move(status));
}

SiteAnswer marathon_cancel(const BrokerSiteConfig& s, const std::string& name,
                           const std::string& token) {
  SiteAnswer a = call_site(s, "DELETE", with_escaped("/v2/apps/", name), token);
  if (a.status == 200 || a.status == 202 || a.status == 404)
    return job_answer(202, name, JobState::kCancelled);
  return as_error(std::move(a));
}

// --- Chronos 3 (DEEP's 3.0.2 too): /v1/scheduler ---

/// The Chronos job named `name` as jobs/search lists it: the answer (an error where it did not
/// answer 200) and the entry, null where it has none of that name.
std::pair<SiteAnswer, json> chronos_find(const BrokerSiteConfig& s, const std::string& name,
                                         const std::string& token) {
  SiteAnswer a = call_site(s, "GET", with_escaped("/v1/scheduler/jobs/search?name=", name), token);
  json found = nullptr;
  if (a.status != 200) return {as_error(std::move(a)), found};
  json list = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  if (list.is_array())
    for (const json& j : list)
      if (text_of(j, "name") == name) found = j;  // search matches substrings
  return {std::move(a), found};
}

SiteAnswer chronos_send(const BrokerSiteConfig& s, const json& body, const std::string& name,
                        const std::string& token, time_t timeout_s) {
  // Chronos replaces a job posted again (and would run it again): asked first.
  auto [found, job] = chronos_find(s, name, token);
  if (found.status != 200) return found;
  if (!job.is_null()) return job_answer(200, name, JobState::kPending);
  SiteAnswer a = call_site(s, "POST", "/v1/scheduler/iso8601", token, to_text(body), "", timeout_s);
  if (a.status == 204 || a.status == 200 || a.status == 201)
    return job_answer(201, name, JobState::kPending);
  return as_error(std::move(a));
}

/// The current state ("running", "queued", "idle") graph/csv gives job `name`; "" unknown.
std::string chronos_current(const BrokerSiteConfig& s, const std::string& name,
                            const std::string& token) {
  SiteAnswer a = call_site(s, "GET", "/v1/scheduler/graph/csv", token);
  if (a.status != 200) return "";
  // Lines "node,NAME,LAST,CURRENT" (and "link,..." for dependencies).
  size_t pos = 0;
  while (pos < a.body.size()) {
    size_t end = a.body.find('\n', pos);
    if (end == std::string::npos) end = a.body.size();
    std::string line = a.body.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string prefix = "node," + name + ",";
    if (line.rfind(prefix, 0) != 0) continue;
    return line.substr(line.rfind(',') + 1);
  }
  return "";
}

SiteAnswer chronos_read(const BrokerSiteConfig& s, const std::string& name,
                        const std::string& token) {
  auto [found, job] = chronos_find(s, name, token);
  if (found.status != 200) return found;
  if (job.is_null()) {
    found.status = 404;
    found.body = "no such job";
    return as_error(std::move(found));
  }
  std::string reason;
  JobState state = chronos_state(job, chronos_current(s, name, token), &reason);
  json status = json::object();
  for (const char* key : {"successCount", "errorCount", "lastSuccess", "lastError"})
    if (job.contains(key)) status[key] = job[key];
  return job_answer(200, name, state, reason, std::move(status));
}

SiteAnswer chronos_cancel(const BrokerSiteConfig& s, const std::string& name,
                          const std::string& token) {
  // Its running task killed first, then the job removed (so that it never runs again).
  SiteAnswer kill = call_site(s, "DELETE", with_escaped("/v1/scheduler/task/kill/", name), token);
  if (kill.status == 0 || kill.status >= 500) return as_error(std::move(kill));
  SiteAnswer a = call_site(s, "DELETE", with_escaped("/v1/scheduler/job/", name), token);
  if (a.status == 204 || a.status == 200 || a.status == 404)
    return job_answer(202, name, JobState::kCancelled);
  return as_error(std::move(a));
}

// --- OpenStack: Nova's servers, on the site's compute endpoint ---

constexpr std::string_view kNovaToken = "X-Auth-Token";

SiteAnswer nova_send(const BrokerSiteConfig& s, const json& body, const std::string& name,
                     const std::string& token, time_t timeout_s) {
  // Nova makes a second server of a name it has: asked first (its name filter is a regex).
  SiteAnswer listed = call_site(s, "GET", with_escaped("/servers?name=", "^" + name + "$"), token,
                                "", "", 5, kNovaToken);
  if (listed.status != 200) return as_error(std::move(listed));
  json servers = parse_json_or_discarded(listed.body, kMaxAnswerBytes);
  if (servers.is_object() && servers.contains("servers") && servers["servers"].is_array())
    for (const json& sv : servers["servers"])
      if (text_of(sv, "name") == name && !text_of(sv, "id").empty())
        return job_answer(200, text_of(sv, "id"), JobState::kPending);
  SiteAnswer a = call_site(s, "POST", "/servers", token, to_text(body), "", timeout_s, kNovaToken);
  json made = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  if ((a.status == 202 || a.status == 200) && made.is_object() && made.contains("server") &&
      !text_of(made["server"], "id").empty())
    return job_answer(201, text_of(made["server"], "id"), JobState::kPending);
  if (a.status == 202 || a.status == 200) {
    a.status = 502;
    a.body = "the server's id is missing from Nova's answer";
  }
  return as_error(std::move(a));
}

SiteAnswer nova_read(const BrokerSiteConfig& s, const std::string& id, const std::string& token) {
  SiteAnswer a = call_site(s, "GET", with_escaped("/servers/", id), token, "", "", 5, kNovaToken);
  if (a.status != 200) return as_error(std::move(a));
  json server = parse_json_or_discarded(a.body, kMaxAnswerBytes);
  std::string reason;
  JobState state = openstack_state(server, &reason);
  json status = json::object();
  if (server.is_object() && server.contains("server") && server["server"].is_object())
    for (const char* key : {"status", "fault"})
      if (server["server"].contains(key)) status[key] = server["server"][key];
  return job_answer(200, id, state, reason, std::move(status));
}

SiteAnswer nova_cancel(const BrokerSiteConfig& s, const std::string& id, const std::string& token) {
  SiteAnswer a =
      call_site(s, "DELETE", with_escaped("/servers/", id), token, "", "", 5, kNovaToken);
  if (a.status == 204 || a.status == 202 || a.status == 200 || a.status == 404)
    return job_answer(202, id, JobState::kCancelled);
  return as_error(std::move(a));
}

SiteAnswer unsupported(const BrokerSiteConfig& s) {
  SiteAnswer a;
  a.error = "site " + s.name + " is of kind " + s.kind + ", which takes no jobs";
  return a;
}

}  // namespace

bool submits_to(std::string_view kind) {
  return kind == "berthd" || kind == "kubernetes" || kind == "marathon" || kind == "chronos" ||
         kind == "openstack";
}

bool removed_when_over(std::string_view kind, JobState state) {
  return (kind == "marathon" && job_state_final(state)) ||
         (kind == "openstack" && state == JobState::kNodeFail);
}

std::string object_name(std::string_view key) {
  // "broker:INSTANCE:ID:N" -> "berth-INSTANCE-ID-N"
  std::string rest(key.rfind("broker:", 0) == 0 ? key.substr(7) : key);
  std::string out = "berth-";
  for (char c : rest) {
    char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    out += (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') ? l : '-';
  }
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

json named_manifest(std::string_view kind, const json& body, std::string_view key) {
  json out = body;
  if (!out.is_object()) return out;
  const std::string name = object_name(key);
  if (kind == "kubernetes") {
    out["metadata"]["name"] = name;
  } else if (kind == "marathon") {
    out["id"] = "/" + name;
  } else if (kind == "chronos") {
    out["name"] = name;
  } else if (kind == "openstack" && out.contains("server") && out["server"].is_object()) {
    out["server"]["name"] = name;
  }
  return out;
}

SiteAnswer send_attempt(const BrokerSiteConfig& s, const json& body, const std::string& key,
                        const std::string& token, time_t timeout_s) {
  if (s.kind == "berthd")
    return call_site(s, "POST", "/v1/jobs", token, to_text(body), key, timeout_s);
  const std::string name = object_name(key);
  const json manifest = named_manifest(s.kind, body, key);
  if (s.kind == "kubernetes") return k8s_send(s, manifest, name, token, timeout_s);
  if (s.kind == "marathon") return marathon_send(s, manifest, name, token, timeout_s);
  if (s.kind == "chronos") return chronos_send(s, manifest, name, token, timeout_s);
  if (s.kind == "openstack") return nova_send(s, manifest, name, token, timeout_s);
  return unsupported(s);
}

SiteAnswer read_at_site(const BrokerSiteConfig& s, const std::string& id,
                        const std::string& token) {
  if (s.kind == "berthd") return call_site(s, "GET", "/v1/jobs/" + id, token);
  if (s.kind == "kubernetes") return k8s_read(s, id, token);
  if (s.kind == "marathon") return marathon_read(s, id, token);
  if (s.kind == "chronos") return chronos_read(s, id, token);
  if (s.kind == "openstack") return nova_read(s, id, token);
  return unsupported(s);
}

SiteAnswer cancel_at_site(const BrokerSiteConfig& s, const std::string& id,
                          const std::string& token) {
  if (s.kind == "berthd") return call_site(s, "DELETE", "/v1/jobs/" + id, token);
  if (s.kind == "kubernetes") return k8s_cancel(s, id, token);
  if (s.kind == "marathon") return marathon_cancel(s, id, token);
  if (s.kind == "chronos") return chronos_cancel(s, id, token);
  if (s.kind == "openstack") return nova_cancel(s, id, token);
  return unsupported(s);
}

std::string site_job_ref(const BrokerJobRecord& job) {
  if (job.site_job_id != 0) return std::to_string(job.site_job_id);
  if (job.site.empty()) return "";
  json attempts = parse_json_or_discarded(job.attempts);
  if (!attempts.is_array()) return "";
  for (auto a = attempts.rbegin(); a != attempts.rend(); ++a)
    if (text_of(*a, "site") == job.site && text_of(*a, "outcome") == "submitted")
      return text_of(*a, "site_job_id");
  return "";
}

JobState kubernetes_state(const json& job, std::string* reason) {
  reason->clear();
  const json status = job.is_object() && job.contains("status") && job["status"].is_object()
                          ? job["status"]
                          : json::object();
  if (status.contains("conditions") && status["conditions"].is_array()) {
    for (const json& c : status["conditions"]) {
      if (text_of(c, "status") != "True") continue;
      std::string type = text_of(c, "type");
      if (type == "Complete") return JobState::kCompleted;
      if (type == "Failed") {
        *reason = text_of(c, "reason");
        if (!text_of(c, "message").empty()) *reason += ": " + text_of(c, "message");
        return text_of(c, "reason") == "DeadlineExceeded" ? JobState::kTimeout : JobState::kFailed;
      }
      if (type == "Suspended") return JobState::kSuspended;
    }
  }
  if (int_of(status, "active") > 0) {
    // `ready` (Kubernetes 1.24 on) tells a running pod from one still scheduled or pulling;
    // without it, an active pod counts as running.
    if (!status.contains("ready") || int_of(status, "ready") > 0) return JobState::kRunning;
    *reason = "its pods are not ready yet";
  }
  return JobState::kPending;
}

JobState marathon_state(const json& doc, std::string* reason) {
  reason->clear();
  const json app = doc.is_object() && doc.contains("app") && doc["app"].is_object()
                       ? doc["app"]
                       : json::object();
  if (app.contains("lastTaskFailure") && app["lastTaskFailure"].is_object()) {
    // A run-once app: its task's end is the job's.
    const json& f = app["lastTaskFailure"];
    std::string state = text_of(f, "state");
    *reason = state + (text_of(f, "message").empty() ? "" : ": " + text_of(f, "message"));
    if (state == "TASK_FINISHED") {
      reason->clear();
      return JobState::kCompleted;
    }
    if (state == "TASK_KILLED" || state == "TASK_KILLING") return JobState::kCancelled;
    if (state == "TASK_LOST" || state == "TASK_GONE" || state == "TASK_GONE_BY_OPERATOR" ||
        state == "TASK_DROPPED" || state == "TASK_UNREACHABLE")
      return JobState::kNodeFail;  // the agent's end, not the job's
    return JobState::kFailed;      // TASK_FAILED, TASK_ERROR
  }
  if (int_of(app, "tasksRunning") > 0) return JobState::kRunning;
  if (int_of(app, "tasksStaged") > 0) *reason = "its task is staged";
  return JobState::kPending;
}

JobState chronos_state(const json& job, std::string_view current, std::string* reason) {
  reason->clear();
  if (int_of(job, "errorCount") > 0) {  // retries 0: one error ends it
    *reason = "failed at " + text_of(job, "lastError");
    return JobState::kFailed;
  }
  if (int_of(job, "successCount") > 0) return JobState::kCompleted;
  if (current == "running") return JobState::kRunning;
  return JobState::kPending;
}

JobState openstack_state(const json& doc, std::string* reason) {
  reason->clear();
  const json server = doc.is_object() && doc.contains("server") && doc["server"].is_object()
                          ? doc["server"]
                          : json::object();
  std::string status = text_of(server, "status");
  if (status == "BUILD") return JobState::kPending;
  if (status == "ACTIVE" || status == "REBOOT" || status == "HARD_REBOOT" ||
      status == "MIGRATING" || status == "RESIZE" || status == "VERIFY_RESIZE" ||
      status == "REVERT_RESIZE" || status == "PASSWORD" || status == "REBUILD" ||
      status == "RESCUE")
    return JobState::kRunning;
  if (status == "SHUTOFF") return JobState::kCompleted;  // the job powered its server off
  if (status == "ERROR") {
    // Nova's fault code says whose end it is: 5xx is the cloud's (its scheduler found no
    // valid host, a hypervisor failed the build), NODE_FAIL, so that a broker moves the job
    // on; otherwise the job's own.
    const json fault =
        server.contains("fault") && server["fault"].is_object() ? server["fault"] : json::object();
    *reason = text_of(fault, "message");
    return int_of(fault, "code") >= 500 ? JobState::kNodeFail : JobState::kFailed;
  }
  if (status == "DELETED" || status == "SOFT_DELETED") return JobState::kCancelled;
  if (status == "PAUSED" || status == "SUSPENDED" || status == "SHELVED" ||
      status == "SHELVED_OFFLOADED")
    return JobState::kSuspended;
  *reason = status.empty() ? "Nova gave no status" : "Nova's status " + status;
  return JobState::kUnknown;
}

}  // namespace berth::gateway

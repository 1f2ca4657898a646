// How a broker's job is sent to, read at and cancelled at each kind of site (docs/broker.md,
// "What each kind of site is sent"): a berthd's /v1/jobs, a Kubernetes API server's batch/v1
// Jobs, a Marathon's apps, a Chronos' jobs, an OpenStack Nova's servers. Every answer is given
// back as a berthd site would have given it (SiteAnswer with berthd's job document {"id",
// "state", "reason"} or error body {"error": {"status", "message"}}), so that BrokerJobs moves
// a job on, reads and cancels it the same way whatever the site.
//
// Never two copies: a Kubernetes, Marathon or Chronos object, and an OpenStack server, is named
// after the attempt's key (object_name()). Kubernetes and Marathon answer a resend with 409,
// which counts as "the site has it"; Chronos (which replaces a job posted twice) and Nova
// (which makes a second server) are asked first whether they have the name.
//
// Credentials: the caller's token, as BrokerJobs has it, so that the site sees the real user:
// as a bearer token (Authorization: Bearer) to berthd, Kubernetes (its OIDC authenticator),
// Marathon and Chronos (an OIDC-checking front, as DEEP's were), and as X-Auth-Token to Nova
// (a Keystone that takes the caller's token).
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/broker.h"
#include "gateway/config.h"
#include "gateway/job_state.h"
#include "gateway/jobs_db.h"

namespace berth::gateway {

/// Whether the broker sends jobs to a site of kind `kind` (all but "static").
bool submits_to(std::string_view kind);

/// Whether the broker removes a job read in `state` from its site of kind `kind` (with
/// cancel_at_site()) before it settles it there or moves it on: a Marathon app whose run
/// ended, which Marathon would launch again, and a Nova server the cloud failed (NODE_FAIL),
/// which holds the caller's quota.
bool removed_when_over(std::string_view kind, JobState state);

/// The name of an attempt's object at a site other than berthd, made of its key
/// "broker:INSTANCE:ID:N": "berth-INSTANCE-ID-N", a DNS-1123 label (lower case, at most 63).
std::string object_name(std::string_view key);

/// Manifest `body` of kind `kind` as it is sent for the attempt of key `key`: its object named
/// object_name(key) (metadata.name, the app's id, the job's or the server's name); a berthd
/// body as it is.
nlohmann::json named_manifest(std::string_view kind, const nlohmann::json& body,
                              std::string_view key);

/// Sends the attempt of key `key`, whose body (berthd's job body, or the manifest of the
/// site's kind) is `body`, to site `s` with the caller's `token`: 201 (made) or 200 (the site
/// had it already) with {"id", "state", "reason"}, or the site's error as berthd's.
SiteAnswer send_attempt(const BrokerSiteConfig& s, const nlohmann::json& body,
                        const std::string& key, const std::string& token, time_t timeout_s);
/// Reads job `id` (berthd's job id, the object's name, the server's id) at site `s`: 200 with
/// {"id", "state", "reason", "site_status"} where the site is not berthd.
SiteAnswer read_at_site(const BrokerSiteConfig& s, const std::string& id, const std::string& token);
/// Cancels job `id` at site `s`: 202 with {"id", "state": "CANCELLED"} where the site is not
/// berthd (also where the site no longer has it).
SiteAnswer cancel_at_site(const BrokerSiteConfig& s, const std::string& id,
                          const std::string& token);

/// The id at its site of broker job `job`: berthd's job id, else the site_job_id of its
/// last submitted attempt at job.site; "" where no site has it.
std::string site_job_ref(const BrokerJobRecord& job);

/// The state of a Kubernetes Job document (its status: conditions Complete, Failed with
/// reason DeadlineExceeded or not; ready and active pods), its reason in `*reason`.
JobState kubernetes_state(const nlohmann::json& job, std::string* reason);
/// The state of a Marathon app ({"app": {...}}): its lastTaskFailure's Mesos task state, else
/// running tasks; a finished run-once task counts as COMPLETED.
JobState marathon_state(const nlohmann::json& app, std::string* reason);
/// The state of a Chronos job (an entry of jobs/search) and its graph/csv `current` state
/// ("running", "queued", "idle" or ""): errors, successes, running.
JobState chronos_state(const nlohmann::json& job, std::string_view current, std::string* reason);
/// The state of a Nova server ({"server": {...}}): BUILD, ACTIVE, SHUTOFF, ERROR, ...
JobState openstack_state(const nlohmann::json& server, std::string* reason);

}  // namespace berth::gateway

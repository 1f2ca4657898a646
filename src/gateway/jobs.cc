// Job requests, their Slurm form, and the job service (gateway/jobs.h).
#include "gateway/jobs.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>

#include "core/json.h"
#include "core/strings.h"
#include "gateway/output.h"
#include "gateway/reclaim.h"
#include "gateway/systems.h"

namespace berth::gateway {
namespace {

Error bad_field(const std::string& field, const std::string& what) {
  return make_error("parse", "job request", "\"" + field + "\" " + what, ErrorCode::kInvalidInput);
}

Result<int64_t> count(const nlohmann::json& j, const std::string& field, int64_t max) {
  if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > max)
    return bad_field(field, "is not a whole number from 0 to " + std::to_string(max));
  return j.get<int64_t>();
}

Result<std::string> text(const nlohmann::json& j, const std::string& field) {
  if (!j.is_string()) return bad_field(field, "is not a string");
  std::string s = j.get<std::string>();
  if (s.find('\0') != std::string::npos) return bad_field(field, "holds a NUL byte");
  return s;
}

Result<std::vector<std::string>> texts(const nlohmann::json& j, const std::string& field) {
  if (!j.is_array()) return bad_field(field, "is not a list of strings");
  std::vector<std::string> out;
  for (const auto& v : j) out.push_back(BERTH_TRY(text(v, field)));
  return out;
}

/// The name of group `gid`, or "" when it has none. Reentrant: the server's threads may ask at
/// once.
std::string group_name(gid_t gid) {
  struct group gr {};
  struct group* found = nullptr;
  std::vector<char> buf(16384);
  if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found) return gr.gr_name;
  return "";
}

/// The running and queued jobs among jobs counted by state.
std::pair<int64_t, int64_t> count_unfinished(const std::map<JobState, int64_t>& states) {
  int64_t running = 0, queued = 0;
  for (const auto& [state, n] : states) {
    if (job_state_final(state)) continue;
    (job_state_queued(state) ? queued : running) += n;
  }
  return std::make_pair(running, queued);
}

}  // namespace

Result<JobRequest> parse_job_request(const nlohmann::json& body) {
  if (!body.is_object())
    return make_error("parse", "job request", "the body is not a JSON object",
                      ErrorCode::kInvalidInput);
  JobRequest r;
  for (const auto& [key, v] : body.items()) {
    if (key == "name")
      r.name = BERTH_TRY(text(v, key));
    else if (key == "image")
      r.image = BERTH_TRY(text(v, key));
    else if (key == "command")
      r.command = BERTH_TRY(texts(v, key));
    else if (key == "mounts")
      r.mounts = BERTH_TRY(texts(v, key));
    else if (key == "workdir")
      r.workdir = BERTH_TRY(text(v, key));
    else if (key == "class") {
      r.job_class = BERTH_TRY(text(v, key));
      if (r.job_class != "batch" && r.job_class != "cloud")
        return bad_field(key, "is not \"batch\" or \"cloud\"");
    } else if (key == "env") {
      if (!v.is_object()) return bad_field(key, "is not an object of strings");
      for (const auto& [name, value] : v.items()) {
        if (name.empty() || name.find_first_of("=\0", 0, 2) != std::string::npos)
          return bad_field("env", "names a variable \"" + name + "\"");
        r.env[name] = BERTH_TRY(text(value, "env." + name));
      }
    } else if (key == "resources") {
      if (!v.is_object()) return bad_field(key, "is not an object");
      for (const auto& [rk, rv] : v.items()) {
        std::string f = "resources." + rk;
        if (rk == "nodes")
          r.nodes = static_cast<int>(BERTH_TRY(count(rv, f, 10000)));
        else if (rk == "tasks")
          r.tasks = static_cast<int>(BERTH_TRY(count(rv, f, 1000000)));
        else if (rk == "cpus_per_task")
          r.cpus_per_task = static_cast<int>(BERTH_TRY(count(rv, f, 10000)));
        else if (rk == "gpus")
          r.gpus = static_cast<int>(BERTH_TRY(count(rv, f, 10000)));
        else if (rk == "gpu_share") {
          if (!rv.is_number() || !(rv.get<double>() > 0 && rv.get<double>() < 1))
            return bad_field(f, "is not a number above 0 and below 1");
          r.gpu_share = rv.get<double>();
        } else if (rk == "memory_mb")
          r.memory_mb = BERTH_TRY(count(rv, f, int64_t{1} << 40));
        else if (rk == "walltime_s")
          r.walltime_s = BERTH_TRY(count(rv, f, int64_t{366} * 86400));
        else
          return bad_field(f, "is not a field of a job request");
      }
    } else {
      return bad_field(key, "is not a field of a job request");
    }
  }
  if (r.image.empty()) return bad_field("image", "is required");
  if (r.nodes < 1 || r.tasks < 1 || r.cpus_per_task < 1)
    return bad_field("resources", "asks for no nodes, tasks or CPUs");
  if (r.gpus > 0 && r.gpu_share > 0)
    return bad_field("resources", "asks for both gpus and gpu_share (a share is of one GPU)");
  return r;
}

Result<JobRequest> read_stored_request(const std::string& text) {
  return parse_job_request(parse_json_or_discarded(text));
}

Status check_share(const JobRequest& r, const ShareConfig& share) {
  if (r.gpu_share > 0 && !share.enabled)
    return bad_field("resources.gpu_share",
                     "asks for a share of a GPU, which this site does not offer");
  return {};
}

std::string share_gres(double x, const ShareConfig& share) {
  const double units = x * static_cast<double>(share.units_per_gpu);
  // Shards are whole slots, rounded up so that the job has at least its share; MPS counts are
  // a percentage of the GPU's threads, rounded to the nearest. The epsilon keeps 0.3 * 10
  // (3.0000000000000004 in binary) at 3 shards.
  auto n =
      static_cast<int64_t>(share.gres == "mps" ? std::llround(units) : std::ceil(units - 1e-9));
  n = std::clamp<int64_t>(n, 1, std::max<int64_t>(1, share.units_per_gpu));
  return share.gres + ":" + std::to_string(n);
}

SlurmJobSpec slurm_spec(const JobRequest& r, int64_t id, const std::string& comment,
                        const SlurmConfig& slurm, const std::string& output_stem) {
  SlurmJobSpec s;
  s.name = r.name;
  s.comment = comment;
  s.partition = slurm.partition;
  s.workdir = slurm.workdir;
  s.nodes = r.nodes;
  s.tasks = r.tasks;
  s.cpus_per_task = r.cpus_per_task;
  s.memory_mb = r.memory_mb;
  s.gpus = r.gpus;
  if (r.gpu_share > 0 && slurm.share.enabled) s.gres = share_gres(r.gpu_share, slurm.share);
  s.time_limit_min = (r.walltime_s + 59) / 60;
  // The site's variables, then the request's. The container goes on the script's srun line,
  // not into the job's environment as BERTH_CONTAINER_*: the plugin reads those in the batch
  // step too and would run the script itself in the image, where there is no srun
  // (docs/slurm.md, "sbatch").
  s.environment = slurm.environment;
  for (const auto& [k, v] : r.env) s.environment[k] = v;
  s.environment["BERTHD_JOB_ID"] = std::to_string(id);
  if (!s.gres.empty()) {
    // The site's MPS daemons' directories: `berth run` binds both (when the node has them) and
    // sets the variables inside, so the container's CUDA reaches the node's MPS server. Slurm
    // sets CUDA_VISIBLE_DEVICES (shard, mps) and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (mps).
    s.environment["CUDA_MPS_PIPE_DIRECTORY"] = slurm.share.pipe_dir;
    s.environment["CUDA_MPS_LOG_DIRECTORY"] = slurm.share.log_dir;
  }
  std::string cmd = "exec srun --container-image=" + shell_quote(r.image);
  if (!r.workdir.empty()) cmd += " --container-workdir=" + shell_quote(r.workdir);
  if (!r.mounts.empty()) {
    std::string m;
    for (const std::string& x : r.mounts) m += (m.empty() ? "" : ",") + x;
    cmd += " --container-mounts=" + shell_quote(m);
  }
  if (!r.command.empty()) {
    cmd += " --";
    for (const std::string& a : r.command) cmd += " " + shell_quote(a);
  }
  std::string watch;
  if (!slurm.output_dir.empty() && !output_stem.empty()) {
    // The container's output where berthd can read it (gateway/output.h); srun's own errors
    // (an image that does not pull) land in the .err file too. Appended to: the idle-GPU
    // sampler adds berthd's notice to .err while the job writes.
    std::string stem = slurm.output_dir + "/" + output_stem;
    cmd += " >>" + shell_quote(stem + ".out") + " 2>>" + shell_quote(stem + ".err");
    if (slurm.reclaim && r.gpus > 0)
      watch = reclaim_watch_script(slurm.reclaim_berth, stem + ".gpu", stem + ".notice",
                                   stem + ".err", slurm.reclaim_policy, r.nodes);
    // The batch script's own output goes nowhere: a file Slurm names is visible to every user
    // in the job's record while it is pending, and a file of the same name planted by another
    // user before the job starts would receive the job's writes. The names above live in the
    // script, which only the owner and Slurm's administrators can read.
    s.standard_output = s.standard_error = "/dev/null";
  }
  s.script = "#!/bin/sh\n" + watch + cmd + "\n";
  return s;
}

nlohmann::json job_json(const JobRecord& j) {
  auto request = read_stored_request(j.request);
  nlohmann::json out = {{"id", std::to_string(j.id)},
                        {"state", j.state},
                        {"reason", j.reason},
                        {"owner", j.owner},
                        {"slurm_job_id", j.slurm_job_id},
                        {"nodes", j.nodes},
                        {"created_at", j.created_at},
                        {"updated_at", j.updated_at},
                        {"exit_code", nullptr},
                        {"start_time", nullptr},
                        {"end_time", nullptr},
                        {"gpus_allocated", j.gpus},
                        {"gres_detail", j.gres_detail}};
  if (j.exit_code) out["exit_code"] = *j.exit_code;
  if (j.start_time > 0) out["start_time"] = j.start_time;
  if (j.end_time > 0) out["end_time"] = j.end_time;
  out["class"] = "batch";
  if (request.ok()) {
    out["name"] = request->name;
    out["image"] = request->image;
    out["class"] = request->job_class;
    // A GPU share: the fraction asked for, and the GRES it became in Slurm.
    if (request->gpu_share > 0) {
      out["gpu_share"] = request->gpu_share;
      out["gres"] = j.gres;
    }
  }
  out["walltime_s"] = j.time_limit_s;
  // Slurm's own reason for a job it ended at its time limit is "TimeLimit"; the answer says
  // which limit that was.
  if (j.state == JobState::kTimeout && j.time_limit_s > 0) {
    std::string limit = std::to_string(j.time_limit_s) + " s";
    if (j.time_limit_from == "request")
      out["reason"] = "cut at the walltime it asked for, " + limit;
    else if (j.time_limit_from == "cloud_max_walltime_s")
      out["reason"] = "cut at the cloud walltime cap, " + limit + " (cloud_max_walltime_s)";
    else if (!j.time_limit_from.empty())
      out["reason"] = "cut at the walltime cap, " + limit + " (" + j.time_limit_from + ")";
  }
  return out;
}

Result<JobService::Submitted> JobService::submit(const Account& who, const std::string& key,
                                                 const std::string& body_text,
                                                 const JobRequest& asked) {
  auto replay = [&](const JobRecord& earlier) -> Result<Submitted> {
    if (earlier.request != body_text)
      return make_error("POST", "/v1/jobs",
                        "Idempotency-Key \"" + key + "\" was used for another request",
                        ErrorCode::kExists);
    return Submitted{earlier, true, std::nullopt};
  };
  // A retry of a recorded job is answered before any limit is looked at: the job is in the
  // counts already, and the limits may have changed since it was accepted.
  if (!key.empty()) {
    std::optional<JobRecord> earlier = BERTH_TRY(db_->find(who.user, key));
    if (earlier) return replay(*earlier);
  }
  const Limits limits = resolve_limits(limits_, who.user, who.groups);
  JobRequest request = asked;
  WalltimeDecision walltime;
  if (auto no = check_job_limits(limits, request.gpus, request.walltime_s,
                                 request.job_class == "cloud", &walltime, request.gpu_share))
    return Submitted{{}, false, std::move(no)};
  request.walltime_s = walltime.walltime_s;
  // A share of a GPU is a GPU job for the quota, as its hours count (accounting.h).
  const bool asks_gpus = request.gpus > 0 || request.gpu_share > 0;
  if (asks_gpus && !quotas_.empty()) {
    // What the group used this period, read as GET /v1/accounting reads it (a source that
    // cannot be read refuses the job with an error rather than letting it past its quota).
    int64_t now = std::time(nullptr);
    Usage used = BERTH_TRY(accounting("", period_start(quotas_, now), now + 1));
    if (auto no = check_gpu_quota(quotas_, group_name(who.gid), asks_gpus, used.records, now))
      return Submitted{{}, false, std::nullopt, std::move(no)};
  }
  const bool counted = limits[static_cast<size_t>(LimitKey::kMaxRunningJobs)] ||
                       limits[static_cast<size_t>(LimitKey::kMaxQueuedJobs)];
  if (counted) {
    // The database may lag behind Slurm by a reconciliation interval: before refusing, read
    // the account's unfinished jobs from Slurm (outside the lock: those are network calls).
    auto [running, queued] = BERTH_TRY(unfinished(who.user, false));
    if (check_count_limits(limits, who.user, running, queued))
      (void)BERTH_TRY(unfinished(who.user, true));
  }

  JobRecord rec;
  rec.owner = who.user;
  rec.issuer = who.issuer;
  rec.subject = who.subject;
  rec.idempotency_key = key;
  rec.request = body_text;
  rec.time_limit_s = walltime.walltime_s;
  rec.time_limit_from = walltime.from;
  if (request.gpu_share > 0 && config_.share.enabled)
    rec.gres = share_gres(request.gpu_share, config_.share);
  bool existing = false;
  int64_t now = std::time(nullptr);
  JobRecord job;
  {
    // Counting and recording under one lock: two requests at once cannot both take the last
    // place under a count limit.
    std::lock_guard<std::mutex> lock(admit_mu_);
    if (counted) {
      if (!key.empty()) {
        std::optional<JobRecord> earlier = BERTH_TRY(db_->find(who.user, key));
        if (earlier) return replay(*earlier);
      }
      auto [running, queued] = BERTH_TRY(unfinished(who.user, false));
      if (auto no = check_count_limits(limits, who.user, running, queued))
        return Submitted{{}, false, std::move(no)};
    }
    job = BERTH_TRY(db_->accept(rec, now, &existing));
  }
  if (existing) return replay(job);
  // Written (and synced) before Slurm sees it: a crash from here on leaves an ACCEPTED row,
  // which reconciliation settles through the Slurm job's comment.
  SlurmJobSpec spec = slurm_spec(request, job.id, comment(job.id), config_, output_stem(job.id));
  spec.account = slurm_account(who.user);
  auto slurm_id = slurm_.submit(who.user, spec);
  if (!slurm_id.ok() && slurm_id.error().code == ErrorCode::kNetwork) {
    // No answer: Slurm may have the job. It stays ACCEPTED; reconcile() finds it by its
    // comment, or submits it, and never twice.
    job.reason = "slurmrestd did not answer; berthd will retry";
    return Submitted{job, false, std::nullopt};
  }
  if (!slurm_id.ok()) {
    job.state = JobState::kSubmitFailed;
    job.reason = slurm_id.error().detail;
    BERTH_CHECK(db_->update(job.id, job.state, job.reason, std::nullopt, "", now));
    return Submitted{job, false, std::nullopt};
  }
  job.slurm_job_id = *slurm_id;
  job.state = JobState::kPending;
  BERTH_CHECK(db_->submitted(job.id, job.slurm_job_id, job.state, now));
  return Submitted{job, false, std::nullopt};
}

Result<std::pair<int64_t, int64_t>> JobService::unfinished(const std::string& user,
                                                           bool refresh_first) {
  std::map<JobState, int64_t> states = BERTH_TRY(db_->count_states(user));
  if (refresh_first) {
    // One listing of the account's Slurm jobs rather than a call per job: a caller at its
    // limit who keeps asking costs slurmrestd one call a request. A job the listing lacks
    // (Slurm forgets finished jobs after MinJobAge) is asked for alone.
    auto listed = slurm_.jobs(user);
    if (!listed.ok()) return count_unfinished(states);  // Slurm unreachable: the database's word
    std::map<int64_t, const SlurmJobInfo*> by_id;
    for (const SlurmJobEntry& e : *listed) by_id[e.id] = &e.info;
    for (const auto& [state, n] : states) {
      // ACCEPTED: not in Slurm yet
      if (job_state_final(state) || state == JobState::kAccepted) continue;
      auto jobs = db_->list(user, state, 0, static_cast<int>(std::min<int64_t>(n, 100000)));
      // deliberate: a job whose state cannot be read or recorded keeps its recorded state
      for (JobRecord& job : jobs.ok() ? *jobs : std::vector<JobRecord>{}) {
        auto found = by_id.find(job.slurm_job_id);
        (void)(found != by_id.end() ? record(job, *found->second) : refresh(user, job));
      }
    }
    states = BERTH_TRY(db_->count_states(user));
  }
  return count_unfinished(states);
}

Status JobService::refresh(const std::string& user, JobRecord& job) {
  if (job.slurm_job_id == 0 || job_state_final(job.state)) return {};
  return record(job, BERTH_TRY(slurm_.job(user, job.slurm_job_id)));
}

Status JobService::record(JobRecord& job, SlurmJobInfo info) {
  // Slurm forgets a job's GPUs (gres_detail) when it ends: what was seen while it ran stays.
  if (info.gpus == 0 && info.gres_detail.empty()) {
    info.gpus = job.gpus;
    info.gres_detail = job.gres_detail;
  }
  if (info.state == job.state && info.reason == job.reason && info.nodes == job.nodes &&
      info.exit_code == job.exit_code && info.start_time == job.start_time &&
      info.end_time == job.end_time && info.gpus == job.gpus && info.gres_detail == job.gres_detail)
    return {};
  job.state = info.state;
  job.reason = info.reason;
  job.exit_code = info.exit_code;
  job.nodes = info.nodes;
  job.start_time = info.start_time;
  job.end_time = info.end_time;
  job.gpus = info.gpus;
  job.gres_detail = info.gres_detail;
  job.updated_at = std::time(nullptr);
  return db_->record(job);
}

Result<std::optional<JobRecord>> JobService::get(const Account& who, int64_t id) {
  std::optional<JobRecord> job = BERTH_TRY(db_->get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<JobRecord>();
  // Slurm unreachable: the database's last word is still the answer.
  (void)refresh(who.user, *job);  // deliberate: a failed refresh leaves the recorded state
  return job;
}

Result<std::vector<JobRecord>> JobService::list(const Account& who, const std::string& state,
                                                int64_t since) {
  std::optional<JobState> only = parse_job_state(state);
  if (!state.empty() && !only) return std::vector<JobRecord>{};  // no job is in no state
  return db_->list(who.admin ? "" : who.user, only, since, 1000);
}

Result<std::optional<JobRecord>> JobService::cancel(const Account& who, int64_t id) {
  std::optional<JobRecord> job = BERTH_TRY(db_->get(id));
  if (!job || (job->owner != who.user && !who.admin)) return std::optional<JobRecord>();
  if (job->slurm_job_id != 0 && !job_state_final(job->state)) {
    // As the caller, never as anyone else: Slurm decides whether an admin may cancel it.
    BERTH_CHECK(slurm_.cancel(who.user, job->slurm_job_id));
    (void)refresh(who.user, *job);  // deliberate: the cancel was accepted; the state follows later
  }
  return job;
}

std::string JobService::output_stem(int64_t id) const {
  return gateway::output_stem(db_->secret(), db_->instance(), id);
}

Result<std::optional<JobService::Output>> JobService::output(const Account& who, int64_t id,
                                                             int lines) {
  if (config_.output_dir.empty())
    return make_error("GET", "/v1/jobs/" + std::to_string(id) + "/output",
                      "berthd keeps no job output here ([slurm] output_dir is not set)",
                      ErrorCode::kNotFound);
  std::optional<JobRecord> job = BERTH_TRY(get(who, id));
  if (!job) return std::optional<Output>();
  // The file must be the job owner's: nobody else can have written the job's output.
  auto owner = system_user_lookup()(job->owner);
  if (!owner)
    return make_error("read", job->owner, "no such account on the gateway host",
                      ErrorCode::kNotFound);
  Output out{*job, "", "", false, false};
  std::string stem = config_.output_dir + "/" + output_stem(id);
  out.stdout_text = BERTH_TRY(
      read_tail(stem + ".out", owner->first, lines, kMaxTailBytes, &out.stdout_truncated));
  out.stderr_text = BERTH_TRY(
      read_tail(stem + ".err", owner->first, lines, kMaxTailBytes, &out.stderr_truncated));
  return std::optional<Output>(std::move(out));
}

nlohmann::json JobService::system(const Account& who) {
  return describe_system(slurm_, who.user, config_.cluster);
}

Result<std::vector<UsageRecord>> JobService::usage(const std::string& owner) {
  auto jobs = BERTH_TRY(db_->list(owner, std::nullopt, 0, 1000000));
  std::map<std::string, std::string> groups;  // owner -> primary group, looked up once
  std::vector<UsageRecord> out;
  for (const JobRecord& j : jobs) {
    if (j.start_time <= 0) continue;
    UsageRecord r;
    r.job_id = std::to_string(j.id);
    r.user = j.owner;
    auto [g, fresh] = groups.try_emplace(j.owner);
    if (fresh)
      if (auto owner = system_user_lookup()(j.owner)) g->second = group_name(owner->second);
    r.group = g->second;
    r.gpus = j.gpus;
    for (const std::string& detail : j.gres_detail)
      if (std::string type = gres_gpu_type(detail); !type.empty()) r.gpu_model = type;
    auto stored = read_stored_request(j.request);  // an unreadable one: the defaults
    const JobRequest asked = stored.ok() ? *stored : JobRequest{};
    r.cpus = asked.nodes * asked.tasks * asked.cpus_per_task;
    // A job that ended before berthd saw it run has no GPUs recorded (Slurm forgets them at
    // the end without slurmdbd): it was allocated the GPUs it asked for (a count per job).
    if (r.gpus == 0) r.gpus = asked.gpus;
    // A share of one GPU counts as that fraction of a GPU.
    if (r.gpus == 0) r.gpu_share = asked.gpu_share;
    r.start = j.start_time;
    r.end = j.end_time;
    out.push_back(std::move(r));
  }
  return out;
}

Result<JobService::Usage> JobService::accounting(const std::string& owner, int64_t since,
                                                 int64_t until) {
  if (accounting_.source != "database") {
    ShareUnits share;
    if (config_.share.enabled) share = {config_.share.gres, config_.share.units_per_gpu};
    auto records = sacct_usage(accounting_, since, until, share);
    if (records.ok()) {
      // sacct reads every user's jobs (--allusers): the caller's own are kept here.
      if (!owner.empty())
        std::erase_if(*records, [&](const UsageRecord& r) { return r.user != owner; });
      return Usage{std::move(*records), "sacct"};
    }
    if (accounting_.source == "sacct") {
      Error e = std::move(records).error();
      e.code = ErrorCode::kBusy;
      return e;
    }
    // "auto": Slurm's accounting cannot be read (no slurmdbd): berthd's own record.
  }
  // The database's records are few: all are read, aggregate_usage() clips them to the window.
  return Usage{BERTH_TRY(usage(owner)), "database"};
}

std::string JobService::slurm_account(const std::string& user) const {
  if (accounting_.slurm_account != "primary_group") return "";
  auto found = system_user_lookup()(user);
  return found ? group_name(found->second) : "";
}

Result<std::map<JobState, int>> JobService::count_by_state() {
  return db_->count_by_state();
}

JobService::Reconciled JobService::reconcile(int64_t now, int64_t min_age_s) {
  // A database write that fails here (the disk is full) is deliberately dropped: the job keeps
  // its recorded state and the next round tries again.
  Reconciled r;
  auto accepted = db_->list("", JobState::kAccepted, 0, 100000);
  std::map<std::string, std::vector<SlurmJobEntry>> slurm_jobs;  // by owner, read once
  for (JobRecord& job : accepted.ok() ? *accepted : std::vector<JobRecord>{}) {
    if (now - job.created_at < min_age_s) continue;
    if (!slurm_jobs.contains(job.owner)) {
      auto listed = slurm_.jobs(job.owner);
      if (!listed.ok()) {
        ++r.failed;
        continue;
      }
      slurm_jobs[job.owner] = std::move(*listed);
    }
    const std::string comment = this->comment(job.id);
    const SlurmJobEntry* found = nullptr;
    for (const SlurmJobEntry& e : slurm_jobs[job.owner])
      if (e.comment == comment) found = &e;
    if (found != nullptr) {
      ++r.found;
      (void)db_->submitted(job.id, found->id, found->info.state, now);
      continue;
    }
    auto request = read_stored_request(job.request);
    Status admitted = request.ok() ? admissible(*request) : Status(request.error());
    if (!admitted.ok()) {  // a share the site stopped offering since it was accepted
      (void)db_->update(job.id, JobState::kSubmitFailed, admitted.error().detail, std::nullopt, "",
                        now);
      continue;
    }
    // The walltime its limits gave it when it was accepted (the caps may have changed since).
    if (job.time_limit_s > 0) request->walltime_s = job.time_limit_s;
    SlurmJobSpec spec = slurm_spec(*request, job.id, comment, config_, output_stem(job.id));
    if (!job.gres.empty()) spec.gres = job.gres;  // the share's GRES as it was accepted, too
    spec.account = slurm_account(job.owner);
    auto slurm_id = slurm_.submit(job.owner, spec);
    if (!slurm_id.ok() && slurm_id.error().code == ErrorCode::kNetwork) {
      ++r.failed;
    } else if (!slurm_id.ok()) {
      (void)db_->update(job.id, JobState::kSubmitFailed, slurm_id.error().detail, std::nullopt, "",
                        now);
    } else {
      ++r.resubmitted;
      (void)db_->submitted(job.id, *slurm_id, JobState::kPending, now);
    }
  }
  auto all = db_->list("", std::nullopt, 0, 100000);
  std::vector<std::pair<JobRecord, GpuSample>> sampled;  // running GPU jobs with samples
  std::set<int64_t> inspected, running_gpu_jobs;         // berthd ids
  std::map<int64_t, JobState> unfinished;                // Slurm id -> state
  for (JobRecord& job : all.ok() ? *all : std::vector<JobRecord>{}) {
    if (job.slurm_job_id == 0 || job_state_final(job.state)) {
      forget_idle(job.id);
      continue;
    }
    if (refresh(job.owner, job).ok()) ++r.refreshed;
    if (!job_state_final(job.state)) unfinished[job.slurm_job_id] = job.state;
    if (!config_.reclaim || job.state != JobState::kRunning || job.gpus <= 0) continue;
    running_gpu_jobs.insert(job.id);
    if (auto sample = check_idle(job, now)) {
      inspected.insert(job.id);
      sampled.emplace_back(job, std::move(*sample));
    }
  }
  if (config_.reclaim) check_orphans(sampled, inspected, running_gpu_jobs, unfinished, now);
  return r;
}

std::vector<GpuOrphan> JobService::orphans() const {
  std::lock_guard lock(idle_mu_);
  return orphans_.list();
}

std::map<std::string, int> JobService::orphans_by_node() const {
  std::lock_guard lock(idle_mu_);
  return orphans_.count_by_node();
}

void JobService::check_orphans(const std::vector<std::pair<JobRecord, GpuSample>>& sampled,
                               const std::set<int64_t>& inspected,
                               const std::set<int64_t>& running_gpu_jobs,
                               const std::map<int64_t, JobState>& unfinished, int64_t now) {
  // A process attributed to a job berthd does not know (submitted to Slurm directly) is asked
  // of Slurm: one listing per owner and round, made only when needed; unreachable, nothing is
  // decided about such processes this round.
  std::map<std::string, std::optional<std::map<int64_t, JobState>>> listed;
  std::vector<GpuOrphan> seen;
  for (const auto& [job, sample] : sampled) {
    auto running = [&, &owner = job.owner](int64_t slurm_id) -> std::optional<bool> {
      if (auto it = unfinished.find(slurm_id); it != unfinished.end())
        return !job_state_queued(it->second);
      auto [l, fresh] = listed.try_emplace(owner);
      if (fresh)
        if (auto jobs = slurm_.jobs(owner); jobs.ok()) {
          l->second.emplace();
          for (const SlurmJobEntry& e : *jobs) (*l->second)[e.id] = e.info.state;
        }
      if (!l->second) return std::nullopt;
      auto it = l->second->find(slurm_id);
      return it != l->second->end() && !job_state_final(it->second) &&
             !job_state_queued(it->second);
    };
    for (const SampledProcess& p : sample.processes) {
      if (classify_gpu_process(p, job.slurm_job_id, running) != GpuProcessVerdict::kOrphan)
        continue;
      GpuOrphan o;
      o.process = p;
      if (o.process.node.empty()) o.process.node = job.nodes;  // a document without "node"
      o.seen_by = job.id;
      o.seen_by_slurm_job = job.slurm_job_id;
      o.reason = p.slurm_job_id ? "Slurm job " + std::to_string(*p.slurm_job_id) + " is not running"
                                : std::string("no Slurm job");
      seen.push_back(std::move(o));
    }
  }
  std::vector<GpuOrphan> fresh;
  {
    std::lock_guard lock(idle_mu_);
    fresh = orphans_.update(std::move(seen), inspected, running_gpu_jobs, now);
  }
  if (orphan_observer_)
    for (const GpuOrphan& o : fresh) orphan_observer_(o);
}

void JobService::forget_idle(int64_t id) {
  std::lock_guard lock(idle_mu_);
  idle_.forget(id);
}

bool JobService::idle_flagged(int64_t id) const {
  std::lock_guard lock(idle_mu_);
  return idle_.flagged(id);
}

size_t JobService::idle_flagged_count() const {
  std::lock_guard lock(idle_mu_);
  return idle_.flagged_count();
}

std::optional<GpuSample> JobService::check_idle(const JobRecord& job, int64_t now) {
  auto owner = system_user_lookup()(job.owner);
  if (!owner) return std::nullopt;
  std::string stem = config_.output_dir + "/" + output_stem(job.id);
  bool truncated = false;
  auto text = read_tail(stem + ".gpu", owner->first, 4000, size_t{1} << 20, &truncated);
  if (!text.ok()) return std::nullopt;
  auto sample = newest_sample(*text, config_.reclaim_policy.idle_below_pct);
  if (!sample) return std::nullopt;
  IdleTracker::Verdict v;
  {
    std::lock_guard lock(idle_mu_);
    v = idle_.observe(job.id, *sample, config_.reclaim_policy);
  }
  const ReclaimPolicy& p = config_.reclaim_policy;
  if (v == IdleTracker::Verdict::kCancel) {
    if (slurm_.cancel(job.owner, job.slurm_job_id).ok() && reclaim_observer_)
      reclaim_observer_("cancel", job, "idle GPUs: cancelled by the site's policy");
    return sample;
  }
  if (v != IdleTracker::Verdict::kFlag) return sample;
  std::string notice =
      "berthd: job " + std::to_string(job.id) + ": its " + std::to_string(sample->gpus) +
      " GPU(s) have been idle (below " + fmt::format("{:g}", p.idle_below_pct) + "% use) for " +
      std::to_string(p.idle_for_s) + " s or more" +
      (p.cancel ? "; the site's policy cancels it shortly\n" : "; it is flagged\n");
  // Left beside the output for the job's sampler to copy into its stderr (gateway/reclaim.h);
  // a file already there (planted, or an earlier round's) is left alone.
  int fd = ::open((stem + ".notice").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0644);
  if (fd >= 0) {
    (void)!::write(fd, notice.data(), notice.size());
    ::close(fd);
  }
  if (reclaim_observer_) reclaim_observer_("flag", job, notice);
  (void)db_->update(job.id, job.state, "idle GPUs: flagged", job.exit_code, job.nodes, now);
  return sample;
}

}  // namespace berth::gateway

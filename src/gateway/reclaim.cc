#include "gateway/reclaim.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/strings.h"
#include "core/write_fully.h"
#include "gateway/auth.h"
#include "gateway/output.h"

namespace berth::gateway {

namespace {

/// The processes of one GPU object of a document on `node`.
void add_processes(const nlohmann::json& gpu, const std::string& node,
                   std::vector<SampledProcess>& out) {
  auto procs = gpu.find("processes");
  if (procs == gpu.end() || !procs->is_array()) return;
  auto text = [](const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  for (const auto& p : *procs) {
    if (!p.is_object() || !p.contains("pid") || !p["pid"].is_number_unsigned()) continue;
    SampledProcess s;
    s.node = node;
    s.gpu_index =
        gpu.value("index", nlohmann::json()).is_number_integer() ? gpu["index"].get<int>() : 0;
    s.gpu_uuid = text(gpu, "uuid");
    s.pid = p["pid"].get<unsigned>();
    if (auto uid = p.find("uid"); uid != p.end() && uid->is_number_unsigned())
      s.uid = uid->get<uint32_t>();
    s.user = text(p, "user");
    s.command = text(p, "command");
    s.known = s.uid.has_value() || !s.command.empty();
    if (auto job = p.find("slurm_job_id"); job != p.end() && job->is_number_integer())
      s.slurm_job_id = job->get<int64_t>();
    s.slurm_job_from = text(p, "slurm_job_from");
    out.push_back(std::move(s));
  }
}

}  // namespace

std::optional<GpuSample> newest_sample(std::string_view text, double idle_below_pct) {
  // The file holds whole documents one after another (one per node and period); a document
  // cut short by a write under way ends the reading.
  // A tail of the file may begin inside a document: start at the first that begins a line
  // (`berth gpu stats --json` indents everything inside its top-level braces).
  if (!text.starts_with("{")) {
    size_t at = text.find("\n{");
    text = at == std::string_view::npos ? std::string_view() : text.substr(at + 1);
  }
  std::istringstream in{std::string(text)};
  int64_t newest_time = -1;
  std::map<int64_t, GpuSample> by_time;  // by the document's time, in ms
  GpuFactsMap measured;
  while (true) {
    nlohmann::json doc;
    try {
      in >> doc;
    } catch (const nlohmann::json::exception&) {
      break;
    }
    if (!doc.is_object() || !doc.contains("gpus") || !doc["gpus"].is_array()) continue;
    int64_t t = 0;
    if (auto it = doc.find("time"); it != doc.end() && it->is_string())
      t = parse_rfc3339_ms(it->get<std::string>()).value_or(0);
    if (t <= 0) continue;
    add_measured_gpus(doc, measured);
    GpuSample& s = by_time[t];
    s.time = t;
    bool all_idle = s.gpus == 0 || s.idle;
    const std::string node =
        doc.value("node", nlohmann::json()).is_string() ? doc["node"].get<std::string>() : "";
    for (const auto& g : doc["gpus"]) {
      ++s.gpus;
      if (g.is_object()) add_processes(g, node, s.processes);
      double util = 100;
      const auto& w = g.value("window", nlohmann::json::object());
      if (auto m = w.find("utilization_gpu");
          m != w.end() && m->is_object() && (*m)["mean"].is_number())
        util = (*m)["mean"].get<double>();
      else if (auto u = g.find("utilization");
               u != g.end() && u->is_object() && (*u)["gpu"].is_number())
        util = (*u)["gpu"].get<double>();
      if (util >= idle_below_pct) all_idle = false;
    }
    s.idle = all_idle && s.gpus > 0;
    newest_time = std::max(newest_time, t);
  }
  if (newest_time < 0) return std::nullopt;
  // The nodes of one period (one srun) write within a fraction of a second of each other; the
  // same node's previous document is a whole period older.
  GpuSample merged{newest_time / 1000, 0, true};
  for (const auto& [t, s] : by_time) {
    if (newest_time - t > 500) continue;
    merged.gpus += s.gpus;
    merged.idle = merged.idle && s.idle;
    merged.processes.insert(merged.processes.end(), s.processes.begin(), s.processes.end());
  }
  merged.idle = merged.idle && merged.gpus > 0;
  merged.measured = std::move(measured);
  return merged;
}

Status write_notice(const std::string& path, const std::string& text, uid_t reader) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return sys_error("create", path);
  // The kernel's ACL xattr form (linux/posix_acl_xattr.h): version 2, then {u16 tag, u16 perm,
  // u32 id} entries, little-endian: u::rw, u:READER:r, g::-, m::r, o::-.
  const struct {
    uint16_t tag, perm;
    uint32_t id;
  } entries[] = {{0x01, 6, ~0U},
                 {0x02, 4, static_cast<uint32_t>(reader)},
                 {0x04, 0, ~0U},
                 {0x10, 4, ~0U},
                 {0x20, 0, ~0U}};
  std::string acl;
  auto put = [&acl](uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) acl.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(2, 4);
  for (const auto& e : entries) put(e.tag, 2), put(e.perm, 2), put(e.id, 4);
  Status done;
  if (::fsetxattr(fd, "system.posix_acl_access", acl.data(), acl.size(), 0) != 0) {
    // No ACLs here (nor, then, a default ACL taking the file from its owner): plain modes.
    if (errno != EOPNOTSUPP || ::fchmod(fd, 0644) != 0) done = sys_error("chmod", path);
  }
  if (done.ok() && !write_fully(fd, text.data(), text.size())) done = sys_error("write", path);
  ::close(fd);
  return done;
}

std::string reclaim_watch_script(const std::string& berth, const std::string& samples_file,
                                 const std::string& notice_file, const std::string& err_file,
                                 const ReclaimPolicy& p, int nodes) {
  // Each period: a sample of the job's GPUs (CUDA_VISIBLE_DEVICES), utilisation averaged over
  // a few seconds; then berthd's notice, once, into the job's stderr. On one node the batch
  // step itself samples; across nodes a step of one task per node does, overlapping the
  // container's (--mem=0: the container's step holds the job's memory; Slurm 22.05 refuses an
  // overlapping step any memory of its own, "Memory required by task is not available").
  // Sampling errors go beside the samples (.gpu.log), not into the job's output.
  // The batch step may have no CUDA_VISIBLE_DEVICES (a job asking --gpus rather than
  // --gres): its GPUs are then SLURM_JOB_GPUS, by host index.
  std::string sample = nodes > 1 ? "srun --overlap --mem=0 --ntasks-per-node=1 --quiet " : "";
  std::string select =
      nodes > 1 ? ""
                : "sel=; [ -z \"$CUDA_VISIBLE_DEVICES\" ] && [ -n \"$SLURM_JOB_GPUS\" ] && "
                  "sel=\"--gpus device=$SLURM_JOB_GPUS\"; ";
  // The loop ends with the job: it runs while the script's process ($$, srun once the script
  // execs it) is alive, checked each second, because under proctrack/linuxproc a background
  // loop orphaned by srun's end escapes the step's cleanup and would sample for ever.
  std::string alive = "kill -0 $$ 2>/dev/null";
  return "( " + select + "while " + alive + "; do " + sample + shell_quote(berth) +
         std::string(nodes > 1 ? "" : " gpu stats $sel") + (nodes > 1 ? " gpu stats" : "") +
         " --json --samples 3 --interval-ms 1000 >>" + shell_quote(samples_file) + " 2>>" +
         shell_quote(samples_file + ".log") + "; if [ -s " + shell_quote(notice_file) +
         " ] && [ -z \"$noticed\" ]; then cat " + shell_quote(notice_file) + " >>" +
         shell_quote(err_file) + "; noticed=1; fi; n=0; while [ $n -lt " +
         std::to_string(p.sample_interval_s) + " ] && " + alive +
         "; do sleep 1; n=$((n+1)); done; done ) &\n";
}

IdleTracker::Verdict IdleTracker::observe(int64_t job, const GpuSample& s, const ReclaimPolicy& p) {
  if (!s.idle) {
    since_.erase(job);
    return Verdict::kBusy;
  }
  auto [it, fresh] = since_.try_emplace(job, s.time);
  auto flag = flagged_.find(job);
  if (flag == flagged_.end()) {
    if (s.time - it->second < p.idle_for_s) return Verdict::kIdle;
    flagged_[job] = Flag{s.time, false};
    return Verdict::kFlag;
  }
  if (p.cancel && !flag->second.cancelled && s.time - flag->second.at >= 2 * p.sample_interval_s) {
    flag->second.cancelled = true;
    return Verdict::kCancel;
  }
  return Verdict::kIdle;
}

void IdleReclaim::forget(int64_t id) {
  std::lock_guard lock(mu_);
  idle_.forget(id);
}

bool IdleReclaim::flagged(int64_t id) const {
  std::lock_guard lock(mu_);
  return idle_.flagged(id);
}

size_t IdleReclaim::flagged_count() const {
  std::lock_guard lock(mu_);
  return idle_.flagged_count();
}

std::optional<GpuSample> IdleReclaim::check(const JobRecord& job, int64_t now) {
  auto owner = system_user_lookup()(job.owner);
  if (!owner) return std::nullopt;
  std::string stem = output_dir_ + "/" + output_stem(db_.secret(), db_.instance(), job.id);
  bool truncated = false;
  auto text = read_tail(stem + ".gpu", owner->first, 4000, size_t{1} << 20, &truncated);
  if (!text.ok()) return std::nullopt;
  auto sample = newest_sample(*text, policy_.idle_below_pct);
  if (!sample) return std::nullopt;
  // deliberate: a database that cannot take the facts now keeps them in memory, and the
  // next sample tries again; the reclaim itself goes on
  (void)facts_.observe(sample->measured);
  IdleTracker::Verdict v;
  {
    std::lock_guard lock(mu_);
    v = idle_.observe(job.id, *sample, policy_);
  }
  const ReclaimPolicy& p = policy_;
  if (v == IdleTracker::Verdict::kCancel) {
    if (slurm_.cancel(job.owner, job.slurm_job_id).ok() && observer_)
      observer_("cancel", job, "idle GPUs: cancelled by the site's policy");
    return sample;
  }
  if (v != IdleTracker::Verdict::kFlag) return sample;
  std::string notice =
      "berthd: job " + std::to_string(job.id) + ": its " + std::to_string(sample->gpus) +
      " GPU(s) have been idle (below " + fmt::format("{:g}", p.idle_below_pct) + "% use) for " +
      std::to_string(p.idle_for_s) + " s or more" +
      (p.cancel ? "; the site's policy cancels it shortly\n" : "; it is flagged\n");
  // Left beside the output for the job's sampler to copy into its stderr (gateway/reclaim.h);
  // deliberate: a notice that cannot be left (one already there) does not stop the flag
  (void)write_notice(stem + ".notice", notice, owner->first);
  if (observer_) observer_("flag", job, notice);
  (void)db_.update(job.id, job.state, "idle GPUs: flagged", job.exit_code, job.nodes, now);
  return sample;
}

}  // namespace berth::gateway

// The jobs' usage (gateway/job_usage.h).
#include "gateway/job_usage.h"

#include <grp.h>

#include <algorithm>
#include <map>

#include "gateway/auth.h"
#include "gateway/job_request.h"
#include "gateway/sacct.h"
#include "gateway/slurm_types.h"

namespace berth::gateway {

std::string group_name(gid_t gid) {
  struct group gr {};
  struct group* found = nullptr;
  std::vector<char> buf(16384);
  if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found) return gr.gr_name;
  return "";
}

Result<std::string> job_vo(const Account& who, const std::string& asked, const QuotaConfig& quotas,
                           const LimitsConfig& limits) {
  if (!asked.empty()) {
    if (std::find(who.groups.begin(), who.groups.end(), asked) != who.groups.end()) return asked;
    std::string yours;
    for (const std::string& g : who.groups) yours += (yours.empty() ? "" : ", ") + g;
    return make_error("POST", "/v1/jobs",
                      "group \"" + asked + "\" is not one of your token groups (" +
                          (yours.empty() ? "your token names none" : "yours: " + yours) +
                          "): name one of them, or leave group out",
                      ErrorCode::kPermission);
  }
  for (const std::string& g : who.groups)
    if (quotas.gpu_hours.count(g) != 0 || limits.groups.count(g) != 0) return g;
  if (!who.groups.empty()) return who.groups.front();
  return group_name(who.gid);
}

Result<std::vector<UsageRecord>> JobUsage::records(const std::string& owner) const {
  auto jobs = BERTH_TRY(db_.list(owner, std::nullopt, 0, 1000000));
  std::map<std::string, std::string> groups;  // owner -> primary group, looked up once
  std::vector<UsageRecord> out;
  for (const JobRecord& j : jobs) {
    if (j.start_time <= 0) continue;
    UsageRecord r;
    r.job_id = std::to_string(j.id);
    r.user = j.owner;
    if (accounting_.group_by == "token" && !j.vo.empty()) {
      r.group = j.vo;
    } else {
      auto [g, fresh] = groups.try_emplace(j.owner);
      if (fresh)
        if (auto owner = system_user_lookup()(j.owner)) g->second = group_name(owner->second);
      r.group = g->second;
    }
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

Result<Usage> JobUsage::accounting(const std::string& owner, int64_t since, int64_t until) const {
  if (accounting_.source != "database") {
    ShareUnits share;
    if (share_.enabled) share = {share_.gres, share_.units_per_gpu};
    auto from_sacct = sacct_usage(accounting_, since, until, share);
    if (from_sacct.ok()) {
      // sacct reads every user's jobs (--allusers): the caller's own are kept here.
      if (!owner.empty())
        std::erase_if(*from_sacct, [&](const UsageRecord& r) { return r.user != owner; });
      if (accounting_.group_by == "token") {
        // sacct knows the Slurm account only: the jobs berthd submitted take their VO from
        // the database (the same Slurm job id and user); other jobs keep the account.
        std::map<std::string, std::pair<std::string, std::string>> vos;  // id -> (owner, vo)
        for (const JobRecord& j : BERTH_TRY(db_.list(owner, std::nullopt, 0, 1000000)))
          if (j.slurm_job_id > 0 && !j.vo.empty())
            vos.try_emplace(std::to_string(j.slurm_job_id), j.owner, j.vo);
        for (UsageRecord& r : *from_sacct)
          if (auto it = vos.find(r.job_id); it != vos.end() && it->second.first == r.user)
            r.group = it->second.second;
      }
      return Usage{std::move(*from_sacct), "sacct"};
    }
    if (accounting_.source == "sacct") {
      Error e = std::move(from_sacct).error();
      e.code = ErrorCode::kBusy;
      return e;
    }
    // "auto": Slurm's accounting cannot be read (no slurmdbd): berthd's own record.
  }
  // The database's records are few: all are read, aggregate_usage() clips them to the window.
  return Usage{BERTH_TRY(records(owner)), "database"};
}

std::string JobUsage::slurm_account(const std::string& user) const {
  if (accounting_.slurm_account != "primary_group") return "";
  auto found = system_user_lookup()(user);
  return found ? group_name(found->second) : "";
}

std::string JobUsage::quota_group(const Account& who, const std::string& vo) const {
  return accounting_.group_by == "unix" ? group_name(who.gid) : vo;
}

}  // namespace berth::gateway

#include "slurm/spank_job.h"

extern "C" {
#include <slurm/slurm.h>
}

#include <dirent.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "slurm/berth_command.h"
#include "slurm/holder.h"
#include "slurm/spank_plugin.h"
#include "slurm/step_state.h"

namespace berth::slurm {
namespace {

/// Steps whose slurmstepd died before its clean-up left their records: their holders (named
/// containers' too) are stopped here, after the same checks as the step's end.
void end_dead_steps(const StepIds& ids) {
  DIR* d = ::opendir(user_dir(ids).c_str());
  if (d == nullptr) return;
  while (struct dirent* e = ::readdir(d)) {
    if (!is_step_file(e->d_name, ids.job, "")) continue;
    std::string path = user_dir(ids) + "/" + e->d_name;
    std::optional<StepRecord> r;
    if (Problem p = read_record(path, &r); !p.empty())
      slurm_error("berth: job epilog: %s", p.c_str());
    if (r && r->owned) kill_holder(r->holder, ids.uid);
    (void)::unlink(path.c_str());
    (void)::unlink((path + ".lock").c_str());
  }
  ::closedir(d);
}

}  // namespace

int job_epilog(spank_t sp, int ac, char** av) {
  if (Problem p = parse_plugin_args(plugin_arguments(ac, av), &g_state.args); !p.empty()) {
    slurm_error("berth: %s", p.c_str());
    return -1;
  }
  StepIds ids;
  uint32_t job = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &ids.uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &ids.gid) != ESPANK_SUCCESS)
    return 0;
  ids.job = job;
  std::string file = job_file(ids);
  std::optional<JobRecord> rec;  // root reading the user's file
  if (Problem p = read_record(file, &rec); !p.empty()) {
    slurm_error("berth: job epilog: %s", p.c_str());
    (void)::unlink(file.c_str());
    return 0;
  }
  if (!rec) return 0;  // the plugin made nothing here
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  if (!g_state.args.site_conf.empty()) env.push_back("BERTH_SITE_CONF=" + g_state.args.site_conf);
  env.insert(env.end(), rec->store_env.begin(), rec->store_env.end());
  end_dead_steps(ids);
  Ran ps = run_berth({"ps", "--json"}, env, &ids);
  std::vector<std::string> names;
  Problem listed = ps.status == 0 ? parse_container_names(ps.out, &names) : ps.problem();
  if (!listed.empty()) slurm_error("berth: job epilog: %s", listed.c_str());
  std::vector<std::string> gone = {"rm", "-f", "--"};
  std::string unnamed = "slurm-" + std::to_string(job) + ".";
  std::string scoped = std::to_string(job) + "_";
  for (const std::string& name : names)
    if (name.starts_with(unnamed) || (g_state.args.job_scope && name.starts_with(scoped)))
      gone.push_back(name);
  if (gone.size() > 3) {
    Ran r = run_berth(gone, env, &ids);
    if (r.status != 0) slurm_error("berth: job epilog: %s", r.problem().c_str());
  }
  (void)::unlink(file.c_str());
  return 0;
}

}  // namespace berth::slurm

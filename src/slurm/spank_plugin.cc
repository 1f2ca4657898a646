#include "slurm/spank_plugin.h"

extern "C" {
#include <slurm/slurm.h>
}

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "runtime/launcher.h"
#include "slurm/berth_command.h"
#include "slurm/step_state.h"

namespace berth::slurm {

State g_state;

void report(const Problem& message, bool task) {
  if (task) {
    std::string line = "berth: error: " + message + "\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    slurm_info("berth: %s", message.c_str());  // and in slurmd's log, for the admin
    return;
  }
  slurm_error("berth: %s", message.c_str());
}

std::string errno_text(int err) {
  return std::strerror(err);
}

std::vector<std::string> plugin_arguments(int ac, char** av) {
  std::vector<std::string> args;
  args.reserve(static_cast<size_t>(ac));
  for (int i = 0; i < ac; ++i) args.emplace_back(av[i]);
  return args;
}

Problem step_ids(spank_t sp, StepIds* ids) {
  uint32_t job = 0, step = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
    return "slurm: cannot read the job's ids";
  ids->job = job;
  ids->step = step;
  ids->uid = uid;
  ids->gid = gid;
  char node[256] = "";
  if (spank_getenv(sp, "SLURMD_NODENAME", node, sizeof node) != ESPANK_SUCCESS)
    ::gethostname(node, sizeof node - 1);
  ids->node = node;
  std::vector<char> home(4096);
  if (spank_getenv(sp, "HOME", home.data(), static_cast<int>(home.size())) == ESPANK_SUCCESS)
    ids->home = home.data();
  char host[256] = "";
  (void)::gethostname(host, sizeof host - 1);
  ids->hostname = host;
  char gpus[256];
  ids->gpus = spank_getenv(sp, "SLURM_STEP_GPUS", gpus, sizeof gpus) == ESPANK_SUCCESS ||
              spank_getenv(sp, "SLURM_JOB_GPUS", gpus, sizeof gpus) == ESPANK_SUCCESS;
  std::vector<char> visible(4096);
  if (spank_getenv(sp, "NVIDIA_VISIBLE_DEVICES", visible.data(),
                   static_cast<int>(visible.size())) == ESPANK_SUCCESS)
    ids->visible_devices = visible.data();
  char mpi[64];
  ids->mpi_step = spank_getenv(sp, "SLURM_MPI_TYPE", mpi, sizeof mpi) == ESPANK_SUCCESS &&
                  std::strcmp(mpi, "none") != 0;
  return {};
}

bool launcher_variable(std::string_view kv) {
  for (std::string_view prefix : berth::kLauncherEnvPrefixes)
    if (kv.starts_with(prefix)) return true;
  return false;
}

std::vector<std::string> job_environment(spank_t sp) {
  std::vector<std::string> env;
  char** job_env = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &job_env) == ESPANK_SUCCESS && job_env != nullptr)
    for (char** e = job_env; *e != nullptr; ++e)
      if (!launcher_variable(*e) && !std::string_view(*e).starts_with("BERTH_SITE_CONF="))
        env.emplace_back(*e);
  if (!g_state.args.site_conf.empty()) env.push_back("BERTH_SITE_CONF=" + g_state.args.site_conf);
  return env;
}

std::string user_dir(const StepIds& ids) {
  return g_state.args.runtime_path + "/" + std::to_string(ids.uid);
}

std::string step_file(const StepIds& ids) {
  return user_dir(ids) + "/" + step_file_name(ids);
}

std::string job_file(const StepIds& ids) {
  return user_dir(ids) + "/" + job_file_name(ids.job);
}

std::string name_lock_file(const StepIds& ids, const std::string& name) {
  return user_dir(ids) + "/" + name + ".name.lock";
}

std::string agent_dir_name(const StepIds& ids) {
  return std::to_string(ids.job) + ".batch." + ids.node + ".agent";
}

std::string read_file(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0) return {};
  std::string out = read_all(fd);
  ::close(fd);
  return out;
}

}  // namespace berth::slurm

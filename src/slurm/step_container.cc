#include "slurm/step_container.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/helper_path.h"
#include "slurm/berth_command.h"
#include "slurm/holder.h"
#include "slurm/host_agent.h"
#include "slurm/host_tools.h"
#include "slurm/spank_plugin.h"
#include "slurm/step_state.h"

namespace berth::slurm {
namespace {

/// srun --mpi=pmix's server directory for this step (PMIX_SERVER_TMPDIR, without a trailing
/// '/'), or "" for a step without PMIx.
std::string pmix_server_dir(spank_t sp) {
  char type[64], dir[4096];
  if (spank_getenv(sp, "SLURM_MPI_TYPE", type, sizeof type) != ESPANK_SUCCESS ||
      !std::string_view(type).starts_with("pmix") ||
      spank_getenv(sp, "PMIX_SERVER_TMPDIR", dir, sizeof dir) != ESPANK_SUCCESS || dir[0] != '/')
    return "";
  std::string path = dir;
  while (path.size() > 1 && path.ends_with('/')) path.pop_back();
  return path.find(':') == std::string::npos ? path : "";  // -v SRC:DST cannot say it
}

/// sbatch --container-image: Slurm's own clients inside the batch container (host_tools.h).
/// Starts the host agent (in this task, before it joins) and adds the binds that reach it:
/// its folder, and berth-slurm-client at /usr/local/bin/srun and the other clients' names.
/// Without berth-slurm-client beside berth (or in its install's helper folder), the script
/// simply has no Slurm clients inside.
Problem add_host_tools(spank_t sp, const StepIds& ids, Options* with) {
  const std::string& berth = g_state.args.berth;
  std::string client;
  for (const std::string& c :
       berth::helper_candidates(berth.substr(0, berth.rfind('/') + 1), kClientName)) {
    client = c;
    if (::access(client.c_str(), X_OK) == 0) break;
  }
  if (::access(client.c_str(), X_OK) != 0) {
    slurm_info("berth: %s: %s: no Slurm clients in the batch container", client.c_str(),
               errno_text(errno).c_str());
    return {};
  }
  std::string dir = user_dir(ids) + "/" + agent_dir_name(ids);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return "mkdir: " + dir + ": " + errno_text(errno);
  std::string sock = dir + "/sock";
  if (Problem p = start_host_agent(sock); !p.empty()) return p;
  with->mounts.push_back(dir + ":" + dir);
  for (std::string_view tool : kHostTools)
    with->mounts.push_back(client + ":/usr/local/bin/" + std::string(tool) + ":ro");
  spank_setenv(sp, kAgentEnv, sock.c_str(), 1);
  return {};
}

/// Starts `berth ARGS` (a run without a container record: a squashfs file) in the background
/// (spawn_detached), calls `started(pid)` (which records it), and waits until its holder has
/// stopped itself. The run ends when slurm_spank_exit kills the holder; berth then releases the
/// squashfs mount as after any run. With `output`, what the run printed until then (berth's
/// and the entrypoint's stdout and stderr).
template <typename Started>
Problem start_background(const std::vector<std::string>& args, const std::vector<std::string>& env,
                         long* runner, long* holder, Started started,
                         std::string* output = nullptr) {
  int err = output_file("berth-err");
  if (err < 0) return "memfd_create: " + errno_text(errno);
  long pid = spawn_detached(args, env, nullptr, err, -1, output != nullptr ? err : -1);
  Problem p;
  if (pid <= 0)
    p = "fork: berth run: " + errno_text(errno);
  else
    p = started(pid);  // recorded before the wait: a task killed meanwhile leaves its pid
  for (int i = 0; p.empty(); ++i) {
    char st = process_state(pid);
    if (st == 0 || st == 'Z') {
      p = parse_berth_error(read_all(err)).message;
      if (p.empty()) p = "berth run exited before the tasks could join its container";
      break;
    }
    if (long h = find_holder(pid); h > 0) {
      *runner = pid;
      *holder = h;
      if (output != nullptr) *output = read_all(err);
      break;
    }
    if (i == 30000) {
      p = "the container's holder did not start within 60 s";
      kill_run_session(pid, ::getuid());  // the run and what its entrypoint started
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::close(err);
  return p;
}

/// A step of this job on this node whose slurmstepd died (SIGKILL, a crash) never ran its
/// clean-up, and the job's epilog may be hours away: its holder (and, unnamed, its container)
/// goes now, at the next step of the job here. As the user, in the task: the holder is the
/// user's.
void reap_stale_steps(const StepIds& ids, const std::vector<std::string>& env) {
  DIR* d = ::opendir(user_dir(ids).c_str());
  if (d == nullptr) return;
  std::string mine = step_file(ids);
  std::vector<std::string> stale;
  while (struct dirent* e = ::readdir(d)) {
    std::string job_step;
    if (!is_step_file(e->d_name, ids.job, ids.node, &job_step)) continue;
    std::string path = user_dir(ids) + "/" + e->d_name;
    if (path == mine) continue;
    std::optional<StepRecord> r;
    if (Problem p = read_record(path, &r); !p.empty()) {
      slurm_info("berth: %s", p.c_str());  // not this step's: left to its end, or the epilog
      continue;
    }
    if (r && r->stepd > 0 && !is_stepd(r->stepd, job_step)) stale.push_back(path);
  }
  ::closedir(d);
  for (const std::string& path : stale) {
    std::optional<StepRecord> r;
    (void)read_record(path, &r);  // read above: a record gone or broken since has no holder
    if (r && r->owned) {
      kill_holder(r->holder, ids.uid);
      if (r->holder == 0 && r->container.empty()) kill_run_session(r->runner, ids.uid);
      if (r->container.starts_with("slurm-")) {
        Ran rm = run_berth({"rm", "-f", "--", r->container}, env, nullptr);
        if (rm.status != 0)
          slurm_info("berth: removing %s of a dead step: %s", r->container.c_str(),
                     rm.problem().c_str());
      }
    }
    (void)::unlink(path.c_str());
    (void)::unlink((path + ".lock").c_str());
  }
}

/// The step's lock (the record's file, .lock): held while its first task starts the container.
class StepLock {
 public:
  explicit StepLock(const std::string& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) {
    while (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  StepLock(const StepLock&) = delete;
  StepLock& operator=(const StepLock&) = delete;
  ~StepLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool held() const { return fd_ >= 0; }

 private:
  int fd_;
};

/// Now, as `berth logs --since` takes it: Unix seconds, to the nanosecond.
std::string now_unix() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%09ld", static_cast<long long>(ts.tv_sec), ts.tv_nsec);
  return buf;
}

/// --container-entrypoint-log: `text` on the task's stderr, where srun prints it, without the
/// holder's lines saying it is up (kHolderUpLine).
void write_entrypoint_log(std::string text) {
  std::string line = std::string(kHolderUpLine) + "\n";
  for (size_t at; (at = text.find(line)) != std::string::npos;) text.erase(at, line.size());
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the task's stderr is gone: nobody to tell
    done += static_cast<size_t>(n);
  }
}

/// The `berth run` of a running container's filesystem in namespaces of this step's own
/// (pyxis's no_exec): its root directory, with its environment and working directory.
Problem no_exec_arguments(const Options& o, const StepIds& ids, const std::string& cwd,
                          const ContainerFacts& f, std::vector<std::string>* args) {
  if (!f.rootfs.starts_with("/"))
    return "inspect " + container_name(o, g_state.args, ids) + ": no rootfs";
  Options with = o;
  with.image = f.rootfs;
  with.name.clear();
  with.save.clear();
  with.entrypoint = false;  // a directory has no image config: the holder is the command
  if (with.writable == true) with.writable.reset();  // a directory is written in place
  if (Problem q = run_arguments(with, g_state.args, ids, cwd, args); !q.empty()) return q;
  std::vector<std::string> image_env;
  std::string text = read_file("/proc/" + std::to_string(f.pid) + "/environ");
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    std::string kv = text.substr(start, end - start);
    start = end + 1;
    if (kv.find('=') == std::string::npos || kv.starts_with("HOSTNAME=") || launcher_variable(kv))
      continue;
    image_env.push_back("--env=" + kv);
  }
  // The holder starts where the image's WorkingDir is (a directory has no image config).
  if (f.workdir.starts_with("/")) image_env.push_back("--workdir=" + f.workdir);
  args->insert(args->begin() + 1, image_env.begin(), image_env.end());
  return {};
}

}  // namespace

Problem step_holder(spank_t sp, const StepIds& ids, long* pid) {
  const Options& o = g_state.opts;
  std::string file = step_file(ids);
  StepLock lock(file + ".lock");
  if (!lock.held()) return "open: " + file + ".lock: " + errno_text(errno);

  std::optional<StepRecord> state;
  if (Problem p = read_record(file, &state); !p.empty()) return p;
  if (state && state->phase == StepPhase::kFailed)
    return "the container was not started successfully by another task: " + state->error;
  if (state) {
    *pid = state->holder;
    // Still starting: the task starting the container was killed before it was up.
    if (state->phase != StepPhase::kUp || *pid <= 0)
      return "the task starting the step's container ended before it was up";
    return {};
  }
  std::vector<std::string> env = job_environment(sp);
  // For the job's epilog; without it the epilog finds nothing to sweep, and the step's own
  // end still cleans up.
  if (Problem p = write_record(job_file(ids), job_record(env)); !p.empty())
    slurm_info("berth: %s", p.c_str());
  // pyxis's USER@IMAGE: berth's pull takes that user's stored login (berth login -u USER).
  if (std::string user = image_user(o); !user.empty()) {
    std::erase_if(env, [](const std::string& kv) { return kv.starts_with("BERTH_CREDS_USER="); });
    env.push_back("BERTH_CREDS_USER=" + user);
  }
  std::string name = container_name(o, g_state.args, ids);
  char cwd_buf[4096];
  std::string cwd = ::getcwd(cwd_buf, sizeof cwd_buf) != nullptr ? cwd_buf : "/";

  StepRecord rec;
  rec.stepd = ::getppid();  // the task's parent: its slurmstepd
  // For the step's last task_exit (slurmstepd, which has not the job's working directory):
  // where to save the container.
  if (!o.save.empty()) rec.save = o.save.starts_with("/") ? o.save : cwd + "/" + o.save;
  auto fail = [&](const Problem& p) {
    StepRecord failed = rec;
    failed.phase = StepPhase::kFailed;
    failed.holder = failed.runner = 0;
    failed.container.clear();
    failed.owned = false;
    failed.error = p;
    if (Problem q = write_record(file, failed); !q.empty()) slurm_info("berth: %s", q.c_str());
    return p;
  };
  // Until the holder is up the record says "starting" with what slurm_spank_exit needs to end
  // a start cut short by the task's death (proctrack/cgroup's scancel, an OOM kill, while an
  // image's entrypoint runs): the container's name, or a background run's pid. Without it
  // such a start left its container, and the holder that stopped itself afterwards, behind
  // for good. (proctrack/linuxproc signals no process still named slurmstepd: a task in
  // task_init outlives scancel, and its own 60 s limit on the holder ends the start.)
  auto record = [&](StepPhase phase, long holder, const std::string& container, bool owned,
                    long runner) {
    rec.phase = phase;
    rec.holder = holder;
    rec.container = container;
    rec.owned = owned;
    rec.runner = runner;
    return write_record(file, rec);
  };
  auto starting_run = [&](long runner) {
    return record(StepPhase::kStarting, 0, "", true, runner);
  };
  // A named container may be wanted by several jobs' steps at once: its look-up and creation
  // happen under a lock of its own, which task_init holds (the step's lock covers only this
  // step's tasks).
  reap_stale_steps(ids, env);

  ContainerFacts found;
  bool absent = true;
  if (!o.name.empty()) {
    if (Problem p = inspect_container(name, env, &found, &absent); !p.empty()) return fail(p);
    // A holder another step's end has just killed: its run counts as running until its
    // monitor is done (and `berth start` would do nothing then): wait for that.
    for (int i = 0;
         i < 2000 && !absent && (found.pid > 0 || found.status == ContainerStatus::kRunning); ++i) {
      char st = found.pid > 0 ? process_state(found.pid) : 0;
      if (st != 0 && st != 'Z' && st != 'X') break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (Problem p = inspect_container(name, env, &found, &absent); !p.empty()) return fail(p);
    }
  }
  const bool running = !absent && found.pid > 0;
  // Running means a holder this plugin started (names are node-unique, so it is this node's).
  if (running && !is_holder(found.pid))
    return fail("container '" + name +
                "' is running, but not as a Slurm step's container (started outside Slurm)");
  if (absent && !o.name.empty() && o.image.empty())
    return fail("a container with name '" + o.name +
                "' does not exist, and --container-image is not set");
  if (!absent && o.name_mode == NameMode::kCreate)
    return fail("container '" + o.name + "' already exists (--container-name=" + o.name +
                ":create)");
  if (!running && o.name_mode == NameMode::kExec)
    return fail("container '" + o.name + "' is not running (--container-name=" + o.name + ":exec)");
  if (running && o.name_mode == NameMode::kNoExec) {
    // pyxis's no_exec: the running container's filesystem, in namespaces of this step's own
    // (its mounts, its --container-unshare): `berth run DIR` on the container's root, in the
    // background as for a squashfs file, with the running container's environment.
    std::vector<std::string> args;
    if (Problem q = no_exec_arguments(o, ids, cwd, found, &args); !q.empty()) return fail(q);
    long runner = 0, holder = 0;
    if (Problem q = start_background(args, env, &runner, &holder, starting_run); !q.empty())
      return fail(q);
    if (Problem q = record(StepPhase::kUp, holder, "", true, runner); !q.empty()) return fail(q);
    *pid = holder;
    return {};
  }
  if (running && !o.mounts.empty())
    slurm_spank_log("berth: ignoring --container-mounts when attaching to a running container");
  // --container-entrypoint-log: what this start printed, the entrypoint's output with it (the
  // container's log from the start on), as pyxis prints enroot's log.
  const std::string since = now_unix();
  Ran r;
  bool created = false;
  int monitor_err = -1;
  struct CloseErr {
    int* fd;
    ~CloseErr() {
      if (*fd >= 0) ::close(*fd);
    }
  } close_err{&monitor_err};
  if (absent) {
    std::vector<std::string> args;
    Options with = o;
    // The batch step's command is the script in slurmd's spool: bound read-only at the same
    // path, so that Slurm's execve finds it inside, as pyxis does.
    int argc = 0;
    char** argv = nullptr;
    if (ids.step == kBatchStep && spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS &&
        argc > 0 && argv[0] != nullptr && argv[0][0] == '/')
      with.mounts.push_back(std::string(argv[0]) + ":" + argv[0] + ":ro");
    if (ids.step == kBatchStep) {
      if (Problem q = add_host_tools(sp, ids, &with); !q.empty()) return fail(q);
    }
    // srun --mpi=pmix: the step's PMIx server directory (its shared-memory data store, under
    // slurmd's spool) bound at its path, as enroot's PMI hook does; the socket is TCP.
    if (std::string dir = pmix_server_dir(sp); !dir.empty()) with.mounts.push_back(dir + ":" + dir);
    if (Problem q = run_arguments(with, g_state.args, ids, cwd, &args); !q.empty()) return fail(q);
    if (is_squashfs_path(o.image) && !needs_container(o)) {
      long runner = 0, holder = 0;
      std::string output;
      if (Problem q = start_background(args, env, &runner, &holder, starting_run,
                                       o.entrypoint_log ? &output : nullptr);
          !q.empty())
        return fail(q);
      write_entrypoint_log(output);
      // No container record: the runner ends with its holder.
      if (Problem q = record(StepPhase::kUp, holder, "", true, runner); !q.empty()) return fail(q);
      *pid = holder;
      return {};
    }
    if (Problem q = record(StepPhase::kStarting, 0, name, true, 0); !q.empty()) return fail(q);
    r = run_berth(args, env, nullptr, &monitor_err);
    if (r.status != 0) return fail(r.problem());
    created = true;
  } else if (!running) {
    if (Problem q = record(StepPhase::kStarting, 0, name, true, 0); !q.empty()) return fail(q);
    r = run_berth({"start", "--", name}, env, nullptr, &monitor_err);
    if (r.status != 0) return fail(r.problem());
  }
  const bool owned = !running;
  if (owned) {
    // A detached start may return before its monitor has recorded the workload: ask again
    // for a while. A start that fails in the monitor (a missing bind source) says why in the
    // container's "error". A container this step created and already exited will not start
    // (a restarted one may still show its last run's status).
    Problem p = inspect_container(name, env, &found);
    for (int i = 0; i < 1000 && p.empty() && found.pid == 0 && found.error.empty() &&
                    !(created && found.status == ContainerStatus::kExited);
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      p = inspect_container(name, env, &found);
    }
    Problem q;
    if (found.pid <= 0) {
      q = !found.error.empty() ? found.error
          : !p.empty()         ? p
                               : "container '" + name + "' is not running";
    } else if (q = wait_stopped(found.pid); !q.empty()) {
      // The holder is gone: its monitor may say why once it has recorded the run's end.
      ContainerFacts ended;
      for (int i = 0; i < 200 && inspect_container(name, env, &ended).empty() &&
                      ended.error.empty() && ended.status == ContainerStatus::kRunning;
           ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (!ended.error.empty()) q = ended.error;
    }
    if (!q.empty()) {
      // A container made for this step and never started is of no use.
      if (created) (void)run_berth({"rm", "-f", "--", name}, env, nullptr);  // best effort
      return fail(q);
    }
  }
  if (owned && o.entrypoint_log) {
    // Until the holder's lines are in the log on both streams (a container made without the
    // option has none: then what there is after 2 s).
    std::string up = std::string(kHolderUpLine) + "\n";
    Ran log;
    for (int i = 0; i < 200; ++i) {
      log = run_berth({"logs", "--since=" + since, "--", name}, env, nullptr);
      if (log.out.find(up) != std::string::npos && log.err.find(up) != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    write_entrypoint_log(r.err + log.out + log.err);
  }
  if (Problem q = record(StepPhase::kUp, found.pid, name, owned, 0); !q.empty()) return fail(q);
  *pid = found.pid;
  return {};
}

}  // namespace berth::slurm

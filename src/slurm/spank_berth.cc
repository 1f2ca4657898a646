// spank_berth.so: a Slurm SPANK plugin, a drop-in for pyxis (srun --container-image=...).
//
// How the work is split, and why:
// - The plugin stays thin. It parses pyxis's options (slurm/options.h), and hands every piece
//   of container work to the `berth` binary, run as the job's user: pulling, unpacking,
//   squashfs mounts, the mount plan, the site policy, GPU injection. The plugin is loaded into
//   srun and slurmstepd, which are root or long-lived: a crash or a leak there costs the node,
//   and a second implementation of runs would drift from `berth run`.
// - One container per node per step, shared by the step's local tasks, as pyxis does. In
//   task_init (which runs in each task's own process, as the user, after Slurm set up its I/O
//   and before it execs the command) the first local task takes a lock and starts the step's
//   container with `berth run -d`: its workload is a holder, a shell that stops itself. Every
//   task then joins the holder's namespaces with setns and chroots to its root, as `berth exec`
//   does (runtime/exec.cc), and merges the container's environment into its own. Slurm then
//   execs the task's command, which it looks up on the task's PATH: inside the container.
//   Slurm 22.05's SPANK has no way to replace the task's argv, so joining in-process is the
//   only way to keep the task (its pid, I/O, signals, accounting) Slurm's own.
// - Errors are returned from task_init: it is the only remote callback whose failure reaches
//   srun's exit status (FIELD-NOTES). Errors found earlier in slurmstepd are kept for it.
// - The step's end (slurm_spank_exit in slurmstepd, also after scancel) ends the holder: an
//   unnamed container is removed, a named one is stopped and kept for the next step.
//
// C ABI surface only: the slurm_spank_* callbacks and the plugin_* symbols (see the version
// script in CMakeLists.txt); no exception leaves a callback.

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(berth, 1)
}

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/proc_stat.h"
#include "runtime/launcher.h"
#include "runtime/root_emulation.h"
#include "runtime/session_kill.h"
#include "slurm/host_agent.h"
#include "slurm/host_tools.h"
#include "slurm/options.h"
#include "slurm/slurm_compat.h"

namespace {

using berth::slurm::Options;
using berth::slurm::PluginArgs;
using berth::slurm::Problem;
using berth::slurm::StepIds;

/// The plugin's state in one process (srun, sbatch, or one slurmstepd).
struct State {
  PluginArgs args;
  Options opts;
  Problem deferred;  ///< an error found in slurmstepd before task_init, returned there
  unsigned exited = 0;  ///< slurmstepd: the step's local tasks that have exited so far
};
State g_state;

/// An error on the user's stderr: in srun and sbatch, through Slurm's log (which prints on the
/// terminal); in a task, on the task's stderr, so that it reads as Berth's own one line, once
/// (slurm_error there would print it a second time with slurmstepd's prefix).
void report(const std::string& message, bool task) {
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

/// A memory file for a child's output, at 3 or above: slurmd's epilog runs with 0-2 closed,
/// and a descriptor there would be overwritten by the child's own dup2 onto 0-2.
int output_file(const char* name) {
  int fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0 || fd > 2) return fd;
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return high;
}

/// pipe2(O_CLOEXEC) with both ends at 3 or above (see output_file).
int high_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  for (int i = 0; i < 2; ++i) {
    if (fds[i] > 2) continue;
    int high = ::fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
    ::close(fds[i]);
    fds[i] = high;
  }
  return fds[0] >= 0 && fds[1] >= 0 ? 0 : -1;
}

/// Reads a whole (small) file from the start of `fd`.
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ::lseek(fd, 0, SEEK_SET);
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::string read_file(const std::string& path, int flags = 0) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0) return {};
  std::string out = read_all(fd);
  ::close(fd);
  return out;
}

/// The last non-empty line of `text` (Berth's one-line error), without "berth: error: ".
std::string last_line(const std::string& text) {
  std::string line;
  size_t end = text.size();
  while (end > 0) {
    size_t start = text.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    line = text.substr(start, end - start);
    if (!line.empty() && !line.starts_with("berth: hint:")) break;
    if (start == 0) break;
    end = start - 1;
  }
  if (line.starts_with("berth: error: ")) line = line.substr(14);
  return line;
}

/// The outcome of one `berth` command.
struct Ran {
  int status = -1;  ///< exit status, -1 when it could not run
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

/// `berth ARGS` with `env`, spelled out before a fork: the child allocates nothing.
struct BerthCommand {
  BerthCommand(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    argv_s.push_back(g_state.args.berth);
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    for (auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    exec_failed = "berth: error: exec: \"" + argv_s[0] + "\": ";
  }
  std::vector<std::string> argv_s;
  std::vector<char*> argv, envp;
  std::string exec_failed;  ///< the message's start, errno's words to follow
};

/// In a forked child: stdin /dev/null, stdout `out` (-1: /dev/null), stderr `err`, nothing else
/// open (a monitor left behind by `run -d` holding the task's output would keep srun waiting
/// for its end), `drop`'s user when given (slurmstepd is root), no signal state left from
/// slurmstepd (berth forwards and waits on its own); then execs `cmd`.
[[noreturn]] void exec_berth(const BerthCommand& cmd, int out, int err, const StepIds* drop) {
  int null = ::open("/dev/null", O_RDWR);
  if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(out >= 0 ? out : null, 1) < 0 ||
      ::dup2(err, 2) < 0)
    _exit(127);
  (void)::syscall(SYS_close_range, 3U, ~0U, 0U);  // ENOSYS: a harmless leak
  if (drop != nullptr) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(drop->gid) != 0 || ::setuid(drop->uid) != 0)
      _exit(126);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(cmd.argv[0], cmd.argv.data(), cmd.envp.data());
  const char* why = std::strerror(errno);
  (void)!::write(2, cmd.exec_failed.data(), cmd.exec_failed.size());
  (void)!::write(2, why, std::strlen(why));
  (void)!::write(2, "\n", 1);
  _exit(127);
}

/// Runs `berth ARGS` with `env`, as `ids`' user when `drop` (slurmstepd is root), and waits.
/// Output goes to memory files, not pipes: `run -d` leaves a monitor behind that holds them;
/// with `keep_err`, the stderr file stays open for the caller (who closes it).
Ran run_berth(const std::vector<std::string>& args, const std::vector<std::string>& env,
              const StepIds* drop, int* keep_err = nullptr) {
  Ran r;
  int out = output_file("berth-out");
  int err = output_file("berth-err");
  if (out < 0 || err < 0) {
    r.err = "berth: error: memfd_create: " + errno_text(errno);
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
    return r;
  }
  BerthCommand cmd(args, env);
  pid_t pid = ::fork();
  if (pid == 0) exec_berth(cmd, out, err, drop);
  if (pid > 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else {
    r.err = "berth: error: fork: " + errno_text(errno);
  }
  r.out = read_all(out);
  r.err += read_all(err);
  ::close(out);
  if (keep_err != nullptr) {
    *keep_err = err;  // `run -d`: its monitor reports a failed start there, later
  } else {
    ::close(err);
  }
  return r;
}

std::optional<std::string> spank_env(spank_t sp, const char* name) {
  static spank_t current;  // set by the callers below; getenv callbacks take no context
  if (name == nullptr) {
    current = sp;
    return std::nullopt;
  }
  std::vector<char> buf(16384);
  if (spank_getenv(current, name, buf.data(), static_cast<int>(buf.size())) != ESPANK_SUCCESS)
    return std::nullopt;
  return std::string(buf.data());
}
std::optional<std::string> remote_getenv(const char* name) {
  return spank_env(nullptr, name);
}
std::optional<std::string> local_getenv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::nullopt : std::optional<std::string>(v);
}

/// The step's ids, read through Slurm's items.
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
  char host[256] = "";
  (void)::gethostname(host, sizeof host - 1);
  ids->hostname = host;
  char gpus[256];
  ids->gpus = spank_getenv(sp, "SLURM_STEP_GPUS", gpus, sizeof gpus) == ESPANK_SUCCESS ||
              spank_getenv(sp, "SLURM_JOB_GPUS", gpus, sizeof gpus) == ESPANK_SUCCESS;
  char mpi[64];
  ids->mpi_step = spank_getenv(sp, "SLURM_MPI_TYPE", mpi, sizeof mpi) == ESPANK_SUCCESS &&
                  std::strcmp(mpi, "none") != 0;
  return {};
}

/// Whether `kv` is one of a launcher's per-rank variables, which `berth run` carries into a
/// container (runtime/launcher.h): each task keeps its own, so the step's shared container
/// must not hold the first task's (PMI_RANK=0 for every rank).
bool launcher_variable(std::string_view kv) {
  for (std::string_view prefix : berth::kLauncherEnvPrefixes)
    if (kv.starts_with(prefix)) return true;
  return false;
}

/// The job's environment (S_JOB_ENV), for the berth commands: HOME, BERTH_HOME, the user's
/// registries' settings. Slurm's PMI variables and descriptor are each task's, not the
/// container's, and are left out; so is the job's BERTH_SITE_CONF: a job does not choose the
/// site policy its containers run under (docs/site.md); the admin's site_conf= does.
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

/// The batch step's agent folder in the user's step state (its socket, bound into the batch
/// container at its path).
std::string agent_dir_name(const StepIds& ids) {
  return std::to_string(ids.job) + ".batch." + ids.node + ".agent";
}

/// <runtime_path>/<uid>: the user's step state (locks, which holder a step started).
std::string user_dir(const StepIds& ids) {
  return g_state.args.runtime_path + "/" + std::to_string(ids.uid);
}
std::string step_file(const StepIds& ids) {
  std::string step = ids.step == berth::slurm::kBatchStep ? "batch" : std::to_string(ids.step);
  return user_dir(ids) + "/" + std::to_string(ids.job) + "." + step + "." + ids.node + ".step";
}

/// The lock a named container's look-up, start, joins and end take on this node: several
/// steps (of one job or of several) may want it at once.
std::string name_lock_file(const StepIds& ids, const std::string& name) {
  return user_dir(ids) + "/" + name + ".name.lock";
}

/// Takes an exclusive flock on `path` (created 0600 with `create`), or returns -1; the caller
/// closes it. Root (slurmstepd) does not create: a lock file of root's would shut the user out.
int take_lock(const std::string& path, bool create = true) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
  while (fd >= 0 && ::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  return fd;
}

/// The step file's fields: "HOLDER NAME OWNED RUNNER STEPD" (RUNNER: a background run's pid,
/// 0 for a container record; STEPD: the slurmstepd that started it).
struct StepRecord {
  long holder = 0;
  std::string name;
  int owned = 0;
  long runner = 0;
  long stepd = 0;
  int fields = 0;  ///< how many were read
};
StepRecord parse_step_record(const std::string& text) {
  StepRecord r;
  char name[512] = "";
  r.fields = std::sscanf(text.c_str(), "%ld %511s %d %ld %ld", &r.holder, name, &r.owned, &r.runner,
                         &r.stepd);
  r.name = name;
  return r;
}

/// Makes <runtime_path>/<uid>, as root in slurmstepd: 0700 and the user's, so that no other
/// user can take a step's lock or forge its state.
Problem make_user_dir(const StepIds& ids) {
  const std::string& root = g_state.args.runtime_path;
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST)
    return "mkdir: " + root + ": " + errno_text(errno);
  std::string dir = user_dir(ids);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return "mkdir: " + dir + ": " + errno_text(errno);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "stat: " + dir + ": not a directory";
  if ((st.st_uid != ids.uid || st.st_gid != ids.gid) && ::chown(dir.c_str(), ids.uid, ids.gid) != 0)
    return "chown: " + dir + ": " + errno_text(errno);
  return {};
}

/// The container's holder pid per `berth inspect` (0: exists, not running), or -1 with `*p`
/// set when there is no such container.
/// With `exited`: whether its status says it ran and ended; with `running`: whether Berth
/// still counts it running (a run whose workload ended is running until its monitor is done).
long holder_pid(const std::string& name, const std::vector<std::string>& env, Problem* p,
                bool* exited = nullptr, bool* running = nullptr) {
  Ran r =
      run_berth({"inspect", "--format", "{{.State.Pid}} {{.State.Status}}", name}, env, nullptr);
  if (r.status != 0) {
    *p = last_line(r.err);
    return -1;
  }
  if (exited != nullptr) *exited = r.out.find(" exited") != std::string::npos;
  if (running != nullptr) *running = r.out.find(" running") != std::string::npos;
  return std::atol(r.out.c_str());
}

/// Waits until `pid` has stopped itself (the holder is inside, everything mounted).
Problem wait_stopped(long pid) {
  // Every millisecond: the holder stops a few milliseconds after `run -d` returns, and every
  // task of the step waits for it.
  for (int i = 0; i < 60000; ++i) {
    std::optional<berth::ProcStat> st = berth::read_proc_stat(static_cast<pid_t>(pid));
    if (!st) return "the container's holder (pid " + std::to_string(pid) + ") exited";
    if (st->state == 'T') return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return "the container's holder did not start within 60 s";
}

std::string job_file(const StepIds& ids) {
  return user_dir(ids) + "/" + std::to_string(ids.job) + ".job";
}

/// The variables that say where the user's Berth store is (HOME, BERTH_HOME, XDG_DATA_HOME),
/// for the job's epilog: it has no job environment to read them from.
void record_store(const StepIds& ids, const std::vector<std::string>& env) {
  std::string text;
  for (const std::string& e : env)
    if (e.starts_with("HOME=") || e.starts_with("BERTH_HOME=") || e.starts_with("XDG_DATA_HOME="))
      text += e + "\n";
  std::string file = job_file(ids);
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;  // the epilog then finds nothing to sweep: the step's exit still cleans
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

/// The state letter of `pid` ('R', 'S', 'T', 'Z', ...), or 0 when it is gone.
char process_state(long pid) {
  std::optional<berth::ProcStat> st = berth::read_proc_stat(static_cast<pid_t>(pid));
  return st ? st->state : 0;
}

/// The holder among `root`'s descendants: stopped, running the holder's shell.
long find_holder(long root) {
  std::vector<long> todo = {root};
  while (!todo.empty()) {
    long p = todo.back();
    todo.pop_back();
    if (p != root && process_state(p) == 'T' &&
        read_file("/proc/" + std::to_string(p) + "/cmdline").find("kill -STOP") !=
            std::string::npos)
      return p;
    std::string children =
        read_file("/proc/" + std::to_string(p) + "/task/" + std::to_string(p) + "/children");
    for (const char* c = children.c_str(); *c != '\0';) {
      char* end = nullptr;
      long child = std::strtol(c, &end, 10);
      if (end == c) break;
      todo.push_back(child);
      c = end;
    }
  }
  return 0;
}

/// Starts `berth ARGS` out of the step's process tree (setsid and a double fork), as `drop`'s
/// user when given; its stderr goes to `err_fd`. Returns its pid, or 0. Out of the tree
/// because slurmstepd's process tracking kills every process of the step at its end, the
/// plugin's own clean-up included, and because the task's command must not inherit it as a
/// child.
long spawn_detached(const std::vector<std::string>& args, const std::vector<std::string>& env,
                    const StepIds* drop, int err_fd) {
  int pids[2];
  if (high_pipe(pids) != 0) return 0;
  BerthCommand cmd(args, env);
  pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild != 0) _exit(grandchild > 0 ? 0 : 1);
    long me = ::getpid();
    (void)!::write(pids[1], &me, sizeof me);
    exec_berth(cmd, -1, err_fd, drop);
  }
  ::close(pids[1]);
  long pid = 0;
  if (child > 0) {
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (::read(pids[0], &pid, sizeof pid) != static_cast<ssize_t>(sizeof pid)) pid = 0;
  }
  ::close(pids[0]);
  return pid;
}

/// Runs `berth ARGS` with spawn_detached and waits up to `seconds` for it to end. Not its
/// parent, the plugin knows no exit status: an error line on stderr is the failure.
Ran run_berth_detached(const std::vector<std::string>& args, const std::vector<std::string>& env,
                       const StepIds* drop, int seconds) {
  Ran r;
  int err = output_file("berth-err");
  if (err < 0) {
    r.err = "berth: error: memfd_create: " + errno_text(errno);
    return r;
  }
  long pid = spawn_detached(args, env, drop, err);
  if (pid <= 0) {
    r.err = "berth: error: fork: " + errno_text(errno);
  } else {
    for (int i = 0; i < seconds * 1000; ++i) {
      char st = process_state(pid);
      if (st == 0 || st == 'Z') break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    r.err = read_all(err);
    r.status = r.err.find("berth: error:") == std::string::npos ? 0 : 1;
  }
  ::close(err);
  return r;
}

void kill_run_session(long runner, unsigned uid);

/// Starts `berth ARGS` (a run without a container record: a squashfs file) in the background
/// (spawn_detached), calls `started(pid)` (which records it), and waits until its holder has
/// stopped itself. The run ends when slurm_spank_exit kills the holder; berth then releases the
/// squashfs mount as after any run.
template <typename Started>
Problem start_background(const std::vector<std::string>& args, const std::vector<std::string>& env,
                         long* runner, long* holder, Started started) {
  int err = output_file("berth-err");
  if (err < 0) return "memfd_create: " + errno_text(errno);
  long pid = spawn_detached(args, env, nullptr, err);
  Problem p;
  if (pid <= 0) p = "fork: berth run: " + errno_text(errno);
  else p = started(pid);  // recorded before the wait: a task killed meanwhile leaves its pid
  for (int i = 0; p.empty(); ++i) {
    char st = process_state(pid);
    if (st == 0 || st == 'Z') {
      p = last_line(read_all(err));
      if (p.empty()) p = "berth run exited before the tasks could join its container";
      break;
    }
    if (long h = find_holder(pid); h > 0) {
      *runner = pid;
      *holder = h;
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

/// SIGKILLs `pid` (as root) if it is still a holder of `uid`'s: the pid comes from a file the
/// user owns.
void kill_holder(long pid, unsigned uid) {
  struct stat st;
  std::string proc = "/proc/" + std::to_string(pid);
  if (pid > 0 && ::stat(proc.c_str(), &st) == 0 && st.st_uid == uid &&
      read_file(proc + "/cmdline").find("kill -STOP") != std::string::npos)
    ::kill(static_cast<pid_t>(pid), SIGKILL);
}

/// SIGKILLs, as root, the processes of `uid`'s in the session of `runner`, a background run
/// whose holder never came up (start_background: spawn_detached gave it a session of its own).
/// The whole start goes (berth, the container's entrypoint, what it started); a squashfs
/// mount's keeper has a session of its own and unmounts once the run is gone.
void kill_run_session(long runner, unsigned uid) {
  struct stat st;
  if (runner <= 0 || ::stat(("/proc/" + std::to_string(runner)).c_str(), &st) != 0 ||
      st.st_uid != uid)
    return;
  pid_t sid = ::getsid(static_cast<pid_t>(runner));
  if (sid == ::getsid(0)) return;
  berth::kill_session(sid, [uid](pid_t pid) {  // only the user's: the pid came from their file
    struct stat owner;
    return ::stat(("/proc/" + std::to_string(pid)).c_str(), &owner) != 0 || owner.st_uid != uid;
  });
}

/// sbatch --container-image: Slurm's own clients inside the batch container (host_tools.h).
/// Starts the host agent (in this task, before it joins) and adds the binds that reach it:
/// its folder, and berth-slurm-client at /usr/local/bin/srun and the other clients' names.
/// Without berth-slurm-client beside berth, the script simply has no Slurm clients inside.
Problem add_host_tools(spank_t sp, const StepIds& ids, Options* with) {
  const std::string& berth = g_state.args.berth;
  std::string client = berth.substr(0, berth.rfind('/') + 1) + berth::slurm::kClientName;
  if (::access(client.c_str(), X_OK) != 0) {
    slurm_info("berth: %s: %s: no Slurm clients in the batch container", client.c_str(),
               errno_text(errno).c_str());
    return {};
  }
  std::string dir = user_dir(ids) + "/" + agent_dir_name(ids);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return "mkdir: " + dir + ": " + errno_text(errno);
  std::string sock = dir + "/sock";
  if (Problem p = berth::slurm::start_host_agent(sock); !p.empty()) return p;
  with->mounts.push_back(dir + ":" + dir);
  for (std::string_view tool : berth::slurm::kHostTools)
    with->mounts.push_back(client + ":/usr/local/bin/" + std::string(tool) + ":ro");
  spank_setenv(sp, berth::slurm::kAgentEnv, sock.c_str(), 1);
  return {};
}

/// Whether `pid` is the slurmstepd of step `job`.`step` ("slurmstepd: [JOB.STEP]").
bool is_stepd(long pid, const std::string& job_step) {
  std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  return cmdline.starts_with("slurmstepd: [" + job_step + "]");
}

/// A step of this job on this node whose slurmstepd died (SIGKILL, a crash) never ran its
/// clean-up, and the job's epilog may be hours away: its holder (and, unnamed, its container)
/// goes now, at the next step of the job here. As the user, in the task: the holder is the
/// user's.
void reap_stale_steps(const StepIds& ids, const std::vector<std::string>& env) {
  DIR* d = ::opendir(user_dir(ids).c_str());
  if (d == nullptr) return;
  std::string prefix = std::to_string(ids.job) + ".", suffix = "." + ids.node + ".step";
  std::string mine = step_file(ids);
  std::vector<std::string> stale;
  while (struct dirent* e = ::readdir(d)) {
    std::string entry = e->d_name;
    if (!entry.starts_with(prefix) || !entry.ends_with(suffix)) continue;
    std::string path = user_dir(ids) + "/" + entry;
    if (path == mine) continue;
    std::string job_step = entry.substr(0, entry.size() - suffix.size());
    StepRecord r = parse_step_record(read_file(path, O_NOFOLLOW));
    if (r.fields == 5 && r.stepd > 0 && !is_stepd(r.stepd, job_step)) stale.push_back(path);
  }
  ::closedir(d);
  for (const std::string& path : stale) {
    StepRecord r = parse_step_record(read_file(path, O_NOFOLLOW));
    if (r.owned == 1) kill_holder(r.holder, ids.uid);
    if (r.owned == 1 && r.holder == 0 && r.name == "-") kill_run_session(r.runner, ids.uid);
    if (r.owned == 1 && r.name.starts_with("slurm-")) {
      Ran rm = run_berth({"rm", "-f", r.name}, env, nullptr);
      if (rm.status != 0)
        slurm_info("berth: removing %s of a dead step: %s", r.name.c_str(),
                   last_line(rm.err).c_str());
    }
    (void)::unlink(path.c_str());
    (void)::unlink((path + ".lock").c_str());
    (void)::unlink((path + ".save").c_str());
  }
}

/// Whether a process other than `holder` is in the holder's mount namespace: a task of
/// another step still in a named container.
bool namespace_in_use(long holder) {
  struct stat mine;
  std::string ns = "/proc/" + std::to_string(holder) + "/ns/mnt";
  if (::stat(ns.c_str(), &mine) != 0) return false;
  bool used = false;
  bool listed = berth::for_each_pid([&](pid_t pid) {
    if (pid == holder) return false;
    struct stat st;
    std::string theirs = "/proc/" + std::to_string(pid) + "/ns/mnt";
    used = ::stat(theirs.c_str(), &st) == 0 && st.st_ino == mine.st_ino &&
           st.st_dev == mine.st_dev && process_state(pid) != 'Z';
    return used;
  });
  return !listed || used;  // cannot tell: keep it
}

/// Under the step's lock: the holder's pid, starting the container when this is the first
/// local task. The step file records it for the other tasks and for slurm_spank_exit (see
/// StepRecord; OWNED: this step started the holder), or "error MESSAGE".
Problem step_holder(spank_t sp, const StepIds& ids, long* pid) {
  const Options& o = g_state.opts;
  std::string file = step_file(ids);
  int lock = ::open((file + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) return "open: " + file + ".lock: " + errno_text(errno);
  while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }
  } unlock{lock};

  std::string state = read_file(file);
  if (state.starts_with("error "))
    return "the container was not started successfully by another task: " + state.substr(6);
  if (!state.empty()) {
    *pid = std::atol(state.c_str());
    // Holder 0: the task starting the container was killed before it was up (record()).
    if (*pid <= 0) return "the task starting the step's container ended before it was up";
    return {};
  }
  std::vector<std::string> env = job_environment(sp);
  record_store(ids, env);
  // pyxis's USER@IMAGE: berth's pull takes that user's stored login (berth login -u USER).
  if (std::string user = berth::slurm::image_user(o); !user.empty()) {
    std::erase_if(env, [](const std::string& kv) { return kv.starts_with("BERTH_CREDS_USER="); });
    env.push_back("BERTH_CREDS_USER=" + user);
  }
  std::string name = berth::slurm::container_name(o, g_state.args, ids);
  char cwd_buf[4096];
  std::string cwd = ::getcwd(cwd_buf, sizeof cwd_buf) != nullptr ? cwd_buf : "/";

  auto fail = [&](const Problem& p) {
    std::string text = "error " + p;
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      (void)!::write(fd, text.data(), text.size());
      ::close(fd);
    }
    return p;
  };
  bool owned = false, created = false;
  int monitor_err = -1;
  struct CloseErr {
    int* fd;
    ~CloseErr() {
      if (*fd >= 0) ::close(*fd);
    }
  } close_err{&monitor_err};
  // A named container may be wanted by several jobs' steps at once: its look-up and creation
  // happen under a lock of its own, which task_init holds (the step's lock covers only this
  // step's tasks).
  reap_stale_steps(ids, env);
  std::string stepd = std::to_string(::getppid());  // the task's parent: its slurmstepd
  auto record = [&](long holder, const std::string& what, bool own, long runner) -> Problem {
    std::string text = std::to_string(holder) + " " + what + " " + (own ? "1" : "0") + " " +
                       std::to_string(runner) + " " + stepd;
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return "open: " + file + ": " + errno_text(errno);
    (void)!::write(fd, text.data(), text.size());
    ::close(fd);
    return {};
  };
  // Until the holder is up the record says "starting" (holder 0) with what slurm_spank_exit
  // needs to end a start cut short by the task's death (proctrack/cgroup's scancel, an OOM
  // kill, while an image's entrypoint runs): the container's name, or a background run's pid.
  // Without it such a start left its container, and the holder that stopped itself afterwards,
  // behind for good. (proctrack/linuxproc signals no process still named slurmstepd: a task in
  // task_init outlives scancel, and its own 60 s limit on the holder ends the start.)
  auto starting_run = [&](long runner) { return record(0, "-", true, runner); };
  if (!o.save.empty()) {
    // For the step's last task_exit (slurmstepd, which has not the job's working directory):
    // the container to save, and where.
    std::string path = o.save.starts_with("/") ? o.save : cwd + "/" + o.save;
    std::string text = name + "\n" + path;
    int fd = ::open((file + ".save").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return fail("open: " + file + ".save: " + errno_text(errno));
    (void)!::write(fd, text.data(), text.size());
    ::close(fd);
  }
  Problem p;
  long found = -1;
  // A holder another step's end has just killed: its run counts as running until its
  // monitor is done (and `berth start` would do nothing then): wait for that.
  bool running = false;
  if (!o.name.empty()) found = holder_pid(name, env, &p, nullptr, &running);
  for (int i = 0; i < 2000 && (found > 0 || (found == 0 && running)); ++i) {
    char st = found > 0 ? process_state(found) : 0;
    if (st != 0 && st != 'Z' && st != 'X') break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    found = holder_pid(name, env, &p, nullptr, &running);
  }
  using berth::slurm::NameMode;
  // Running means a holder this plugin started (names are node-unique, so it is this node's).
  if (found > 0 && (process_state(found) != 'T' ||
                    read_file("/proc/" + std::to_string(found) + "/cmdline").find("kill -STOP") ==
                        std::string::npos))
    return fail("container '" + name +
                "' is running, but not as a Slurm step's container (started outside Slurm)");
  if (found < 0 && !o.name.empty() && o.image.empty())
    return fail("a container with name '" + o.name +
                "' does not exist, and --container-image is not set");
  if (found >= 0 && o.name_mode == NameMode::kCreate)
    return fail("container '" + o.name + "' already exists (--container-name=" + o.name +
                ":create)");
  if (found <= 0 && o.name_mode == NameMode::kExec)
    return fail("container '" + o.name + "' is not running (--container-name=" + o.name + ":exec)");
  if (found > 0 && o.name_mode == NameMode::kNoExec) {
    // pyxis's no_exec: the running container's filesystem, in namespaces of this step's own
    // (its mounts, its --container-unshare): `berth run DIR` on the container's root, in the
    // background as for a squashfs file, with the running container's environment.
    Ran root =
        run_berth({"inspect", "--format", "{{.rootfs}}\n{{index .Config \"WorkingDir\"}}", name},
                  env, nullptr);
    size_t nl = root.out.find('\n');
    std::string rootfs = root.out.substr(0, nl);
    std::string workdir = nl == std::string::npos ? "" : root.out.substr(nl + 1);
    workdir = workdir.substr(0, workdir.find('\n'));
    if (root.status != 0 || !rootfs.starts_with("/"))
      return fail(root.status != 0 ? last_line(root.err) : "inspect " + name + ": no rootfs");
    Options with = o;
    with.image = rootfs;
    if (with.workdir.empty() && workdir.starts_with("/")) with.workdir = workdir;  // the image's
    with.name.clear();
    with.save.clear();
    with.entrypoint = false;  // a directory has no image config: the holder is the command
    if (with.writable == true) with.writable.reset();  // a directory is written in place
    std::vector<std::string> args;
    if (Problem q = berth::slurm::run_arguments(with, g_state.args, ids, cwd, &args); !q.empty())
      return fail(q);
    std::vector<std::string> image_env;
    std::string text = read_file("/proc/" + std::to_string(found) + "/environ");
    for (size_t start = 0; start < text.size();) {
      size_t end = text.find('\0', start);
      if (end == std::string::npos) end = text.size();
      std::string kv = text.substr(start, end - start);
      start = end + 1;
      if (kv.find('=') == std::string::npos || kv.starts_with("HOSTNAME=") || launcher_variable(kv))
        continue;
      image_env.insert(image_env.end(), {"-e", kv});
    }
    args.insert(args.begin() + 1, image_env.begin(), image_env.end());
    long runner = 0, holder = 0;
    if (Problem q = start_background(args, env, &runner, &holder, starting_run); !q.empty())
      return fail(q);
    if (Problem q = record(holder, "-", true, runner); !q.empty()) return fail(q);
    *pid = holder;
    return {};
  }
  if (found > 0 && !o.mounts.empty())
    slurm_spank_log("berth: ignoring --container-mounts when attaching to a running container");
  Ran r;
  if (found < 0) {
    std::vector<std::string> args;
    Options with = o;
    // The batch step's command is the script in slurmd's spool: bound read-only at the same
    // path, so that Slurm's execve finds it inside, as pyxis does.
    int argc = 0;
    char** argv = nullptr;
    if (ids.step == berth::slurm::kBatchStep &&
        spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS && argc > 0 &&
        argv[0] != nullptr && argv[0][0] == '/')
      with.mounts.push_back(std::string(argv[0]) + ":" + argv[0] + ":ro");
    if (ids.step == berth::slurm::kBatchStep) {
      if (Problem q = add_host_tools(sp, ids, &with); !q.empty()) return fail(q);
    }
    // srun --mpi=pmix: the step's PMIx server directory (its shared-memory data store, under
    // slurmd's spool) bound at its path, as enroot's PMI hook does; the socket is TCP.
    if (std::string dir = pmix_server_dir(sp); !dir.empty()) with.mounts.push_back(dir + ":" + dir);
    if (Problem q = berth::slurm::run_arguments(with, g_state.args, ids, cwd, &args); !q.empty())
      return fail(q);
    if (berth::slurm::is_squashfs_path(o.image) && !berth::slurm::needs_container(o)) {
      long runner = 0, holder = 0;
      if (Problem q = start_background(args, env, &runner, &holder, starting_run); !q.empty())
        return fail(q);
      // "-": no container record; the runner ends with its holder.
      if (Problem q = record(holder, "-", true, runner); !q.empty()) return fail(q);
      *pid = holder;
      return {};
    }
    if (Problem q = record(0, name, true, 0); !q.empty()) return fail(q);
    r = run_berth(args, env, nullptr, &monitor_err);
    if (r.status != 0) return fail(last_line(r.err));
    created = true;
  } else if (found == 0) {
    if (Problem q = record(0, name, true, 0); !q.empty()) return fail(q);
    r = run_berth({"start", name}, env, nullptr, &monitor_err);
    if (r.status != 0) return fail(last_line(r.err));
  }
  owned = found <= 0;
  if (o.entrypoint_log && !r.err.empty()) (void)!::write(STDERR_FILENO, r.err.data(), r.err.size());
  if (owned) {
    // A detached start may return before its monitor has recorded the workload: ask again
    // for a while. A start that fails in the monitor (a missing bind source) says so on its
    // stderr.
    auto monitor_failure = [&] {
      std::string text = monitor_err >= 0 ? read_all(monitor_err) : "";
      return text.find("berth: error:") != std::string::npos ? last_line(text) : "";
    };
    // A container this step created and already exited will not start (a restarted one may
    // still show its last run's status).
    bool exited = false;
    found = holder_pid(name, env, &p, &exited);
    for (int i = 0; i < 1000 && found == 0 && !(created && exited) && monitor_failure().empty();
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      found = holder_pid(name, env, &p, &exited);
    }
    Problem q;
    if (found <= 0) {
      q = monitor_failure();
      if (q.empty()) q = p.empty() ? "container '" + name + "' is not running" : p;
    } else {
      q = wait_stopped(found);
      if (!q.empty() && !monitor_failure().empty()) q = monitor_failure();
    }
    if (!q.empty()) {
      // The monitor of a failed start records its error with the container (berth logs and
      // rm print it); a container made for this step and never started is of no use.
      std::string said = run_berth({"logs", name}, env, nullptr).err;
      if (created) said += run_berth({"rm", "-f", name}, env, nullptr).err;  // best effort
      if (size_t at = said.rfind("berth: error:"); at != std::string::npos)
        q = last_line(said.substr(0, said.find('\n', at)));
      return fail(q);
    }
  }
  if (Problem q = record(found, name, owned, 0); !q.empty()) return fail(q);
  *pid = found;
  return {};
}

bool same_ns(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_ino == sb.st_ino &&
         sa.st_dev == sb.st_dev;
}

/// The container's environment merged into the task's, as pyxis does: the image's variables
/// win, except those --container-env names; LANG and LC_ALL come from the image only.
Problem merge_environment(spank_t sp, long pid) {
  const Options& o = g_state.opts;
  auto listed = [&](std::string_view n) {
    for (const std::string& e : o.env_names)
      if (e == n) return true;
    return false;
  };
  std::string text = read_file("/proc/" + std::to_string(pid) + "/environ");
  for (const char* n : {"LANG", "LANGUAGE", "LC_ALL"})
    if (!listed(n)) spank_unsetenv(sp, n);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    std::string kv = text.substr(start, end - start);
    start = end + 1;
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "HOSTNAME") continue;  // the node's name is the truth in a job
    if (launcher_variable(kv)) continue;  // the task's own rank, not the holder's
    spank_err_t e = spank_setenv(sp, k.c_str(), v.c_str(), listed(k) ? 0 : 1);
    if (e != ESPANK_SUCCESS && e != ESPANK_ENV_EXISTS)  // exists: a --container-env name
      return "env: cannot set " + k + ": " + spank_strerror(e);
  }
  // PMIx: the modules the server chose, as MCA parameters that a client in the image (maybe
  // an older PMIx) reads, unless the job set them (enroot's PMI hook does the same).
  for (auto [from, to] : {std::pair{"PMIX_PTL_MODULE", "PMIX_MCA_ptl"},
                          std::pair{"PMIX_SECURITY_MODE", "PMIX_MCA_psec"},
                          std::pair{"PMIX_GDS_MODULE", "PMIX_MCA_gds"}}) {
    char value[256];
    if (spank_getenv(sp, from, value, sizeof value) == ESPANK_SUCCESS)
      spank_setenv(sp, to, value, 0);
  }
  // PyTorch's launcher variables for PyTorch images: RANK and LOCAL_RANK as pyxis sets them,
  // WORLD_SIZE and MASTER_ADDR (the step's first node) as enroot's PyTorch hook does.
  char buf[64];
  if (spank_getenv(sp, "PYTORCH_VERSION", buf, sizeof buf) == ESPANK_SUCCESS) {
    if (spank_getenv(sp, "SLURM_PROCID", buf, sizeof buf) == ESPANK_SUCCESS)
      spank_setenv(sp, "RANK", buf, 1);
    if (spank_getenv(sp, "SLURM_LOCALID", buf, sizeof buf) == ESPANK_SUCCESS)
      spank_setenv(sp, "LOCAL_RANK", buf, 1);
    if (spank_getenv(sp, "SLURM_NTASKS", buf, sizeof buf) == ESPANK_SUCCESS)
      spank_setenv(sp, "WORLD_SIZE", buf, 0);
    std::vector<char> nodes(65536);
    int len = static_cast<int>(nodes.size());
    if (spank_getenv(sp, "SLURM_STEP_NODELIST", nodes.data(), len) == ESPANK_SUCCESS ||
        spank_getenv(sp, "SLURM_JOB_NODELIST", nodes.data(), len) == ESPANK_SUCCESS) {
      // Slurm's own hostlist parser ("n[1-3],gpu07"), from the slurmstepd that loaded us.
      berth::slurm::Hostlist hl = slurm_hostlist_create(nodes.data());
      if (hl != nullptr) {
        if (char* first = slurm_hostlist_shift(hl); first != nullptr) {
          spank_setenv(sp, "MASTER_ADDR", first, 0);
          std::free(first);
        }
        slurm_hostlist_destroy(hl);
      }
    }
  }
  return {};
}

/// Moves this task into the holder's namespaces and root, as `berth exec` does.
Problem join(spank_t sp, long pid) {
  const Options& o = g_state.opts;
  std::string proc = "/proc/" + std::to_string(pid);
  struct Ns {
    const char* name;
    int fd;
  } ns[] = {{"user", -1}, {"mnt", -1}, {"cgroup", -1}, {"uts", -1}, {"ipc", -1}, {"net", -1}};
  auto close_all = [&] {
    for (auto& n : ns)
      if (n.fd >= 0) ::close(n.fd);
  };
  for (auto& n : ns) {
    std::string theirs = proc + "/ns/" + n.name;
    if (same_ns("/proc/self/ns/" + std::string(n.name), theirs)) continue;
    n.fd = ::open(theirs.c_str(), O_RDONLY | O_CLOEXEC);
    if (n.fd < 0) {
      int e = errno;
      close_all();
      return "open: " + theirs + ": " + errno_text(e);
    }
  }
  int root = ::open((proc + "/root").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int cwd = ::open((proc + "/cwd").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0 || cwd < 0) {
    int e = errno;
    close_all();
    return "open: " + proc + "/root: " + errno_text(e);
  }
  if (Problem p = merge_environment(sp, pid); !p.empty()) return p;
  Problem p;
  for (auto& n : ns) {
    if (n.fd >= 0 && p.empty() && ::setns(n.fd, 0) != 0)
      p = std::string("setns: ") + n.name + ": " + errno_text(errno);
  }
  close_all();
  if (p.empty() && (::fchdir(root) != 0 || ::chroot(".") != 0))
    p = "chdir: /: the container's root: " + errno_text(errno);
  if (p.empty()) {
    if (!o.workdir.empty()) {
      if (::chdir(o.workdir.c_str()) != 0)
        p = "chdir to working directory: " + o.workdir + ": " + errno_text(errno);
    } else if (::fchdir(cwd) != 0) {
      p = "chdir to working directory: " + errno_text(errno);
    }
  }
  ::close(root);
  ::close(cwd);
  if (!p.empty()) return p;
  // The holder's root emulation (berth run's seccomp filter: set*id and chown succeed without
  // effect), which setns does not carry: the task installs it as the holder has it, as pyxis
  // installs enroot's filter in every task.
  if (read_file(proc + "/status").find("\nSeccomp:\t2") != std::string::npos &&
      berth::install_root_emulation() != 0)
    return "root emulation: seccomp: " + errno_text(errno);
  char buf[4096];
  if (::getcwd(buf, sizeof buf) != nullptr) spank_setenv(sp, "PWD", buf, 1);
  // As the workload of `berth run`: with --container-remap-root the task is uid 0 in the
  // container's namespace, and without CAP_SYS_ADMIN it cannot undo the mount plan.
  if (::prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0)
    return "drop capability: CAP_SYS_ADMIN: " + errno_text(errno);
  return {};
}

std::vector<std::string> plugin_arguments(int ac, char** av) {
  std::vector<std::string> args;
  args.reserve(static_cast<size_t>(ac));
  for (int i = 0; i < ac; ++i) args.emplace_back(av[i]);
  return args;
}

int option_callback(int val, const char* optarg, int remote) {
  Problem p = berth::slurm::apply_option(static_cast<size_t>(val), optarg, &g_state.opts);
  if (p.empty()) return 0;
  if (remote) {
    // slurmstepd: only task_init's errors reach srun; srun has checked the same value already.
    if (g_state.deferred.empty()) g_state.deferred = p;
    return 0;
  }
  report(p, false);
  return -1;
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  spank_context_t ctx = spank_context();
  if (Problem p = berth::slurm::parse_plugin_args(plugin_arguments(ac, av), &g_state.args);
      !p.empty()) {
    slurm_error("berth: %s", p.c_str());
    return -1;
  }
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR) return 0;
  if (ctx == S_CTX_ALLOCATOR && !g_state.args.sbatch_support) return 0;
  const auto& table = berth::slurm::option_table();
  for (size_t i = 0; i < table.size(); ++i) {
    int has_arg = table[i].arg == nullptr ? 0 : 1;
    if (table[i].optional_arg) has_arg = 2;  // SPANK's optional argument (--container-mpi)
    struct spank_option opt = {const_cast<char*>(table[i].name),
                               const_cast<char*>(table[i].arg),
                               const_cast<char*>(table[i].usage),
                               has_arg,
                               static_cast<int>(i),
                               option_callback};
    if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
      slurm_error("berth: cannot register --%s", table[i].name);
      return -1;
    }
  }
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  spank_context_t ctx = spank_context();
  if (ctx == S_CTX_REMOTE) {
    spank_env(sp, nullptr);
    Problem p = berth::slurm::apply_environment(&g_state.opts, remote_getenv);
    if (!p.empty() && g_state.deferred.empty()) g_state.deferred = p;
    if (!g_state.opts.active()) return 0;
    StepIds ids;
    p = step_ids(sp, &ids);
    if (p.empty()) p = make_user_dir(ids);
    if (!p.empty() && g_state.deferred.empty()) g_state.deferred = p;
    return 0;
  }
  if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR) {
    Problem p = berth::slurm::apply_environment(&g_state.opts, local_getenv);
    if (!p.empty()) {
      report(p, false);
      return -1;
    }
  }
  return 0;
}

int slurm_spank_task_init(spank_t sp, int, char**) {
  if (!spank_remote(sp)) return 0;
  if (!g_state.deferred.empty()) {
    report(g_state.deferred, true);
    return -1;
  }
  if (!g_state.opts.active()) return 0;
  StepIds ids;
  Problem p = step_ids(sp, &ids);
  long pid = 0;
  // A named container: every task looks it up and joins it under its name's lock, so that
  // another step's end (which stops the holder once nobody is inside) cannot come between.
  int name_lock = -1;
  if (p.empty() && !g_state.opts.name.empty()) {
    std::string lock =
        name_lock_file(ids, berth::slurm::container_name(g_state.opts, g_state.args, ids));
    name_lock = take_lock(lock);
    if (name_lock < 0) p = "open: " + lock + ": " + errno_text(errno);
  }
  if (p.empty()) p = step_holder(sp, ids, &pid);
  if (p.empty()) p = join(sp, pid);
  if (name_lock >= 0) ::close(name_lock);
  if (!p.empty()) {
    report(p, true);
    return -1;
  }
  return 0;
}

int slurm_spank_exit(spank_t sp, int, char**) {
  if (spank_context() != S_CTX_REMOTE || !g_state.opts.active()) return 0;
  StepIds ids;
  if (!step_ids(sp, &ids).empty()) return 0;
  std::string file = step_file(ids);
  // root reading the user's file
  StepRecord rec = parse_step_record(read_file(file, O_NOFOLLOW));
  int fields = rec.fields, owned = rec.owned;
  long pid = rec.holder, runner = rec.runner;
  const std::string& name = rec.name;
  // The holder a step started ends with it; an unnamed container goes, a named one stays
  // (stopped) for the job's next steps. A named one another step is still inside stays
  // running: the last step out stops it, whichever started it.
  // The holder is stopped: a SIGTERM (berth rm's first, polite signal) would wait for the
  // grace period in vain. It is killed here, as root, so only after checking that the pid
  // (read from a file the user owns) is still the holder, and the user's.
  if (fields >= 3 && pid == 0 && owned == 1 && name != "-" && !g_state.opts.name.empty()) {
    // A named container this step was starting when it was cut short (its record still says
    // "starting"): stopped, as a step's end leaves a named container; `berth stop` also ends a
    // start still in its entrypoint.
    std::vector<std::string> env = job_environment(sp);
    Ran r = run_berth_detached({"stop", "-t", "1", name}, env, &ids, 30);
    if (r.status != 0)
      slurm_info("berth: stopping %s after an interrupted start: %s", name.c_str(),
                 last_line(r.err).c_str());
  } else if (fields >= 3 && name != "-" && !g_state.opts.name.empty()) {
    int lock = take_lock(name_lock_file(ids, name), false);
    if (!namespace_in_use(pid)) {
      kill_holder(pid, ids.uid);
      // Gone before the lock goes: the next step must not find it dying (and refuse it).
      for (int i = 0; i < 5000; ++i) {
        char st = process_state(pid);
        if (st == 0 || st == 'Z' || st == 'X') break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    if (lock >= 0) ::close(lock);
  } else if (fields >= 3 && owned == 1) {
    kill_holder(pid, ids.uid);
    // A background run whose holder never came up (scancel during its entrypoint).
    if (pid == 0 && name == "-") kill_run_session(runner, ids.uid);
  }
  if (fields >= 4 && name == "-") {
    // A squashfs run: with its holder gone, berth itself releases the mount.
    for (int i = 0; i < 10000; ++i) {
      char st = process_state(runner);
      if (st == 0 || st == 'Z') break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  } else if (fields >= 3 && owned == 1 && g_state.opts.name.empty()) {
    // An unnamed container goes; a named one stays, stopped, for the job's next steps.
    std::vector<std::string> env = job_environment(sp);
    Ran r = run_berth_detached({"rm", "-f", name}, env, &ids, 30);
    if (r.status != 0)
      slurm_error("berth: cleaning up container %s: exit status %d: %s", name.c_str(), r.status,
                  last_line(r.err).c_str());
  }
  (void)::unlink(file.c_str());  // a missing file is fine: nothing was started
  (void)::unlink((file + ".lock").c_str());
  if (ids.step == berth::slurm::kBatchStep) {
    // The agent died with the batch task; its folder goes. Root in the user's folder: through
    // descriptors, never following a link the user may have put in the folder's place.
    int users = ::open(user_dir(ids).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    std::string name = agent_dir_name(ids);
    int agent =
        users < 0 ? -1
                  : ::openat(users, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (agent >= 0) {
      (void)::unlinkat(agent, "sock", 0);
      ::close(agent);
      (void)::unlinkat(users, name.c_str(), AT_REMOVEDIR);
    }
    if (users >= 0) ::close(users);
  }
  (void)::unlink((file + ".save").c_str());
  return 0;
}

/// After each task of the step (slurmstepd, root): the last local one saves the container
/// (--container-save) with `berth squash`, as the user, before slurm_spank_exit stops it;
/// srun waits for this callback. On every node, as pyxis does: berth squash writes the file
/// under a temporary name and renames it, so nodes sharing the path never leave a torn file
/// (the last one wins).
int slurm_spank_task_exit(spank_t sp, int, char**) {
  if (spank_context() != S_CTX_REMOTE || !g_state.opts.active() || g_state.opts.save.empty())
    return 0;
  uint32_t local = 0;
  if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local) != ESPANK_SUCCESS) return 0;
  if (++g_state.exited != local) return 0;
  StepIds ids;
  if (!step_ids(sp, &ids).empty()) return 0;
  std::string file = step_file(ids);
  if (read_file(file, O_NOFOLLOW).starts_with("error ")) return 0;  // never started
  std::string save = read_file(file + ".save", O_NOFOLLOW);         // "NAME\nPATH"
  size_t nl = save.find('\n');
  if (nl == std::string::npos) return 0;
  std::string name = save.substr(0, nl), path = save.substr(nl + 1);
  Ran r = run_berth({"squash", name, "-o", path}, job_environment(sp), &ids);
  if (r.status != 0) {
    slurm_error("berth: --container-save: %s", last_line(r.err).c_str());
    return -1;
  }
  slurm_spank_log("berth: saved container %s to %s", name.c_str(), path.c_str());
  return 0;
}

/// At the job's end on each node (slurmd's epilog, root, no PATH, no job environment): the
/// sweep behind slurm_spank_exit. As the user, every container of the job the plugin made
/// goes: unnamed ones a killed step left (slurm-JOB.*), and with container_scope=job the job's
/// named ones (JOB_NAME), as pyxis's epilog does.
int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  if (Problem p = berth::slurm::parse_plugin_args(plugin_arguments(ac, av), &g_state.args);
      !p.empty()) {
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
  std::string text = read_file(file, O_NOFOLLOW);  // root reading the user's file
  if (text.empty()) return 0;                      // the plugin made nothing here
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  if (!g_state.args.site_conf.empty()) env.push_back("BERTH_SITE_CONF=" + g_state.args.site_conf);
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) env.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  // Steps whose slurmstepd died before its clean-up left their step files: their holders
  // (named containers' too) are stopped here, after the same checks as slurm_spank_exit's.
  if (DIR* d = ::opendir(user_dir(ids).c_str()); d != nullptr) {
    std::string prefix = std::to_string(job) + ".";
    while (struct dirent* e = ::readdir(d)) {
      std::string entry = e->d_name;
      if (!entry.starts_with(prefix) || !entry.ends_with(".step")) continue;
      std::string path = user_dir(ids) + "/" + entry;
      long holder = 0;
      char name[512] = "";
      int owned = 0;
      if (std::sscanf(read_file(path, O_NOFOLLOW).c_str(), "%ld %511s %d", &holder, name, &owned) ==
              3 &&
          owned == 1)
        kill_holder(holder, ids.uid);
      (void)::unlink(path.c_str());
      (void)::unlink((path + ".lock").c_str());
    }
    ::closedir(d);
  }
  Ran ps = run_berth({"ps", "-a", "--format", "{{.Names}}"}, env, &ids);
  if (ps.status != 0) slurm_error("berth: job epilog: %s", last_line(ps.err).c_str());
  std::vector<std::string> gone = {"rm", "-f"};
  std::string unnamed = "slurm-" + std::to_string(job) + ".";
  std::string scoped = std::to_string(job) + "_";
  for (size_t start = 0; start < ps.out.size();) {
    size_t end = ps.out.find('\n', start);
    if (end == std::string::npos) end = ps.out.size();
    std::string name = ps.out.substr(start, end - start);
    start = end + 1;
    if (name.starts_with(unnamed) || (g_state.args.job_scope && name.starts_with(scoped)))
      gone.push_back(name);
  }
  if (gone.size() > 2) {
    Ran r = run_berth(gone, env, &ids);
    if (r.status != 0) slurm_error("berth: job epilog: %s", last_line(r.err).c_str());
  }
  (void)::unlink(file.c_str());
  return 0;
}

}  // extern "C"

#include "slurm/spank_slurmstepd.h"

extern "C" {
#include <slurm/slurm.h>
}

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "slurm/berth_command.h"
#include "slurm/holder.h"
#include "slurm/spank_plugin.h"
#include "slurm/step_container.h"
#include "slurm/step_state.h"
#include "slurm/task_join.h"

namespace berth::slurm {
namespace {

std::optional<std::string> spank_env(spank_t sp, const char* name) {
  static spank_t current;  // set by the caller below; getenv callbacks take no context
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

/// How long the step's end tries for a named container's lock before it goes on without it.
/// A step's tasks hold it for a look-up and a join, a start until its holder is up; the
/// user's own process may hold it for ever, and root must not wait for that (Slurm would
/// drain the node after its unkillable-step timeout).
constexpr int kNameLockTries = 1000;  // 10 ms apart: 10 s
constexpr const char* kNameLockBound = "10 s";

/// The name's lock for the step's end (root): the file a task made in the user's folder,
/// taken without waiting and tried again for kNameLockTries; never created, never through a
/// link, never anything but a plain file. -1 when there is none or it stays held (said in the
/// step's log); the caller closes it.
int take_name_lock_bounded(const StepIds& ids, const std::string& name) {
  std::string path = name_lock_file(ids, name);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st;
  if (fd >= 0 && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    ::close(fd);
    fd = -1;
  }
  if (fd < 0) return -1;  // no task of the name's made it here: nothing to keep out
  for (int i = 0; ::flock(fd, LOCK_EX | LOCK_NB) != 0; ++i) {
    if ((errno != EWOULDBLOCK && errno != EINTR) || i == kNameLockTries) {
      slurm_error(
          "berth: container %s: its lock %s is still held after %s (by a process of "
          "the user's): the step's end goes on without it",
          name.c_str(), path.c_str(), kNameLockBound);
      ::close(fd);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fd;
}

/// Takes an exclusive flock on `path` (created 0600), or returns -1; the caller closes it.
int take_lock(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_CREAT, 0600);
  while (fd >= 0 && ::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  return fd;
}

/// The batch step's agent (host_agent.h) died with the batch task; its folder goes. Root in the
/// user's folder: through descriptors, never following a link the user may have put in the
/// folder's place.
void remove_agent_dir(const StepIds& ids) {
  int users = ::open(user_dir(ids).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  std::string name = agent_dir_name(ids);
  int agent = users < 0
                  ? -1
                  : ::openat(users, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (agent >= 0) {
    (void)::unlinkat(agent, "sock", 0);
    ::close(agent);
    (void)::unlinkat(users, name.c_str(), AT_REMOVEDIR);
  }
  if (users >= 0) ::close(users);
}

/// Ends what the step `rec` says it started on this node (root): the holder a step started
/// ends with it; an unnamed container goes, a named one stays (stopped) for the job's next
/// steps. A named one another step is still inside stays running: the last step out stops it,
/// whichever started it. The holder is stopped: a SIGTERM (berth rm's first, polite signal)
/// would wait for the grace period in vain. It is killed here, as root, so only after checking
/// that the pid (read from a file the user owns) is still the holder, and the user's.
void end_step(spank_t sp, const StepIds& ids, const StepRecord& rec) {
  const bool named = !g_state.opts.name.empty();
  const std::string& name = rec.container;
  if (rec.phase == StepPhase::kStarting && rec.owned && !name.empty() && named) {
    // A named container this step was starting when it was cut short: stopped, as a step's
    // end leaves a named container; `berth stop` also ends a start still in its entrypoint.
    Ran r = run_berth_detached({"stop", "-t", "1", "--", name}, job_environment(sp), &ids, 30);
    if (r.status != 0)
      slurm_info("berth: stopping %s after an interrupted start: %s", name.c_str(),
                 r.problem().c_str());
  } else if (!name.empty() && named) {
    int lock = take_name_lock_bounded(ids, name);
    if (!namespace_in_use(rec.holder)) {
      kill_holder(rec.holder, ids.uid);
      wait_gone(rec.holder, 5000);  // gone before the lock goes: the next step must not find it
                                    // dying (and refuse it)
    }
    if (lock >= 0) ::close(lock);
  } else if (rec.owned) {
    kill_holder(rec.holder, ids.uid);
    // A background run whose holder never came up (scancel during its entrypoint).
    if (rec.holder == 0 && name.empty()) kill_run_session(rec.runner, ids.uid);
  }
  if (name.empty()) {
    wait_gone(rec.runner, 10000);  // a squashfs run: with its holder gone, berth itself
                                   // releases the mount
  } else if (rec.owned && !named) {
    Ran r = run_berth_detached({"rm", "-f", "--", name}, job_environment(sp), &ids, 30);
    if (r.status != 0)
      slurm_error("berth: cleaning up container %s: exit status %d: %s", name.c_str(), r.status,
                  r.problem().c_str());
  }
}

}  // namespace

int slurmstepd_post_opt(spank_t sp) {
  spank_env(sp, nullptr);
  Problem p = apply_environment(&g_state.opts, remote_getenv);
  if (!p.empty() && g_state.deferred.empty()) g_state.deferred = p;
  if (!g_state.opts.active()) return 0;
  StepIds ids;
  p = step_ids(sp, &ids);
  if (p.empty()) p = make_user_dir(ids);
  if (!p.empty() && g_state.deferred.empty()) g_state.deferred = p;
  return 0;
}

int slurmstepd_task_init(spank_t sp) {
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
    std::string lock = name_lock_file(ids, container_name(g_state.opts, g_state.args, ids));
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

/// After each task of the step (slurmstepd, root): the last local one saves the container
/// (--container-save) with `berth squash`, as the user, before slurmstepd_exit stops it; srun
/// waits for this callback. On every node, as pyxis does: berth squash writes the file under a
/// temporary name and renames it, so nodes sharing the path never leave a torn file (the last
/// one wins).
int slurmstepd_task_exit(spank_t sp) {
  if (!g_state.opts.active() || g_state.opts.save.empty()) return 0;
  uint32_t local = 0;
  if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local) != ESPANK_SUCCESS) return 0;
  if (++g_state.exited != local) return 0;
  StepIds ids;
  if (!step_ids(sp, &ids).empty()) return 0;
  std::optional<StepRecord> rec;
  if (Problem p = read_record(step_file(ids), &rec); !p.empty()) {
    slurm_error("berth: --container-save: %s", p.c_str());
    return -1;
  }
  if (!rec || rec->phase == StepPhase::kFailed || rec->save.empty()) return 0;  // never started
  std::string name = container_name(g_state.opts, g_state.args, ids);
  Ran r = run_berth({"squash", "-o", rec->save, "--", name}, job_environment(sp), &ids);
  if (r.status != 0) {
    slurm_error("berth: --container-save: %s", r.problem().c_str());
    return -1;
  }
  slurm_spank_log("berth: saved container %s to %s", name.c_str(), rec->save.c_str());
  return 0;
}

int slurmstepd_exit(spank_t sp) {
  if (!g_state.opts.active()) return 0;
  StepIds ids;
  if (!step_ids(sp, &ids).empty()) return 0;
  std::string file = step_file(ids);
  std::optional<StepRecord> rec;
  if (Problem p = read_record(file, &rec); !p.empty()) slurm_error("berth: %s", p.c_str());
  if (rec && rec->phase != StepPhase::kFailed) end_step(sp, ids, *rec);
  (void)::unlink(file.c_str());  // a missing file is fine: nothing was started
  (void)::unlink((file + ".lock").c_str());
  if (ids.step == kBatchStep) remove_agent_dir(ids);
  return 0;
}

}  // namespace berth::slurm

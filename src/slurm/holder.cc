#include "slurm/holder.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "core/proc_stat.h"
#include "runtime/session_kill.h"
#include "slurm/spank_plugin.h"

namespace berth::slurm {
namespace {

std::string proc(long pid) {
  return "/proc/" + std::to_string(pid);
}

/// Whether /proc/PID is owned by `uid` (a process that changed its ids has root's folder).
bool owned_by(long pid, unsigned uid) {
  struct stat st;
  return ::stat(proc(pid).c_str(), &st) == 0 && st.st_uid == uid;
}

}  // namespace

char process_state(long pid) {
  std::optional<berth::ProcStat> st = berth::read_proc_stat(static_cast<pid_t>(pid));
  return st ? st->state : 0;
}

bool is_holder(long pid) {
  return process_state(pid) == 'T' &&
         read_file(proc(pid) + "/cmdline").find("kill -STOP") != std::string::npos;
}

long find_holder(long root) {
  // A directory run execs in place, so `root` itself becomes the holder's shell ("sh -c
  // SCRIPT"). Until then it is berth, whose command line carries the script too ("berth run
  // ... sh -c SCRIPT"): only a second word "-c" makes `root` the holder.
  if (is_holder(root)) {
    std::string cmdline = read_file(proc(root) + "/cmdline");
    std::size_t end = cmdline.find('\0');
    if (end != std::string::npos && cmdline.compare(end + 1, 3, std::string("-c\0", 3)) == 0)
      return root;
  }
  std::vector<long> todo = {root};
  while (!todo.empty()) {
    long p = todo.back();
    todo.pop_back();
    if (p != root && is_holder(p)) return p;
    std::string children = read_file(proc(p) + "/task/" + std::to_string(p) + "/children");
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

void wait_gone(long pid, int ms) {
  for (int i = 0; i < ms; ++i) {
    char st = process_state(pid);
    if (st == 0 || st == 'Z' || st == 'X') return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void kill_holder(long pid, unsigned uid) {
  if (pid > 0 && owned_by(pid, uid) &&
      read_file(proc(pid) + "/cmdline").find("kill -STOP") != std::string::npos)
    ::kill(static_cast<pid_t>(pid), SIGKILL);
}

void kill_run_session(long runner, unsigned uid) {
  if (runner <= 0 || !owned_by(runner, uid)) return;
  pid_t sid = ::getsid(static_cast<pid_t>(runner));
  if (sid == ::getsid(0)) return;
  berth::kill_session(sid, [uid](pid_t pid) {  // only the user's: the pid came from their file
    return !owned_by(pid, uid);
  });
}

bool namespace_in_use(long holder) {
  struct stat mine;
  if (::stat((proc(holder) + "/ns/mnt").c_str(), &mine) != 0) return false;
  bool used = false;
  bool listed = berth::for_each_pid([&](pid_t pid) {
    if (pid == holder) return false;
    struct stat st;
    used = ::stat((proc(pid) + "/ns/mnt").c_str(), &st) == 0 && st.st_ino == mine.st_ino &&
           st.st_dev == mine.st_dev && process_state(pid) != 'Z';
    return used;
  });
  return !listed || used;  // cannot tell: keep it
}

bool is_stepd(long pid, const std::string& job_step) {
  return read_file(proc(pid) + "/cmdline").starts_with("slurmstepd: [" + job_step + "]");
}

}  // namespace berth::slurm

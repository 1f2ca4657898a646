// Ending a whole session of processes: what a detached container's workload left behind
// (runtime/monitor.cc), and a Slurm step's background run whose start was cut short
// (slurm/spank_berth.cc). Header-only: the SPANK plugin compiles only a few of Berth's sources.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include "core/proc_stat.h"

namespace berth {

/// Whether /proc/PID/stat says the process is a zombie (or is gone).
inline bool dead_or_zombie(pid_t pid) {
  std::optional<ProcStat> st = read_proc_stat(pid);
  return !st || st->gone();
}

/// SIGKILLs every live process of session `sid` that `spare(pid)` does not keep, in rounds
/// (a dying process's children may fork meanwhile) until a round finds none, at most 20.
template <typename Spare>
void kill_session(pid_t sid, Spare spare) {
  if (sid <= 0) return;
  for (int round = 0; round < 20; ++round) {
    int sent = 0;
    DIR* d = ::opendir("/proc");
    if (d == nullptr) return;
    while (struct dirent* e = ::readdir(d)) {
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || ::getsid(static_cast<pid_t>(pid)) != sid ||
          spare(static_cast<pid_t>(pid)) || dead_or_zombie(static_cast<pid_t>(pid)))
        continue;
      if (::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++sent;
    }
    ::closedir(d);
    if (sent == 0) return;
    // Reaped by their parents (or by init): give them a moment to leave /proc.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace berth

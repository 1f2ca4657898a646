// Ending a whole session of processes: what a detached container's workload left behind
// (runtime/monitor.cc), and a Slurm step's background run whose start was cut short
// (slurm/holder.cc). Header-only: the SPANK plugin compiles only a few of Berth's sources.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
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
    bool listed = for_each_pid([&](pid_t pid) {
      if (::getsid(pid) == sid && !spare(pid) && !dead_or_zombie(pid) && ::kill(pid, SIGKILL) == 0)
        ++sent;
      return false;  // every one of them
    });
    if (!listed || sent == 0) return;
    // Reaped by their parents (or by init): give them a moment to leave /proc.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace berth

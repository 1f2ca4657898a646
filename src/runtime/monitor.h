// Detached runs without a daemon (`berth run -d`, `berth start`) and what a container's runs
// leave for `ps`, `logs`, `wait`, `stop`, `kill` and `exec` to read.
//
// A detached run forks twice: the first child starts a new session and exits, so the second,
// the monitor, is nobody's child and has no terminal. The monitor is an ordinary `berth run`
// from then on (it holds run.lock, which it inherits already taken, and runs the engine) with
// stdin on /dev/null (or a pipe nobody writes, for -i), stdout and stderr on pipes to a logger
// (forked by the first child too, so not the monitor's child), which appends what comes to
// containers/<id>/log stream by stream, and ends when both pipes close. The monitor records its
// start and end in containers/<id>/monitor.json; the workload dies with it (the engine's
// PR_SET_PDEATHSIG), so a monitor killed outright leaves a record with a start and no end, and a
// free run lock: `ps` says Exited (137).
//
// The monitor is not made a child subreaper (PR_SET_CHILD_SUBREAPER): the engine waits for its
// own child only, so orphans of the workload re-parented to the monitor would stay zombies
// until it exits, and `exec`/`kill` find the workload as the monitor's one child.
//
// Foreground runs write nothing of this (they are tuned for start-up time): their start time is
// run.lock's mtime (the pid written into it at start), their end container.json's mtime when the
// run's end rewrote it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/fs.h"
#include "runtime/containers.h"

namespace berth {

/// When a container's last run started and ended, and how, as far as the files tell.
struct RunTimes {
  int64_t started_ns = 0;        ///< the last run's start (Unix ns), 0 before the first
  int64_t finished_ns = 0;       ///< its end, 0 while it runs or when unknown
  std::optional<int> exit_code;  ///< the last run's status (137: its monitor was killed)
  bool detached = false;         ///< the last run was a detached one
  std::string error;  ///< a detached run that failed in Berth: its error's message, else ""
};

/// Reads the times of `c`'s last run (`c` as loaded: running, last_exit).
RunTimes run_times(const ContainerStore& cs, const ContainerRecord& c);

/// containers/<id>/log: a detached run's stdout and stderr, each piece of output a record
/// (stream, time, bytes) in the order it came, written by a logger process beside the monitor.
std::string log_path(const ContainerStore& cs, const ContainerRecord& c);

/// Receives one piece of a log: stream 1 (stdout) or 2 (stderr), the time it was read (Unix
/// ns; 0 when unknown) and its bytes.
using LogSink = std::function<void(int stream, int64_t time_ns, std::string_view data)>;

/// Decodes a log read piece by piece from its start (`logs -f` reads while it grows).
class LogReader {
 public:
  /// Gives `sink` every record that `more`, the next bytes of the log, completes. A record cut
  /// short waits for the next call, unless `whole` (the log ends here): then what there is of
  /// it goes too. A log without the format's first line is stdout, raw.
  void feed(std::string_view more, bool whole, const LogSink& sink);

 private:
  enum class Format { kUnknown, kRecords, kRaw };
  Format format_ = Format::kUnknown;
  std::string pending_;  ///< bytes of a record not yet complete
};

/// In the caller: forks the monitor and returns false once it has taken over `lock` (its pid
/// recorded in it, its output on the log); in the monitor: returns true, with the process
/// detached and ready to run the container. `keep_stdin`: -i, stdin a pipe that stays open.
Result<bool> detach_monitor(const ContainerStore& cs, const ContainerRecord& c,
                            const FileLock& lock, bool keep_stdin);

/// In the monitor, once the run ended: ends what the workload left running in the container's
/// session (a stopped container runs nothing, as Docker's, whose PID namespace ends with its
/// init), then records its end in monitor.json, with `error` (the message of Berth's own
/// failure to run it, which the monitor prints to the log) when there is one.
void record_monitor_end(const ContainerStore& cs, const ContainerRecord& c, int exit_code,
                        const std::string& error = "");

/// The pid of the berth process running `c` (the one in run.lock), or 0 when it is not running.
pid_t runner_pid(const ContainerStore& cs, const ContainerRecord& c);

/// The pid of the process the runner started for `c`: the workload, or the init of its PID
/// namespace; 0 when there is none (yet).
pid_t workload_pid(pid_t runner);

/// Waits until `c` is not running (its run lock free) or `timeout_s` passed (negative: no limit);
/// true when it stopped.
bool wait_stopped(const ContainerStore& cs, const ContainerRecord& c, double timeout_s);

}  // namespace berth

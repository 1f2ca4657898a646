// The part of the userns engine that runs between clone and exec.
//
// Everything the child needs is prepared by the parent as C strings and
// pointer arrays (ChildContext); the child allocates nothing, throws
// nothing and never returns: it applies the MountPlan, pivots into the root,
// execs the workload, and on any failure writes one ChildFailure record to
// the report pipe (close-on-exec, so a successful exec closes it) and _exits.
//
// Each step returns a ChildStep: done, or failed with its record written into the
// ChildFailure it was given (step_failed()). A failure goes up the calls to child_main(), the
// one place that reports it; nothing unwinds (a step returns, as any C function would).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "runtime/container_spec.h"
#include "runtime/mount_plan.h"

namespace berth {

/// The record a failing child writes to the report pipe.
struct ChildFailure {
  int exit_code = 125;  ///< 125 Berth failed, 126 cannot execute, 127 not found
  int err = 0;          ///< errno, 0 when none
  Op op;                ///< e.g. "mount", "exec:"
  char subject[1024] = {};
  char detail[256] = {};
};

/// What the child needs, prepared by the parent before clone.
struct ChildContext {
  const ContainerSpec* spec = nullptr;
  const MountPlan* plan = nullptr;
  const char* uid_map = nullptr;  ///< "UID OUTER 1"
  const char* gid_map = nullptr;
  /// The root emulation this run uses, resolved (never kAuto).
  RootEmulation emulation = RootEmulation::kSeccomp;
  /// kSubids: the holder's user namespace (runtime/subids.h), which the child joins instead of
  /// making one and writing uid_map/gid_map; it then unshares the other namespaces there.
  int userns_fd = -1;
  /// kSubids with a container user other than root: the IDs to switch to before exec
  /// (setgroups, setresgid, setresuid: real IDs of the mapped range).
  bool switch_ids = false;
  const gid_t* groups = nullptr;
  size_t group_count = 0;
  std::vector<char*> argv;     ///< null-terminated
  std::vector<char*> envp;     ///< null-terminated
  const char* path = nullptr;  ///< PATH for the command lookup
  /// ldconfig's argv (null-terminated; empty: no loader cache update), and the plan that
  /// binds its output over /etc/ld.so.cache once it succeeded.
  std::vector<char*> ldconfig_argv;
  const MountPlan* ld_cache_plan = nullptr;
  /// spec->overlay_scratch set: the tmpfs's mount point, the three directories made in it,
  /// the overlay's mount options, and what to append to the root's /etc/passwd and /etc/group
  /// ("" for nothing); root_path is then where the container's root is mounted.
  const char* overlay_scratch = nullptr;
  const char* overlay_upper = nullptr;
  const char* overlay_work = nullptr;
  const char* overlay_root = nullptr;
  const char* overlay_data = nullptr;
  const char* passwd_tail = "";
  const char* group_tail = "";
  /// The root emulation's apt drop-in to write in the overlay (kAptDropIn; "" for none).
  const char* apt_drop_in = "";
  int report_fd = -1;  ///< write end of the report pipe (close-on-exec)
  /// The parent's read end of the report pipe, which the child closes at once: the parent's
  /// copy is then the pipe's only reader, so a pipe with none says the parent died.
  int report_read_fd = -1;
  int devnull_fd = -1;  ///< stdin when !spec->stdin_open: /dev/null, or the terminal with -t
  int tty_fd = -1;      ///< the caller's terminal to hand over, or -1
  /// ContainerSpec::exec_in_place, taken: this process made the namespaces (no report pipe, no
  /// parent to die with) and is the one to exec.
  bool in_place = false;
};

/// What a step of the child returns: done, or failed with the ChildFailure it was given
/// filled in. A bool that cannot be ignored: no allocation, no exception, cheap to return.
class [[nodiscard]] ChildStep {
 public:
  /// The step did what it should.
  static constexpr ChildStep done() { return ChildStep(true); }
  /// True when done; false when the step's ChildFailure holds what to report.
  constexpr explicit operator bool() const { return done_; }

 private:
  friend ChildStep step_failed(ChildFailure& f, int exit_code, int err, Op op, const char* subject,
                               const char* detail);
  constexpr explicit ChildStep(bool done) : done_(done) {}
  bool done_;
};

/// Fills `f` (snprintf into the fixed buffers; nothing allocated) and returns the failed step:
/// `return step_failed(f, 125, errno, "mount", target);`.
ChildStep step_failed(ChildFailure& f, int exit_code, int err, Op op, const char* subject,
                      const char* detail = "");

/// Returns the enclosing step's failure when `step` (a ChildStep expression) failed.
#define BERTH_CHILD_CHECK(step)                         \
  do {                                                  \
    if (::berth::ChildStep s_ = (step); !s_) return s_; \
  } while (false)

/// One uid and one gid, mapped onto the caller's, written from inside the user namespace the
/// caller has just made (setgroups "deny", then /proc/self's uid_map and gid_map: "IN OUT 1").
ChildStep write_single_id_maps(const char* uid_map, const char* gid_map, ChildFailure& f);

/// Applies `plan` beneath the root at `root_fd` (before pivot_root); failed, with `f` filled,
/// when a required entry fails. The working directory is the root's when it returns.
ChildStep apply_mount_plan(const MountPlan& plan, int root_fd, ChildFailure& f);

/// Remounts the mount at `path` read-only, keeping its locked flags
/// (nosuid, nodev, noexec, atime) without which the remount fails with EPERM.
int remount_read_only(const char* path);
/// A bind remount of `path` adding `add` (MS_RDONLY, MS_NOSUID, ...) to the flags it has.
int remount_with(const char* path, unsigned long add);

/// Execs ctx's argv (PATH lookup when argv[0] has no '/'); returns only on
/// failure, with `f` filled (127 not found, 126 cannot execute).
ChildStep exec_workload(const ChildContext& ctx, ChildFailure& f);

/// Writes `f` to the report pipe `fd` and _exits with its exit code: the one report of a
/// child that failed (run's and exec's).
[[noreturn]] void report_child_failure(int fd, const ChildFailure& f);

/// The child's entry point after clone; never returns.
[[noreturn]] void child_main(const ChildContext& ctx);

/// A run in place (ctx.in_place: this process unshared the namespaces itself): the child's
/// setup and exec, here. Returns only on failure, with its record; the process is then inside
/// the run's namespaces, and must only report and exit.
ChildFailure set_up_and_exec_in_place(const ChildContext& ctx);

// The parent's side of a child that reports through a close-on-exec pipe (run, exec).

/// The terminal to hand to a workload run with -t: the first of stdin/stdout/stderr that is a
/// terminal whose foreground group is ours; -1 when none.
int foreground_terminal();

/// In the workload's process, before exec: makes its own process group the foreground one of
/// `tty_fd` (when >= 0), so that ^C and the terminal's reads reach it. SIGTTOU must be blocked.
void take_terminal(int tty_fd);

/// Reads the report pipe until it closes (the child exec'd: 0 bytes) or holds a whole
/// ChildFailure; the number of bytes read.
size_t read_child_report(int fd, ChildFailure* failure);

/// waitpid(pid) through EINTR; the wait status.
int wait_child(pid_t pid);

/// The outcome of a child that ended with wait `status`: its exit status (128 + a signal),
/// or the code and one-line error of the failure it reported (`got` bytes of it; a record cut
/// short is 125, "the container's setup died mid-report", about `subject`).
RunOutcome child_outcome(int status, const ChildFailure& failure, size_t got,
                         const std::string& subject);

}  // namespace berth

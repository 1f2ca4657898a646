// run_userns(): the default engine. Plans in the parent, clones into new
// user + mount (+ PID, UTS) namespaces, waits, forwards signals.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "core/env_list.h"
#include "core/fs.h"
#include "core/root_path.h"
#include "core/signals.h"
#include "core/strings.h"
#include "runtime/child.h"
#include "runtime/container_spec.h"
#include "runtime/identity.h"
#include "runtime/mount_plan.h"
#include "runtime/root_emulation.h"
#include "runtime/subids.h"

namespace berth {
namespace {

RunOutcome failed(Error e) {
  return RunOutcome{125, std::move(e)};
}

/// Whether the plan can be applied to a read-only `root` as it is: every mount target exists
/// (those inside a tmpfs the plan mounts first are made there), no symlink or file is to be
/// written outside such a tmpfs, and the working directory exists.
bool plan_needs_no_writes(int root_fd, const MountPlan& plan, const std::string& cwd) {
  std::vector<const std::string*> tmpfs;
  for (const MountEntry& e : plan.entries) {
    bool inside = false;
    for (const std::string* t : tmpfs) inside |= is_under(e.target, *t);
    if (!inside) {
      if (e.kind == MountKind::kSymlink || e.kind == MountKind::kWriteFile) return false;
      UniqueFd fd(open_in_root(root_fd, e.target.c_str(), O_PATH));
      if (!fd.valid()) return false;
    }
    if (is_tmpfs_mount(e)) tmpfs.push_back(&e.target);
  }
  UniqueFd dir(open_in_root(root_fd, cwd.c_str(), O_PATH | O_DIRECTORY));
  return dir.valid();
}

}  // namespace

namespace {
int child_entry(void* ctx) {
  child_main(*static_cast<const ChildContext*>(ctx));
}

constexpr size_t kChildStackSize = size_t{256} * 1024;

/// Held while a child runs on the stack below (CLONE_VFORK: until it has exec'd or failed).
std::mutex g_child_stack_mutex;
void* g_child_stack = nullptr;

/// The stack of the CLONE_VM child, mapped at the first run and kept for the next: unmapped
/// after each start, it cost an munmap whose TLB shootdown reached the CPU the child had run on
/// (about 40 us of a container start on the development VM). nullptr, errno set, when the
/// mapping fails. The caller holds g_child_stack_mutex.
void* child_stack() {
  if (g_child_stack == nullptr) {
    void* p = ::mmap(nullptr, kChildStackSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p != MAP_FAILED) g_child_stack = p;
  }
  return g_child_stack;
}
}  // namespace

RunOutcome run_userns(const ContainerSpec& spec) {
  if (spec.argv.empty()) return failed(make_error("run", spec.rootfs, "no command given"));
  if (spec.rootfs.empty() || spec.rootfs.front() != '/')
    return failed(make_error("run", spec.rootfs, "root filesystem path must be absolute"));

  // The root emulation, resolved: the subordinate-ID mode needs its holder's namespace.
  RootEmulation emulation = spec.root_emulation;
  UniqueFd userns;
  if (emulation == RootEmulation::kAuto) {
    // A container user other than root keeps the one-ID mapping: its files stay the user's on
    // the host, and its volumes writable (Podman would need --userns=keep-id for that).
    if (spec.uid == 0 && spec.gid == 0) userns = subid_namespace_if_available();
    emulation = userns.valid() ? RootEmulation::kSubids : RootEmulation::kSeccomp;
  } else if (emulation == RootEmulation::kSubids) {
    auto ns = required_subid_namespace();
    if (!ns) return failed(std::move(ns).error().with_context("run --root-emulation subids"));
    userns = std::move(ns).value();
  }
  // Plan everything while exceptions and allocation are still allowed.
  auto plan = plan_mounts(spec, probe_host(spec));
  if (!plan) return failed(std::move(plan).error());
  if (auto st = plan_device_edits(spec, *plan); !st) return failed(std::move(st).error());
  IdentityAdditions identity;
  std::string_view apt_drop_in;  // kAptDropInText (a literal: NUL-terminated) or nothing
  bool overlay = !spec.overlay_scratch.empty();
  {
    UniqueFd root(::open(spec.rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root.valid()) return failed(sys_error("open", spec.rootfs));
    if (overlay) {
      // A squashfs image is read-only here: the child appends the lines in its overlay.
      auto add = identity_additions(root.get(), spec);
      if (!add) return failed(std::move(add).error().with_context("set up /etc/passwd"));
      identity = std::move(add).value();
      // A writable squashfs root (--writable) may run apt: the child writes the root
      // emulation's drop-in in the overlay. A read-only one installs nothing.
      if (emulation == RootEmulation::kSeccomp && spec.writable_rootfs &&
          needs_apt_drop_in(root.get()))
        apt_drop_in = kAptDropInText;
      if (spec.overlay_only_for_writes && !spec.writable_rootfs && identity.passwd.empty() &&
          identity.group.empty() && plan_needs_no_writes(root.get(), *plan, spec.cwd))
        overlay = false;  // the shared mount itself, bound read-only
    } else {
      if (auto st = ensure_identity(root.get(), spec); !st)
        return failed(std::move(st).error().with_context("set up /etc/passwd"));
      if (emulation == RootEmulation::kSeccomp) {
        if (auto st = prepare_root_emulation(root.get()); !st)
          return failed(std::move(st).error().with_context("set up root emulation"));
      } else if (emulation == RootEmulation::kSubids) {
        retire_root_emulation(root.get());  // apt's switch to _apt is real here
      }
    }
  }
  std::string uid_map = std::to_string(spec.uid) + " " + std::to_string(::geteuid()) + " 1";
  std::string gid_map = std::to_string(spec.gid) + " " + std::to_string(::getegid()) + " 1";
  ChildContext ctx;
  ctx.spec = &spec;
  ctx.plan = &*plan;
  ctx.uid_map = uid_map.c_str();
  ctx.gid_map = gid_map.c_str();
  ctx.emulation = emulation;
  ctx.userns_fd = userns.get();
  if (emulation == RootEmulation::kSubids && (spec.uid != 0 || spec.gid != 0)) {
    ctx.switch_ids = true;
    ctx.groups = spec.extra_gids.data();
    ctx.group_count = spec.extra_gids.size();
  }
  for (const std::string& a : spec.argv) ctx.argv.push_back(const_cast<char*>(a.c_str()));
  ctx.argv.push_back(nullptr);
  ctx.path = kDefaultPath;
  for (const std::string& e : spec.env) {
    ctx.envp.push_back(const_cast<char*>(e.c_str()));
    if (e.starts_with("PATH=")) ctx.path = e.c_str() + 5;
  }
  ctx.envp.push_back(nullptr);
  ctx.tty_fd = spec.tty ? foreground_terminal() : -1;
  // The squashfs overlay's paths and options, spelled out now: the child allocates nothing.
  std::string upper, work, merged, overlay_data;
  if (overlay) {
    for (const std::string* p : {&spec.rootfs, &spec.overlay_scratch})
      if (p->find_first_of(",:\\") != std::string::npos)
        return failed(
            make_error("mount", *p, "overlayfs cannot take a path with ',', ':' or '\\'"));
    upper = path_join(spec.overlay_scratch, "upper");
    work = path_join(spec.overlay_scratch, "work");
    merged = path_join(spec.overlay_scratch, "root");
    // xino=off: the FUSE lower and the tmpfs upper do not share inode number spaces (as
    // enroot mounts it).
    overlay_data =
        "lowerdir=" + spec.rootfs + ",upperdir=" + upper + ",workdir=" + work + ",xino=off";
    ctx.overlay_scratch = spec.overlay_scratch.c_str();
    ctx.overlay_upper = upper.c_str();
    ctx.overlay_work = work.c_str();
    ctx.overlay_root = merged.c_str();
    ctx.overlay_data = overlay_data.c_str();
    ctx.passwd_tail = identity.passwd.c_str();
    ctx.group_tail = identity.group.c_str();
    ctx.apt_drop_in = apt_drop_in.empty() ? "" : apt_drop_in.data();
  }
  // Device layers asked for loader directories: ldconfig runs inside before the workload.
  const std::string ld_args[] = {spec.ldconfig_path, "-X", "-f", kBerthLdConf, "-C", kBerthLdCache};
  MountPlan ld_cache_plan;
  if (!spec.ld_library_dirs.empty()) {
    for (const std::string& a : ld_args) ctx.ldconfig_argv.push_back(const_cast<char*>(a.c_str()));
    ctx.ldconfig_argv.push_back(nullptr);
    MountEntry cache;
    cache.kind = MountKind::kBind;
    cache.source = kBerthLdCache;
    cache.source_in_root = true;
    cache.target = "/etc/ld.so.cache";
    cache.target_kind = TargetKind::kFile;
    cache.read_only = true;
    ld_cache_plan.entries.push_back(std::move(cache));
    ctx.ld_cache_plan = &ld_cache_plan;
  }

  UniqueFd devnull;
  if (!spec.stdin_open && ctx.tty_fd >= 0) {
    // -t without -i: stdin is the terminal, as Docker's -t gives the workload its tty on all
    // three (`tty` prints its name); without -t, /dev/null.
    ctx.devnull_fd = ctx.tty_fd;
  } else if (!spec.stdin_open) {
    devnull.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devnull.valid()) return failed(sys_error("open", "/dev/null"));
    ctx.devnull_fd = devnull.get();
  }
  // The namespaces a clone makes. In the subordinate-ID mode the child joins the holder's user
  // namespace and unshares the others there (child.cc): the clone itself makes none.
  int ns_flags = 0;
  if (!userns.valid()) {
    ns_flags = CLONE_NEWUSER | CLONE_NEWNS;
    if (spec.pid_namespace) ns_flags |= CLONE_NEWPID;
    if (!spec.hostname.empty()) ns_flags |= CLONE_NEWUTS;
    if (spec.network_none) ns_flags |= CLONE_NEWNET;
    if (spec.ipc_namespace) ns_flags |= CLONE_NEWIPC;
  }
  // In place: this process makes them and becomes the workload. Without a parent to wake, clone
  // and reap, a start is about 0.2 ms shorter (bench/start). unshare refuses a process with
  // threads (EINVAL), and its other errors (user namespaces disabled, too many) are the clone's
  // too: either way the clone below runs and reports.
  if (spec.exec_in_place && !spec.pid_namespace && !userns.valid() && ::unshare(ns_flags) == 0) {
    ctx.in_place = true;
    ctx.tty_fd = -1;       // the terminal is this process's already: nothing to hand over
    std::fflush(nullptr);  // what stdio holds would not outlive the exec
    ChildFailure failure = set_up_and_exec_in_place(ctx);
    return child_outcome(0, failure, sizeof failure, spec.rootfs);
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return failed(sys_error("pipe", "child report"));
  UniqueFd report_r(fds[0]), report_w(fds[1]);
  ctx.report_fd = report_w.get();
  ctx.report_read_fd = report_r.get();

  // Forwarded signals (and SIGTTOU, for the terminal hand-over) stay blocked
  // until the handlers know the child's pid; the child inherits the mask.
  sigset_t block, old_mask;
  sigemptyset(&block);
  add_forwarded_signals(&block);
  sigaddset(&block, SIGTTOU);
  ::sigprocmask(SIG_BLOCK, &block, &old_mask);

  unsigned long flags = SIGCHLD | static_cast<unsigned long>(ns_flags);
  pid_t pid;
  int clone_err = 0;
  if (!spec.pid_namespace) {
    // Without an init to keep running, the child shares this process's memory (CLONE_VM), which
    // spares copying its page tables (about a millisecond for berth), and CLONE_VFORK stops this
    // process until the child has exec'd or failed, so the two never run at once. The child
    // allocates nothing and writes only to its own stack (its failure goes out through the
    // report pipe); glibc's posix_spawn uses clone() the same way.
    std::lock_guard<std::mutex> hold(g_child_stack_mutex);
    void* stack = child_stack();
    if (stack == nullptr) {
      ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      return failed(sys_error("mmap", "child stack"));
    }
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer builds only: the child's frames end in exec or _exit and never clear
    // their redzones' poison, which the next run's child would inherit.
    __asan_unpoison_memory_region(stack, kChildStackSize);
#endif
    pid = ::clone(child_entry, static_cast<char*>(stack) + kChildStackSize,
                  static_cast<int>(flags | CLONE_VM | CLONE_VFORK), &ctx);
    clone_err = errno;
  } else {
    // The init keeps running beside this process: a raw clone behaves like fork (the child
    // runs on a copy of this stack) and, unlike unshare, works in a multi-threaded caller.
    pid = static_cast<pid_t>(::syscall(SYS_clone, flags, 0, 0, 0, 0));
    if (pid == 0) child_main(ctx);
    clone_err = errno;
  }
  if (pid < 0) {
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    if (auto probe = probe_user_namespaces(); !probe) return failed(std::move(probe).error());
    return failed(sys_error("clone", "user namespace", clone_err));
  }
  ForwardedActions old_actions;
  forward_signals_to(pid, &old_actions);
  sigset_t unblock = block;
  sigdelset(&unblock, SIGTTOU);
  ::sigprocmask(SIG_UNBLOCK, &unblock, nullptr);

  // The report pipe closes on a successful exec (close-on-exec) or carries
  // one ChildFailure record.
  report_w.reset();
  ChildFailure failure;
  size_t got = read_child_report(report_r.get(), &failure);
  int status = wait_child(pid);
  stop_forwarding(old_actions);
  if (ctx.tty_fd >= 0) {
    // Take the terminal back (SIGTTOU is still blocked, so a background group may).
    (void)::tcsetpgrp(ctx.tty_fd, ::getpgrp());  // best effort: the run itself is over
  }
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);

  return child_outcome(status, failure, got, spec.rootfs);
}

}  // namespace berth

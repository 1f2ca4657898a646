// berth exec: runs a command in a running container of the userns engine (runtime/exec.h).
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string_view>

#include "cli/container_target.h"
#include "cli/context.h"
#include "cli/engine.h"
#include "cli/run.h"
#include "core/env_list.h"
#include "core/fs.h"
#include "runtime/container_config.h"
#include "runtime/engines.h"
#include "runtime/exec.h"
#include "runtime/launcher.h"
#include "runtime/monitor.h"

namespace berth::cli {
namespace {

/// The user `user` (-u: name|uid[:group|gid]) names in the container, looked up in its
/// /etc/passwd and /etc/group as `run --user` does, read through the process's root.
Result<ResolvedUser> user_named(const std::string& user, pid_t target) {
  UniqueFd root =
      BERTH_TRY(open_file("/proc/" + std::to_string(target) + "/root", O_RDONLY | O_DIRECTORY));
  return resolve_user_in_root(user, root.get());
}

/// Fills spec's identity for -u `user`: nothing for the container's own user; set directly
/// where the container's namespace maps the user (subordinate IDs); else a user namespace of
/// the command's own maps it onto the container's user, as `run --user` maps it onto yours.
Status choose_identity(const std::string& user, pid_t target, ExecSpec& spec) {
  ResolvedUser who = BERTH_TRY(user_named(user, target).with_context("exec -u " + user));
  uid_t inside = BERTH_TRY(mapped_uid(target));
  gid_t inside_gid = BERTH_TRY(mapped_gid(target));
  if (who.uid != inside && maps_uid(target, who.uid)) {
    spec.uid = who.uid;
    spec.gid = who.gid;
  } else if (who.uid != inside || who.gid != inside_gid) {
    spec.nested_uid_map = std::to_string(who.uid) + " " + std::to_string(inside) + " 1";
    spec.nested_gid_map = std::to_string(who.gid) + " " + std::to_string(inside_gid) + " 1";
  }
  // As docker exec -u: the user's own home, unless -e says otherwise (set after).
  set_env(spec.env, "HOME=" + who.home);
  set_env(spec.env, "USER=" + who.name);
  return {};
}

/// The engine whose tool `pid` is (its executable) or has loaded (libfakechroot), when a run
/// was given an engine the record does not name (run --engine); nullptr when none of the
/// engines without namespaces to join is found there.
const Engine* engine_of_process(pid_t pid) {
  std::string proc = "/proc/" + std::to_string(pid);
  struct stat exe {};
  bool have_exe = ::stat((proc + "/exe").c_str(), &exe) == 0;
  Result<std::string> maps = read_file(proc + "/maps");
  for (const Engine& e : engine_table()) {
    if (e.joinable || e.tools.empty()) continue;
    Result<std::string> tool = engine_tool(e);
    struct stat st {};
    if (!tool.ok() || ::stat(tool->c_str(), &st) != 0) continue;
    if (have_exe && exe.st_dev == st.st_dev && exe.st_ino == st.st_ino) return &e;
    char real[PATH_MAX];
    if (maps.ok() && ::realpath(tool->c_str(), real) != nullptr &&
        maps->find(std::string(" ") + real + "\n") != std::string::npos)
      return &e;
  }
  return nullptr;
}

/// exec's refusal of a container whose engine has no namespaces to join, naming the engine.
Error no_namespaces(const std::string& subject, std::string_view engine) {
  return make_error(
             "exec", subject,
             "the " + std::string(engine) + " engine runs containers without namespaces to join",
             ErrorCode::kUnsupported)
      .with_hint("run the command in a new container instead: berth run " + subject + " ...");
}

}  // namespace

Action setup_exec(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::vector<std::string> env;
    std::string workdir, user;
    bool interactive = false, tty = false;
    int preserve_fds = 0;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("-i,--interactive", o->interactive, "Keep stdin attached");
  app.add_flag("-t,--tty", o->tty, "The command uses the caller's terminal");
  app.add_option("-e,--env", o->env, "Set a variable (KEY=VALUE, or KEY for the host's value)")
      ->allow_extra_args(false);
  app.add_option("-w,--workdir", o->workdir, "Working directory inside the container");
  app.add_option("-u,--user", o->user, "User inside: name|uid[:group|gid]");
  app.add_option("--preserve-fds", o->preserve_fds,
                 "Keep descriptors 3 .. 2+N open in the command (PMI_FD is kept anyway)");
  app.prefix_command();
  return [o, &g, &app]() -> Status {
    set_exit_status(kExitBerthFailed);
    std::vector<std::string> rest = prefix_operands(app, g);
    if (!rest.empty() && rest.front().starts_with("-")) return unknown_flag("exec", rest.front());
    if (rest.size() < 2)
      return make_error("exec", "CONTAINER", "a container and a command are required")
          .with_hint("berth exec [OPTIONS] CONTAINER COMMAND [ARG...]");
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(rest.front()));
    const std::string& subject = rest.front();
    // Only the userns engine's containers have namespaces of their own to join; proot and
    // fakechroot run in the caller's, runc and Apptainer keep their own books.
    EngineChoice engine = engine_for(c, std::nullopt, nullptr);
    if (engine.is_auto() || !engine.row->joinable) return no_namespaces(subject, engine.spelled);
    pid_t runner = runner_pid(cs, c);
    pid_t target = workload_pid(runner);
    if (runner == 0 || target == 0)
      return make_error("exec", subject, "container " + c.short_id() + " is not running")
          .with_hint("start it with 'berth start " + subject + "', or use berth run");
    if (!in_own_user_namespace(target)) {
      // Run with another engine than the record names (run --engine=proot, or auto's fallback).
      if (const Engine* running = engine_of_process(target))
        return no_namespaces(subject, running->name);
      return make_error("exec", subject,
                        "the engine running it gave it no namespaces to join (run --engine?)",
                        ErrorCode::kUnsupported);
    }
    if (o->tty && !::isatty(STDIN_FILENO) && !::isatty(STDOUT_FILENO))
      return make_error("exec", "-t", "no terminal to hand to the command")
          .with_hint("run from a terminal, or leave out -t");

    ExecSpec spec;
    spec.target = target;
    spec.argv.assign(rest.begin() + 1, rest.end());
    // The workload's environment, as the run made it; -e on top (KEY alone: the host's value).
    spec.env = BERTH_TRY(process_environment(target));
    // A launcher's ranks started with berth exec (one container per node, as pyxis runs
    // them: one user namespace and /dev/shm for all) get its variables and descriptor.
    for (const std::string& kv : launcher_env(current_environment())) set_env(spec.env, kv);
    if (!o->user.empty()) BERTH_CHECK(choose_identity(o->user, target, spec));
    for (const std::string& e : o->env) {
      std::string kv = e;
      if (kv.find('=') == std::string::npos) {
        const char* host = std::getenv(kv.c_str());
        if (host == nullptr) continue;  // as docker: an unset host variable is left out
        kv += "=" + std::string(host);
      }
      set_env(spec.env, kv);
    }
    std::string wd = o->workdir;
    if (wd.empty() && c.image_config.is_object()) wd = c.image_config.value("WorkingDir", "");
    spec.cwd = wd.empty() ? "/" : wd;
    if (!spec.cwd.starts_with("/"))
      return make_error("exec", "-w " + spec.cwd, "the working directory must be absolute");
    spec.stdin_open = o->interactive;
    spec.tty = o->tty;
    spec.kept_fds = BERTH_TRY(kept_fds(o->preserve_fds, spec.env));
    BERTH_CHECK(check_fds_open(spec.kept_fds));
    RunOutcome outcome = exec_in_container(spec);
    set_exit_status(outcome.exit_code);
    if (outcome.error) return *outcome.error;
    return {};
  };
}

}  // namespace berth::cli

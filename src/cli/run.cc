// berth create, run, ps, rm, name, rmname: containers.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/context.h"
#include "cli/engine.h"
#include "cli/run_devices.h"
#include "core/env.h"
#include "core/fs.h"
#include "core/log.h"
#include "runtime/container_config.h"
#include "runtime/container_spec.h"
#include "runtime/engines.h"
#include "runtime/root_path.h"

extern char** environ;

namespace berth::cli {
namespace {

/// Docker's status for "Berth itself failed" (bad flag, missing image, mount failure).
constexpr int kExitBerthFailed = 125;

/// Reads a small file inside the container root ("" when it is missing), resolving the path
/// inside the root so that an image symlink cannot point it at a host file.
Result<std::string> read_in_root(const std::string& rootfs, const char* path) {
  UniqueFd root = BERTH_TRY(open_file(rootfs, O_RDONLY | O_DIRECTORY));
  return read_file_in_root(root.get(), path);
}

std::vector<std::string> host_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

/// prefix_command() hands an unknown option over as if it were the image: say what it is.
Error unknown_flag(Op command, const std::string& flag) {
  return make_error(command, flag, "unknown flag", ErrorCode::kInvalidInput)
      .with_hint("see 'berth " + std::string(command.word()) + " --help'");
}

/// Declares the options `run` and `create` share.
void add_run_options(CLI::App& app, RunOptions& o, std::string& name) {
  app.add_option("--name", name, "Name the container");
  app.add_option("-e,--env", o.env, "Set a variable (KEY=VALUE, or KEY for the host's value)")
      ->allow_extra_args(false);
  app.add_option("--env-file", o.env_files, "Read variables from a file")->allow_extra_args(false);
  app.add_option("-v,--volume", o.volumes, "Bind a host path: HOST:CONTAINER[:ro|:rw]")
      ->allow_extra_args(false);
  app.add_option("-w,--workdir", o.workdir, "Working directory inside the container");
  app.add_option("-u,--user", o.user, "User inside: name|uid[:group|gid]");
  app.add_option("--entrypoint", o.entrypoint, "Replace the image's entrypoint")
      ->each([&o](const std::string&) { o.entrypoint_set = true; });
  app.add_option("--hostname", o.hostname, "Host name inside the container");
  app.add_flag("-i,--interactive", o.interactive, "Keep stdin attached");
  app.add_flag("-t,--tty", o.tty, "The workload uses the caller's terminal");
  app.add_flag("--pid-ns", o.pid_namespace, "New PID namespace with a minimal init");
  app.add_flag("--host-dev", o.host_dev, "Bind the host's /dev instead of a minimal one");
  app.add_flag("--bind-home", o.bind_home, "Bind your home directory at the same path");
  app.add_flag("--hostenv", o.hostenv, "Pass the host's environment");
  app.add_option("--gpus", o.gpus, "GPUs to inject: all | N | device=0,2 | GPU-uuid[,capabilities=...]");
  app.add_option("--device", o.devices,
                 "A CDI device (vendor.com/class=name) or a host device HOST[:CONTAINER[:rwm]]")
      ->allow_extra_args(false);
  // Everything from the image on is positional: IMAGE [COMMAND [ARG...]].
  app.prefix_command();
}

/// The container `what` names, or a new one made from the image `what` names.
struct Target {
  ContainerRecord container;
  bool created = false;
};

Result<Target> find_or_create(const GlobalOptions& g, ContainerStore& cs, const std::string& what,
                              const std::string& name, bool allow_existing,
                              const std::vector<std::string>& command = {}) {
  if (allow_existing) {
    if (auto c = cs.find(what); c.ok()) {
      if (!name.empty())
        return make_error("run", what, "--name applies to a new container, not to an existing one");
      return Target{*c, false};
    }
  }
  Store store = BERTH_TRY(open_store(g));
  auto image = store.find_image(what);
  if (!image.ok() && image.error().code != ErrorCode::kNotFound) return std::move(image).error();
  if (!image.ok()) {
    // As Docker does: an image that is not here is pulled first (progress and this line go to
    // stderr; stdout belongs to the container).
    std::fprintf(stderr, "Unable to find image '%s' locally\n", what.c_str());
    std::fflush(stderr);
    PullResult pulled = BERTH_TRY(pull_reference(g, what, "", !g.quiet));
    image = std::move(pulled.record);
  }
  return Target{BERTH_TRY(cs.create(store, *image, name, command)), true};
}

/// A root filesystem directory rather than an image or container: a path, which no image
/// reference or container name can be ("/...", "./...", "../...").
bool is_directory_argument(const std::string& what) {
  return what.starts_with("/") || what.starts_with("./") || what.starts_with("../") || what == "." ||
         what == "..";
}

/// `berth run DIR CMD`: runs a root filesystem directory in place, as ch-run and Apptainer's
/// sandboxes do (shared, read-mostly trees on a cluster file system). No container record, no
/// image config: the command must be given; changes land in the directory itself.
Status run_directory(const RunOptions& opts, const std::string& name, bool remove,
                     const std::string& dir, const HostContext& host) {
  if (!name.empty() || remove)
    return make_error("run", dir, "--name and --rm apply to containers, not to a directory");
  if (opts.command.empty() && !opts.entrypoint_set)
    return make_error("run", dir, "a directory has no image config: give the command to run");
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) return sys_error("run", dir);
  struct stat st;
  if (::stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) return make_error("run", dir, "not a directory");
  std::string rootfs = real;
  std::string passwd = BERTH_TRY(read_in_root(rootfs, "/etc/passwd"));
  std::string group = BERTH_TRY(read_in_root(rootfs, "/etc/group"));
  ContainerSpec spec =
      BERTH_TRY(build_spec(nlohmann::json::object(), rootfs, opts, host, passwd, group));
  BERTH_CHECK(add_run_devices(opts, host, spec));
  RunOutcome outcome = run_userns(spec);
  set_exit_status(outcome.exit_code);
  if (outcome.error) return *outcome.error;
  return {};
}

Status do_run(const GlobalOptions& g, RunOptions opts, const std::string& name, bool remove,
              const std::string& engine, std::vector<std::string> rest) {
  set_exit_status(kExitBerthFailed);  // until the workload runs
  if (rest.empty())
    return make_error("run", "IMAGE", "an image or container is required")
        .with_hint("berth run [OPTIONS] IMAGE|CONTAINER [COMMAND [ARG...]]");
  std::string what = rest.front();
  if (what.starts_with("-")) return unknown_flag("run", what);
  opts.command.assign(rest.begin() + 1, rest.end());
  if (!engine.empty()) BERTH_CHECK(validate_engine_name(engine));

  HostContext host{host_environment(), home_dir(), ::getuid(), ::getgid()};
  for (const std::string& path : opts.env_files) {
    std::string text = BERTH_TRY(read_file(path));
    auto vars = BERTH_TRY(parse_env_file(text, path, host.environ));
    opts.file_env.insert(opts.file_env.end(), vars.begin(), vars.end());
  }
  if (is_directory_argument(what)) {
    // The fallback engines keep per-container state (bundles, fakechroot's symlink form).
    if (!engine.empty() && engine != kDefaultEngine)
      return make_error("run", what, "a directory runs with the userns engine only")
          .with_hint("create a container (berth import, berth create) to use --engine=" + engine);
    return run_directory(opts, name, remove, what, host);
  }
  ContainerStore cs = BERTH_TRY(open_containers(g));
  Target t = BERTH_TRY(find_or_create(g, cs, what, name, true));
  const ContainerRecord& c = t.container;
  std::string rootfs = cs.rootfs(c);
  FileLock lock = BERTH_TRY(cs.lock_for_run(c));

  auto cleanup = [&]() {
    if (!remove) return;
    lock = FileLock();  // released, so that remove() sees the container stopped
    if (auto st = cs.remove(c, true); !st.ok())
      log::warn("{}", st.error().message());  // the run's own status matters more
  };
  auto passwd = read_in_root(rootfs, "/etc/passwd");
  auto group = read_in_root(rootfs, "/etc/group");
  if (!passwd.ok() || !group.ok()) {
    cleanup();
    return !passwd.ok() ? std::move(passwd).error() : std::move(group).error();
  }
  auto spec = build_spec(c.image_config, rootfs, opts, host, *passwd, *group);
  if (!spec.ok()) {
    cleanup();
    return std::move(spec).error();
  }
  if (auto st = add_run_devices(opts, host, *spec); !st.ok()) {
    cleanup();
    return std::move(st).error();
  }
  auto ran = run_with_engine(cs, c, *spec, engine);
  if (!ran.ok()) {
    cleanup();
    return std::move(ran).error();
  }
  RunOutcome outcome = std::move(ran).value();
  // Bookkeeping for ps, written once the run ended (while it runs, ps sees the run lock); a
  // failure to write it must not change the run's status.
  if (!remove) {
    if (auto st = cs.record_run(c, spec->argv, outcome.exit_code); !st.ok())
      log::warn("{}", st.error().message());
  }
  cleanup();
  set_exit_status(outcome.exit_code);
  if (outcome.error) return *outcome.error;
  return {};
}

std::string ps_status(const ContainerRecord& c) {
  if (c.running) return "Running";
  if (c.last_exit) return "Exited (" + std::to_string(*c.last_exit) + ")";
  return "Created";
}

std::string ps_command(const ContainerRecord& c) {
  std::string cmd;
  for (const std::string& a : c.last_command) cmd += (cmd.empty() ? "" : " ") + a;
  if (cmd.size() > 30) cmd = cmd.substr(0, 27) + "...";
  return "\"" + cmd + "\"";
}

}  // namespace

Action setup_run(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    RunOptions run;
    std::string name, engine;
    bool remove = false;
  };
  auto o = std::make_shared<Opts>();
  add_run_options(app, o->run, o->name);
  app.add_flag("--rm", o->remove, "Remove the container when it exits");
  app.add_option("--engine", o->engine, "Engine for this run: " + engine_names());
  return [o, &g, &app]() -> Status {
    return do_run(g, o->run, o->name, o->remove, o->engine, app.remaining());
  };
}

Action setup_create(CLI::App& app, const GlobalOptions& g) {
  auto name = std::make_shared<std::string>();
  app.add_option("--name", *name, "Name the container");
  app.prefix_command();
  return [name, &g, &app]() -> Status {
    set_exit_status(kExitBerthFailed);
    std::vector<std::string> rest = app.remaining();
    if (!rest.empty() && rest.front().starts_with("-")) return unknown_flag("create", rest.front());
    if (rest.empty())
      return make_error("create", "IMAGE", "an image is required")
          .with_hint("berth create [--name NAME] IMAGE [COMMAND [ARG...]]");
    ContainerStore cs = BERTH_TRY(open_containers(g));
    std::vector<std::string> command(rest.begin() + 1, rest.end());
    Target t = BERTH_TRY(find_or_create(g, cs, rest.front(), *name, false, command));
    std::printf("%s\n", t.container.id.c_str());
    set_exit_status(0);
    return {};
  };
}

Action setup_ps(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    bool json = false, quiet = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("--json", o->json, "Print a JSON array");
  app.add_flag("-q,--quiet", o->quiet, "Print container IDs only");
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    std::vector<ContainerRecord> all = BERTH_TRY(cs.list());
    if (o->json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& c : all) arr.push_back(container_json(cs, c));
      print_json(arr);
      return {};
    }
    if (o->quiet) {
      for (const auto& c : all) std::printf("%s\n", c.short_id().c_str());
      return {};
    }
    std::vector<std::vector<std::string>> rows = {
        {"CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "NAMES"}};
    for (const auto& c : all) {
      std::string names;
      for (const auto& n : c.names) names += (names.empty() ? "" : ",") + n;
      rows.push_back({c.short_id(), c.image, ps_command(c), c.created, ps_status(c), names});
    }
    print_table(rows);
    return {};
  };
}

Action setup_rm(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::vector<std::string> names;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("-f,--force", o->force, "Remove running containers too");
  app.add_option("CONTAINER", o->names, "Container names or IDs")->required();
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    for (const std::string& n : o->names) {
      ContainerRecord c = BERTH_TRY(cs.find(n));
      BERTH_CHECK(cs.remove(c, o->force));
      std::printf("%s\n", n.c_str());
    }
    return {};
  };
}

Action setup_name(CLI::App& app, const GlobalOptions& g) {
  auto args = std::make_shared<std::pair<std::string, std::string>>();
  app.add_option("CONTAINER", args->first, "Container name or ID")->required();
  app.add_option("NAME", args->second, "The new name")->required();
  return [args, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(args->first));
    return cs.add_name(c, args->second);
  };
}

Action setup_rmname(CLI::App& app, const GlobalOptions& g) {
  auto name = std::make_shared<std::string>();
  app.add_option("NAME", *name, "The name to remove")->required();
  return [name, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    return cs.remove_name(*name);
  };
}

}  // namespace berth::cli

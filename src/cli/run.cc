// berth run: runs a container, an image (creating a container first) or a root filesystem
// directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cli/container_target.h"
#include "cli/context.h"
#include "cli/engine.h"
#include "cli/policy.h"
#include "cli/run.h"
#include "core/env.h"
#include "core/env_list.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/root_path.h"
#include "core/runtime_dir.h"
#include "core/scope_guard.h"
#include "core/vocabulary.h"
#include "devices/mpi.h"
#include "devices/run_devices.h"
#include "runtime/container_config.h"
#include "runtime/container_spec.h"
#include "runtime/engines.h"
#include "runtime/launcher.h"
#include "runtime/monitor.h"
#include "runtime/rlimits.h"
#include "runtime/root_emulation.h"
#include "runtime/subids.h"
#include "site/central_store.h"
#include "site/policy.h"
#include "site/squashfs.h"
#include "site/squashfs_mount.h"

namespace berth::cli {
namespace {

/// Reads a small file inside the container root ("" when it is missing), resolving the path
/// inside the root so that an image symlink cannot point it at a host file.
Result<std::string> read_in_root(const std::string& rootfs, const char* path) {
  UniqueFd root = BERTH_TRY(open_file(rootfs, O_RDONLY | O_DIRECTORY));
  return read_file_in_root(root.get(), path);
}

/// `volume` (HOST:CTR[:MODE]) with its host part, relative, made absolute against the working
/// directory and normalised.
Result<std::string> absolute_volume(const std::string& volume) {
  size_t colon = volume.find(':');
  std::string host = volume.substr(0, colon);
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return sys_error("volume", volume);
  std::string abs = std::filesystem::path(path_join(cwd, host)).lexically_normal().string();
  while (abs.size() > 1 && abs.ends_with("/")) abs.pop_back();
  return abs + (colon == std::string::npos ? "" : volume.substr(colon));
}

}  // namespace

Status resolve_typed_options(RunOptions& opts, const std::vector<std::string>& host_env) {
  // -v ./data:/data, as Docker takes it: a host path starting with '.' is the working
  // directory's.
  for (std::string& v : opts.volumes)
    if (v.starts_with(".")) v = BERTH_TRY(absolute_volume(v));
  for (const std::string& path : opts.env_files) {
    std::string text = BERTH_TRY(read_file(path));
    auto vars = BERTH_TRY(parse_env_file(text, path, host_env));
    opts.file_env.insert(opts.file_env.end(), vars.begin(), vars.end());
  }
  opts.env_files.clear();  // read: a record of the options keeps what they held
  if (!opts.root_emulation_word.empty()) {
    opts.root_emulation = parse_root_emulation(opts.root_emulation_word);
    if (!opts.root_emulation)
      return make_error("run", "--root-emulation " + opts.root_emulation_word,
                        "expected " + word_list(kRootEmulationWords));
    opts.root_emulation_word.clear();
  }
  return {};
}

GivenOptions given_run_options(const CLI::App& app) {
  return {given_count(app, "--bind-home") + given_count(app, "--no-bind-home") > 0,
          given_count(app, "--read-only") > 0};
}

namespace {

/// `--network`: the host's network (host, the default) or none; Docker's others need a virtual
/// network, which rootless Berth does not make.
Status check_network(const std::string& network) {
  if (network.empty() || network == "host" || network == "none") return {};
  return make_error("run", "--network " + network,
                    "rootless Berth makes no virtual networks: a container shares the host's "
                    "network (host, the default) or has none (none)",
                    ErrorCode::kUnsupported)
      .with_hint("leave out --network, or use --network none to cut the container off");
}

}  // namespace

namespace {

/// --security-opt no-new-privileges's value: true unless ":false" / "=false".
bool nnp_value(const std::string& v) {
  return !(v.ends_with(":false") || v.ends_with("=false"));
}

/// Why a --security-opt value cannot be honoured rootless; "" when it can.
std::string security_opt_refusal(const std::string& v) {
  std::string key = v.substr(0, v.find_first_of(":="));
  if (key == "no-new-privileges") {
    std::string value = v.size() > key.size() ? v.substr(key.size() + 1) : "true";
    if (value == "true" || value == "false") return "";
    return "no-new-privileges takes true or false, not '" + value + "'";
  }
  if (key == "seccomp")
    return "seccomp=: a rootless container runs under your own session's seccomp filter, "
           "which it cannot lift; Berth adds its own only for root emulation (--root-emulation)";
  if (key == "apparmor" || key == "label")
    return key +
           "=: AppArmor and SELinux profiles are chosen by the host for your user, not by "
           "a rootless container";
  if (key == "systempaths")
    return "systempaths=: /proc and /sys are the host's views, which a rootless container "
           "cannot unmask";
  return "'" + v + "' is not a security option Berth knows (it honours no-new-privileges)";
}

}  // namespace

/// Declares the options of `run` that the command line mentions (see MentionedOptions).
void add_run_options(CLI::App& app, RunOptions& o, std::string& name, const MentionedOptions& m) {
  if (m.any("--name")) app.add_option("--name", name, "Name the container");
  if (m.any("-e,--env"))
    app.add_option("-e,--env", o.env, "Set a variable (KEY=VALUE, or KEY for the host's value)")
        ->allow_extra_args(false);
  if (m.any("--env-file"))
    app.add_option("--env-file", o.env_files, "Read variables from a file")
        ->allow_extra_args(false);
  if (m.any("-v,--volume"))
    app.add_option("-v,--volume", o.volumes, "Bind a host path: HOST:CONTAINER[:ro|:rw]")
        ->allow_extra_args(false);
  if (m.any("--tmpfs"))
    app.add_option("--tmpfs", o.tmpfs,
                   "Mount an empty tmpfs: CONTAINER[:size=64m,mode=1777,ro,...]")
        ->allow_extra_args(false);
  if (m.any("-w,--workdir"))
    app.add_option("-w,--workdir", o.workdir, "Working directory inside the container");
  if (m.any("-u,--user")) app.add_option("-u,--user", o.user, "User inside: name|uid[:group|gid]");
  if (m.any("--entrypoint"))
    app.add_option("--entrypoint", o.entrypoint, "Replace the image's entrypoint")
        ->each([&o](const std::string&) { o.entrypoint_set = true; });
  // -h is the host name, as in `docker run`/`create`; help stays --help.
  app.set_help_flag("--help", "Print this help message and exit");
  if (m.any("-h,--hostname"))
    app.add_option("-h,--hostname", o.hostname, "Host name inside the container");
  if (m.any("-i,--interactive"))
    app.add_flag("-i,--interactive", o.interactive, "Keep stdin attached");
  if (m.any("-t,--tty")) app.add_flag("-t,--tty", o.tty, "The workload uses the caller's terminal");
  if (m.any("--pid-ns,--init"))
    // Docker's --init (an init as PID 1 that reaps and passes signals on) is what --pid-ns
    // gives: a container has no PID namespace of its own without it.
    app.add_flag("--pid-ns,--init", o.pid_namespace,
                 "New PID namespace with a minimal init as PID 1 (--init: Docker's name)");
  if (m.any("--host-dev"))
    app.add_flag("--host-dev", o.host_dev, "Bind the host's /dev instead of a minimal one");
  if (m.any("--bind-home,!--no-bind-home"))
    app.add_flag(
        "--bind-home,!--no-bind-home", o.bind_home,
        "Bind your home directory at the same path (default: the site policy's mount_home)");
  if (m.any("--read-only"))
    app.add_flag("--read-only", o.read_only,
                 "Mount the container's root read-only (default: the site policy's readonly)");
  if (m.any("--root-emulation"))
    app.add_option("--root-emulation", o.root_emulation_word,
                   "userns engine: auto (the default: subids where you have subordinate IDs, "
                   "else seccomp), subids (real IDs from /etc/subuid), seccomp (set*id, chown "
                   "succeed without effect) or none (the policy's root_emulation)");
  if (m.any("--hostenv")) app.add_flag("--hostenv", o.hostenv, "Pass the host's environment");
  if (m.any("--no-image-config"))
    app.add_flag("--no-image-config", o.no_image_config,
                 "Use none of the image's Env, WorkingDir, User, Entrypoint and Cmd");
  if (m.any("--gpus"))
    app.add_option("--gpus", o.gpus,
                   "GPUs to inject: all | N | device=0,2 | GPU-uuid[,capabilities=...]");
  if (m.any("--device"))
    app.add_option("--device", o.devices,
                   "A CDI device (vendor.com/class=name) or a host device HOST[:CONTAINER[:rwm]]")
        ->allow_extra_args(false);
  if (m.any("--ib"))
    app.add_option("--ib", o.ib, "InfiniBand/RDMA HCAs to inject: all | none | 0,1 | mlx5_0");
  if (m.any("--mpi"))
    app.add_flag("--mpi{*}", o.mpi,
                 "Inject the host's MPI (--mpi=TYPE: one the site policy declares)");
  if (m.any("--preserve-fds"))
    app.add_option("--preserve-fds", o.preserve_fds,
                   "Keep descriptors 3 .. 2+N open in the workload (PMI_FD is kept anyway)");
  if (m.any("--ipc"))
    app.add_option_function<std::string>(
           "--ipc",
           [&o](const std::string& v) {
             o.ipc_host = v == "host";
             o.ipc_private = v == "private";
           },
           "host: the host's /dev/shm, shared by the ranks of a job; private: an IPC namespace of "
           "its own too (default: a private /dev/shm, the host's IPC namespace)")
        ->check(CLI::IsMember({"host", "private"}));
  if (m.any("--shm-size"))
    app.add_option("--shm-size", o.shm_size,
                   "Size of the private /dev/shm (default 64m): 512m, 2g, or bytes");
  if (m.any("-l,--label"))
    app.add_option("-l,--label", o.labels, "Set a label of the new container: KEY[=VALUE]")
        ->allow_extra_args(false);
  if (m.any("--add-host"))
    app.add_option("--add-host", o.add_hosts,
                   "Add a line to /etc/hosts: HOST:IP (host-gateway: the host itself)")
        ->allow_extra_args(false);
  if (m.any("--ulimit"))
    app.add_option("--ulimit", o.ulimits,
                   "A resource limit of the workload: NAME=SOFT[:HARD] (nofile=1024:4096, "
                   "core=0, stack=unlimited; a hard limit at most your own)")
        ->allow_extra_args(false)
        ->check(CLI::Validator(
            [](std::string& v) {
              auto parsed = parse_ulimit(v);
              return parsed.ok() ? std::string() : parsed.error().detail;
            },
            "NAME=SOFT[:HARD]"));
  if (m.any("--security-opt"))
    app.add_option_function<std::string>(
           "--security-opt",
           [&o](const std::string& v) {
             if (security_opt_refusal(v).empty()) o.no_new_privileges = nnp_value(v);
           },
           "no-new-privileges[:true|false] (what a rootless container can honour; profiles "
           "for seccomp, AppArmor and SELinux are refused, with the reason)")
        ->check(CLI::Validator([](std::string& v) { return security_opt_refusal(v); }, "OPTION"));
  // Everything from the image on is positional: IMAGE [COMMAND [ARG...]].
  app.prefix_command();
}

nlohmann::json options_record(const RunOptions& o, const GivenOptions& given,
                              const std::vector<std::string>& host_env) {
  nlohmann::json j = nlohmann::json::object();
  std::vector<std::string> env;
  for (const std::string& e : o.env) {
    if (e.find('=') != std::string::npos) {
      env.push_back(e);
      continue;
    }
    // KEY alone: the host's value now, as `docker create` takes it; unset on the host, left out.
    if (auto v = env_lookup(host_env, e)) env.push_back(e + "=" + *v);
  }
  auto put = [&j](const char* key, const auto& value, bool present) {
    if (present) j[key] = value;
  };
  put("env", env, !env.empty());
  put("file_env", o.file_env, !o.file_env.empty());
  put("volumes", o.volumes, !o.volumes.empty());
  put("tmpfs", o.tmpfs, !o.tmpfs.empty());
  put("workdir", o.workdir, !o.workdir.empty());
  put("user", o.user, !o.user.empty());
  put("entrypoint", o.entrypoint, o.entrypoint_set);
  put("hostname", o.hostname, !o.hostname.empty());
  put("pid_ns", true, o.pid_namespace);
  put("host_dev", true, o.host_dev);
  put("network_none", true, o.network_none);
  put("bind_home", o.bind_home, given.bind_home);
  put("hostenv", true, o.hostenv);
  put("no_image_config", true, o.no_image_config);
  put("read_only", o.read_only, given.read_only);
  put("gpus", o.gpus.value_or(""), o.gpus.has_value());
  put("devices", o.devices, !o.devices.empty());
  if (o.root_emulation) j["root_emulation"] = std::string(root_emulation_name(*o.root_emulation));
  put("ipc_host", true, o.ipc_host);
  put("ipc_private", true, o.ipc_private);
  put("no_new_privileges", true, o.no_new_privileges);
  put("shm_size", o.shm_size, !o.shm_size.empty());
  put("ulimits", o.ulimits, !o.ulimits.empty());
  put("add_hosts", o.add_hosts, !o.add_hosts.empty());
  put("ib", o.ib.value_or(""), o.ib.has_value());
  put("mpi", o.mpi, !o.mpi.empty());  // not --preserve-fds: descriptors belong to one run
  return j;
}

RunOptions options_from_record(const nlohmann::json& j, GivenOptions* given) {
  RunOptions o;
  if (!j.is_object()) return o;
  // Written by options_record; a field of another type (a hand-edited file) is left out.
  auto strings = [&j](const char* key) {
    auto it = j.find(key);
    std::vector<std::string> out;
    if (it == j.end() || !it->is_array()) return out;
    for (const auto& v : *it)
      if (v.is_string()) out.push_back(v.get<std::string>());
    return out;
  };
  auto text = [&j](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto flag = [&j](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  o.env = strings("env");
  o.file_env = strings("file_env");
  o.volumes = strings("volumes");
  o.tmpfs = strings("tmpfs");
  o.workdir = text("workdir");
  o.user = text("user");
  o.entrypoint_set = j.contains("entrypoint");
  o.entrypoint = text("entrypoint");
  o.hostname = text("hostname");
  o.pid_namespace = flag("pid_ns");
  o.host_dev = flag("host_dev");
  o.network_none = flag("network_none");
  given->bind_home = j.contains("bind_home");
  o.bind_home = flag("bind_home");
  o.hostenv = flag("hostenv");
  o.no_image_config = flag("no_image_config");
  given->read_only = j.contains("read_only");
  o.read_only = flag("read_only");
  if (j.contains("gpus")) o.gpus = text("gpus");
  o.devices = strings("devices");
  o.root_emulation_word = text("root_emulation");  // parsed by resolve_typed_options()
  o.ipc_host = flag("ipc_host");
  o.ipc_private = flag("ipc_private");
  o.no_new_privileges = flag("no_new_privileges");
  o.shm_size = text("shm_size");
  o.ulimits = strings("ulimits");
  o.add_hosts = strings("add_hosts");
  if (j.contains("ib")) o.ib = text("ib");
  o.mpi = text("mpi");
  return o;
}

namespace {

/// A root filesystem directory rather than an image or container: a path, which no image
/// reference or container name can be ("/...", "./...", "../...").
bool is_directory_argument(const std::string& what) {
  return what.starts_with("/") || what.starts_with("./") || what.starts_with("../") ||
         what == "." || what == "..";
}

/// What every kind of run reads besides its request: the caller's side, the device discovery's
/// options and the policy in force.
struct RunEnv {
  HostContext host;
  Result<DiscoveryOptions> discovery;
  const SiteConfig& site;
};

/// The spec a run executes, for a container and a directory alike: the root's /etc/passwd and
/// /etc/group read inside it, the image config and the options merged, the devices asked for
/// added.
Result<ContainerSpec> prepare_spec(const nlohmann::json& image_config, const std::string& rootfs,
                                   const RunRequest& req, const RunEnv& env) {
  const RunOptions& opts = req.opts;
  std::string passwd = BERTH_TRY(read_in_root(rootfs, "/etc/passwd"));
  std::string group = BERTH_TRY(read_in_root(rootfs, "/etc/group"));
  ContainerSpec spec = BERTH_TRY(build_spec(image_config, rootfs, opts, env.host, passwd, group));
  BERTH_CHECK(check_fds_open(spec.kept_fds));
  for (const ResourceLimit& limit : spec.rlimits) BERTH_CHECK(check_ulimit(limit));
  if (!opts.add_hosts.empty()) {
    // --add-host: the host's /etc/hosts (what the container sees without it) and the lines
    // asked for, as a file of the run's own over the container's /etc/hosts.
    std::string lines = BERTH_TRY(added_hosts(opts.add_hosts, opts.network_none));
    auto hosts = read_file("/etc/hosts");
    std::string text = hosts.ok() ? *hosts : "127.0.0.1\tlocalhost\n";
    if (!text.empty() && text.back() != '\n') text += '\n';
    DeviceEdit edit;
    edit.kind = DeviceEdit::Kind::kFile;
    edit.source = text + lines;
    edit.target = "/etc/hosts";
    spec.device_edits.push_back(std::move(edit));
  }
  spec.passwd = std::move(passwd);  // the engine's identity step reads them from here
  spec.group = std::move(group);
  BERTH_CHECK(apply_mount_policy(env.site, opts.bind_home && !req.given.bind_home, spec));
  BERTH_CHECK(add_run_devices(opts, env.host, env.discovery, spec));
  if (!opts.mpi.empty())
    BERTH_CHECK(add_mpi(env.site.mpi, env.site.mpi_default, opts.mpi == "*" ? "" : opts.mpi, spec));
  return spec;
}

/// The run's status becomes berth's; an error from Berth or exec is the one line to print.
Status finish(const RunOutcome& outcome) {
  set_exit_status(outcome.exit_code);
  if (outcome.error) return *outcome.error;
  return {};
}

/// `berth run DIR CMD`: runs a root filesystem directory in place, as ch-run and Apptainer's
/// sandboxes do (shared, read-mostly trees on a cluster file system). No container record, no
/// image config: the command must be given; changes land in the directory itself.
Status run_directory(const RunRequest& req, const std::string& dir, const RunEnv& env) {
  if (!req.name.empty() || req.remove)
    return make_error("run", dir, "--name and --rm apply to containers, not to a directory");
  if (req.opts.command.empty() && !req.opts.entrypoint_set)
    return make_error("run", dir, "a directory has no image config: give the command to run");
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) return sys_error("run", dir);
  struct stat st;
  if (::stat(real, &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error("run", dir, "not a directory");
  BERTH_CHECK(check_run_engine(env.site, default_engine()));
  ContainerSpec spec = BERTH_TRY(prepare_spec(nlohmann::json::object(), real, req, env));
  // Changes land in the directory itself, which no `berth rm` walks: under auto it keeps one
  // owner (the seccomp mode), so that the user's own tools can remove what a run wrote there.
  // --root-emulation=subids maps the range all the same.
  if (spec.root_emulation == RootEmulation::kAuto) spec.root_emulation = RootEmulation::kSeccomp;
  // No record to write and nothing to remove when it ends: berth becomes the workload, as
  // ch-run does; its status and signals are the workload's own.
  spec.exec_in_place = true;
  return finish(run_userns(spec));
}

/// A path argument that names a squashfs image rather than a root filesystem directory: a
/// file, or a missing path with an image file's suffix (so that its error says "open").
bool is_squashfs_argument(const std::string& what) {
  struct stat st;
  if (::stat(what.c_str(), &st) == 0) return !S_ISDIR(st.st_mode);
  return what.ends_with(".sqsh") || what.ends_with(".squashfs") || what.ends_with(".sqfs") ||
         what.ends_with(".sif");
}

/// `berth run FILE.sqsh [CMD]`: runs a squashfs image without extracting it, on the one FUSE
/// mount of that image that every container of this user on this node shares
/// (site/squashfs_mount.h), with a private kernel overlay on top (read-only unless
/// --writable; discarded at exit either way). Image config from /.berth/image.json when the
/// image has one (Berth made it); otherwise the command must be given, as for a directory.
///
/// `image` is the file opened (open_squashfs(), or a store's squashed image); `path` names it
/// in messages: the file as given, or the image's name.
Status run_squashfs(const RunRequest& req, SquashfsFile image, const std::string& path,
                    const RunEnv& env) {
  const RunOptions& opts = req.opts;
  const SiteConfig& site = env.site;
  const bool writable = req.writable;
  if (!req.name.empty())
    return make_error("run", path, "--name applies to containers, not to a squashfs image");
  // A squashfs root is read-only unless --writable asks otherwise (and then only a discarded
  // overlay is written): --writable overrides the site's readonly default, not its lock.
  if (writable && opts.read_only) {
    if (req.given.read_only)
      return make_error("run", path, "--writable and --read-only contradict each other");
    BERTH_CHECK(check_not_locked(site, "readonly", "--writable"));
  }
  BERTH_CHECK(check_run_engine(site, default_engine()));
  std::string base = BERTH_TRY(make_runtime_dir("mount squashfs", site.runtime_dir));
  base = path_join(base, "squashfs");
  BERTH_CHECK(make_dirs(base, 0700));
  SquashfsMount mount = BERTH_TRY(acquire_squashfs_mount(image, base));
  log::debug("squashfs {}: {} mount {}", path, mount.started ? "new" : "shared", mount.root);
  image.fd.reset();  // the daemon holds the file now
  bool has_config = false;
  nlohmann::json config;
  {
    UniqueFd root = BERTH_TRY(open_file(mount.root, O_RDONLY | O_DIRECTORY));
    config = BERTH_TRY(read_squashfs_image_config(root.get(), path, &has_config));
  }
  if (!has_config && opts.command.empty() && !opts.entrypoint_set)
    return make_error(
               "run", path,
               "this squashfs image has no image config (neither Berth's nor enroot's): give "
               "the command to run")
        .with_hint("berth run " + path + " /bin/sh");
  ContainerSpec spec = BERTH_TRY(prepare_spec(config, mount.root, req, env));
  spec.overlay_scratch = mount.scratch;
  spec.overlay_only_for_writes = !writable;
  spec.writable_rootfs = writable;
  return finish(run_userns(spec));  // `mount` is held until the workload is gone
}

/// The squashfs file `what` designates (the caller found no container of that name) when it
/// names a squashed image: of
/// the user's store, else of the site's central store (verified, site/central_store.h); when
/// it names nothing and store_format is "squashfs", the image pulled squashed first. nullopt:
/// run it as a container (an image kept as layers, or one to pull as layers).
Result<std::optional<SquashfsFile>> find_squashed_image(const GlobalOptions& g,
                                                        const std::string& what) {
  Store store = BERTH_TRY(open_store(g));
  // rmi and gc wait while the file is looked up and opened; the mount keeps it afterwards.
  FileLock pinned = BERTH_TRY(store.pin());
  std::optional<FoundImage> found = BERTH_TRY(find_image_anywhere(g, store, what));
  if (!found) {
    if (!BERTH_TRY(squash_wanted(g, std::nullopt, "run"))) return std::optional<SquashfsFile>();
    pinned = FileLock();  // a pull pins the store itself
    std::fprintf(stderr, "Unable to find image '%s' locally\n", what.c_str());
    std::fflush(stderr);
    PullResult pulled = BERTH_TRY(pull_reference(g, what, "", !g.quiet, true));
    pinned = BERTH_TRY(store.pin());
    found = FoundImage{store, pulled.record, false};
  }
  if (found->central) {
    pinned = FileLock();  // the central store is not this store: no gc of ours need wait
    return std::optional<SquashfsFile>(
        BERTH_TRY(open_central_squash(found->store, found->record, store)));
  }
  if (!found->record.squashed()) return std::optional<SquashfsFile>();
  // The user's own store: verified when it was written, private since (`berth verify` hashes
  // it again).
  return std::optional<SquashfsFile>(
      BERTH_TRY(open_squashfs(store.blob_path(found->record.squash))));
}
}  // namespace

Status do_run(const GlobalOptions& g, RunRequest req, bool* monitor) {
  RunOptions& opts = req.opts;
  const bool detach = req.detach != Detach::kNo;
  set_exit_status(kExitBerthFailed);  // until the workload runs
  if (req.rest.empty())
    return make_error("run", "IMAGE", "an image or container is required")
        .with_hint("berth run [OPTIONS] IMAGE|CONTAINER [COMMAND [ARG...]]");
  const std::string what = req.rest.front();
  if (what.starts_with("-")) return unknown_flag("run", what);
  opts.command.assign(req.rest.begin() + 1, req.rest.end());
  BERTH_CHECK(check_pull_policy("run", req.pull));
  HostContext host{current_environment(), home_dir(), ::getuid(), ::getgid()};
  BERTH_CHECK(resolve_typed_options(opts, host.environ));
  // What `berth start` repeats: the options as typed, before the policy's defaults (the
  // policy in force then applies then).
  const nlohmann::json typed = options_record(opts, req.given, host.environ);
  const SiteConfig& site = BERTH_TRY(g.site);
  BERTH_CHECK(apply_run_policy(site, req.given, opts));
  const RunEnv env{std::move(host), discovery_options(g), site};
  // A squashfs file run with a name or detached becomes a container of its own (extracted, as
  // enroot's create does), which later runs and `start` find by that name.
  const bool squashfs_container = is_squashfs_file_argument(what) && (!req.name.empty() || detach);
  if (detach && is_directory_argument(what) && !squashfs_container)
    return make_error("run", what, "-d applies to containers, not to a directory or squashfs image")
        .with_hint("run it in the background with your shell ('&', nohup), or import it");
  // A directory or a squashfs image runs in place (runs_in_place); a squashfs image under auto
  // too. The fallback engines would need the mount in their own way (proot: a bind of the
  // shared mount, but no overlay for mount targets and /etc/passwd; runc: a bundle per run).
  const std::string in_place = engines_with(&Engine::runs_in_place);
  auto squash_engine = [&]() -> Status {
    if (req.engine && !req.engine->is_auto() && !req.engine->row->runs_in_place)
      return make_error("run", what, "a squashfs image runs with the " + in_place + " engine only",
                        ErrorCode::kUnsupported);
    return {};
  };
  // Labels belong to a container record, made by this run or never (Docker's).
  const auto labels = BERTH_TRY(parse_labels(opts.labels));
  auto no_labels = [&](const char* what_runs) -> Status {
    if (labels.empty()) return {};
    return make_error("run", "--label",
                      std::string("labels belong to a new container, not to ") + what_runs)
        .with_hint("berth create --label KEY=VALUE ... to make one");
  };
  if (is_directory_argument(what) && is_squashfs_argument(what) && !squashfs_container) {
    BERTH_CHECK(no_labels("a squashfs image run in place"));
    BERTH_CHECK(squash_engine());
    SquashfsFile image = BERTH_TRY(open_squashfs(what));
    return run_squashfs(req, std::move(image), what, env);
  }
  auto not_writable = [&]() -> Status {
    if (!req.writable) return {};
    return make_error("run", what, "--writable applies to squashfs images only")
        .with_hint("a container's root filesystem is writable already");
  };
  if (is_directory_argument(what) && !squashfs_container) {
    BERTH_CHECK(not_writable());
    BERTH_CHECK(no_labels("a directory"));
    // The fallback engines keep per-container state (bundles, fakechroot's symlink form).
    if (req.engine && (req.engine->is_auto() || !req.engine->row->runs_in_place))
      return make_error("run", what, "a directory runs with the " + in_place + " engine only")
          .with_hint("create a container (berth import, berth create) to use --engine=" +
                     std::string(req.engine->spelled));
    return run_directory(req, what, env);
  }
  ContainerStore cs = BERTH_TRY(open_containers(g));
  // Without --rm, the run needs no list of the container's names (a scan of names/ that
  // grows with the store) and no probe of its run lock (taken just below).
  const auto detail = req.remove ? ContainerStore::Detail::kFull : ContainerStore::Detail::kRecord;
  auto existing = cs.find(what, detail);
  if (existing.ok() && !req.platform.empty())
    return make_error("run", "--platform " + req.platform,
                      "--platform chooses the image of a new container, not an existing one");
  if (!existing.ok() && !squashfs_container && req.platform.empty()) {
    // No container of that name: a squashed image runs as it is, without one (with
    // --platform, the image of that platform is pulled as layers for a container).
    std::optional<SquashfsFile> image = BERTH_TRY(find_squashed_image(g, what));
    if (image) {
      BERTH_CHECK(no_labels("a squashed image run in place"));
      BERTH_CHECK(squash_engine());
      return run_squashfs(req, std::move(*image), what, env);
    }
  }
  if (!squashfs_container) BERTH_CHECK(not_writable());  // a container is writable already
  if (existing.ok() && !req.name.empty())
    return make_error("run", what, "--name applies to a new container, not to an existing one");
  const bool created = !existing.ok();
  if (!created) BERTH_CHECK(no_labels("an existing one"));
  const ContainerRecord c =
      created
          ? BERTH_TRY(create_from_image(g, cs, what, req.name, "run", {}, req.pull, req.platform))
          : std::move(existing).value();
  if (created) BERTH_CHECK(cs.add_labels(c, labels));
  // `berth setup --gpus` (udocker's `setup --nvidia`): the container's GPUs unless --gpus (or
  // the site's default gpus, applied above) says otherwise.
  if (!opts.gpus && !c.gpus.empty()) opts.gpus = c.gpus;
  if (opts.network_none) {
    // The engine asked for or recorded (the site's default is not consulted here).
    std::optional<EngineChoice> chosen = req.engine ? req.engine : c.engine;
    if (chosen && (chosen->is_auto() || !chosen->row->network_namespace))
      return make_error("run", "--network none",
                        "the " + std::string(chosen->spelled) +
                            " engine cannot give a container a network namespace",
                        ErrorCode::kUnsupported)
          .with_hint("run it with the default engine (--engine=" +
                     std::string(default_engine().spelled) + ")");
  }
  std::string rootfs = cs.rootfs(c);
  FileLock lock = BERTH_TRY(cs.lock_for_run(c));
  // --rm: the container goes however the run ends here (a detached run's in its monitor).
  auto removal = on_scope_exit([&] {
    if (!req.remove) return;
    lock = FileLock();  // released, so that remove() sees the container stopped
    if (auto st = cs.remove(c, true); !st.ok())
      log::warn("{}", st.error().message());  // the run's own status matters more
  });
  ContainerSpec spec = BERTH_TRY(prepare_spec(c.image_config, rootfs, req, env));
  if (detach && !spec.kept_fds.empty()) {
    // The monitor closes what it does not use; a launcher's rank is a foreground process.
    return make_error("run", "descriptor " + std::to_string(spec.kept_fds.front()),
                      "a detached run keeps no descriptors (PMI_FD, --preserve-fds)",
                      ErrorCode::kUnsupported)
        .with_hint("run the rank in the foreground, or berth exec it into a detached container");
  }
  if (detach) {
    // Detached (cli/lifecycle.cc, runtime/monitor.h): this process prints the ID and leaves;
    // the monitor, holding the run lock it inherits, goes on below. There is no terminal.
    spec.tty = false;
    // The user's subordinate-ID holder (runtime/subids.h) is made here when it is missing,
    // not in the monitor: making it forks helpers (newuidmap, newgidmap), which `inspect` and
    // `exec` would take for the workload while they run, the monitor's first children.
    if (spec.uid == 0 && spec.gid == 0) {
      if (spec.root_emulation == RootEmulation::kAuto)
        (void)subid_namespace_if_available();
      else if (spec.root_emulation == RootEmulation::kSubids)
        (void)required_subid_namespace();  // its error, if any, is the engine's to report
    }
    bool in_monitor = BERTH_TRY(detach_monitor(cs, c, lock, opts.interactive));
    if (!in_monitor) {
      removal.dismiss();  // the monitor runs it, and removes it
      if (req.detach == Detach::kYes) std::printf("%s\n", c.id.c_str());
      set_exit_status(0);
      return {};
    }
    if (monitor != nullptr) *monitor = true;
  }
  // A run of another command than the one the record shows (the last run's, or the
  // Entrypoint and Cmd create recorded): recorded now, so that ps and inspect show it while it
  // runs. Not for --rm: the record goes with the run.
  if (!req.remove && spec.argv != container_command(c)) {
    if (auto st = cs.record_run(c, spec.argv, c.last_exit, nlohmann::json()); !st.ok())
      log::warn("{}", st.error().message());
  }
  auto ran = run_with_engine(cs, c, spec, req.engine, &site);
  if (!ran.ok()) {
    if (detach) record_monitor_end(cs, c, kExitBerthFailed, ran.error().message());
    return std::move(ran).error();
  }
  RunOutcome outcome = std::move(ran).value();
  // Bookkeeping for ps, written once the run ended (while it runs, ps sees the run lock); a
  // failure to write it must not change the run's status.
  if (!req.remove) {
    if (auto st = cs.record_run(c, spec.argv, outcome.exit_code, typed); !st.ok())
      log::warn("{}", st.error().message());
  }
  if (detach)
    record_monitor_end(cs, c, outcome.exit_code, outcome.error ? outcome.error->message() : "");
  return finish(outcome);
}

Action setup_run(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    RunRequest req;
    std::string engine;  ///< --engine as typed
    bool detach = false;
    std::string network;
  };
  auto o = std::make_shared<Opts>();
  const MentionedOptions& m = g.mentioned;
  RunRequest& req = o->req;
  add_run_options(app, req.opts, req.name, m);
  if (m.any("--rm")) app.add_flag("--rm", req.remove, "Remove the container when it exits");
  if (m.any("--engine"))
    app.add_option("--engine", o->engine, "Engine for this run: " + engine_names());
  if (m.any("--writable"))
    app.add_flag("--writable", req.writable,
                 "Squashfs image: a writable root (changes are discarded at exit)");
  if (m.any("-d,--detach"))
    app.add_flag("-d,--detach", o->detach,
                 "Run in the background under a small monitor; print the container ID");
  if (m.any("--pull"))
    app.add_option("--pull", req.pull, "Pull the image: always, missing (default) or never");
  if (m.any("--platform"))
    app.add_option("--platform", req.platform,
                   "The image's platform, os/arch[/variant]: pulled for it when the stored one "
                   "is another");
  if (m.any("--network,--net"))
    app.add_option("--network,--net", o->network,
                   "host (default: the host's network) or none (a network namespace with only lo)");
  return [o, &g, &app]() -> Status {
    // The caller's terminal is handed to the workload: without one there is nothing to hand
    // (with -i, Docker's words: it refuses the same way).
    RunRequest& req = o->req;
    if (req.opts.tty && req.opts.interactive && !::isatty(STDIN_FILENO) && !o->detach)
      return make_error("run", "-it", "the input device is not a TTY")
          .with_hint("run from a terminal, or leave out -t");
    if (req.opts.tty && !o->detach && !::isatty(STDIN_FILENO) && !::isatty(STDOUT_FILENO) &&
        !::isatty(STDERR_FILENO))
      return make_error("run", "-t", "no terminal to hand to the container")
          .with_hint("run from a terminal, or leave out -t");
    set_exit_status(kExitBerthFailed);
    BERTH_CHECK(check_network(o->network));
    if (!o->engine.empty()) req.engine = BERTH_TRY(parse_engine(o->engine));
    req.opts.network_none = o->network == "none";
    req.given = given_run_options(app);
    req.rest = prefix_operands(app, g);
    req.detach = o->detach ? Detach::kYes : Detach::kNo;
    return do_run(g, std::move(req));
  };
}

}  // namespace berth::cli

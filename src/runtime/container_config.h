// From what the user typed and what the image says to a ContainerSpec: Docker's rules for
// Entrypoint/Cmd, environment merging, users and groups, volumes, working directory.
// Pure functions of their inputs (the CLI reads the files), so tests cover every rule.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/env_list.h"
#include "core/error.h"
#include "runtime/container_spec.h"

namespace berth {

/// `berth run` / `create` options, as typed.
struct RunOptions {
  std::vector<std::string> env;        ///< -e K=V, or -e K for the host's value
  std::vector<std::string> env_files;  ///< --env-file paths
  std::vector<std::string> file_env;   ///< their variables, read by the caller (parse_env_file)
  std::vector<std::string> volumes;    ///< -v HOST:CTR[:ro|:rw]
  std::vector<std::string> tmpfs;      ///< --tmpfs CTR[:OPTIONS]
  std::string workdir;                 ///< -w
  std::string user;                    ///< -u USER[:GROUP]
  std::string entrypoint;              ///< --entrypoint
  bool entrypoint_set = false;         ///< --entrypoint given (even as "")
  std::string hostname;                ///< --hostname
  bool interactive = false;            ///< -i
  bool tty = false;                    ///< -t
  bool pid_namespace = false;          ///< --pid-ns
  bool host_dev = false;               ///< --host-dev: the host's /dev instead of a minimal one
  bool network_none = false;           ///< --network none: a network namespace with only lo
  bool bind_home = false;              ///< --bind-home
  bool hostenv = false;                ///< --hostenv
  /// --no-image-config: the image's Env, WorkingDir, User, Entrypoint and Cmd are not used
  /// (udocker's --nometa)
  bool no_image_config = false;
  bool read_only = false;  ///< --read-only (or the site's readonly): the root is mounted read-only
  /// --root-emulation as typed, or as a container's recorded run options hold it:
  /// resolve_typed_options() (cli/run.h) parses it into root_emulation and clears it.
  std::string root_emulation_word;
  /// --root-emulation, or the policy's root_emulation; nullopt: neither says (auto).
  std::optional<RootEmulation> root_emulation;
  /// The site policy's [env] edits (core/env_list.h), applied after the image's variables and
  /// --hostenv, before --env-file and -e.
  std::vector<EnvEdit> policy_env;
  std::optional<std::string> gpus;   ///< --gpus (Docker's syntax)
  std::vector<std::string> devices;  ///< --device: CDI names (vendor.com/class=name)
  std::optional<std::string> ib;     ///< --ib all|none|0,1|mlx5_0 (devices/rdma.h)
  std::string ib_site_default;       ///< the site policy's `ib`: HCAs where the host has some
  /// --mpi[=TYPE]: "" not asked, "*" the site's default type, else the type (devices/mpi.h).
  std::string mpi;
  int preserve_fds = 0;            ///< --preserve-fds N: keep 3 .. 2+N open (runtime/launcher.h)
  bool ipc_host = false;           ///< --ipc host: the host's /dev/shm (ranks of one job share it)
  bool ipc_private = false;        ///< --ipc private: an IPC namespace of its own
  bool no_new_privileges = false;  ///< --security-opt no-new-privileges
  std::string shm_size;            ///< --shm-size, as typed (64m, 1g, 1073741824)
  std::vector<std::string> ulimits;    ///< --ulimit NAME=SOFT[:HARD], as typed
  std::vector<std::string> labels;     ///< -l/--label KEY[=VALUE]: of a new container only
  std::vector<std::string> add_hosts;  ///< --add-host HOST:IP, lines added to /etc/hosts
  std::vector<std::string> command;    ///< everything after the image
};

/// What the caller's side contributes.
struct HostContext {
  std::vector<std::string> environ;  ///< the caller's environment, "K=V"
  std::string home;                  ///< the caller's $HOME
  uid_t uid = 0;
  gid_t gid = 0;
};

/// The identity a -u / image User value resolves to.
struct ResolvedUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;  ///< from passwd, else the number as text
  std::string home;  ///< from passwd, else "/" ("/root" for root)
};

/// Resolves "name|uid[:group|gid]" against the container's /etc/passwd and /etc/group texts.
Result<ResolvedUser> resolve_user(std::string_view user, std::string_view passwd,
                                  std::string_view group);
/// resolve_user() against the /etc/passwd and /etc/group of the root at `root_fd`, read
/// inside it (a missing file: no entries).
Result<ResolvedUser> resolve_user_in_root(std::string_view user, int root_fd);

/// Parses -v HOST:CTR[:ro|:rw]; both paths must be absolute.
Result<Volume> parse_volume(std::string_view text);

/// Parses --tmpfs CTR[:OPTIONS], Docker's form: OPTIONS comma-separated among ro, rw, nosuid,
/// suid, nodev, dev, noexec, exec, size=N, mode=OCTAL, nr_inodes=N (default nosuid, nodev,
/// mode=1777).
Result<TmpfsMount> parse_tmpfs(std::string_view text);

/// Parses Docker's `--ulimit NAME=SOFT[:HARD]` (HARD defaults to SOFT; -1 or "unlimited" is
/// no limit; NAME one of core, cpu, data, fsize, locks, memlock, msgqueue, nice, nofile,
/// nproc, rss, rtprio, rttime, sigpending, stack, as).
Result<ResourceLimit> parse_ulimit(std::string_view text);

/// Docker's `--label KEY[=VALUE]` values (a KEY alone has the value ""), the later of one KEY
/// winning; an empty KEY is an error.
Result<std::map<std::string, std::string>> parse_labels(const std::vector<std::string>& labels);

/// The /etc/hosts lines of Docker's `--add-host HOST:IP` values ("IP\tHOST\n" each; HOST=IP
/// too, Docker 25's form; the IP may be IPv6; `host-gateway` is 127.0.0.1, the host itself,
/// whose network a container shares, and has no meaning under --network none).
Result<std::string> added_hosts(const std::vector<std::string>& add_hosts, bool network_none);

/// Variables from an env file: "K=V" lines, "K" alone takes the host's value (skipped when the
/// host has none), blank lines and '#' comments ignored. `path` is for errors.
Result<std::vector<std::string>> parse_env_file(std::string_view text, const std::string& path,
                                                const std::vector<std::string>& host_env);

/// Merges everything into the spec the engine runs. `image_config` is the image config's
/// "config" object; `passwd`/`group` are the container's files ("" when absent).
Result<ContainerSpec> build_spec(const nlohmann::json& image_config, const std::string& rootfs,
                                 const RunOptions& opts, const HostContext& host,
                                 std::string_view passwd, std::string_view group);

}  // namespace berth

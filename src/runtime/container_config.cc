#include "runtime/container_config.h"

#include <arpa/inet.h>
#include <sys/resource.h>

#include "core/env_list.h"
#include "core/root_path.h"
#include "core/strings.h"
#include "image/image_config.h"
#include "runtime/identity.h"
#include "runtime/launcher.h"
#include "runtime/rlimits.h"

#include <sys/mount.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace berth {
namespace {

std::optional<uint32_t> parse_id(std::string_view s) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

Result<ResolvedUser> resolve_user(std::string_view user, std::string_view passwd,
                                  std::string_view group) {
  auto parts = split(user, ':');
  if (parts.size() > 2 || parts[0].empty() || (parts.size() == 2 && parts[1].empty()))
    return make_error("user", std::string(user), "expected USER[:GROUP], a name or a number");
  ResolvedUser r;
  std::optional<std::vector<std::string_view>> pw;
  if (auto uid = parse_id(parts[0])) {
    r.uid = *uid;
    pw = find_account(passwd, 2, parts[0]);
    r.gid = 0;  // Docker: a uid without a passwd entry runs with group 0
  } else {
    pw = find_account(passwd, 0, parts[0]);
    if (!pw || pw->size() < 4 || !parse_id((*pw)[2]) || !parse_id((*pw)[3]))
      return make_error("user", std::string(parts[0]),
                        "unable to find user " + std::string(parts[0]) +
                            ": no matching entries in the container's /etc/passwd");
    r.uid = *parse_id((*pw)[2]);
  }
  if (pw && pw->size() >= 4) {
    r.name = std::string((*pw)[0]);
    if (auto g = parse_id((*pw)[3])) r.gid = *g;
    if (pw->size() >= 6 && !(*pw)[5].empty()) r.home = std::string((*pw)[5]);
  }
  if (r.name.empty()) r.name = r.uid == 0 ? "root" : std::to_string(r.uid);
  if (r.home.empty()) r.home = r.uid == 0 ? "/root" : "/";
  if (parts.size() == 2) {
    if (auto gid = parse_id(parts[1])) {
      r.gid = *gid;
    } else {
      auto gr = find_account(group, 0, parts[1]);
      if (!gr || gr->size() < 3 || !parse_id((*gr)[2]))
        return make_error("user", std::string(parts[1]),
                          "unable to find group " + std::string(parts[1]) +
                              ": no matching entries in the container's /etc/group");
      r.gid = *parse_id((*gr)[2]);
    }
  }
  return r;
}

Result<ResolvedUser> resolve_user_in_root(std::string_view user, int root_fd) {
  std::string passwd = BERTH_TRY(read_file_in_root(root_fd, "/etc/passwd"));
  std::string group = BERTH_TRY(read_file_in_root(root_fd, "/etc/group"));
  return resolve_user(user, passwd, group);
}

Result<Volume> parse_volume(std::string_view text) {
  auto parts = split(text, ':');
  auto bad = [&](std::string why) {
    return make_error("volume", std::string(text), std::move(why))
        .with_hint("use -v HOST:CONTAINER[:ro|:rw][,nosuid,...] with absolute paths");
  };
  if (parts.size() < 2 || parts.size() > 3) return bad("expected HOST:CONTAINER[:ro|:rw]");
  Volume v;
  v.host = std::string(parts[0]);
  v.container = std::string(parts[1]);
  if (v.host.empty() || v.host[0] != '/') return bad("the host path must be absolute");
  if (v.container.empty() || v.container[0] != '/')
    return bad("the container path must be absolute");
  if (parts.size() == 3) {
    // Docker's comma-separated options: ro|rw and a propagation, plus the mount flags.
    struct Option {
      std::string_view word;
      unsigned long flag, propagation;
    };
    static constexpr Option kOptions[] = {
        {"ro", 0, 0},
        {"rw", 0, 0},
        {"nosuid", MS_NOSUID, 0},
        {"nodev", MS_NODEV, 0},
        {"noexec", MS_NOEXEC, 0},
        {"private", 0, 0},
        {"rprivate", 0, 0},
        {"slave", 0, MS_SLAVE},
        {"rslave", 0, MS_SLAVE | MS_REC},
        {"unbindable", 0, MS_UNBINDABLE},
        {"runbindable", 0, MS_UNBINDABLE | MS_REC},
    };
    for (std::string_view opt : split(parts[2], ',')) {
      const Option* o = std::find_if(std::begin(kOptions), std::end(kOptions),
                                     [&](const Option& k) { return k.word == opt; });
      if (o == std::end(kOptions))
        return bad("unknown option \"" + std::string(opt) +
                   "\" (ro, rw, nosuid, nodev, noexec, [r]private, [r]slave, [r]unbindable)");
      if (opt == "ro" || opt == "rw") v.read_only = opt == "ro";
      v.flags |= o->flag;
      if (o->propagation != 0 || opt.ends_with("private")) v.propagation = o->propagation;
    }
  }
  return v;
}

namespace {

/// --shm-size as a tmpfs size= value.
Result<std::string> tmpfs_size(const std::string& text) {
  // Docker's units (go-units RAMInBytes): a number, then b, k, m, g (or kb, mb, gb), any case.
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string unit = lower(text.substr(digits));
  if (unit.size() == 2 && unit[1] == 'b') unit.pop_back();
  if (digits == 0 || digits > 15 ||
      text.substr(0, digits).find_first_not_of('0') == std::string::npos ||
      !(unit.empty() || unit == "b" || unit == "k" || unit == "m" || unit == "g"))
    return make_error("volume", "--shm-size " + text,
                      "expected a size such as 64m, 1g or a number of bytes");
  return text.substr(0, digits) + (unit == "b" ? "" : unit);
}

}  // namespace

namespace {

struct UlimitName {
  const char* name;
  int resource;
};
constexpr UlimitName kUlimits[] = {
    {"core", RLIMIT_CORE},         {"cpu", RLIMIT_CPU},
    {"data", RLIMIT_DATA},         {"fsize", RLIMIT_FSIZE},
    {"locks", RLIMIT_LOCKS},       {"memlock", RLIMIT_MEMLOCK},
    {"msgqueue", RLIMIT_MSGQUEUE}, {"nice", RLIMIT_NICE},
    {"nofile", RLIMIT_NOFILE},     {"nproc", RLIMIT_NPROC},
    {"rss", RLIMIT_RSS},           {"rtprio", RLIMIT_RTPRIO},
    {"rttime", RLIMIT_RTTIME},     {"sigpending", RLIMIT_SIGPENDING},
    {"stack", RLIMIT_STACK},       {"as", RLIMIT_AS},
};

}  // namespace

Result<ResourceLimit> parse_ulimit(std::string_view text) {
  const std::string what = "--ulimit " + std::string(text);
  size_t eq = text.find('=');
  if (eq == std::string_view::npos)
    return make_error("run", what, "expected NAME=SOFT[:HARD], e.g. nofile=1024:4096",
                      ErrorCode::kInvalidInput);
  std::string_view name = text.substr(0, eq);
  ResourceLimit limit;
  limit.name = std::string(name);
  const UlimitName* known = nullptr;
  for (const UlimitName& u : kUlimits)
    if (name == u.name) known = &u;
  if (known == nullptr) {
    std::string names;
    for (const UlimitName& u : kUlimits) names += (names.empty() ? "" : ", ") + std::string(u.name);
    return make_error("run", what, "unknown limit \"" + limit.name + "\" (known: " + names + ")",
                      ErrorCode::kInvalidInput);
  }
  limit.resource = known->resource;
  std::string_view values = text.substr(eq + 1);
  auto number = [&](std::string_view v, uint64_t& out) {
    if (v == "-1" || v == "unlimited") {
      out = RLIM_INFINITY;
      return true;
    }
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string_view::npos)
      return false;
    out = std::stoull(std::string(v));
    return true;
  };
  size_t colon = values.find(':');
  if (!number(values.substr(0, colon), limit.soft) ||
      !number(colon == std::string_view::npos ? values.substr(0, colon) : values.substr(colon + 1),
              limit.hard))
    return make_error("run", what, "limits are whole numbers, -1 or unlimited: NAME=SOFT[:HARD]",
                      ErrorCode::kInvalidInput);
  if (limit.soft > limit.hard)
    return make_error("run", what,
                      "the soft limit " + rlimit_text(limit.soft) + " is above the hard limit " +
                          rlimit_text(limit.hard),
                      ErrorCode::kInvalidInput);
  return limit;
}

Result<std::map<std::string, std::string>> parse_labels(const std::vector<std::string>& labels) {
  std::map<std::string, std::string> out;
  for (const std::string& l : labels) {
    size_t eq = l.find('=');
    if (eq == 0 || l.empty())
      return make_error("run", "--label " + l, "a label is KEY[=VALUE], with a KEY",
                        ErrorCode::kInvalidInput);
    out[l.substr(0, eq)] = eq == std::string::npos ? "" : l.substr(eq + 1);
  }
  return out;
}

Result<std::string> added_hosts(const std::vector<std::string>& add_hosts, bool network_none) {
  std::string lines;
  for (const std::string& entry : add_hosts) {
    const std::string what = "--add-host " + entry;
    size_t sep = entry.find_first_of(":=");
    std::string host = entry.substr(0, sep);
    std::string ip = sep == std::string::npos ? "" : entry.substr(sep + 1);
    if (ip.size() > 2 && ip.front() == '[' && ip.back() == ']') ip = ip.substr(1, ip.size() - 2);
    if (host.empty() || ip.empty() || host.find_first_of(" \t\n\r#") != std::string::npos)
      return make_error("run", what, "expected HOST:IP (my-host:10.0.0.7)",
                        ErrorCode::kInvalidInput);
    if (ip == "host-gateway") {
      if (network_none)
        return make_error("run", what,
                          "host-gateway is the host, which --network none cuts the container "
                          "off from",
                          ErrorCode::kInvalidInput);
      ip = "127.0.0.1";  // the host's own network namespace: the host is its loopback
    }
    unsigned char buf[16];
    if (::inet_pton(AF_INET, ip.c_str(), buf) != 1 && ::inet_pton(AF_INET6, ip.c_str(), buf) != 1)
      return make_error("run", what, "\"" + ip + "\" is not an IPv4 or IPv6 address",
                        ErrorCode::kInvalidInput);
    lines.append(ip).append("\t").append(host).append("\n");
  }
  return lines;
}

Result<TmpfsMount> parse_tmpfs(std::string_view text) {
  auto bad = [&](std::string why) {
    return make_error("volume", "tmpfs " + std::string(text), std::move(why))
        .with_hint("use --tmpfs CONTAINER[:size=64m,mode=1777,ro,noexec,...]");
  };
  size_t colon = text.find(':');
  TmpfsMount t;
  t.container = std::string(text.substr(0, colon));
  if (t.container.empty() || t.container[0] != '/')
    return bad("the container path must be absolute");
  t.flags = MS_NOSUID | MS_NODEV;
  std::vector<std::string> data;
  bool mode = false;
  if (colon != std::string_view::npos) {
    for (std::string_view opt : split(text.substr(colon + 1), ',')) {
      struct Flag {
        std::string_view word;
        unsigned long flag;
        bool set;
      };
      static constexpr Flag kFlags[] = {{"ro", MS_RDONLY, true},     {"rw", MS_RDONLY, false},
                                        {"nosuid", MS_NOSUID, true}, {"suid", MS_NOSUID, false},
                                        {"nodev", MS_NODEV, true},   {"dev", MS_NODEV, false},
                                        {"noexec", MS_NOEXEC, true}, {"exec", MS_NOEXEC, false}};
      const Flag* f = std::find_if(std::begin(kFlags), std::end(kFlags),
                                   [&](const Flag& k) { return k.word == opt; });
      if (f != std::end(kFlags)) {
        t.flags = f->set ? (t.flags | f->flag) : (t.flags & ~f->flag);
        continue;
      }
      std::string_view key = opt.substr(0, opt.find('='));
      if (opt.find('=') == std::string_view::npos || opt.size() == key.size() + 1 ||
          (key != "size" && key != "mode" && key != "nr_inodes" && key != "huge"))
        return bad("unknown option \"" + std::string(opt) + "\"");
      mode = mode || key == "mode";
      data.emplace_back(opt);
    }
  }
  if (!mode) data.insert(data.begin(), "mode=1777");
  for (const std::string& d : data) t.data += (t.data.empty() ? "" : ",") + d;
  return t;
}

Result<std::vector<std::string>> parse_env_file(std::string_view text, const std::string& path,
                                                const std::vector<std::string>& host_env) {
  std::vector<std::string> out;
  size_t n = 0;
  for (std::string_view line : split(text, '\n')) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    line.remove_prefix(first);
    std::string_view key = env_name(line);
    if (key.empty() || key.find_first_of(" \t") != std::string_view::npos)
      return make_error(
          "read env file", path,
          "line " + std::to_string(n) + ": invalid variable name \"" + std::string(key) + "\"");
    if (line.find('=') != std::string_view::npos) {
      out.emplace_back(line);
    } else if (auto v = env_lookup(host_env, key)) {
      out.push_back(std::string(key) + "=" + *v);
    }
  }
  return out;
}

Result<ContainerSpec> build_spec(const nlohmann::json& image_config, const std::string& rootfs,
                                 const RunOptions& opts, const HostContext& host,
                                 std::string_view passwd, std::string_view group) {
  ContainerSpec spec;
  spec.rootfs = rootfs;

  // --no-image-config (udocker's --nometa): the run is made of its options alone.
  RunSettings image =
      opts.no_image_config ? RunSettings{} : BERTH_TRY(parse_run_settings(image_config));

  // Command: Docker's Entrypoint/Cmd rules.
  std::vector<std::string> entrypoint = image.entrypoint;
  std::vector<std::string> cmd = image.cmd;
  if (opts.entrypoint_set) {
    entrypoint.clear();
    if (!opts.entrypoint.empty()) entrypoint.push_back(opts.entrypoint);
    cmd.clear();  // --entrypoint drops the image's Cmd
  }
  if (!opts.command.empty()) cmd = opts.command;
  spec.argv = entrypoint;
  spec.argv.insert(spec.argv.end(), cmd.begin(), cmd.end());
  if (spec.argv.empty())
    return make_error("run", "command", "no command specified: the image has no Cmd or Entrypoint")
        .with_hint("give a command after the image name");

  // Identity.
  std::string user = opts.user;
  if (user.empty()) user = image.user;
  ResolvedUser who = BERTH_TRY(resolve_user(user.empty() ? "0" : user, passwd, group));
  spec.uid = who.uid;
  spec.gid = who.gid;
  spec.user_name = who.name;
  spec.home = who.home;

  // Environment: image < host (--hostenv) < the site policy's edits < --env-file < -e.
  for (const std::string& kv : image.env) set_env(spec.env, kv);
  if (opts.hostenv)
    for (const std::string& kv : host.environ) set_env(spec.env, kv);
  // A site's PATH edit extends the PATH the container would have had, Docker's default included.
  if (!opts.policy_env.empty() && !env_lookup(spec.env, "PATH"))
    set_env(spec.env, std::string("PATH=") + kDefaultPath);
  for (const EnvEdit& e : opts.policy_env) apply_env_edit(spec.env, e);
  // A launcher's variables (PMI_RANK, PMIX_NAMESPACE...) reach the rank it started.
  for (const std::string& kv : launcher_env(host.environ)) set_env(spec.env, kv);
  for (const std::string& kv : opts.file_env) set_env(spec.env, kv);
  for (const std::string& e : opts.env) {
    if (env_name(e).empty())
      return make_error("env", e, "invalid variable: expected KEY=VALUE or KEY");
    if (e.find('=') != std::string::npos) {
      set_env(spec.env, e);
    } else if (auto v = env_lookup(host.environ, e)) {
      set_env(spec.env, e + "=" + *v);
    }
  }

  // Volumes, then --bind-home.
  for (const std::string& v : opts.volumes) spec.volumes.push_back(BERTH_TRY(parse_volume(v)));
  for (const std::string& t : opts.tmpfs) spec.tmpfs.push_back(BERTH_TRY(parse_tmpfs(t)));
  // --ipc host: ranks of one job on one node meet in the host's /dev/shm (MPICH, Open MPI's
  // shared-memory transports); Docker's name for it. Bound over the minimal /dev's tmpfs.
  // --mpi means it too unless --ipc private or --shm-size says otherwise, as Apptainer shares
  // the host's: with one container per rank (`mpiexec -n N berth run --mpi ...`), a private
  // /dev/shm each fails MPI_Init ("unable to allocate shared memory").
  bool ipc_host =
      opts.ipc_host || (!opts.mpi.empty() && !opts.ipc_private && opts.shm_size.empty());
  if (ipc_host) spec.volumes.push_back(Volume{"/dev/shm", "/dev/shm", false});
  // --shm-size: the private /dev/shm's size (Docker's default is 64 MiB, as Berth's).
  if (!opts.shm_size.empty()) {
    if (ipc_host)
      return make_error("volume", "--shm-size " + opts.shm_size,
                        "--ipc host binds the host's /dev/shm, whose size is the host's");
    std::string size = BERTH_TRY(tmpfs_size(opts.shm_size));
    spec.tmpfs.push_back(BERTH_TRY(parse_tmpfs("/dev/shm:size=" + size + ",mode=1777,noexec")));
  }
  if (opts.bind_home) {
    if (host.home.empty() || host.home[0] != '/')
      return make_error("bind home", "$HOME", "HOME is not set to an absolute path");
    spec.volumes.push_back(Volume{host.home, host.home, false});
    spec.home = host.home;
    set_env(spec.env, "HOME=" + host.home);
  }
  if (!env_lookup(spec.env, "PATH")) set_env(spec.env, std::string("PATH=") + kDefaultPath);
  if (!env_lookup(spec.env, "HOME")) set_env(spec.env, "HOME=" + spec.home);
  if (!opts.hostname.empty()) set_env(spec.env, "HOSTNAME=" + opts.hostname);

  // Working directory.
  spec.cwd = !opts.workdir.empty() ? opts.workdir : image.working_dir;
  if (spec.cwd.empty()) spec.cwd = "/";
  if (spec.cwd[0] != '/')
    return make_error("workdir", spec.cwd, "the working directory must be an absolute path");

  spec.hostname = opts.hostname;
  spec.stdin_open = opts.interactive;
  spec.tty = opts.tty;
  spec.pid_namespace = opts.pid_namespace;
  spec.host_dev = opts.host_dev;
  spec.network_none = opts.network_none;
  spec.ipc_namespace = opts.ipc_private;
  spec.no_new_privileges = opts.no_new_privileges;
  for (const std::string& u : opts.ulimits) {
    ResourceLimit limit = BERTH_TRY(parse_ulimit(u));
    // A later --ulimit of the same name wins, as in Docker.
    std::erase_if(spec.rlimits, [&](const ResourceLimit& l) { return l.name == limit.name; });
    spec.rlimits.push_back(std::move(limit));
  }
  spec.writable_rootfs = !opts.read_only;
  if (opts.root_emulation) spec.root_emulation = *opts.root_emulation;
  spec.kept_fds = BERTH_TRY(kept_fds(opts.preserve_fds, spec.env));
  return spec;
}

}  // namespace berth

#include "slurm/options.h"

#include <algorithm>
#include <cctype>

namespace berth::slurm {
namespace {

/// Indexes into option_table(), in its order.
enum Index : size_t {
  kImage,
  kMounts,
  kWorkdir,
  kName,
  kSave,
  kMountHome,
  kNoMountHome,
  kRemapRoot,
  kNoRemapRoot,
  kEntrypoint,
  kNoEntrypoint,
  kEntrypointLog,
  kWritable,
  kReadonly,
  kEnv,
  kUnshare,
  kMpi,
  kNoMpi,
};

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    out.emplace_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

/// Sets a single-valued option: the same value again is fine (Slurm repeats callbacks).
Problem set_once(std::string* field, const std::string& value, const char* option) {
  if (!field->empty() && *field != value)
    return std::string("--") + option + ": given twice with different values ('" + *field + "', '" +
           value + "')";
  *field = value;
  return {};
}

/// Sets one side of a --x / --no-x pair.
Problem set_flag(std::optional<bool>* field, bool value, const char* option) {
  if (field->has_value() && **field != value)
    return std::string("--") + option + ": both --" + option + " and its opposite were given";
  *field = value;
  return {};
}

/// The mount flags of a bind as `berth run -v` takes them (its comma-separated options):
/// ro/rw, nosuid, nodev, noexec, [r]slave, [r]unbindable. Binds are always recursive binds,
/// and private unless asked (pyxis's default flags, rbind, give that); enroot's x-create=dir
/// and x-create=file are what berth does anyway (a missing target is made, as the source's
/// kind).
Problem mount_flags(const std::string& flags, std::string* mode) {
  std::string rw, rest;
  for (const std::string& f : split(flags, '+')) {
    if (f == "ro" || f == "rw") {
      rw = f;
    } else if (f == "nosuid" || f == "nodev" || f == "noexec" || f == "slave" || f == "rslave" ||
               f == "unbindable" || f == "runbindable") {
      rest.append(",").append(f);
    } else if (f == "rbind" || f == "bind" || f == "private" || f == "rprivate" ||
               f == "x-create=dir" || f == "x-create=file" || f == "x-create=auto") {
      // what Berth does anyway
    } else {
      return "--container-mounts: mount flag '" + f +
             "' is not supported (ro, rw, rbind, bind, [r]private, [r]slave, [r]unbindable, "
             "nosuid, nodev, noexec, x-create=dir|file|auto)";
    }
  }
  *mode = rest.empty() ? rw : (rw.empty() ? "rw" : rw) + rest;
  return {};
}

/// The flags of a `tmpfs:DST[:FLAGS]` item, as `berth run --tmpfs` takes them (',' for '+').
Problem tmpfs_flags(const std::string& item, const std::string& flags, std::string* out) {
  out->clear();
  for (const std::string& f : split(flags, '+')) {
    std::string key = f.substr(0, f.find('='));
    bool word = f == "ro" || f == "rw" || f == "nosuid" || f == "suid" || f == "nodev" ||
                f == "dev" || f == "noexec" || f == "exec";
    bool value = f.size() > key.size() + 1 &&
                 (key == "size" || key == "mode" || key == "nr_inodes" || key == "huge");
    if (f == "x-create=dir") continue;  // a tmpfs's target is made anyway
    if (!word && !value) {
      std::string p = "--container-mounts: '" + item + "': tmpfs flag '";
      p.append(f).append(
          "' is not supported (ro, rw, [no]suid, [no]dev, [no]exec, size=, mode=, nr_inodes=, "
          "huge=)");
      return p;
    }
    out->append(out->empty() ? "" : ",").append(f);
  }
  return {};
}

Problem check_mount(const std::string& item) {
  if (item.empty()) return "--container-mounts: empty item";
  std::vector<std::string> parts = split(item, ':');
  if (parts.size() > 3) return "--container-mounts: '" + item + "': expected SRC[:DST[:FLAGS]]";
  if (parts[0] == "umount" && (parts.size() != 2 || !parts[1].starts_with("/")))
    return "--container-mounts: '" + item + "': expected umount:DST, DST an absolute path";
  if (parts[0] == "umount") return {};
  if (parts[0] == "tmpfs" && parts.size() < 2)
    return "--container-mounts: '" + item + "': expected tmpfs:DST[:FLAGS]";
  if (parts.size() > 1 && !parts[1].starts_with("/"))
    return "--container-mounts: '" + item + "': the destination must be an absolute path";
  std::string mode;
  if (parts.size() == 3 && parts[0] == "tmpfs") return tmpfs_flags(item, parts[2], &mode);
  if (parts.size() == 3) return mount_flags(parts[2], &mode);
  return {};
}

Problem set_mounts(Options* o, const std::string& value) {
  for (const std::string& item : split(value, ',')) {
    if (Problem p = check_mount(item); !p.empty()) return p;
    if (std::find(o->mounts.begin(), o->mounts.end(), item) == o->mounts.end())
      o->mounts.push_back(item);
  }
  return {};
}

Problem set_name(Options* o, const std::string& value) {
  std::string name = value, flag = "auto";
  if (size_t colon = value.find(':'); colon != std::string::npos) {
    name = value.substr(0, colon);
    flag = value.substr(colon + 1);
  }
  NameMode mode;
  if (flag == "auto") {
    mode = NameMode::kAuto;
  } else if (flag == "create") {
    mode = NameMode::kCreate;
  } else if (flag == "exec") {
    mode = NameMode::kExec;
  } else if (flag == "no_exec") {
    mode = NameMode::kNoExec;
  } else {
    return "--container-name: unknown flag '" + flag + "' (auto, create, exec or no_exec)";
  }
  if (name.empty()) return "--container-name: the name is empty";
  if (name.starts_with("-"))
    return "--container-name: '" + name + "' is not a valid name (it starts with '-')";
  if (name.find('/') != std::string::npos || name.size() > 200)
    return "--container-name: '" + name + "' is not a valid name";
  if (Problem p = set_once(&o->name, name, "container-name"); !p.empty()) return p;
  o->name_mode = mode;
  return {};
}

Problem set_list(std::vector<std::string>* field, const std::string& value, const char* option) {
  std::vector<std::string> items = split(value, ',');
  for (const std::string& item : items)
    if (item.empty()) return std::string("--") + option + ": empty item in '" + value + "'";
  if (!field->empty() && *field != items)
    return std::string("--") + option + ": given twice with different values";
  *field = items;
  return {};
}

Problem set_unshare(Options* o, const std::string& value) {
  if (Problem p = set_list(&o->unshare, value, "container-unshare"); !p.empty()) return p;
  for (const std::string& ns : o->unshare) {
    if (ns != "net" && ns != "ipc" && ns != "uts")
      return "--container-unshare: unknown namespace '" + ns + "' (net, ipc, uts)";
  }
  return {};
}

/// An [mpi.TYPE] name as the site file spells it: letters, digits, '-', '_', '.'.
bool valid_mpi_type(std::string_view type) {
  if (type.empty() || type.size() > 64) return false;
  for (char c : type)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

/// --container-mpi[=TYPE]: the host MPI; an empty TYPE is the site policy's mpi_default.
Problem set_mpi(Options* o, const std::string& type) {
  if (!type.empty() && !valid_mpi_type(type))
    return "--container-mpi: '" + type + "' is not an MPI type name";
  if (Problem p = set_flag(&o->mpi, true, "container-mpi"); !p.empty()) return p;
  if (o->mpi_type != type && !o->mpi_type.empty())
    return "--container-mpi: given twice with different values ('" + o->mpi_type + "', '" + type +
           "')";
  o->mpi_type = type;
  return {};
}

/// pyxis's --container-save: a file path (relative: the job's working directory's).
Problem set_save(Options* o, const std::string& value) {
  if (value.empty()) return "--container-save: the path is empty";
  if (value.ends_with("/")) return "--container-save: '" + value + "' is a directory";
  return set_once(&o->save, value, "container-save");
}

}  // namespace

std::optional<bool> parse_bool(std::string_view text) {
  if (text == "1" || text == "true" || text == "yes" || text == "y") return true;
  if (text == "0" || text == "false" || text == "no" || text == "n") return false;
  return std::nullopt;
}

Problem parse_plugin_args(const std::vector<std::string>& args, PluginArgs* out) {
  for (const std::string& arg : args) {
    size_t eq = arg.find('=');
    std::string key = arg.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    auto boolean = [&](bool* field) -> Problem {
      std::optional<bool> b = parse_bool(value);
      if (!b) return "plugstack argument " + arg + ": expected true or false";
      *field = *b;
      return {};
    };
    Problem p;
    if (eq == std::string::npos) {
      p = "plugstack argument '" + arg + "': expected KEY=VALUE";
    } else if (key == "berth") {
      if (!value.starts_with("/")) p = "plugstack argument " + arg + ": expected an absolute path";
      out->berth = value;
    } else if (key == "runtime_path") {
      if (!value.starts_with("/")) p = "plugstack argument " + arg + ": expected an absolute path";
      out->runtime_path = value;
    } else if (key == "execute_entrypoint") {
      p = boolean(&out->execute_entrypoint);
    } else if (key == "sbatch_support") {
      p = boolean(&out->sbatch_support);
    } else if (key == "container_scope") {
      if (value != "job" && value != "global")
        p = "plugstack argument " + arg + ": expected job or global";
      out->job_scope = value == "job";
    } else if (key == "use_enroot_load" || key == "use_squashfuse") {
      // pyxis's import strategies: Berth always pulls into its store and mounts squashfs
      // files with its shared squashfuse mount, so either value means the same here.
      bool ignored = false;
      p = boolean(&ignored);
    } else if (key == "container_mpi") {
      // false: none; true: the site policy's mpi_default; else an [mpi.TYPE] name.
      std::optional<bool> b = parse_bool(value);
      if (b) {
        out->container_mpi = *b ? "*" : "";
      } else if (valid_mpi_type(value)) {
        out->container_mpi = value;
      } else {
        p = "plugstack argument " + arg + ": expected true, false or an MPI type";
      }
    } else if (key == "site_conf") {
      if (!value.starts_with("/")) p = "plugstack argument " + arg + ": expected an absolute path";
      out->site_conf = value;
    } else if (key == "root_emulation") {
      if (value != "seccomp" && value != "subids" && value != "none" && value != "auto" &&
          value != "policy")
        p = "plugstack argument " + arg + ": expected seccomp, subids, auto, none or policy";
      out->root_emulation = value;
    } else if (key == "importer") {
      // pyxis's importer hands back a squashfs file made from an image, and enroot keeps the
      // image's environment in it as files of its own; Berth keeps images in its store, with
      // their config, and a site shares them through its central store.
      p = "plugstack argument importer=: not supported: Berth imports images into its own "
          "store (a site shares them through the policy's central_store)";
    } else {
      p = "unknown plugstack argument '" + arg +
          "' (berth, runtime_path, execute_entrypoint, container_scope, sbatch_support, "
          "use_enroot_load, use_squashfuse, container_mpi, site_conf, root_emulation)";
    }
    if (!p.empty()) return p;
  }
  return {};
}

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = {
      {"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH",
       "[berth] the image to run the tasks in (Docker reference, or a squashfs file)", "IMAGE"},
      {"container-mounts", "SRC[:DST[:FLAGS]][,...]",
       "[berth] bind mounts (or tmpfs:DST) into the container", "MOUNTS"},
      {"container-workdir", "PATH", "[berth] working directory inside the container", "WORKDIR"},
      {"container-name", "NAME[:auto|create|exec|no_exec]",
       "[berth] name the container, to reuse it in later steps", "NAME"},
      {"container-save", "PATH", "[berth] save the container as a squashfs file after the step",
       "SAVE"},
      {"container-mount-home", nullptr, "[berth] bind the user's home directory", "MOUNT_HOME"},
      {"no-container-mount-home", nullptr, "[berth] do not bind the user's home directory",
       nullptr},
      {"container-remap-root", nullptr, "[berth] run as root (uid 0) inside", "REMAP_ROOT"},
      {"no-container-remap-root", nullptr, "[berth] run as your own uid inside", nullptr},
      {"container-entrypoint", nullptr, "[berth] run the image's entrypoint", "ENTRYPOINT"},
      {"no-container-entrypoint", nullptr, "[berth] do not run the image's entrypoint", nullptr},
      {"container-entrypoint-log", nullptr, "[berth] print Berth's output even on success",
       "ENTRYPOINT_LOG"},
      {"container-writable", nullptr, "[berth] a writable container root", "WRITABLE"},
      {"container-readonly", nullptr, "[berth] a read-only container root", "READONLY"},
      {"container-env", "NAME[,NAME...]", "[berth] host variables that win over the image's",
       "ENV"},
      {"container-unshare", "NS[,NS...]",
       "[berth] namespaces of the container's own (net, ipc, uts)", "UNSHARE"},
      {"container-mpi", "TYPE", "[berth] inject the host's MPI (TYPE: one the site declares)",
       "MPI", true},
      {"no-container-mpi", nullptr, "[berth] do not inject the host's MPI", nullptr},
  };
  return table;
}

Problem apply_option(size_t index, const char* arg, Options* o) {
  std::string value = arg == nullptr ? "" : arg;
  switch (index) {
    case kImage:
      if (value.empty()) return "--container-image: the image is empty";
      // It would reach `berth run` as one of its options (--help, --privileged, ...).
      if (value.starts_with("-"))
        return "--container-image: '" + value + "' is not an image (it starts with '-')";
      return set_once(&o->image, value, "container-image");
    case kMounts:
      return set_mounts(o, value);
    case kWorkdir:
      // pyxis's: a relative PATH is the container root's, and the directory must be there.
      if (value.empty()) return "--container-workdir: the path is empty";
      return set_once(&o->workdir, value, "container-workdir");
    case kName:
      return set_name(o, value);
    case kSave:
      return set_save(o, value);
    case kMountHome:
    case kNoMountHome:
      return set_flag(&o->mount_home, index == kMountHome, "container-mount-home");
    case kRemapRoot:
    case kNoRemapRoot:
      return set_flag(&o->remap_root, index == kRemapRoot, "container-remap-root");
    case kEntrypoint:
    case kNoEntrypoint:
      return set_flag(&o->entrypoint, index == kEntrypoint, "container-entrypoint");
    case kEntrypointLog:
      o->entrypoint_log = true;
      return {};
    case kWritable:
    case kReadonly:
      return set_flag(&o->writable, index == kWritable, "container-writable");
    case kEnv:
      return set_list(&o->env_names, value, "container-env");
    case kUnshare:
      return set_unshare(o, value);
    case kMpi:
      return set_mpi(o, value);
    case kNoMpi:
      return set_flag(&o->mpi, false, "container-mpi");
    default:
      return "unknown option " + std::to_string(index);
  }
}

Problem apply_environment(Options* o, std::optional<std::string> (*getenv)(const char* name)) {
  // An option given on the command line wins; then BERTH_CONTAINER_X, then PYXIS_CONTAINER_X.
  Options given = *o;
  const auto& table = option_table();
  for (size_t i = 0; i < table.size(); ++i) {
    const OptionSpec& spec = table[i];
    if (spec.env == nullptr) continue;
    std::optional<std::string> value;
    std::string var;
    for (const char* prefix : {"BERTH_CONTAINER_", "PYXIS_CONTAINER_"}) {
      var = std::string(prefix) + spec.env;
      value = getenv(var.c_str());
      if (value) break;
    }
    if (!value) continue;
    bool is_flag = spec.arg == nullptr;
    std::optional<bool> b;
    if (is_flag) {
      b = parse_bool(*value);
      // pyxis ignores a value it cannot read; Berth says so, as for any other bad input.
      if (!b) return var + "=" + *value + ": expected 1, true, yes, y, 0, false, no or n";
    }
    Problem p;
    switch (i) {
      case kImage:
        if (given.image.empty()) p = apply_option(i, value->c_str(), o);
        break;
      case kMounts:
        if (given.mounts.empty()) p = apply_option(i, value->c_str(), o);
        break;
      case kWorkdir:
        if (given.workdir.empty()) p = apply_option(i, value->c_str(), o);
        break;
      case kName:
        if (given.name.empty()) p = apply_option(i, value->c_str(), o);
        break;
      case kSave:
        if (given.save.empty()) p = apply_option(i, value->c_str(), o);
        break;
      case kMountHome:
        if (!given.mount_home) o->mount_home = *b;
        break;
      case kRemapRoot:
        if (!given.remap_root) o->remap_root = *b;
        break;
      case kEntrypoint:
        if (!given.entrypoint) o->entrypoint = *b;
        break;
      case kEntrypointLog:
        if (!given.entrypoint_log) o->entrypoint_log = *b;
        break;
      case kWritable:
        if (!given.writable && !o->writable) o->writable = *b;
        break;
      case kReadonly:
        if (!given.writable && !o->writable) o->writable = !*b;
        break;
      case kEnv:
        if (given.env_names.empty()) p = apply_option(i, value->c_str(), o);
        break;
      case kUnshare:
        if (given.unshare.empty()) p = apply_option(i, value->c_str(), o);
        break;
      case kMpi:
        // BERTH_CONTAINER_MPI: a boolean (true: the site's mpi_default), or the TYPE.
        if (!given.mpi) {
          std::optional<bool> on = parse_bool(*value);
          if (on == false) {
            o->mpi = false;
          } else {
            p = set_mpi(o, on ? "" : *value);
          }
        }
        break;
      default:
        break;
    }
    if (!p.empty()) return var.append(": ").append(p);
  }
  return {};
}

Problem berth_image(const std::string& image, const std::string& cwd, std::string* out,
                    std::string* user) {
  if (user != nullptr) user->clear();
  if (image.starts_with("/")) {
    *out = image;
    return {};
  }
  if (image.starts_with(".")) {
    *out = cwd + "/" + image;
    return {};
  }
  std::string ref = image;
  if (ref.starts_with("docker://")) ref = ref.substr(9);
  if (ref.starts_with("dockerd://"))
    return "--container-image: dockerd:// images are not supported (there is no Docker daemon)";
  // USER@: whose stored login pulls it (enroot's credentials, Berth's `berth login -u USER`).
  // An '@' followed by a digest (IMAGE@sha256:HEX) is not one.
  if (size_t at = ref.find('@'); at != std::string::npos) {
    std::string_view rest = std::string_view(ref).substr(at + 1);
    bool digest =
        rest.starts_with("sha256:") || rest.starts_with("sha384:") || rest.starts_with("sha512:");
    if (!digest) {
      std::string name = ref.substr(0, at);
      if (name.empty() || name.find_first_of("/:# \t") != std::string::npos)
        return "--container-image: '" + image + "': '" + name + "' is not a user name";
      if (user != nullptr) *user = name;
      ref = ref.substr(at + 1);
    }
  }
  if (size_t hash = ref.find('#'); hash != std::string::npos)
    ref = ref.substr(0, hash) + "/" + ref.substr(hash + 1);
  if (ref.empty() || ref.starts_with("/")) return "--container-image: the image is empty";
  if (ref.starts_with("-"))
    return "--container-image: '" + image + "': the image '" + ref + "' starts with '-'";
  *out = ref;
  return {};
}

std::string image_user(const Options& o) {
  std::string ref, user;
  if (berth_image(o.image, "/", &ref, &user).empty()) return user;
  return "";
}

namespace {

/// Whether `name` is JOB.STEP, the name pyxis gives a step's unnamed container.
bool is_step_name(std::string_view name) {
  size_t dot = name.find('.');
  auto digits = [](std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return dot != std::string_view::npos && digits(name.substr(0, dot)) &&
         (digits(name.substr(dot + 1)) || name.substr(dot + 1) == "batch");
}

}  // namespace

std::string container_name(const Options& o, const PluginArgs& a, const StepIds& ids) {
  std::string node = ids.node;
  for (char& c : node)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '-';
  std::string job = std::to_string(ids.job);
  // pyxis names a step's unnamed container JOB.STEP, and --container-name=JOB.STEP joins it
  // while it runs: Berth's is slurm-JOB.STEP.NODE.
  if (is_step_name(o.name)) return "slurm-" + o.name + "." + node;
  if (!o.name.empty()) return (a.job_scope ? job + "_" + o.name : o.name) + "." + node;
  std::string step = ids.step == kBatchStep ? "batch" : std::to_string(ids.step);
  return "slurm-" + job + "." + step + "." + node;
}

std::string mpi_argument(const Options& o, const PluginArgs& a, const StepIds& ids) {
  bool on = o.mpi.value_or(ids.mpi_step && !a.container_mpi.empty());
  if (!on) return "";
  std::string type = o.mpi ? o.mpi_type : a.container_mpi;
  return type.empty() || type == "*" ? "--mpi" : "--mpi=" + type;
}

std::string gpu_argument(const StepIds& ids) {
  std::string want = "all";
  if (ids.visible_devices) {
    want = *ids.visible_devices;
    want.erase(0, want.find_first_not_of(" \t"));
    want.erase(want.find_last_not_of(" \t") + 1);
  }
  // Without GPUs from Slurm (or with the job's own "void"), none: the image's
  // NVIDIA_VISIBLE_DEVICES=all would otherwise inject every GPU of the node. An -e rather than
  // --gpus, so that a site policy's gpus (locked or not) still decides over the image.
  if (!ids.gpus || want.empty() || want == "void") return "--env=NVIDIA_VISIBLE_DEVICES=void";
  // The step's GPUs, and only those: berth's --gpus takes the job's CUDA_VISIBLE_DEVICES as
  // the pool (indexes count within it) and renumbers the chosen ones from 0 inside, with the
  // site policy applied. The job's own NVIDIA_VISIBLE_DEVICES narrows within that pool; the
  // image's never widens it.
  if (want == "all" || want == "none") return "--gpus=" + want;
  return "--gpus=device=" + want;
}

Problem run_arguments(const Options& o, const PluginArgs& a, const StepIds& ids,
                      const std::string& cwd, std::vector<std::string>* out) {
  std::string image;
  if (Problem p = berth_image(o.image, cwd, &image); !p.empty()) return p;
  std::vector<std::string>& v = *out;
  // A squashfs file runs on its shared mount, without a container record, unless the step
  // names its container or saves it: then `berth run -d --name` extracts the file into a
  // container of its own (enroot's create), which a later step finds and `berth squash` reads.
  bool in_place = is_squashfs_path(o.image) && !needs_container(o);
  if (in_place) {
    v = {"run"};
  } else {
    v = {"run", "-d", "--name", container_name(o, a, ids)};
  }
  // pyxis runs the tasks as the user unless --container-remap-root: the same uid and gid
  // inside, so that files written to bound directories belong to the user.
  std::string uid = std::to_string(ids.uid), gid = std::to_string(ids.gid);
  v.insert(v.end(), {"-u", o.remap_root.value_or(false) ? "0:0" : uid + ":" + gid});
  // pyxis's remap-root is enroot's seccomp filter, and Berth's subordinate-ID mode keeps a
  // per-user holder process that would outlive the job: seccomp unless the site says otherwise.
  if (a.root_emulation != "policy") v.push_back("--root-emulation=" + a.root_emulation);
  // enroot's default is no home; Berth's would be the site policy's: pyxis's wins here. With
  // --container-remap-root enroot binds the home at the remapped user's, /root.
  bool home = o.mount_home.value_or(false);
  // umount:DST takes away a mount the step would make: the only one there is the home (enroot
  // uses it for its fstab's, which Berth has none of).
  std::string home_at = o.remap_root.value_or(false) ? "/root" : ids.home;
  for (const std::string& m : o.mounts) {
    if (!m.starts_with("umount:")) continue;
    std::string dst = m.substr(7);
    while (dst.size() > 1 && dst.ends_with("/")) dst.pop_back();
    bool bound = home && ids.home.starts_with("/");
    if (bound && dst == home_at) {
      home = false;
      continue;
    }
    std::string why = "--container-mounts: '";
    why += m;
    why += "': the step makes no mount at ";
    why += dst;
    why += " to take away (";
    if (bound) {
      why += "its only one is the home, at ";
      why += home_at;
    } else {
      why += "its only one would be the home, with --container-mount-home";
    }
    why += "; Berth mounts no site fstab)";
    return why;
  }
  if (home && o.remap_root.value_or(false) && ids.home.starts_with("/")) {
    v.insert(v.end(), {"--no-bind-home", "-v", ids.home + ":/root"});
  } else {
    v.push_back(home ? "--bind-home" : "--no-bind-home");
    // HOME stays the job's, as enroot's containers inherit it, rather than Berth's default
    // for a user the image does not know ("/"): a batch script's srun hands it to its steps,
    // whose berth looks for the user's store there.
    if (!home && ids.home.starts_with("/")) v.push_back("--env=HOME=" + ids.home);
  }
  for (const std::string& m : o.mounts) {
    std::vector<std::string> parts = split(m, ':');
    std::string src = parts[0], mode;
    if (src == "umount") continue;  // above
    if (src == "tmpfs") {
      // pyxis's tmpfs:DST[:FLAGS]: an empty tmpfs (berth run --tmpfs, before the binds).
      std::string tmpfs = parts[1];
      if (parts.size() == 3) {
        if (Problem p = tmpfs_flags(m, parts[2], &mode); !p.empty()) return p;
        tmpfs.append(":").append(mode);
      }
      v.insert(v.end(), {"--tmpfs", tmpfs});
      continue;
    }
    if (parts.size() == 3) {
      if (Problem p = mount_flags(parts[2], &mode); !p.empty()) return p;
    }
    if (!src.starts_with("/")) src = std::string(cwd).append("/").append(src);
    std::string volume = src;
    volume.append(":").append(parts.size() > 1 ? parts[1] : src);
    if (!mode.empty()) volume.append(":").append(mode);
    v.insert(v.end(), {"-v", volume});
  }
  // --container-workdir is no `-w`: that would make a missing directory, where pyxis fails the
  // step; each task goes there after joining (task_join.h), as pyxis's do.
  // --container-env: the host's value (berth run's -e NAME), before the entrypoint runs; in
  // one word, so that a NAME starting with '-' is never taken for an option.
  for (const std::string& n : o.env_names) v.push_back("--env=" + n);
  // Berth's directory images are writable already; --writable is for squashfs files.
  if (o.writable == false) v.push_back("--read-only");
  if (o.writable == true && in_place) v.push_back("--writable");
  v.push_back(gpu_argument(ids));
  // The host's MPI (devices/mpi.h), checked against the image's by the site's ABI rule.
  if (std::string mpi = mpi_argument(o, a, ids); !mpi.empty()) v.push_back(mpi);
  for (const std::string& ns : o.unshare) {
    if (ns == "net") v.insert(v.end(), {"--network", "none"});
    // An IPC namespace of its own (SysV, POSIX message queues) and a private /dev/shm.
    if (ns == "ipc") v.insert(v.end(), {"--ipc", "private"});
    // A UTS namespace keeps the node's host name, as enroot's does: Berth makes one for
    // --hostname, given the node's own.
    if (ns == "uts") v.insert(v.end(), {"--hostname", ids.hostname});
  }
  // The holder: a shell that stops itself, so that the container exists (its namespaces and
  // mounts) while the tasks join it, and costs nothing while they run; the plugin kills it at
  // step end. With the entrypoint, the image's entrypoint runs first and execs the holder
  // ("$@"), as enroot's /etc/rc does for pyxis.
  // "--" ends berth run's options before the image, whatever the image is.
  // With --container-entrypoint-log it says it is up on stdout and stderr first: once both
  // lines are in the container's log, all the entrypoint printed before them is too (the
  // monitor's logger reads the two streams as they come).
  std::string up = std::string("echo '") + kHolderUpLine + "'";
  std::string holder =
      o.entrypoint_log ? up + "; " + up + " >&2; kill -STOP $$; exit 0" : "kill -STOP $$; exit 0";
  if (o.entrypoint.value_or(a.execute_entrypoint)) {
    v.insert(v.end(), {"--", image, "/bin/sh", "-c", holder});
  } else {
    v.insert(v.end(), {"--entrypoint", "/bin/sh", "--", image, "-c", holder});
  }
  return {};
}

}  // namespace berth::slurm

#include "runtime/containers.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "core/clock.h"
#include "core/dir.h"
#include "core/json.h"
#include "core/log.h"
#include "core/scope_guard.h"
#include "core/sha256.h"
#include "core/strings.h"
#include "image/image_config.h"
#include "image/squash.h"
#include "image/unpack.h"
#include "image/unsquash.h"
#include "runtime/link_form.h"
#include "runtime/monitor.h"
#include "runtime/subids.h"

namespace berth {
namespace {

constexpr size_t kIdLength = 64;
constexpr size_t kMinPrefix = 4;
/// Digits of the pid in run.lock (Linux pids have at most 7; atol reads the leading zeros).
constexpr int kPidWidth = 10;

Result<std::string> random_id() {
  unsigned char bytes[kIdLength / 2];
  UniqueFd fd = BERTH_TRY(open_file("/dev/urandom", O_RDONLY));
  if (::read(fd.get(), bytes, sizeof bytes) != static_cast<ssize_t>(sizeof bytes))
    return sys_error("read", "/dev/urandom");
  std::string id;
  for (unsigned char b : bytes) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", b);
    id += hex;
  }
  return id;
}

/// The container ID a names/ link points to, or "" when it is not one of ours; `link` is
/// taken relative to `dirfd` (AT_FDCWD: a path).
std::string link_target_id(const std::string& link, int dirfd = AT_FDCWD) {
  char buf[256];
  ssize_t n = ::readlinkat(dirfd, link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string t(buf, static_cast<size_t>(n));
  std::string_view prefix = "../containers/";
  if (t.rfind(prefix, 0) != 0) return "";
  std::string id = t.substr(prefix.size());
  return id.size() == kIdLength && is_lower_hex(id) ? id : "";
}

/// Holds no lock but tells whether someone holds `path` exclusively.
bool lock_is_held(const std::string& path) {
  auto l = FileLock::try_acquire(path, FileLock::Mode::kShared);
  return l.ok() && !l->held();
}

}  // namespace

Status validate_container_name(std::string_view name) {
  auto ok_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  };
  bool valid = !name.empty() && name.size() <= 128 && ok_char(name[0]) && name[0] != '_' &&
               name[0] != '.' && name[0] != '-' && std::all_of(name.begin(), name.end(), ok_char);
  if (!valid)
    return make_error("name", std::string(name),
                      "invalid container name: only [a-zA-Z0-9][a-zA-Z0-9_.-]* is allowed");
  if (name.size() == kIdLength && is_lower_hex(name))
    return make_error("name", std::string(name), "a name cannot look like a container ID");
  return {};
}

Result<ContainerStore> ContainerStore::open(const std::string& berth_home) {
  ContainerStore s;
  s.root_ = berth_home;
  BERTH_CHECK(make_dirs(path_join(berth_home, "containers")));
  BERTH_CHECK(make_dirs(path_join(berth_home, "names")));
  for (const char* dir : {"", "containers", "names"})
    BERTH_CHECK(check_private_dir(*dir ? path_join(berth_home, dir) : berth_home));
  return s;
}

std::string ContainerStore::dir(const ContainerRecord& c) const {
  return path_join(path_join(root_, "containers"), c.id);
}

std::string ContainerStore::doomed_dir(const std::string& id) const {
  return path_join(path_join(root_, "containers"), ".tmp-" + id);
}

Result<FileLock> ContainerStore::lock_doomed(const std::string& id) const {
  return FileLock::acquire(doomed_dir(id) + ".lock");
}

Result<ContainerRecord> ContainerStore::load(const std::string& id, Detail detail,
                                             const std::string& found_by) const {
  std::string cdir = path_join(path_join(root_, "containers"), id);
  std::string path = path_join(cdir, "container.json");
  std::string text = BERTH_TRY(read_file(path));
  ContainerRecord c;
  nlohmann::json j = BERTH_TRY(parse_json(text, path));
  try {
    c.id = j.at("id").get<std::string>();
    c.image = j.value("image", "");
    c.image_id = j.value("image_id", "");
    c.created = j.value("created", "");
    c.image_config = j.value("image_config", nlohmann::json::object());
    c.last_command = j.value("last_command", std::vector<std::string>{});
    if (auto it = j.find("run_options"); it != j.end() && it->is_object()) c.run_options = *it;
    if (j.contains("last_exit") && j["last_exit"].is_number_integer())
      c.last_exit = j["last_exit"].get<int>();
    c.is_protected = j.value("protected", false);
    if (std::string engine = j.value("engine", ""); !engine.empty())
      c.engine = BERTH_TRY(parse_engine(engine).with_context("read container " + path));
    c.gpus = j.value("gpus", "");
    c.udocker_mode = j.value("udocker_mode", "");
    c.link_prefix = j.value("link_prefix", "");
  } catch (const nlohmann::json::exception& e) {
    return make_error("read container", path, json_error_text(e));
  }
  if (detail == Detail::kRecord) {
    if (!found_by.empty()) c.names.push_back(found_by);
    return c;
  }
  // One open of names/ and a readlinkat per entry: no path is walked again per name.
  UniqueFd names(::open(path_join(root_, "names").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  std::vector<DirEntry> entries;
  if (names.valid() && list_dir_at(names.get(), entries) == 0) {
    for (const DirEntry& e : entries)
      if (link_target_id(e.name, names.get()) == id) c.names.push_back(e.name);
    std::sort(c.names.begin(), c.names.end());
  }
  c.running = lock_is_held(path_join(cdir, "run.lock"));
  return c;
}

namespace {

std::string record_text(const ContainerRecord& c) {
  nlohmann::json j = {{"id", c.id},
                      {"image", c.image},
                      {"image_id", c.image_id},
                      {"created", c.created},
                      {"image_config", c.image_config},
                      {"last_command", c.last_command}};
  if (c.last_exit) j["last_exit"] = *c.last_exit;
  if (c.run_options.is_object() && !c.run_options.empty()) j["run_options"] = c.run_options;
  if (c.is_protected) j["protected"] = true;
  if (c.engine) j["engine"] = std::string(c.engine->spelled);
  if (!c.gpus.empty()) j["gpus"] = c.gpus;
  if (!c.udocker_mode.empty()) j["udocker_mode"] = c.udocker_mode;
  if (!c.link_prefix.empty()) j["link_prefix"] = c.link_prefix;
  return to_text(j, 2) + "\n";
}

}  // namespace

Status ContainerStore::update(const ContainerRecord& c,
                              const std::function<void(ContainerRecord&)>& change,
                              Durability durability) {
  // Readers need no lock (the file is replaced whole by a rename); writers read the record
  // as it is now, under the lock, so that a change made meanwhile by another is kept.
  FileLock lock = BERTH_TRY(FileLock::acquire(path_join(dir(c), "container.lock")));
  ContainerRecord now = BERTH_TRY(load(c.id));
  change(now);
  return write_file_atomic(path_join(dir(now), "container.json"), record_text(now), 0644,
                           durability);
}

Result<ContainerRecord> ContainerStore::create(const Store& images, const ImageRecord& image,
                                               const std::string& name,
                                               const std::vector<std::string>& command) {
  BERTH_CHECK(check_name_free("create", name));
  ContainerRecord c;
  c.id = BERTH_TRY(random_id());
  c.image = image.name;
  c.image_id = image.config_digest;
  c.created = now_rfc3339();
  std::string config_text = BERTH_TRY(images.read_blob(image.config_digest));
  c.image_config =
      BERTH_TRY(parse_image_config(config_text, images.blob_path(image.config_digest))).config;
  if (!command.empty()) c.image_config["Cmd"] = command;
  // Pinned while it unpacks: no rmi, image prune or gc deletes a blob under it.
  FileLock pin = BERTH_TRY(images.pin());
  std::vector<LayerInput> layers = BERTH_TRY(images.layer_inputs(image, "create"));
  return build(std::move(c), name, [&](const std::string& rootfs) -> Status {
    BERTH_TRY(unpack_layers(layers, rootfs).with_context("create container from " + image.name));
    return {};
  });
}

Result<ContainerRecord> ContainerStore::create_from_squashfs(
    const std::string& file, const std::string& name, const std::vector<std::string>& command,
    uint64_t limit) {
  BERTH_CHECK(check_name_free("create", name));
  SquashInfo info = BERTH_TRY(read_squash_info(file));
  ContainerRecord c;
  c.id = BERTH_TRY(random_id());
  c.image = file;
  c.created = now_rfc3339();
  c.image_config = nlohmann::json::object();
  if (info.metadata && info.metadata->is_object()) {
    const nlohmann::json& config = info.metadata->value("config", nlohmann::json::object());
    // Not an image of the store: the digest of the config Berth kept in the file names it.
    c.image_id = sha256_digest(config.dump());
    if (config.is_object() && config.contains("config") && config["config"].is_object())
      c.image_config = config["config"];
  } else if (info.enroot_config) {
    // An image enroot made: it runs as under enroot (image/squash.h).
    c.image_id = sha256_digest(info.enroot_config->dump());
    c.image_config = *info.enroot_config;
  } else if (info.singularity_config) {
    // One Apptainer/Singularity made (a SIF file): it runs as under Apptainer (image/sif.h).
    c.image_id = sha256_digest(info.singularity_config->dump());
    c.image_config = *info.singularity_config;
  }
  if (!command.empty()) c.image_config["Cmd"] = command;
  return build(std::move(c), name, [&](const std::string& rootfs) -> Status {
    BERTH_TRY(unsquash(file, rootfs, limit).with_context("create container from " + file));
    return {};
  });
}

Result<std::vector<ContainerRecord>> ContainerStore::list() const {
  std::vector<ContainerRecord> out;
  for (const std::string& id : list_dir(path_join(root_, "containers"))) {
    if (id.size() != kIdLength || !is_lower_hex(id)) continue;  // .tmp-* and strangers
    Result<ContainerRecord> c = load(id);
    // Removed between the listing and the read (rm renames the folder to .tmp-<id> first; a
    // create that lost its name removes the folder in place): gone, not an error of the listing.
    if (!c.ok() && c.error().code == ErrorCode::kNotFound) continue;
    out.push_back(BERTH_TRY(std::move(c)));
  }
  std::stable_sort(out.begin(), out.end(), [](const ContainerRecord& a, const ContainerRecord& b) {
    return a.created < b.created;
  });
  return out;
}

Result<ContainerRecord> ContainerStore::find(std::string_view name_or_id, Detail detail) const {
  std::string key(name_or_id);
  if (key.empty()) return make_error("find container", "\"\"", "empty name");
  if (key.find('/') == std::string::npos) {
    std::string id = link_target_id(path_join(path_join(root_, "names"), key));
    if (!id.empty()) return load(id, detail, key);
  }
  if (key.size() >= kMinPrefix && key.size() <= kIdLength && is_lower_hex(key)) {
    std::vector<std::string> hits;
    for (const std::string& id : list_dir(path_join(root_, "containers")))
      if (id.size() == kIdLength && id.rfind(key, 0) == 0) hits.push_back(id);
    if (hits.size() == 1) return load(hits[0], detail);
    if (hits.size() > 1)
      return make_error(
          "find container", key,
          "ambiguous ID prefix: " + std::to_string(hits.size()) + " containers match");
  }
  return make_error("find container", key, "no such container", ErrorCode::kNotFound);
}

Status ContainerStore::add_name(const ContainerRecord& c, const std::string& name) {
  BERTH_CHECK(validate_container_name(name));
  std::string link = path_join(path_join(root_, "names"), name);
  if (::symlink(("../containers/" + c.id).c_str(), link.c_str()) != 0) {
    if (errno == EEXIST) {
      std::string holder = link_target_id(link);
      return make_error("name", name,
                        "the container name \"" + name + "\" is already in use" +
                            (holder.empty() ? std::string() : " by container " + holder));
    }
    return sys_error("symlink", link);
  }
  return {};
}

Status ContainerStore::remove_name(const std::string& name) {
  std::string link = path_join(path_join(root_, "names"), name);
  if (name.find('/') != std::string::npos || link_target_id(link).empty())
    return make_error("rmname", name, "no such container name");
  if (::unlink(link.c_str()) != 0) return sys_error("unlink", link);
  return {};
}

Status ContainerStore::rename(const ContainerRecord& c, const std::string& name) {
  BERTH_CHECK(validate_container_name(name));
  if (c.names.size() == 1 && c.names.front() == name)
    return make_error("rename", name, "the container is already named \"" + name + "\"");
  bool had = std::find(c.names.begin(), c.names.end(), name) != c.names.end();
  // The new name first: symlink(2) makes it ours or fails, so two renames cannot both win.
  if (!had) BERTH_CHECK(add_name(c, name));
  for (const std::string& n : c.names)
    if (n != name) BERTH_CHECK(remove_name(n));
  return {};
}

Result<ContainerRecord> ContainerStore::clone(const ContainerRecord& c, const std::string& name) {
  BERTH_CHECK(check_name_free("clone", name));
  // Copied while no run can change it.
  FileLock run = BERTH_TRY(lock_for_run(c).with_context("clone"));
  // The copy starts from the image's symlink form, as every reader of a rootfs sees it.
  BERTH_CHECK(canonical_links(*this, c).with_context("clone"));
  ContainerRecord copy = c;
  copy.link_prefix.clear();
  copy.id = BERTH_TRY(random_id());
  copy.names.clear();
  copy.is_protected = false;
  copy.created = now_rfc3339();
  copy.running = false;
  return build(std::move(copy), name, [&](const std::string& rootfs) {
    // Inside the subordinate-ID namespace where the user has one: files of other IDs are
    // readable there, and keep their owners.
    return run_mapped([&] { return copy_tree(this->rootfs(c), rootfs); })
        .with_context("clone " + c.id);
  });
}

Status ContainerStore::check_name_free(Op op, const std::string& name) const {
  if (name.empty()) return {};
  BERTH_CHECK(validate_container_name(name));
  if (auto holder = find(name); holder.ok())
    return make_error(
               op, name,
               "the container name \"" + name + "\" is already in use by container " + holder->id)
        .with_hint("remove or rename that container, or choose another name");
  return {};
}

Result<ContainerRecord> ContainerStore::build(
    ContainerRecord c, const std::string& name,
    const std::function<Status(const std::string& rootfs)>& fill) {
  // Built under a temporary name and renamed: a killed create leaves nothing that ps shows,
  // and a .tmp-<id> whose lock is free, which `berth gc` removes.
  std::string tmp = doomed_dir(c.id);
  FileLock owner = BERTH_TRY(lock_doomed(c.id));
  auto drop_lock = on_scope_exit([&tmp] {
    (void)::unlink((tmp + ".lock").c_str());  // under the lock (core/fs.cc): only clutter
  });
  BERTH_CHECK(make_dirs(tmp, 0700));
  auto fail = [&tmp](Error e) {
    (void)remove_tree_mapped(tmp);  // best effort; .tmp-* is never listed
    return e;
  };
  if (Status st = fill(path_join(tmp, "rootfs")); !st.ok()) return fail(std::move(st).error());
  if (Status st = write_file_atomic(path_join(tmp, "container.json"), record_text(c)); !st.ok())
    return fail(std::move(st).error());
  if (::chmod(tmp.c_str(), 0755) != 0 || ::rename(tmp.c_str(), dir(c).c_str()) != 0)
    return fail(sys_error("rename", tmp + " -> " + dir(c)));
  if (!name.empty()) {
    if (Status st = add_name(c, name); !st.ok()) {
      (void)remove_tree_mapped(dir(c));  // lost a race for the name: undo, the error says why
      return st.error();
    }
    c.names.push_back(name);
  }
  return c;
}

Status ContainerStore::set_protected(const ContainerRecord& c, bool on) {
  return update(
      c, [on](ContainerRecord& now) { now.is_protected = on; }, Durability::kSynced);
}

Status ContainerStore::remove(const ContainerRecord& c, bool force) {
  if (c.is_protected)
    return make_error("rm", c.names.empty() ? c.id : c.names.front(),
                      "container " + c.short_id() + " is protected")
        .with_hint("run 'berth unprotect " + (c.names.empty() ? c.short_id() : c.names.front()) +
                   "' first");
  std::string cdir = dir(c);
  auto lock = BERTH_TRY(FileLock::try_acquire(path_join(cdir, "run.lock")));
  if (!lock.held() && !force)
    return make_error("rm", c.names.empty() ? c.id : c.names.front(),
                      "container " + c.short_id() + " is running")
        .with_hint("stop it first, or use rm -f");
  for (const std::string& n : c.names)
    (void)::unlink(path_join(path_join(root_, "names"), n).c_str());  // gone with the container
  // Renamed away first, so that a half-deleted container is never listed; under the lock
  // that tells `berth gc` the folder is ours until this rm ends (or is killed).
  std::string doomed = doomed_dir(c.id);
  FileLock owner = BERTH_TRY(lock_doomed(c.id));
  auto drop_lock = on_scope_exit([&doomed] {
    (void)::unlink((doomed + ".lock").c_str());  // under the lock (core/fs.cc): only clutter
  });
  if (::rename(cdir.c_str(), doomed.c_str()) != 0) return sys_error("rename", cdir);
  return remove_tree_mapped(doomed);  // files of subordinate IDs go inside their namespace
}

Result<std::vector<Leftover>> ContainerStore::sweep(bool dry_run) const {
  std::vector<Leftover> out;
  std::string containers = path_join(root_, "containers");
  for (const std::string& n : list_dir(containers)) {
    std::string path = path_join(containers, n);
    if (n.starts_with(".tmp-")) {
      bool lock_file = n.ends_with(".lock");
      std::string id = n.substr(5, n.size() - 5 - (lock_file ? 5 : 0));
      if (id.size() != kIdLength || !is_lower_hex(id)) continue;  // not ours
      if (lock_file && path_exists(doomed_dir(id))) continue;     // seen with its folder
      bool created = !path_exists(doomed_dir(id) + ".lock");
      auto lock = FileLock::try_acquire(doomed_dir(id) + ".lock");
      if (!lock.ok()) continue;  // best effort: looked at again next time
      bool in_use = !lock->held();
      if (!lock_file) out.push_back({LeftoverKind::kContainer, path, "", tree_size(path), in_use});
      if (in_use) continue;
      // Its create or rm was killed: finish the removal it had begun (or the create undone).
      if (!dry_run && !lock_file) {
        if (Status st = remove_tree_mapped(path); !st.ok()) {
          // One folder that cannot go (a rootfs with a read-only folder) does not stop gc.
          log::warn("{}", st.error().message());
          out.pop_back();  // not reclaimed: not counted as such
          continue;
        }
      }
      if (!dry_run || created)
        (void)::unlink((doomed_dir(id) + ".lock").c_str());  // under the lock: clutter only
    } else if (n.size() == kIdLength && is_lower_hex(n)) {
      // container.json temporaries: written only under container.lock (update()) or inside
      // .tmp-<id> (build()), so with container.lock held every one here is a dead process's.
      std::vector<std::string> temps;
      for (const std::string& f : list_dir(path))
        if (f.starts_with("container.json.tmp.")) temps.push_back(path_join(path, f));
      if (temps.empty()) continue;
      std::string lock_path = path_join(path, "container.lock");
      bool created = !path_exists(lock_path);
      auto lock = FileLock::try_acquire(lock_path);
      if (!lock.ok()) continue;  // removed meanwhile: nothing to sweep
      for (const std::string& t : temps) {
        out.push_back({LeftoverKind::kTempFile, t, "", tree_size(t), !lock->held()});
        if (lock->held() && !dry_run && ::unlink(t.c_str()) != 0 && errno != ENOENT)
          return sys_error("remove", t);
      }
      if (created && lock->held()) (void)::unlink(lock_path.c_str());  // under the lock: no trace
    }
  }
  // A name whose container is gone: `berth name` raced with an rm (rm unlinks names first).
  std::string names = path_join(root_, "names");
  for (const std::string& n : list_dir(names)) {
    std::string link = path_join(names, n);
    std::string id = link_target_id(link);
    if (id.empty() || path_exists(path_join(containers, id))) continue;
    out.push_back({LeftoverKind::kName, link, "", 0, false});
    if (!dry_run && ::unlink(link.c_str()) != 0 && errno != ENOENT)
      return sys_error("remove", link);
  }
  return out;
}

Result<FileLock> ContainerStore::lock_for_run(const ContainerRecord& c) const {
  std::string path = path_join(dir(c), "run.lock");
  auto lock = BERTH_TRY(FileLock::try_acquire(path));
  if (!lock.held())
    return make_error("run", c.names.empty() ? c.id : c.names.front(),
                      "container " + c.short_id() + " is already running")
        .with_hint("run the image instead to get a new container");
  write_runner_pid(lock);
  return lock;
}

void write_runner_pid(const FileLock& lock) {
  // Who runs it, for rm -f (best effort: without it rm -f cannot stop the run). Written at a
  // fixed width over the last run's pid, never truncated first: on ext4 a truncate to zero of
  // a file with data waits for its ordered writeback and forces the next write out at close
  // (auto_da_alloc), 0.5 to 2 ms per start here. Only a longer file (an older berth) is cut.
  char pid[kPidWidth + 2];
  std::snprintf(pid, sizeof pid, "%0*d\n", kPidWidth, static_cast<int>(::getpid()));
  if (::pwrite(lock.fd(), pid, kPidWidth + 1, 0) == kPidWidth + 1) {
    struct stat st;
    if (::fstat(lock.fd(), &st) == 0 && st.st_size > kPidWidth + 1)
      (void)!::ftruncate(lock.fd(), kPidWidth + 1);
  }
}

Status ContainerStore::stop(const ContainerRecord& c, int grace_seconds) const {
  using std::chrono::steady_clock;
  std::string subject = c.names.empty() ? c.id : c.names.front();
  std::string path = path_join(dir(c), "run.lock");
  for (int sig : {SIGTERM, SIGKILL}) {
    // After SIGKILL the run lock is free as soon as the kernel has closed its files.
    auto deadline = steady_clock::now() + std::chrono::seconds(sig == SIGTERM ? grace_seconds : 10);
    // SIGKILL goes to the workload first, so that the berth process running it records how it
    // ended; to that process too when it is still there a little later.
    auto kill_runner_at = deadline;
    pid_t pid = 0;
    bool sent = false;
    for (;;) {
      auto lock = FileLock::try_acquire(path);
      if (!lock.ok() && ::access(dir(c).c_str(), F_OK) != 0) return {};  // its run --rm ended it
      if (BERTH_TRY(std::move(lock)).held()) return {};
      if (!sent) {
        // Read while the lock is held: the pid is that of the run holding it (a run that took
        // the lock this instant may not have written it yet: read again on the next round).
        if (auto text = read_file(path)) pid = static_cast<pid_t>(std::atol(text->c_str()));
        if (pid > 0) {
          pid_t target = pid;
          if (sig == SIGKILL) {
            if (pid_t w = workload_pid(pid); w > 0) target = w;
            kill_runner_at = steady_clock::now() + std::chrono::seconds(2);
          }
          if (::kill(target, sig) != 0 && errno != ESRCH) return sys_error("stop", subject);
          sent = true;
        }
      }
      if (sent && sig == SIGKILL && steady_clock::now() >= kill_runner_at) {
        (void)::kill(pid, SIGKILL);  // ESRCH: gone meanwhile, which is what was wanted
        kill_runner_at = deadline + std::chrono::hours(1);
      }
      if (steady_clock::now() >= deadline) break;
      ::usleep(20 * 1000);
    }
  }
  return make_error("stop", subject, "container " + c.short_id() + " did not stop")
      .with_hint("the berth process running it is unknown or cannot be signalled");
}

Status ContainerStore::record_run(const ContainerRecord& c, const std::vector<std::string>& argv,
                                  std::optional<int> exit_code, const nlohmann::json& options) {
  // The same command ending the same way as last time (a loop of runs): nothing to write, and
  // creating and renaming a file costs more than starting the container did.
  auto same_options = [&]() {
    if (options.is_null()) return true;
    bool had_none = !c.run_options.is_object() || c.run_options.empty();
    return options.empty() ? had_none : options == c.run_options;
  };
  if ((argv.empty() || argv == c.last_command) && exit_code == c.last_exit && same_options())
    return {};
  // Run bookkeeping (last command, exit status) is rewritten on every run: an fsync would cost
  // more than the container's start, and a crash losing the last status loses nothing else.
  return update(
      c,
      [&](ContainerRecord& now) {
        if (!argv.empty()) now.last_command = argv;
        now.last_exit = exit_code;
        if (!options.is_null()) now.run_options = options;
      },
      Durability::kProcessSafe);
}

Status ContainerStore::add_labels(const ContainerRecord& c,
                                  const std::map<std::string, std::string>& labels) {
  if (labels.empty()) return {};
  return update(
      c,
      [&](ContainerRecord& now) {
        nlohmann::json& set = now.image_config["Labels"];
        if (!set.is_object()) set = nlohmann::json::object();
        for (const auto& [k, v] : labels) set[k] = v;
      },
      Durability::kProcessSafe);
}

Status ContainerStore::set_run_options(const ContainerRecord& c, const nlohmann::json& options) {
  return update(
      c, [&](ContainerRecord& now) { now.run_options = options; }, Durability::kProcessSafe);
}

Status ContainerStore::set_engine(const ContainerRecord& c, std::optional<EngineChoice> engine) {
  return update(
      c, [&](ContainerRecord& now) { now.engine = engine; }, Durability::kProcessSafe);
}

Status ContainerStore::set_gpus(const ContainerRecord& c, const std::string& gpus) {
  return update(
      c, [&](ContainerRecord& now) { now.gpus = gpus; }, Durability::kProcessSafe);
}

Status ContainerStore::set_udocker_mode(const ContainerRecord& c,
                                        std::optional<EngineChoice> engine,
                                        const std::string& mode) {
  return update(
      c,
      [&](ContainerRecord& now) {
        now.engine = engine;
        now.udocker_mode = mode;
      },
      Durability::kProcessSafe);
}

Status ContainerStore::set_link_prefix(const ContainerRecord& c, const std::string& prefix) {
  return update(
      c, [&](ContainerRecord& now) { now.link_prefix = prefix; }, Durability::kProcessSafe);
}

}  // namespace berth

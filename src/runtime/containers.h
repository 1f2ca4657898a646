// Containers under $BERTH_HOME, beside the image store:
//
//   containers/<id>/rootfs          the container's private, writable root filesystem
//   containers/<id>/container.json  what it was made from and how it runs (rewritten atomically)
//   containers/<id>/run.lock        flock held while the container runs; holds the pid of
//                                   the berth process that runs it, which rm -f signals
//   containers/<id>/log             a detached run's stdout and stderr (runtime/monitor.h)
//   containers/<id>/monitor.json    a detached run's start and end, written by its monitor
//   containers/<id>/container.lock  flock held while container.json is read, changed and
//                                   written back, so that two updates cannot lose one
//   containers/.tmp-<id>/           a container being created (renamed into place when whole)
//                                   or removed (renamed here first, then deleted)
//   containers/.tmp-<id>.lock       flock held by the create or rm that owns .tmp-<id>/, taken
//                                   before the folder exists; `berth gc` removes a .tmp-<id>/
//                                   only under this lock, so only a killed command's
//   names/<name>                    symlink to ../containers/<id>: one per name, made with
//                                   symlink(2), so two creates of one name cannot both win
//
// IDs are 64 hex digits, as Docker's; a unique prefix (at least 4 digits) designates one.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "image/gc.h"
#include "image/store.h"
#include "runtime/engines.h"

namespace berth {

/// One container, as container.json holds it.
struct ContainerRecord {
  std::string id;                         ///< 64 hex digits
  std::vector<std::string> names;         ///< every name that designates it (names/ links), sorted
  std::string image;                      ///< the image name it was created from
  std::string image_id;                   ///< the image's config digest
  std::string created;                    ///< RFC 3339 UTC
  nlohmann::json image_config;            ///< the image config's "config" object (Env, Cmd, ...)
  std::vector<std::string> last_command;  ///< argv of the last run, empty before the first
  std::optional<int> last_exit;           ///< exit status of the last run that ended
  /// The options of the last run (or of `create`), which `berth start` repeats: what
  /// cli::options_record wrote; null before any.
  nlohmann::json run_options;
  bool is_protected = false;  ///< `berth protect`: rm refuses it, even with -f
  /// The default engine (`berth setup --engine`), parsed as the record is read (an unknown
  /// name is an error); nullopt: none recorded, the site's or Berth's default.
  std::optional<EngineChoice> engine;
  /// GPUs every run injects unless it says --gpus (`berth setup --gpus`; udocker's
  /// `setup --nvidia` sets "all"); "" none.
  std::string gpus;
  /// udocker's execution mode as `udocker setup --execmode` last set it (P1 ... S1), shown by
  /// `udocker ps -m` and `udocker setup`; the engine it maps to is `engine` (cli/udocker.h).
  std::string udocker_mode;
  /// The host prefix absolute symlinks in the rootfs may carry now: "" as unpacked, the rootfs
  /// path while a fakechroot run owns it, or after one was killed (runtime/link_form.h).
  std::string link_prefix;
  bool running = false;  ///< run.lock is held now (computed, not stored)

  /// The first 12 hex digits, as `docker ps` shows.
  std::string short_id() const { return id.substr(0, 12); }
};

class ContainerStore {
 public:
  /// Opens (creating when missing) the container folders under `berth_home`.
  static Result<ContainerStore> open(const std::string& berth_home);

  /// Unpacks `image` into a new container; `name` may be empty. A `command` replaces the
  /// image's Cmd for this container, as `docker create IMAGE COMMAND...` does.
  Result<ContainerRecord> create(const Store& images, const ImageRecord& image,
                                 const std::string& name,
                                 const std::vector<std::string>& command = {});
  /// Extracts the squashfs file `file` (an absolute path) into a new container, as enroot's
  /// `create` does (image/unsquash.h): its image is the file, its image config the one Berth
  /// keeps in it (/.berth/image.json; none in a file Berth did not make). `name` may be empty;
  /// a `command` replaces the image's Cmd, as create() does. At most `limit` bytes of file data
  /// are written (0: the store's free space; unsquash()).
  Result<ContainerRecord> create_from_squashfs(const std::string& file, const std::string& name,
                                               const std::vector<std::string>& command = {},
                                               uint64_t limit = 0);
  /// Adds `labels` to the container's config's Labels (over the image's, as `docker create
  /// --label` does), for inspect and `ps --filter label=`.
  Status add_labels(const ContainerRecord& c, const std::map<std::string, std::string>& labels);
  /// Every container, oldest first.
  Result<std::vector<ContainerRecord>> list() const;
  /// How much find() reads besides the record.
  enum class Detail {
    kFull,    ///< every name (a scan of names/) and whether it runs (a probe of its run lock)
    kRecord,  ///< neither: `names` holds the name it was found by, `running` is false. For
              ///< `berth run`, which takes the run lock anyway and removes no name (without --rm)
  };
  /// A container by name, full ID or unique ID prefix.
  Result<ContainerRecord> find(std::string_view name_or_id, Detail detail = Detail::kFull) const;
  /// Adds `name` for the container (a container may have several, as in udocker).
  Status add_name(const ContainerRecord& c, const std::string& name);
  /// Removes a name; the container stays.
  Status remove_name(const std::string& name);
  /// Docker's rename: `name` becomes the container's only name. Refuses a name another
  /// container holds, and the container's own sole name.
  Status rename(const ContainerRecord& c, const std::string& name);
  /// A copy of the container (root filesystem, config, last run) under a new ID, with
  /// `name` (may be empty) and no protection; refuses a running container.
  Result<ContainerRecord> clone(const ContainerRecord& c, const std::string& name);
  /// Marks or unmarks the container as protected from rm.
  Status set_protected(const ContainerRecord& c, bool on);
  /// Deletes the container and its names; refuses a protected one, and a running one
  /// unless `force`.
  Status remove(const ContainerRecord& c, bool force);
  /// Takes the run lock and records this process in it; fails with "container ... is already
  /// running" when held.
  Result<FileLock> lock_for_run(const ContainerRecord& c) const;
  /// Stops a running container as `docker stop -t` does: SIGTERM to the berth process running
  /// it (which forwards it to the workload), SIGKILL after `grace_seconds` (the workload dies
  /// with it), and returns once the run lock is free. Nothing to do when it is not running.
  Status stop(const ContainerRecord& c, int grace_seconds) const;
  /// Records the command, exit status and options of a run (`c` as found before the run;
  /// nothing is written when all three are what `c` already holds). An empty `argv` or null
  /// `options` keeps what was recorded.
  Status record_run(const ContainerRecord& c, const std::vector<std::string>& argv,
                    std::optional<int> exit_code, const nlohmann::json& options = {});
  /// Records the options `berth create` was given, for `berth start`.
  Status set_run_options(const ContainerRecord& c, const nlohmann::json& options);

  /// Finds what killed commands left: containers half created or half removed (.tmp-<id>
  /// whose lock is free), names whose container is gone, container.json temporaries (under
  /// container.lock). Removes them unless `dry_run`; never waits on a lock.
  Result<std::vector<Leftover>> sweep(bool dry_run) const;

  /// Records the container's default engine (nullopt: none, the default).
  Status set_engine(const ContainerRecord& c, std::optional<EngineChoice> engine);
  /// Records the GPUs every run injects by default ("" none).
  Status set_gpus(const ContainerRecord& c, const std::string& gpus);
  /// Records the engine and udocker's execution-mode label together (`udocker setup`).
  Status set_udocker_mode(const ContainerRecord& c, std::optional<EngineChoice> engine,
                          const std::string& mode);
  /// Records the prefix the rootfs's absolute symlinks carry now.
  Status set_link_prefix(const ContainerRecord& c, const std::string& prefix);

  std::string dir(const ContainerRecord& c) const;
  std::string rootfs(const ContainerRecord& c) const { return path_join(dir(c), "rootfs"); }

 private:
  /// `found_by`: the name the caller looked it up by, or "" (Detail::kRecord).
  Result<ContainerRecord> load(const std::string& id, Detail detail = Detail::kFull,
                               const std::string& found_by = "") const;
  /// containers/.tmp-<id>, and the lock its owner holds (taken before the folder exists).
  std::string doomed_dir(const std::string& id) const;
  Result<FileLock> lock_doomed(const std::string& id) const;
  /// Fails when `name` (may be empty) is invalid or held by a container.
  Status check_name_free(Op op, const std::string& name) const;
  /// Makes container `c` under a temporary folder, its root filesystem by `fill`, then
  /// renames it into place and names it.
  Result<ContainerRecord> build(ContainerRecord c, const std::string& name,
                                const std::function<Status(const std::string& rootfs)>& fill);
  /// Reads the container's record as stored now, applies `change` and writes it back, all
  /// under container.lock.
  Status update(const ContainerRecord& c, const std::function<void(ContainerRecord&)>& change,
                Durability durability);
  std::string root_;  ///< $BERTH_HOME
};

/// Writes this process's pid into a held run lock (`lock_for_run` does; a detached run's monitor
/// does again, as the lock's new owner). Its mtime is the run's start for `ps`.
void write_runner_pid(const FileLock& lock);

/// Container names as Docker allows them: [a-zA-Z0-9][a-zA-Z0-9_.-]*, and not 64 hex digits.
Status validate_container_name(std::string_view name);

}  // namespace berth

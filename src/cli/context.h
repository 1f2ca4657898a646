// What several commands need: the store, registry options, output helpers.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "cli/command.h"
#include "devices/nvidia_driver_config.h"
#include "image/pull.h"
#include "image/registry.h"
#include "image/store.h"
#include "runtime/containers.h"

namespace berth::cli {

/// Opens the store at --home / $BERTH_HOME / the default location.
Result<Store> open_store(const GlobalOptions& g);
/// Registry options from --insecure-registry, $BERTH_INSECURE_REGISTRIES and the
/// configuration's "insecure-registries" list (site/config.h).
Result<RegistryOptions> registry_options(const GlobalOptions& g);
/// registry_options() for talking to `registry`, once the site policy's allowed_registries
/// let it be asked (site/policy.h).
Result<RegistryOptions> registry_options_for(const GlobalOptions& g, const std::string& registry);
/// Where GPU discovery looks: the configuration's driver and device roots, overridden by
/// the environment (BERTH_DRIVER_ROOT, BERTH_DEV_ROOT, BERTH_CUDA_PROBE; see
/// devices/nvidia_driver_config.h) unless the site policy locks the root.
Result<DiscoveryOptions> discovery_options(const GlobalOptions& g);
/// Pulls `name` (a reference as typed) into the store; progress on a terminal's stderr.
/// `squash`: keep it as one squashfs file (image/pull.h PullOptions::squash). `creds_user`:
/// whose stored login to use (`pull --creds-user`); empty: $BERTH_CREDS_USER, else the
/// registry's default login.
Result<PullResult> pull_reference(const GlobalOptions& g, const std::string& name,
                                  const std::string& platform, bool progress, bool squash,
                                  const std::string& creds_user = "");
/// Whether a pull keeps the image as one squashfs file: `flag` (--squash / --no-squash) when
/// given, else the configuration's store_format; a flag against a locked store_format is
/// refused in one line naming `op`.
Result<bool> squash_wanted(const GlobalOptions& g, std::optional<bool> flag, Op op);
/// An image found by name: in the user's store, or else in the site's central store.
struct FoundImage {
  Store store;  ///< the store holding it (open_shared() for the central one)
  ImageRecord record;
  bool central = false;
};
/// Looks `name` up in the user's store `own`, then in the central store (site/central_store.h)
/// when the site names one; nullopt when neither has it.
Result<std::optional<FoundImage>> find_image_anywhere(const GlobalOptions& g, const Store& own,
                                                      const std::string& name);
/// Opens the containers beside the store.
Result<ContainerStore> open_containers(const GlobalOptions& g);
/// A container as `ps --json` and `inspect` show it.
nlohmann::json container_json(const ContainerStore& cs, const ContainerRecord& c);
/// The container's command: its last run's argv, else (before a run has ended) the Entrypoint
/// and Cmd its creation recorded.
std::vector<std::string> container_command(const ContainerRecord& c);
/// An image config's `config` as Docker's inspect shows it: every field of Docker's type, the
/// ones the image left out at their zero values ("", [], map[]).
nlohmann::json docker_config_view(const nlohmann::json& config);
/// container_json() with Docker's field names added (Id, Name, State, Config, ...): what
/// `inspect --format` and `ps --format` templates see.
nlohmann::json container_template_view(const ContainerStore& cs, const ContainerRecord& c);
/// Prints `tmpl` applied to `data` (core/go_template.h), with a newline as Docker's CLI does.
Status print_template(const std::string& tmpl, const nlohmann::json& data);
/// The store's sweep lock (Store::sweep_lock()) for `op`: when pulls, imports, loads or
/// creates hold the store, says so (on a terminal, else with -v) and waits for them, at most
/// `timeout_s` seconds when > 0 (then a one-line kBusy error).
Result<FileLock> wait_for_sweep_lock(const GlobalOptions& g, const Store& store, Op op,
                                     int timeout_s);
/// "12.3 MB (45%)": `part` of `whole`, as `docker system df` shows what is reclaimable.
std::string size_with_share(int64_t part, int64_t whole);
/// Splits an image record's name into what `docker images` shows: REPOSITORY and TAG
/// ("<none>" for a record by digest only).
std::pair<std::string, std::string> image_repo_and_tag(const std::string& name);
/// Prints rows as left-aligned columns three spaces apart, the first row being the header.
void print_table(const std::vector<std::vector<std::string>>& rows);
/// Whether `inspect` takes `name` for a squashfs file: a path starting with / or . (as run does).
bool looks_like_squash_path(const std::string& name);
/// `berth inspect FILE.sqsh [--json]`: the file's facts and its Berth metadata, if any.
Status inspect_squash_file(const std::string& path, bool json);
/// Prints JSON to stdout, indented, with a trailing newline.
void print_json(const nlohmann::json& j);

}  // namespace berth::cli

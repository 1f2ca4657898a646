// The site policy's rules as pure checks over the configuration in force (site/config.h):
// which registries may be pulled from and through which mirrors, which mounts a user may ask
// for, which engines may run. Each refusal is one line naming the policy file that made the
// rule. Nothing here touches the system but check_mount_source(), which resolves a path.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "image/squash.h"
#include "image/store.h"
#include "site/config.h"

namespace berth {

/// A registry as the policy compares it: lower case, Docker Hub's API hosts as "docker.io".
std::string policy_registry_name(std::string_view registry);

/// Whether `registry` ("host[:port]") matches an allowed_registries `entry`: the same
/// registry, the same host when the entry has no port, or a host under "*.domain".
bool registry_matches(std::string_view registry, std::string_view entry);

/// Refuses a registry outside allowed_registries.
Status check_registry_allowed(const SiteConfig& c, const std::string& registry);

/// The registry a stored image came from: the one it was pulled from, "" for one imported or
/// loaded, else (a record older than Berth's keeping it) the registry its name names.
std::string stored_image_registry(const ImageRecord& image);

/// Refuses to run a stored image pulled from a registry allowed_registries does not (or no
/// longer) allow; an image imported or loaded is not refused.
Status check_stored_image_allowed(const SiteConfig& c, const ImageRecord& image);

/// A mirror entry split: its host[:port] for the client, the repository prefix ("" or
/// "path/"), and whether it asked for plain HTTP (http://).
struct Mirror {
  std::string host;
  std::string prefix;
  bool plain_http = false;
};
/// The mirrors the policy puts in front of `registry`, in order.
std::vector<Mirror> mirrors_for(const SiteConfig& c, const std::string& registry);

/// `path` with "//", "." and ".." folded (lexically; ".." above "/" stays at "/").
std::string normalize_path(std::string_view path);

/// Whether `path` is `dir` or lies under it ("/" holds everything); both normalized.
bool path_at_or_under(std::string_view path, std::string_view dir);

/// Refuses a container path a -v may not mount on: one at, under or above (it would cover)
/// a deny_mount_destinations entry. Lexical: the check sees the path as the user wrote it.
Status check_mount_destination(const SiteConfig& c, const std::string& destination);

/// Refuses a host path outside allow_mount_sources, after resolving its symlinks (a missing
/// path is refused too when there is a list: what cannot be resolved cannot be checked).
Status check_mount_source(const SiteConfig& c, const std::string& source);

/// Refuses an engine outside allowed_engines (auto is never in it: refused there).
Status check_engine_allowed(const SiteConfig& c, EngineChoice engine);

/// Refuses a user's choice on the command line or in the environment (`what`, e.g.
/// "--read-only=false") of a setting the site locks, when it differs from the site's. `op`
/// names the command in the refusal.
Status check_not_locked(const SiteConfig& c, std::string_view key, std::string_view what,
                        Op op = "run");

/// What a command that writes a squashfs file (squash, pull --squash) was given on its command
/// line; nullopt: not given.
struct SquashChoice {
  std::optional<std::string> compressor;  ///< --compressor
  std::optional<int> level;               ///< --level
};

/// The squash options in force: the policy's squash_options (mksquashfs syntax), with the
/// command line's choices over them. A compressor given without a level keeps the policy's
/// level only when the policy names the same compressor. Refused (one line, op "squash")
/// when the result is invalid, or differs from the policy's while the site locks
/// squash_options.
Result<SquashOptions> effective_squash_options(const SiteConfig& c, const SquashChoice& cli);

}  // namespace berth

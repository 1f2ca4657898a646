// The site policy's rules as pure checks over the configuration in force (site/config.h):
// which registries may be pulled from and through which mirrors, which mounts a user may ask
// for, which engines may run. Each refusal is one line naming the policy file that made the
// rule. Nothing here touches the system but check_mount_source(), which resolves a path.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "site/config.h"

namespace berth {

/// A registry as the policy compares it: lower case, Docker Hub's API hosts as "docker.io".
std::string policy_registry_name(std::string_view registry);

/// Whether `registry` ("host[:port]") matches an allowed_registries `entry`: the same
/// registry, the same host when the entry has no port, or a host under "*.domain".
bool registry_matches(std::string_view registry, std::string_view entry);

/// Refuses a registry outside allowed_registries.
Status check_registry_allowed(const SiteConfig& c, const std::string& registry);

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

/// Refuses an engine outside allowed_engines.
Status check_engine_allowed(const SiteConfig& c, std::string_view engine);

/// Refuses a user's choice on the command line or in the environment (`what`, e.g.
/// "--read-only=false") of a setting the site locks, when it differs from the site's; `op`
/// names the command refused ("run", "pull").
Status check_not_locked(const SiteConfig& c, std::string_view key, std::string_view what,
                        Op op = "run");

}  // namespace berth

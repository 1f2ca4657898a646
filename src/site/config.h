// Berth's configuration as the site and the user give it, read once per command and handed
// down as a narrow const struct: commands take what they need from it (registry options,
// mount rules, driver roots), and no lower layer opens a configuration file itself.
//
// Three files, each optional (docs/site.md documents every key):
//  - the site policy, /etc/berth/berth.conf ($BERTH_SITE_CONF instead, for tests and for
//    sites that install elsewhere), TOML. Refused unless root owns it and every folder above
//    it, and none of them is writable by group or others (Sarus's rule; check_trusted_file());
//  - the user's berth.conf in berth_config_dir(), TOML, the same keys: preferences that may
//    tighten the site's rules but never loosen them (merge_policy());
//  - the user's older config.json in berth_config_dir(), still read, as part of the user's
//    layer (its keys: "insecure-registries", "driver_root", "dev_root", "pull-low-speed-limit",
//    "pull-low-speed-time", "pull-deadline"); the user's berth.conf wins over it.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env_list.h"
#include "core/error.h"
#include "devices/mpi.h"
#include "runtime/engines.h"
#include "runtime/root_emulation.h"

namespace berth {

/// The site policy's place when $BERTH_SITE_CONF does not name another.
inline constexpr const char* kSitePolicyPath = "/etc/berth/berth.conf";

/// What one configuration file says; unset fields were not given. A list given as [] is set
/// (and empty): for allowed_registries that means none is allowed. The words of the runtime's
/// vocabularies (root_emulation, engines, an MPI's abi) are parsed as the file is read.
struct PolicyLayer {
  std::string path;  ///< the file, named in errors and in `berth info`
  std::optional<std::vector<std::string>> allowed_registries;
  std::optional<std::vector<std::string>> insecure_registries;
  /// registry (as in a reference: "docker.io", "host:port") -> mirrors tried first, in order,
  /// each "host[:port][/path prefix]", optionally with http:// (plain HTTP) or https://.
  std::optional<std::map<std::string, std::vector<std::string>>> registry_mirrors;
  std::optional<std::vector<std::string>> site_mounts;  ///< "-v" syntax: SRC:DST[:ro|:rw]
  std::optional<std::vector<std::string>> deny_mount_destinations;
  std::optional<std::vector<std::string>> allow_mount_sources;
  std::optional<bool> mount_home;
  std::optional<std::vector<EnvEdit>> env;  ///< [env] set, prepend, append, unset, in that order
  std::optional<bool> readonly;
  std::optional<RootEmulation> root_emulation;
  std::optional<EngineChoice> default_engine;
  std::optional<std::vector<EngineChoice>> allowed_engines;  ///< rows only, never auto
  std::optional<std::string> driver_root;
  std::optional<std::string> dev_root;
  std::optional<std::string> gpus;  ///< the --gpus a run gets when it gives none
  std::optional<std::string> ib;    ///< the HCAs a run gets when it names none (--ib syntax)
  std::optional<std::vector<MpiDeclaration>> mpi;  ///< site only: [mpi.TYPE] tables
  std::optional<std::string> mpi_default;          ///< the TYPE plain --mpi uses
  std::optional<std::vector<std::string>> lock;    ///< site only: keys users may not change
  std::optional<std::string> central_store;
  std::optional<std::string> squash_options;
  std::optional<std::string> store_format;  ///< "layers" or "squashfs"
  std::optional<std::string> runtime_dir;
  std::optional<long> pull_low_speed_limit;
  std::optional<long> pull_low_speed_time;
  std::optional<long> pull_deadline;
  std::optional<long> extract_limit_mb;
};

/// The configuration in force: the site's policy with the user's preferences merged in.
struct SiteConfig {
  std::string path;       ///< the user's config.json when one was read, else ""
  std::string site_path;  ///< the site policy read, "" when there was none
  std::string user_path;  ///< the user's berth.conf read, "" when there was none

  std::vector<std::string> insecure_registries;  ///< site's and user's
  /// Registries images may be pulled from; nullopt: any. Entries: "host[:port]" (a host
  /// alone allows every port), "*.domain" (any host under it), "docker.io".
  std::optional<std::vector<std::string>> allowed_registries;
  std::map<std::string, std::vector<std::string>> registry_mirrors;
  std::vector<std::string> site_mounts;  ///< the site's: added to every run, unchecked
  std::vector<std::string> user_mounts;  ///< the user file's: added to every run, checked as -v
  std::vector<std::string> deny_mount_destinations;  ///< site's and user's
  /// Host folders -v sources must lie under (after resolving symlinks); nullopt: any.
  std::optional<std::vector<std::string>> allow_mount_sources;
  bool mount_home = false;
  std::vector<EnvEdit> env;  ///< the site's edits, then the user's
  bool readonly = false;
  /// The userns engine's root emulation (runtime/root_emulation.h); auto unless a file says.
  RootEmulation root_emulation = RootEmulation::kAuto;
  std::optional<EngineChoice> default_engine;                ///< nullopt for Berth's own default
  std::optional<std::vector<EngineChoice>> allowed_engines;  ///< nullopt: any
  std::string driver_root;
  std::string dev_root;
  std::string gpus;                 ///< "" for none
  std::string ib;                   ///< "" for none: --ib syntax, injected where the host has HCAs
  std::vector<MpiDeclaration> mpi;  ///< the site's host MPIs
  std::string mpi_default;          ///< "" when none: plain --mpi is then an error
  std::vector<std::string> locked;  ///< the site's `lock`
  std::string central_store;
  /// mksquashfs-style options for the squashfs files Berth writes (image/squash.h
  /// parse_squash_options(); checked when read); "" for the defaults.
  std::string squash_options;
  /// How pulls keep images: "layers" (the default; also "") or "squashfs" (one file each).
  std::string store_format;
  std::string runtime_dir;
  /// Transfers slower than this many bytes/s for pull-low-speed-time seconds are cut off
  /// (and retried, resuming); 0: the default (1024 bytes/s over 60 s).
  long pull_low_speed_limit = 0;
  long pull_low_speed_time = 0;
  long pull_deadline = 0;  ///< seconds a whole pull may take; 0: none
  /// MiB of file data one extraction of a squashfs file (create FILE.sqsh) may write; 0: only
  /// the store's free space bounds it.
  long extract_limit_mb = 0;

  /// key -> the file(s) its value came from ("a + b" when both added to it); absent: default.
  std::map<std::string, std::string> sources;
  /// User settings ignored because they would loosen a site rule, one line each.
  std::vector<std::string> ignored;

  /// Whether the site locks `key` (one of lockable_policy_keys(), site/policy_keys.h).
  bool is_locked(std::string_view key) const;
  /// Whether pulls keep images as one squashfs file (store_format = "squashfs").
  bool squash_store() const { return store_format == "squashfs"; }
};

/// The user's configuration file: config.json in berth_config_dir().
std::string user_config_path();
/// The user's policy file: berth.conf in berth_config_dir().
std::string user_policy_path();
/// The site policy's path: $BERTH_SITE_CONF when set, else kSitePolicyPath.
std::string site_policy_path();

/// Parses the JSON text of the user's config.json `path` (which names it in errors).
Result<SiteConfig> parse_site_config(std::string_view text, const std::string& path);

/// Reads and parses the config.json at `path`; a missing file gives the defaults.
Result<SiteConfig> read_site_config(const std::string& path);

/// Parses the TOML text of a policy file `path`; `site` says whether it is the site's (only
/// the site's may `lock`). Errors are one line naming the file, and the key or line. (It, and
/// merge_policy(), loop over the table of keys, site/policy_keys.cc.)
Result<PolicyLayer> parse_policy(std::string_view text, const std::string& path, bool site);

/// Refuses a policy file anyone but root could change: `path` (symlinks resolved) must be a
/// regular file owned by root, or by `owner` when it is not 0 (unit tests, which cannot chown),
/// not writable by group or others, and so must every folder above it, except that a folder
/// with the sticky bit (/tmp) may be writable by all.
Status check_trusted_file(const std::string& path, uid_t owner = 0);

/// Merges the site's layer (may be absent) and the user's layers, in order (a later one's
/// preferences win), into the configuration in force. The user may tighten, never loosen:
/// what would loosen is left out and said in `ignored`.
SiteConfig merge_policy(const std::optional<PolicyLayer>& site,
                        const std::vector<PolicyLayer>& user);

/// Reads everything: the site policy (site_policy_path(); missing is fine unless
/// $BERTH_SITE_CONF names it), the user's config.json and berth.conf.
Result<SiteConfig> load_config();

}  // namespace berth

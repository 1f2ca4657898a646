// Berth's configuration as the site and the user give it, read once per command and handed
// down as a narrow const struct: commands take what they need from it (registry options,
// driver roots), and no lower layer opens a configuration file itself.
//
// Today it is the user's file, $BERTH_CONFIG_DIR/config.json (see berth_config_dir()), a JSON
// object:
//   "insecure-registries": ["host[:port]", ...]   registries reached over plain HTTP
//   "driver_root": "/path", "dev_root": "/path"   where GPU discovery looks (devices/)
//   "pull-low-speed-limit": N, "pull-low-speed-time": S, "pull-deadline": S
//                                                 when a slow registry is cut off (image/)
// A missing file means the defaults. The site's /etc/berth/berth.conf will be read here too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace berth {

/// What the configuration file says; empty fields were not set.
struct SiteConfig {
  std::string path;                              ///< the file read; "" when there was none
  std::vector<std::string> insecure_registries;  ///< "insecure-registries"
  std::string driver_root;                       ///< "driver_root"
  std::string dev_root;                          ///< "dev_root"
  /// Transfers slower than this many bytes/s for pull-low-speed-time seconds are cut off
  /// (and retried, resuming); 0: the default (1024 bytes/s over 60 s).
  long pull_low_speed_limit = 0;  ///< "pull-low-speed-limit"
  long pull_low_speed_time = 0;   ///< "pull-low-speed-time"
  long pull_deadline = 0;         ///< "pull-deadline": seconds a whole pull may take; 0: none
};

/// The user's configuration file: config.json in berth_config_dir().
std::string user_config_path();

/// Parses the JSON text of the configuration file `path` (which names it in errors).
Result<SiteConfig> parse_site_config(std::string_view text, const std::string& path);

/// Reads and parses the configuration file at `path`; a missing file gives the defaults.
Result<SiteConfig> read_site_config(const std::string& path);

}  // namespace berth

// Where Berth keeps things, from the environment (XDG and BERTH_* variables).
#pragma once

#include <string>

namespace berth {

/// The invoking user's home: $HOME, else the passwd entry.
std::string home_dir();
/// The store root: $BERTH_HOME, else $XDG_DATA_HOME/berth, else ~/.local/share/berth.
std::string berth_home();
/// Berth's config folder: $BERTH_CONFIG_DIR, else $XDG_CONFIG_HOME/berth, else ~/.config/berth.
std::string berth_config_dir();
/// A variable's value, or `fallback` when unset or empty.
std::string env_or(const char* name, const std::string& fallback);

}  // namespace berth

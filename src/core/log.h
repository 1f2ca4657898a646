// Logging to stderr. Level set once from the CLI (-v / --quiet / BERTH_LOG).
// Messages are for people; scripts read --json output instead.
#pragma once

#include <fmt/core.h>

#include <string>
#include <string_view>

namespace berth::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_level(Level l);
Level level();
void write(Level l, std::string_view msg);
/// Writes a warning the first time `key` is seen in this process, never again.
void warn_once(std::string_view key, std::string_view msg);

template <class... A>
void debug(fmt::format_string<A...> f, A&&... a) {
  if (level() >= Level::kDebug) write(Level::kDebug, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void info(fmt::format_string<A...> f, A&&... a) {
  if (level() >= Level::kInfo) write(Level::kInfo, fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
void warn(fmt::format_string<A...> f, A&&... a) {
  if (level() >= Level::kWarn) write(Level::kWarn, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace berth::log

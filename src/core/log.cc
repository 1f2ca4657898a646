#include "core/log.h"

#include <cstdio>
#include <mutex>
#include <set>

#include "core/safe_text.h"

namespace berth::log {
namespace {
Level g_level = Level::kWarn;
std::mutex g_mu;
std::set<std::string, std::less<>> g_warned;
}  // namespace

void set_level(Level l) {
  g_level = l;
}
Level level() {
  return g_level;
}

void write(Level l, std::string_view msg) {
  static const char* prefix[] = {"error: ", "warning: ", "", "debug: "};
  std::string text = safe_text(msg);  // warnings quote registries and images too
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "berth: %s%s\n", prefix[static_cast<int>(l)], text.c_str());
}

void warn_once(std::string_view key, std::string_view msg) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_warned.emplace(key).second) return;
  }
  if (level() >= Level::kWarn) write(Level::kWarn, msg);
}

}  // namespace berth::log

#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace berth {

ProgressMeter::ProgressMeter(bool enabled) : enabled_(enabled) {}

ProgressMeter::~ProgressMeter() {
  finish();
}

bool ProgressMeter::stderr_is_terminal() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDERR_FILENO) && !(term && std::strcmp(term, "dumb") == 0);
}

int ProgressMeter::add(std::string label, int64_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  items_.push_back(Item{std::move(label), "Waiting", total, 0});
  if (enabled_) draw_locked(true);
  return static_cast<int>(items_.size()) - 1;
}

void ProgressMeter::advance(int id, int64_t n) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  Item& it = items_.at(static_cast<size_t>(id));
  it.done += n;
  it.status = "Downloading";
  draw_locked(false);
}

void ProgressMeter::set_status(int id, std::string status) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  items_.at(static_cast<size_t>(id)).status = std::move(status);
  draw_locked(true);
}

void ProgressMeter::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled_) return;
  draw_locked(true);
  enabled_ = false;
}

void ProgressMeter::draw_locked(bool force) {
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  std::string out;
  if (lines_drawn_ > 0) out += "\x1b[" + std::to_string(lines_drawn_) + "F";  // back to first line
  for (const Item& it : items_) {
    out += "\x1b[2K" + it.label + ": " + it.status;
    if (it.status == "Downloading" && it.total > 0) {
      constexpr int kWidth = 30;
      int filled = static_cast<int>(kWidth * std::min<int64_t>(it.done, it.total) / it.total);
      out += " [" + std::string(filled, '=') + (filled < kWidth ? ">" : "") +
             std::string(kWidth - filled - (filled < kWidth ? 1 : 0), ' ') + "] " +
             human_size(it.done) + "/" + human_size(it.total);
    }
    out += '\n';
  }
  lines_drawn_ = static_cast<int>(items_.size());
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

std::string human_size(int64_t bytes) {
  static const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.3g %s", v, units[u]);
  return buf;
}

}  // namespace berth

// A progress display for long work (downloads, unpacking), drawn on stderr
// only when stderr is a terminal; otherwise every call is a cheap no-op.
// Thread-safe: download workers report bytes concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace berth {

class ProgressMeter {
 public:
  /// `enabled` false makes every call a no-op (not a terminal, --quiet).
  explicit ProgressMeter(bool enabled);
  ~ProgressMeter();
  /// True when stderr is a terminal and TERM is not "dumb".
  static bool stderr_is_terminal();

  /// Adds a line "label  status"; returns its id. total < 0 when unknown.
  int add(std::string label, int64_t total);
  /// Adds n bytes of progress to item id.
  void advance(int id, int64_t n);
  /// Sets the status word shown instead of the bar ("Waiting", "Already exists", "Done").
  void set_status(int id, std::string status);
  /// Redraws one last time and stops drawing.
  void finish();

 private:
  struct Item {
    std::string label, status;
    int64_t total = -1, done = 0;
  };
  void draw_locked(bool force);

  bool enabled_;
  std::mutex mu_;
  std::vector<Item> items_;
  int lines_drawn_ = 0;
  std::chrono::steady_clock::time_point last_draw_{};
};

/// "1.5 MB", "230 kB", "12 B" (decimal units, as Docker prints sizes).
std::string human_size(int64_t bytes);

}  // namespace berth

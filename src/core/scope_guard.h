// A scope guard: runs a cleanup when the scope it lives in ends, on every return
// path, unless dismissed (crun's cleanup attributes, in C++).
#pragma once

#include <utility>

namespace berth {

/// Runs `f` when destroyed unless dismiss() was called first. Use through on_scope_exit().
template <class F>
class [[nodiscard]] ScopeGuard {
 public:
  explicit ScopeGuard(F f) : f_(std::move(f)) {}
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
  ~ScopeGuard() {
    if (armed_) f_();
  }
  /// The cleanup will not run (the resource was handed on).
  void dismiss() { armed_ = false; }

 private:
  F f_;
  bool armed_ = true;
};

/// A guard that calls `f` at the end of the enclosing scope:
/// `auto closer = on_scope_exit([&] { ::closedir(d); });`.
template <class F>
ScopeGuard<F> on_scope_exit(F f) {
  return ScopeGuard<F>(std::move(f));
}

}  // namespace berth

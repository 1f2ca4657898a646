// One caller at a time per ACCEPTED job (gateway/submit_locks.h).
#include "gateway/submit_locks.h"

namespace berth::gateway {

void SubmitLocks::acquire(int64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  released_.wait(lock, [&] { return !held_.contains(id); });
  held_.insert(id);
}

void SubmitLocks::release(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_.erase(id);
  }
  released_.notify_all();
}

}  // namespace berth::gateway

// One caller at a time per job (gateway/job_locks.h).
#include "gateway/job_locks.h"

namespace berth::gateway {

void JobLocks::acquire(int64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  released_.wait(lock, [&] { return !held_.contains(id); });
  held_.insert(id);
}

void JobLocks::release(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_.erase(id);
  }
  released_.notify_all();
}

}  // namespace berth::gateway

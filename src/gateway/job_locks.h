// One caller at a time per job. At a gateway, who settles an ACCEPTED job's way into Slurm: the
// POST that recorded it, reconciliation (a submission slurmrestd did not answer) or a cancel;
// each re-reads the job once it holds the job's lock, so that a cancel that found nothing in
// Slurm cannot be followed by a submission of the job, and a submission cannot land after the
// cancel that should have stopped it. At a broker, who moves a broker job on (gateway/
// broker_jobs.h): its POST, the owner's GET or cancel, and the broker's own rounds. A lock is
// held across a call to Slurm or a site; other jobs' locks do not wait for it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>

namespace berth::gateway {

class JobLocks {
 public:
  /// Job `id` held by one caller: made, it waits while another caller holds the job;
  /// destroyed, it lets the next one in.
  class Held {
   public:
    Held(JobLocks& locks, int64_t id) : locks_(locks), id_(id) { locks_.acquire(id_); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() { locks_.release(id_); }

   private:
    JobLocks& locks_;
    int64_t id_;
  };

 private:
  void acquire(int64_t id);
  void release(int64_t id);

  std::mutex mu_;
  std::condition_variable released_;
  std::set<int64_t> held_;
};

}  // namespace berth::gateway

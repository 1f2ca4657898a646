#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "core/fs.h"
#include "gateway/orphans.h"
#include "gateway/reclaim.h"
#include "test_util.h"

namespace berth::gateway {
namespace {

/// The kernel's binary ACL form of `entries` ({tag, perm, id}).
std::string acl_xattr(std::initializer_list<std::array<uint32_t, 3>> entries) {
  std::string out;
  auto put = [&out](uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(2, 4);
  for (const auto& e : entries) put(e[0], 2), put(e[1], 2), put(e[2], 4);
  return out;
}

/// Whether the file at `path` lets `uid` (not its owner, in none of its groups) read it: its
/// access ACL's entry for `uid` under the mask, else its mode's "other" bits.
bool readable_by(const std::string& path, uid_t uid) {
  char buf[256];
  ssize_t n = ::getxattr(path.c_str(), "system.posix_acl_access", buf, sizeof buf);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  if (n < 4) return (st.st_mode & S_IROTH) != 0;
  std::string_view x(buf, static_cast<size_t>(n));
  auto le = [&x](size_t at, size_t bytes) {
    uint32_t v = 0;
    for (size_t i = 0; i < bytes; ++i)
      v |= static_cast<uint32_t>(static_cast<unsigned char>(x[at + i])) << (8 * i);
    return v;
  };
  bool named = false, named_read = false, mask_read = true;
  for (size_t at = 4; at + 8 <= x.size(); at += 8) {
    uint32_t tag = le(at, 2), perm = le(at + 2, 2), id = le(at + 4, 4);
    if (tag == 0x02 && id == uid) named = true, named_read = (perm & 4) != 0;
    if (tag == 0x10) mask_read = (perm & 4) != 0;
  }
  if (named) return named_read && mask_read;
  return (st.st_mode & S_IROTH) != 0;
}

TEST(GatewayReclaim, NoticeIsReadableByTheJobsOwnerUnderTheOutputFoldersAcl) {
  // The folder as docs/gateway.md makes it: files made there are berthd's (this process's)
  // alone, "u::rw,u:BERTHD:r,g::-,m::r,o::-". The job runs as another account.
  TempDir dir("notice");
  const uid_t berthd = ::getuid(), owner = berthd == 65534 ? 65533 : 65534;
  std::string acl = acl_xattr(
      {{0x01, 6, ~0U}, {0x02, 4, berthd}, {0x04, 0, ~0U}, {0x10, 4, ~0U}, {0x20, 0, ~0U}});
  if (::setxattr(dir.path.c_str(), "system.posix_acl_default", acl.data(), acl.size(), 0) != 0)
    GTEST_SKIP() << "no POSIX ACLs on " << dir.path << ": " << std::strerror(errno);
  // What a plain create (mode 0644) gets there: nothing for the job's owner.
  std::string plain = dir.path + "/plain";
  int fd = ::open(plain.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_FALSE(readable_by(plain, owner));

  std::string notice = dir.path + "/berthd-1-x.notice";
  ASSERT_TRUE(write_notice(notice, "berthd: job 1: idle\n", owner).ok());
  EXPECT_TRUE(readable_by(notice, owner));
  EXPECT_FALSE(readable_by(notice, owner + 1));  // and no one else
  struct stat st {};
  ASSERT_EQ(::stat(notice.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);  // u::rw, mask r (group bits), o::-
  EXPECT_EQ(*read_file(notice), "berthd: job 1: idle\n");
  // A file already there is left as it is.
  auto again = write_notice(notice, "other\n", owner);
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(*read_file(notice), "berthd: job 1: idle\n");
}

/// A `berth gpu stats --json` document (docs/gpu.md), pretty-printed as the command writes it.
std::string doc(int64_t time, std::initializer_list<double> means, int ms = 123) {
  std::string gpus;
  int i = 0;
  for (double m : means) {
    if (!gpus.empty()) gpus += ",\n";
    gpus += "    {\"index\": " + std::to_string(i++) + ", \"utilization\": {\"gpu\": 99},\n" +
            "     \"window\": {\"utilization_gpu\": {\"min\": 0.0, \"mean\": " + std::to_string(m) +
            ", \"max\": 1.0}}}";
  }
  char when[32];
  time_t tt = static_cast<time_t>(time);
  struct tm tm {};
  gmtime_r(&tt, &tm);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03dZ", ms);
  return "{\n  \"driver_version\": \"550.54.15\",\n  \"time\": \"" + std::string(when) + frac +
         "\",\n  \"gpus\": [\n" + gpus + "\n  ]\n}\n";
}

TEST(GatewayReclaim, TheNewestPeriodAcrossNodesDecides) {
  // Two nodes per period, writing within a fraction of a second; the newest period has one
  // busy GPU: not idle.
  std::string text =
      doc(100, {0, 0}, 100) + doc(100, {1}, 400) + doc(160, {0, 0}, 800) + doc(161, {50}, 100);
  auto s = newest_sample(text, 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->time, 161);
  EXPECT_EQ(s->gpus, 3);
  EXPECT_FALSE(s->idle);
  s = newest_sample(doc(100, {0, 0}) + doc(100, {1}, 200) + doc(160, {2, 0}) + doc(160, {4.9}, 300),
                    5);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->idle);
  // One node sampling every second: its previous document is not part of the newest period.
  s = newest_sample(doc(200, {0}) + doc(201, {0}), 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->gpus, 1);
  // A document cut short (the sampler writing) ends the reading; what came before counts.
  std::string cut = doc(200, {0});
  s = newest_sample(doc(190, {0}) + cut.substr(0, cut.size() / 2), 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->time, 190);
  // A tail of the file that begins inside a document skips to the next.
  std::string first = doc(100, {50});
  s = newest_sample(first.substr(first.size() / 2) + doc(160, {0}), 5);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->time, 160);
  EXPECT_TRUE(s->idle);
  EXPECT_FALSE(newest_sample("", 5).has_value());
  EXPECT_FALSE(
      newest_sample("berth: error: gpu stats: no NVIDIA driver found under /\n", 5).has_value());
  // No GPU reported is not "idle".
  EXPECT_FALSE(newest_sample(R"({"time": "1970-01-01T00:00:05Z", "gpus": []})", 5)->idle);
}

TEST(GatewayReclaim, AJobIsFlaggedOnceAfterItsIdleTime) {
  ReclaimPolicy p;
  p.idle_for_s = 120;
  IdleTracker t;
  using V = IdleTracker::Verdict;
  EXPECT_EQ(t.observe(7, {0, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {60, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {100, 1, false}, p), V::kBusy);  // busy again: the clock restarts
  EXPECT_EQ(t.observe(7, {160, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {279, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {280, 1, true}, p), V::kFlag);
  EXPECT_EQ(t.observe(7, {340, 1, true}, p), V::kIdle);  // flagged once
  EXPECT_TRUE(t.flagged(7));
  // A cancelling policy: two sample periods after the flag, once.
  p.cancel = true;
  p.sample_interval_s = 60;
  EXPECT_EQ(t.observe(7, {399, 1, true}, p), V::kIdle);
  EXPECT_EQ(t.observe(7, {400, 1, true}, p), V::kCancel);
  EXPECT_EQ(t.observe(7, {460, 1, true}, p), V::kIdle);
  p.cancel = false;
  EXPECT_EQ(t.observe(8, {340, 1, false}, p), V::kBusy);
  EXPECT_EQ(t.flagged_count(), 1u);
  t.forget(7);
  EXPECT_TRUE(t.flagged(7));  // its record keeps the flag
  EXPECT_EQ(t.flagged_count(), 0u);
}

TEST(GatewayReclaim, TheSamplerAndTheNoticeInTheJobsScript) {
  ReclaimPolicy p;
  p.sample_interval_s = 30;
  std::string s =
      reclaim_watch_script("/usr/bin/berth", "/o/j.gpu", "/o/j.notice", "/o/j.err", p, 2);
  EXPECT_NE(
      s.find(
          "srun --overlap --mem=0 --ntasks-per-node=1 --quiet '/usr/bin/berth' gpu stats --json"),
      std::string::npos)
      << s;
  EXPECT_NE(s.find(">>'/o/j.gpu' 2>>'/o/j.gpu.log'"), std::string::npos) << s;
  EXPECT_NE(s.find("cat '/o/j.notice' >>'/o/j.err'"), std::string::npos) << s;
  // It waits a period a second at a time, while the script's process (srun) lives.
  EXPECT_NE(s.find("while [ $n -lt 30 ] && kill -0 $$ 2>/dev/null; do sleep 1;"), std::string::npos)
      << s;
  // On one node the batch step samples itself: no step to start.
  std::string one =
      reclaim_watch_script("/usr/bin/berth", "/o/j.gpu", "/o/j.notice", "/o/j.err", p, 1);
  EXPECT_NE(one.find("while kill -0 $$ 2>/dev/null; do '/usr/bin/berth' gpu stats $sel --json"),
            std::string::npos)
      << one;
  EXPECT_NE(one.find("sel=\"--gpus device=$SLURM_JOB_GPUS\""), std::string::npos) << one;
  EXPECT_TRUE(s.ends_with(") &\n")) << s;
}

TEST(GatewayReclaim, TheNewestSamplesListTheProcessesOnTheJobsGpus) {
  // Two nodes of the newest period (the older period's process is not listed); a process the
  // sampler could not read in /proc is not "known"; an older berth's document has no "node"
  // and no owners.
  auto node_doc = [](const char* node, const char* when, const char* procs) {
    return std::string("{\"node\": ") + node + ", \"time\": \"" + when +
           "\", \"gpus\": [{\"index\": 1, \"uuid\": \"GPU-b\", \"utilization\": {\"gpu\": 50},"
           " \"processes\": " +
           procs + "}]}\n";
  };
  std::string text =
      node_doc("\"n1\"", "2026-11-26T04:00:00.100Z", R"([{"pid": 9, "used_memory_mib": 1}])") +
      node_doc(
          "\"n1\"", "2026-11-26T04:01:00.100Z",
          R"([{"pid": 10, "used_memory_mib": 1, "uid": 1000, "user": "alice", "command": "python3",
                    "slurm_job_id": 42, "slurm_job_from": "slurmstepd"},
                   {"pid": 11, "used_memory_mib": null, "uid": null, "user": null, "command": null,
                    "slurm_job_id": null, "slurm_job_from": null}])") +
      node_doc("null", "2026-11-26T04:01:00.300Z", R"([{"pid": 12, "used_memory_mib": 5}])");
  auto s = newest_sample(text, 5);
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->processes.size(), 3u);
  const SampledProcess& a = s->processes[0];
  EXPECT_EQ(a.node, "n1");
  EXPECT_EQ(a.gpu_index, 1);
  EXPECT_EQ(a.gpu_uuid, "GPU-b");
  EXPECT_EQ(a.pid, 10u);
  EXPECT_TRUE(a.known);
  EXPECT_EQ(a.uid, 1000u);
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.command, "python3");
  EXPECT_EQ(a.slurm_job_id, 42);
  EXPECT_EQ(a.slurm_job_from, "slurmstepd");
  EXPECT_EQ(s->processes[1].pid, 11u);
  EXPECT_FALSE(s->processes[1].known);
  EXPECT_EQ(s->processes[2].pid, 12u);
  EXPECT_EQ(s->processes[2].node, "");
  EXPECT_FALSE(s->processes[2].known);
}

SampledProcess seen(unsigned pid, std::optional<int64_t> job, bool known = true,
                    const std::string& node = "n1", const std::string& command = "python3") {
  SampledProcess p;
  p.node = node;
  p.gpu_uuid = "GPU-a";
  p.pid = pid;
  p.known = known;
  p.uid = 1000;
  p.user = "alice";
  p.command = command;
  p.slurm_job_id = job;
  return p;
}

TEST(GatewayOrphans, AProcessOfNoRunningJobIsAnOrphan) {
  int asked = 0;
  auto running = [&asked](int64_t job) -> std::optional<bool> {
    ++asked;
    if (job == 5) return true;   // another job, running
    if (job == 6) return false;  // ended
    return std::nullopt;         // Slurm could not be asked
  };
  using V = GpuProcessVerdict;
  EXPECT_EQ(classify_gpu_process(seen(1, 42), 42, running), V::kHolders);
  EXPECT_EQ(asked, 0);  // the holder's own: Slurm is not asked
  EXPECT_EQ(classify_gpu_process(seen(1, 5), 42, running), V::kRunning);
  EXPECT_EQ(classify_gpu_process(seen(1, 6), 42, running), V::kOrphan);
  EXPECT_EQ(classify_gpu_process(seen(1, 7), 42, running), V::kUnknown);
  EXPECT_EQ(classify_gpu_process(seen(1, std::nullopt), 42, running), V::kOrphan);
  // Nothing read of it in /proc (ended meanwhile, or hidden): no alarm.
  EXPECT_EQ(classify_gpu_process(seen(1, std::nullopt, false), 42, running), V::kUnknown);
}

GpuOrphan orphan(unsigned pid, int64_t by, const std::string& node = "n1",
                 const std::string& command = "python3") {
  GpuOrphan o;
  o.process = seen(pid, std::nullopt, true, node, command);
  o.seen_by = by;
  o.seen_by_slurm_job = by + 100;
  o.reason = "no Slurm job";
  return o;
}

TEST(GatewayOrphans, TrackedFromFirstSightUntilNoLongerSeen) {
  OrphanTracker t;
  auto pids = [](const std::vector<GpuOrphan>& v) {
    std::vector<unsigned> out;
    out.reserve(v.size());
    for (const auto& o : v) out.push_back(o.process.pid);
    return out;
  };
  // Round 1: jobs 1 and 2 inspected; three orphans, all new.
  auto fresh = t.update({orphan(10, 1), orphan(11, 1), orphan(20, 2, "n2")}, {1, 2}, {1, 2}, 100);
  EXPECT_EQ(pids(fresh), (std::vector<unsigned>{10, 11, 20}));
  // Round 2: the same again: nothing new, first_seen kept, last_seen moves; 11 is gone.
  fresh = t.update({orphan(10, 1), orphan(20, 2, "n2")}, {1, 2}, {1, 2}, 160);
  EXPECT_TRUE(fresh.empty());
  auto all = t.list();
  ASSERT_EQ(pids(all), (std::vector<unsigned>{10, 20}));
  EXPECT_EQ(all[0].first_seen, 100);
  EXPECT_EQ(all[0].last_seen, 160);
  // Round 3: job 2's samples could not be read but it runs: its orphan stays as it was.
  fresh = t.update({orphan(10, 1)}, {1}, {1, 2}, 220);
  EXPECT_TRUE(fresh.empty());
  EXPECT_EQ(pids(t.list()), (std::vector<unsigned>{10, 20}));
  EXPECT_EQ(t.list()[1].last_seen, 160);
  // Round 4: job 2 ended; pid 10 is now another program: a new orphan.
  fresh = t.update({orphan(10, 1, "n1", "stress")}, {1}, {1}, 280);
  EXPECT_EQ(pids(fresh), (std::vector<unsigned>{10}));
  EXPECT_EQ(t.list()[0].first_seen, 280);
  EXPECT_EQ(t.count_by_node(), (std::map<std::string, int>{{"n1", 1}, {"n2", 0}}));
  // The same process seen through two jobs' samples counts once.
  fresh = t.update({orphan(30, 1), orphan(30, 3)}, {1, 3}, {1, 3}, 340);
  EXPECT_EQ(pids(fresh), (std::vector<unsigned>{30}));
  EXPECT_EQ(t.list().size(), 1u);
}

TEST(GatewayOrphans, JsonOfAnOrphan) {
  GpuOrphan o = orphan(4242, 7);
  o.process.gpu_index = 1;
  o.process.slurm_job_id = 66;
  o.process.slurm_job_from = "environ";
  o.reason = "Slurm job 66 is not running";
  o.first_seen = 100;
  o.last_seen = 160;
  EXPECT_EQ(orphan_json(o), nlohmann::json::parse(R"({
    "node": "n1", "gpu_index": 1, "gpu_uuid": "GPU-a", "pid": 4242, "uid": 1000,
    "user": "alice", "command": "python3", "slurm_job_id": 66, "slurm_job_from": "environ",
    "reason": "Slurm job 66 is not running", "first_seen": 100, "last_seen": 160,
    "seen_by": {"id": "7", "slurm_job_id": 107}})"));
  o.process.uid.reset();
  o.process.user.clear();
  o.process.slurm_job_id.reset();
  o.process.slurm_job_from.clear();
  nlohmann::json j = orphan_json(o);
  EXPECT_TRUE(j["uid"].is_null() && j["user"].is_null() && j["slurm_job_id"].is_null() &&
              j["slurm_job_from"].is_null())
      << j;
}

}  // namespace
}  // namespace berth::gateway

// The GPU sampler loop of a berthd batch script, run by a real /bin/sh: it must end with the
// script's process (srun, which the script execs), as nothing else ends it under
// proctrack/linuxproc.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gateway/reclaim.h"

namespace berth::gateway {
namespace {

TEST(GatewayReclaim, TheSamplerLoopEndsWithTheJobsScript) {
  char tmpl[] = "/tmp/berth-sampler-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::string berth = dir + "/berth";
  {
    std::ofstream f(berth);
    f << "#!/bin/sh\necho '{}'\n";
  }
  ::chmod(berth.c_str(), 0755);
  ReclaimPolicy p;
  p.sample_interval_s = 1;
  std::string script =
      reclaim_watch_script(berth, dir + "/j.gpu", dir + "/j.notice", dir + "/j.err", p, 1) +
      "exec sleep 1\n";
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setpgid(0, 0);  // a group of its own, for the cleanup below
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);  // reaped, as slurmstepd reaps the batch script
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // The loop holds the pipe's write end while it runs: end of file once it has ended. The
  // poll's bound only keeps a loop that never ends from hanging the test.
  bool eof = false;
  for (;;) {
    struct pollfd pfd = {out[0], POLLIN, 0};
    if (::poll(&pfd, 1, 30000) <= 0) break;
    char buf[256];
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n == 0) {
      eof = true;
      break;
    }
    if (n < 0) break;
  }
  ::close(out[0]);
  if (!eof) ::kill(-pid, SIGKILL);  // the loop left behind: not for ever
  EXPECT_TRUE(eof) << "the sampler loop outlived the job's script:\n" << script;
  std::string rm = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(rm.c_str()), 0);
}

}  // namespace
}  // namespace berth::gateway

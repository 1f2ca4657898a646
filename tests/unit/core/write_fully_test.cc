// Writing a whole buffer (core/write_fully.h, core/fs.h write_all()): through a pipe that takes
// a little at a time while signals interrupt the writer, and the error when nobody reads.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "core/fs.h"
#include "core/write_fully.h"

namespace berth {
namespace {

std::atomic<int> g_interrupts{0};
void count_interrupt(int) {
  ++g_interrupts;
}

TEST(WriteFully, ShortWritesAndInterruptedWritesLoseNothing) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  (void)::fcntl(fds[1], F_SETPIPE_SZ, 4096);  // the smallest pipe: many partial writes
  // A handler without SA_RESTART: a blocked write returns EINTR, or the bytes it took so far.
  struct sigaction sa = {}, old = {};
  sa.sa_handler = count_interrupt;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(::sigaction(SIGUSR1, &sa, &old), 0);

  std::string data;
  for (int i = 0; data.size() < (1u << 20); ++i) data += std::to_string(i) + ",";
  pthread_t writer = ::pthread_self();
  std::string got;
  std::thread reader([&] {
    char buf[1000];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      got.append(buf, static_cast<size_t>(n));
      ::pthread_kill(writer, SIGUSR1);  // lands while the writer waits for room, mostly
    }
  });
  bool ok = write_fully(fds[1], data.data(), data.size());
  int err = errno;
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  ::sigaction(SIGUSR1, &old, nullptr);
  ASSERT_TRUE(ok) << std::strerror(err);
  EXPECT_GT(g_interrupts.load(), 0);
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
}

TEST(WriteFully, AFailedWriteSaysWhy) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ::close(fds[0]);
  struct sigaction sa = {}, old = {};
  sa.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &sa, &old), 0);
  errno = 0;
  EXPECT_FALSE(write_fully(fds[1], "x", 1));
  EXPECT_EQ(errno, EPIPE);
  Status st = write_all(fds[1], "x", "the pipe");
  ::sigaction(SIGPIPE, &old, nullptr);
  ::close(fds[1]);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().sys_errno, EPIPE);
  EXPECT_EQ(st.error().message().rfind("write the pipe: ", 0), 0u) << st.error().message();
  EXPECT_TRUE(write_fully(-1, "", 0));  // nothing to write: no call at all
}

}  // namespace
}  // namespace berth

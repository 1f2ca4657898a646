#include "runtime/launcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/container_config.h"

namespace berth {
namespace {

TEST(LauncherEnv, CarriesOnlyLauncherVariables) {
  std::vector<std::string> caller = {
      "PATH=/bin", "PMI_FD=7",       "PMI_RANK=1", "PMIX_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
      "PMIBAD=1",  "SLURM_JOB_ID=3", "PMI_SIZE"};
  EXPECT_EQ(launcher_env(caller), (std::vector<std::string>{"PMI_FD=7", "PMI_RANK=1", "PMIX_RANK=1",
                                                            "OMPI_COMM_WORLD_SIZE=2"}));
}

TEST(KeptFds, CountAndPmiFd) {
  struct Case {
    int count;
    std::vector<std::string> env;
    std::vector<int> want;
  } cases[] = {
      {0, {}, {}},
      {2, {}, {3, 4}},
      {0, {"PMI_FD=9"}, {9}},
      {2, {"PMI_FD=4"}, {3, 4}},  // already among them
      {1, {"PMI_FD=2"}, {3}},     // 0-2 are the workload's anyway
      {0, {"A=1", "PMI_FD=12", "B=2"}, {12}},
  };
  for (const Case& c : cases) {
    auto got = kept_fds(c.count, c.env);
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_EQ(*got, c.want) << c.count;
  }
}

TEST(KeptFds, BadInputIsOneLine) {
  auto neg = kept_fds(-1, {});
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.error().message(),
            "run --preserve-fds -1: the count of descriptors to keep cannot be negative");
  auto bad = kept_fds(0, {"PMI_FD=x7"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "run PMI_FD=x7: PMI_FD must name a descriptor by its number");
}

TEST(KeptFds, CheckOpen) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  EXPECT_TRUE(check_fds_open({fds[0], fds[1]}).ok());
  ::close(fds[1]);
  auto st = check_fds_open({fds[0], fds[1]});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("descriptor " + std::to_string(fds[1])), std::string::npos);
  keep_across_exec({fds[0]});
  EXPECT_EQ(::fcntl(fds[0], F_GETFD) & FD_CLOEXEC, 0);
  ::close(fds[0]);
}

TEST(BuildSpecLauncher, CarriesPmiAndIpcHost) {
  RunOptions o;
  o.command = {"/app"};
  o.ipc_host = true;
  o.env = {"PMI_RANK=5"};  // -e wins over the launcher's
  HostContext h;
  h.environ = {"PMI_FD=6", "PMI_RANK=0", "HOME=/h"};
  auto s = build_spec(nlohmann::json::object(), "/rootfs", o, h, "root:x:0:0::/root:/bin/sh\n",
                      "root:x:0:\n");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->kept_fds, std::vector<int>{6});
  EXPECT_NE(std::find(s->env.begin(), s->env.end(), "PMI_FD=6"), s->env.end());
  EXPECT_NE(std::find(s->env.begin(), s->env.end(), "PMI_RANK=5"), s->env.end());
  ASSERT_EQ(s->volumes.size(), 1U);
  EXPECT_EQ(s->volumes[0].host, "/dev/shm");
  EXPECT_EQ(s->volumes[0].container, "/dev/shm");
  EXPECT_FALSE(s->volumes[0].read_only);
}

TEST(BuildSpecLauncher, MpiSharesTheHostsShmUnlessTold) {
  auto spec = [](void (*edit)(RunOptions&)) {
    RunOptions o;
    o.command = {"/app"};
    o.mpi = "*";
    edit(o);
    auto s = build_spec(nlohmann::json::object(), "/rootfs", o, HostContext{},
                        "root:x:0:0::/root:/bin/sh\n", "root:x:0:\n");
    EXPECT_TRUE(s.ok()) << s.error().message();
    return *s;
  };
  // --mpi alone: one container per rank meets the others in the host's /dev/shm.
  ContainerSpec s = spec([](RunOptions&) {});
  ASSERT_EQ(s.volumes.size(), 1U);
  EXPECT_EQ(s.volumes[0].host, "/dev/shm");
  EXPECT_TRUE(s.tmpfs.empty());
  // --ipc private or --shm-size win: a /dev/shm of the container's own.
  s = spec([](RunOptions& o) { o.ipc_private = true; });
  EXPECT_TRUE(s.volumes.empty());
  EXPECT_TRUE(s.ipc_namespace);
  s = spec([](RunOptions& o) { o.shm_size = "1m"; });
  EXPECT_TRUE(s.volumes.empty());
  ASSERT_EQ(s.tmpfs.size(), 1U);
  EXPECT_EQ(s.tmpfs[0].container, "/dev/shm");
  // No --mpi: the private /dev/shm as before.
  s = spec([](RunOptions& o) { o.mpi.clear(); });
  EXPECT_TRUE(s.volumes.empty());
}

TEST(KeptFds, GapsBelowTheHighestBecomeDevNull) {
  // In a child: the test process's own descriptors stay as they are.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int file = ::open("/proc/self/exe", O_RDONLY);
    for (int fd : {20, 21, 22, 23, 25}) ::dup2(file, fd);  // 24 not open
    fill_kept_gaps({20, 23, 25});
    auto link = [](int fd) {
      char buf[256] = "";
      ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf - 1);
      return n < 0 ? std::string("closed") : std::string(buf, static_cast<size_t>(n));
    };
    bool ok = link(21) == "/dev/null" && link(22) == "/dev/null" && link(24) == "/dev/null" &&
              link(20) != "/dev/null" && link(23) != "/dev/null" && link(25) != "/dev/null" &&
              (::fcntl(24, F_GETFD) & FD_CLOEXEC) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace berth

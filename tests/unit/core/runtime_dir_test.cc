#include "core/runtime_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/fs.h"
#include "test_util.h"

namespace berth {
namespace {

/// Sets (or unsets, for nullptr) an environment variable for one test, putting it back after.
class EnvFor {
 public:
  EnvFor(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) saved_ = old;
    had_ = ::getenv(name) != nullptr;
    if (value == nullptr)
      ::unsetenv(name);
    else
      ::setenv(name, value, 1);
  }
  ~EnvFor() {
    if (had_)
      ::setenv(name_, saved_.c_str(), 1);
    else
      ::unsetenv(name_);
  }
  EnvFor(const EnvFor&) = delete;
  EnvFor& operator=(const EnvFor&) = delete;

 private:
  const char* name_;
  std::string saved_;
  bool had_ = false;
};

std::string per_user(const TempDir& site) {
  return site / ("berth-" + std::to_string(::getuid()));
}

TEST(RuntimeDir, ThePolicysFolderHoldsAFolderPerUser) {
  TempDir tmp("runtime");
  EnvFor unset("BERTH_RUNTIME_DIR", nullptr);
  auto dir = make_runtime_dir("mount squashfs", tmp.path);
  ASSERT_TRUE(dir.ok()) << dir.error().message();
  EXPECT_EQ(*dir, per_user(tmp));
  struct stat st;
  ASSERT_EQ(::stat(dir->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  // $BERTH_RUNTIME_DIR still names the folder itself.
  EnvFor own("BERTH_RUNTIME_DIR", (tmp / "own").c_str());
  EXPECT_EQ(*make_runtime_dir("mount squashfs", tmp.path), tmp / "own");
}

TEST(RuntimeDir, AFolderTakenFirstSendsTheUserToAPrivateOne) {
  TempDir site("runtime"), home("home");
  EnvFor unset("BERTH_RUNTIME_DIR", nullptr), cache("XDG_CACHE_HOME", nullptr),
      h("HOME", home.path.c_str());
  // Another user's folder under the user's name (as root the test makes one of uid 65534; as
  // a user it cannot, and a file of that name takes the name as well).
  std::string taken = per_user(site);
  if (::getuid() == 0) {
    ASSERT_EQ(::mkdir(taken.c_str(), 0777), 0);
    ASSERT_EQ(::chown(taken.c_str(), 65534, 65534), 0);
  } else {
    ASSERT_TRUE(write_file_atomic(taken, "squatted\n").ok());
  }
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  std::string want = home / (".cache/berth/run-" + std::string(host));
  EXPECT_EQ(runtime_dir_path(site.path), want);
  auto dir = make_runtime_dir("mount squashfs", site.path);
  ASSERT_TRUE(dir.ok()) << dir.error().message();
  EXPECT_EQ(*dir, want);
  struct stat st;
  ASSERT_EQ(::lstat(want.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_uid, ::getuid());
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  // $XDG_CACHE_HOME, where set, holds it instead of ~/.cache.
  EnvFor xdg("XDG_CACHE_HOME", (home / "xdg").c_str());
  EXPECT_EQ(runtime_dir_path(site.path), home / ("xdg/berth/run-" + std::string(host)));
}

TEST(RuntimeDir, WithNowhereElseTheErrorSaysWhatToSet) {
  TempDir site("runtime");
  EnvFor unset("BERTH_RUNTIME_DIR", nullptr), cache("XDG_CACHE_HOME", nullptr), h("HOME", nullptr);
  ASSERT_TRUE(write_file_atomic(per_user(site), "squatted\n").ok());
  auto dir = make_runtime_dir("mount squashfs", site.path);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().message(), "mount squashfs " + per_user(site) +
                                       ": the runtime folder is a file or a symlink, not a folder");
  EXPECT_NE(dir.error().hint.find("BERTH_RUNTIME_DIR"), std::string::npos);
}

}  // namespace
}  // namespace berth

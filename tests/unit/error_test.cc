#include "core/error.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "core/fs.h"
#include "core/sha256.h"
#include "test_util.h"

namespace berth {
namespace {

Result<int> half(int x) {
  if (x % 2) return make_error("halve", std::to_string(x), "odd number");
  return x / 2;
}

Result<int> quarter(int x) {
  int h = BERTH_TRY(half(x));
  return BERTH_TRY(half(h));
}

TEST(Error, MessageNamesOpSubjectAndErrno) {
  Error e = sys_error("open", "/nope", ENOENT);
  EXPECT_EQ(e.message(), "open /nope: No such file or directory");
}

TEST(Error, ContextOutermostFirst) {
  Error e = make_error("GET", "http://r/v2/", "manifest unknown");
  e.http_status = 404;
  e = std::move(e).with_context("fetching manifest").with_context("pull r/a:b");
  EXPECT_EQ(e.message(), "pull r/a:b: fetching manifest: GET http://r/v2/: manifest unknown (HTTP 404)");
}

TEST(Error, TryPropagates) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "halve 3: odd number");
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_digest(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_digest("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, ValidateDigest) {
  EXPECT_TRUE(validate_digest(sha256_digest("x")).ok());
  EXPECT_FALSE(validate_digest("sha512:abcd").ok());
  EXPECT_FALSE(validate_digest("sha256:ABC").ok());
  EXPECT_FALSE(validate_digest("sha256:" + std::string(64, 'g')).ok());
}

TEST(Fs, AtomicWriteAndRead) {
  TempDir t("fs");
  std::string dir = t / "tree";
  ASSERT_TRUE(make_dirs(dir + "/a/b").ok());
  ASSERT_TRUE(write_file_atomic(dir + "/a/b/f", "hello").ok());
  EXPECT_EQ(*read_file(dir + "/a/b/f"), "hello");
  auto missing = read_file(dir + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().sys_errno, ENOENT);
  ASSERT_TRUE(remove_tree(dir).ok());
  EXPECT_FALSE(path_exists(dir));
}

TEST(Fs, TryLockSeesBusyLock) {
  TempDir t("lock");
  std::string path = t / "lock";
  auto a = FileLock::acquire(path);
  ASSERT_TRUE(a.ok());
  // flock locks belong to the open file description, so a second open in
  // the same process conflicts just as another process would.
  auto b = FileLock::try_acquire(path);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->held());
}

}  // namespace
}  // namespace berth

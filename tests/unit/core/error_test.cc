#include "core/error.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "core/fs.h"
#include "core/sha256.h"
#include "image/store.h"
#include "test_util.h"

namespace berth {
namespace {

Result<int> half(int x) {
  if (x % 2) return make_error("parse", std::to_string(x), "odd number");
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
  EXPECT_EQ(e.message(),
            "pull r/a:b: fetching manifest: GET http://r/v2/: manifest unknown (HTTP 404)");
}

TEST(Error, TryPropagates) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "parse 3: odd number");
}

TEST(Error, CodeFollowsErrno) {
  EXPECT_EQ(sys_error("open", "/x", ENOENT).code, ErrorCode::kNotFound);
  EXPECT_EQ(sys_error("mkdir", "/x", EEXIST).code, ErrorCode::kExists);
  EXPECT_EQ(sys_error("open", "/x", EACCES).code, ErrorCode::kPermission);
  EXPECT_EQ(sys_error("flock", "/x", EAGAIN).code, ErrorCode::kBusy);
  EXPECT_EQ(sys_error("unshare", "", ENOSYS).code, ErrorCode::kUnsupported);
  EXPECT_EQ(sys_error("write", "/x", ENOSPC).code, ErrorCode::kOther);
  errno = ENOTDIR;
  Error now = sys_error("stat", "/x/y");  // reads errno itself
  EXPECT_EQ(now.sys_errno, ENOTDIR);
  EXPECT_EQ(now.code, ErrorCode::kNotFound);
}

TEST(Error, CodeOfMadeAndHttpErrors) {
  EXPECT_EQ(make_error("parse", "x", "bad").code, ErrorCode::kOther);
  EXPECT_EQ(make_error("find image", "x", "no such image", ErrorCode::kNotFound).code,
            ErrorCode::kNotFound);
  Error h = http_error("GET", "http://r/v2/", 500, "boom");
  EXPECT_EQ(h.code, ErrorCode::kHttp);
  EXPECT_EQ(h.http_status, 500);
  // The code survives context and hints, which only change the words.
  Error wrapped = std::move(h).with_context("pull r/a").with_hint("try later");
  EXPECT_EQ(wrapped.code, ErrorCode::kHttp);
}

TEST(Error, NoSuchImageIsACodeNotAPhrase) {
  // cli's protect and run decide on the code; the words stay what users read.
  std::string home = ::testing::TempDir() + "/berth-error-store-" + std::to_string(::getpid());
  auto store = Store::open(home);
  ASSERT_TRUE(store.ok()) << store.error().message();
  auto image = store->find_image("alpine:3");
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(image.error().message(), "find image alpine:3: no such image");
  (void)remove_tree(home);  // best effort: a leftover temp folder is harmless
}

TEST(Op, WordsFromTheVocabulary) {
  constexpr Op open = "open";
  static_assert(open.word() == "open");
  static_assert(Op("GET") != Op("POST"));
  static_assert(Op().word().empty());
  EXPECT_EQ(Error().op, Op());
  // The vocabulary has no word twice (an Op compares by its place in the list).
  std::set<std::string_view> seen;
  for (std::string_view w : kOpWords) EXPECT_TRUE(seen.insert(w).second) << '"' << w << '"';
}

TEST(Op, RendersTodaysMessages) {
  // Operations that were once spelled out in the op text read the same from op + subject.
  EXPECT_EQ(make_error("exec:", "\"foo\"", "executable file not found in $PATH").message(),
            "exec: \"foo\": executable file not found in $PATH");
  EXPECT_EQ(sys_error("mount", "proc on /proc", EPERM).message(),
            "mount proc on /proc: Operation not permitted");
  EXPECT_EQ(sys_error("device node", "/dev/x", ENOENT).with_context("CDI spec.yaml").message(),
            "CDI spec.yaml: device node /dev/x: No such file or directory");
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

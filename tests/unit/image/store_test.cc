#include "image/store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "core/dir.h"
#include "test_util.h"

namespace berth {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path;
    auto s = Store::open(root_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_.emplace(std::move(*s));
  }

  Store& store() { return *store_; }
  std::string tmp_path(const std::string& digest, const char* ext) {
    return root_ + "/tmp/" + std::string(digest_hex(digest)) + ext;
  }
  /// Names of files in tmp/ that end in `suffix`.
  std::vector<std::string> tmp_files(const std::string& suffix) {
    std::vector<std::string> out;
    for (const std::string& n : list_dir(root_ + "/tmp"))
      if (n.ends_with(suffix)) out.push_back(n);
    return out;
  }
  /// Stores `data` as a blob and returns its digest.
  std::string blob(const std::string& data) {
    std::string d = sha256_digest(data);
    EXPECT_TRUE(store().put_blob(d, data).ok());
    return d;
  }
  /// An image whose blobs are all present; `layers` are blob contents.
  ImageRecord image(const std::string& name, const std::string& config,
                    const std::vector<std::string>& layers) {
    ImageRecord r;
    r.name = name;
    r.config_digest = blob(config);
    for (const auto& l : layers) r.layers.push_back(blob(l));
    r.manifest_digest = blob("manifest of " + name + " " + config);
    r.manifest_media_type = "application/vnd.oci.image.manifest.v1+json";
    r.platform = {"linux", "amd64", ""};
    r.size = 42;
    r.pulled = "2024-01-01T00:00:00Z";
    return r;
  }

  TempDir tmp_{"store"};
  std::string root_;
  std::optional<Store> store_;
};

TEST_F(StoreTest, OpenCreatesLayoutAndVersion) {
  struct stat st;
  for (const char* sub : {"", "/blobs/sha256", "/tmp"}) {
    ASSERT_EQ(stat((root_ + sub).c_str(), &st), 0) << sub;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << sub;
  }
  EXPECT_EQ(*read_file(root_ + "/version"), "{\"version\":1}\n");
  EXPECT_TRUE(Store::open(root_).ok());  // reopening an existing store works
}

TEST_F(StoreTest, OpenRefusesUnknownLayoutVersion) {
  ASSERT_TRUE(write_file_atomic(root_ + "/version", "{\"version\":2}").ok());
  auto s = Store::open(root_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(
      s.error().message(),
      "open store " + root_ + ": layout version 2 is not supported (this berth knows version 1)");
  EXPECT_FALSE(s.error().hint.empty());

  ASSERT_TRUE(write_file_atomic(root_ + "/version", "garbage").ok());
  s = Store::open(root_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().subject, root_ + "/version");
}

TEST_F(StoreTest, PutReadAndHasBlob) {
  std::string d = sha256_digest("hello");
  EXPECT_FALSE(store().has_blob(d));
  ASSERT_TRUE(store().put_blob(d, "hello").ok());
  EXPECT_TRUE(store().has_blob(d));
  EXPECT_EQ(store().blob_path(d), root_ + "/blobs/sha256/" + std::string(digest_hex(d)));
  EXPECT_EQ(*store().read_blob(d), "hello");
  struct stat st;
  ASSERT_EQ(stat(store().blob_path(d).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_TRUE(store().put_blob(d, "hello").ok());  // idempotent
  EXPECT_TRUE(tmp_files(".partial").empty());
  EXPECT_TRUE(tmp_files(".lock").empty());  // lock files go once the blob is published
}

TEST_F(StoreTest, PutBlobRefusesWrongBytes) {
  std::string d = sha256_digest("hello");
  auto st = store().put_blob(d, "hellO");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(),
            "verify " + d + ": digest mismatch: got " + sha256_digest("hellO"));
  EXPECT_FALSE(store().has_blob(d));
  EXPECT_FALSE(store().put_blob("sha256:abc", "x").ok());
}

TEST_F(StoreTest, ReadBlobRefusesHugeBlobs) {
  std::string big((16 << 20) + 1, 'x');
  std::string d = blob(big);
  auto r = store().read_blob(d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().detail, "too large to read whole (16777217 bytes, limit 16 MiB)");
  auto missing = store().read_blob(sha256_digest("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().sys_errno, ENOENT);
}

TEST_F(StoreTest, BeginBlobOnPresentBlobGivesNothing) {
  std::string d = blob("present");
  auto w = store().begin_blob(d, 7);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->has_value());
  EXPECT_FALSE(store().begin_blob("sha256:XYZ", 1).ok());
}

TEST_F(StoreTest, InterruptedDownloadResumes) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  std::string d = sha256_digest(data);
  size_t half = data.size() / 2;
  {
    auto w = store().begin_blob(d, static_cast<int64_t>(data.size()));
    ASSERT_TRUE(w.ok() && w->has_value());
    EXPECT_EQ((*w)->offset(), 0u);
    ASSERT_TRUE((*w)->write(data.data(), half).ok());
  }  // dropped without commit, as a killed pull would
  EXPECT_FALSE(store().has_blob(d));
  auto w = store().begin_blob(d, static_cast<int64_t>(data.size()));
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->offset(), half);
  ASSERT_TRUE((*w)->write(data.data() + half, data.size() - half).ok());
  ASSERT_TRUE((*w)->commit().ok());
  EXPECT_EQ(*store().read_blob(d), data);
  EXPECT_TRUE(tmp_files(".partial").empty());
  EXPECT_TRUE(tmp_files(".lock").empty());
}

TEST_F(StoreTest, ReplayGivesTheBytesAResumedDownloadHas) {
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 13 + (i >> 11));
  std::string d = sha256_digest(data);
  size_t part = (size_t{2} << 20) + 12345;  // more than one chunk of replay
  {
    auto w = store().begin_blob(d, static_cast<int64_t>(data.size()));
    ASSERT_TRUE(w.ok() && w->has_value());
    std::string none;
    ASSERT_TRUE((*w)->replay([&](const char* p, size_t n) { none.append(p, n); }).ok());
    EXPECT_EQ(none, "");
    ASSERT_TRUE((*w)->write(data.data(), part).ok());
  }  // a killed pull
  auto w = store().begin_blob(d, static_cast<int64_t>(data.size()));
  ASSERT_TRUE(w.ok() && w->has_value());
  std::string seen;
  ASSERT_TRUE((*w)->replay([&](const char* p, size_t n) { seen.append(p, n); }).ok());
  EXPECT_EQ(seen, data.substr(0, part));
  ASSERT_TRUE((*w)->write(data.data() + part, data.size() - part).ok());
  ASSERT_TRUE((*w)->commit().ok());
  EXPECT_EQ(*store().read_blob(d), data);
}

/// The diff_id recorded on a file (kDiffIdRecordAttr), or "" when none is.
std::string recorded_diff_id(const std::string& path) {
  char value[100] = {};
  ssize_t n = ::getxattr(path.c_str(), kDiffIdRecordAttr, value, sizeof value);
  return n > 0 ? std::string(value, static_cast<size_t>(n)) : "";
}

TEST_F(StoreTest, CommitPublishesTheDiffIdRecordWithTheBlob) {
  std::string data = "layer bytes";
  std::string d = sha256_digest(data);
  std::string id = sha256_digest("its uncompressed tar");
  auto w = store().begin_blob(d, static_cast<int64_t>(data.size()));
  ASSERT_TRUE(w.ok() && w->has_value());
  ASSERT_TRUE((*w)->write(data.data(), data.size()).ok());
  (*w)->record_diff_id(id);
  ASSERT_TRUE((*w)->commit().ok());
  std::string got = recorded_diff_id(store().blob_path(d));
  if (got.empty() && errno == ENOTSUP) GTEST_SKIP() << "this file system keeps no user attributes";
  EXPECT_EQ(got, id);
  // Bytes stored without a record (put_blob: manifests, configs, loads) carry none.
  std::string plain = blob("config bytes");
  EXPECT_EQ(recorded_diff_id(store().blob_path(plain)), "");
  EXPECT_EQ(errno, ENODATA);
}

TEST_F(StoreTest, ADiffIdRecordIsDroppedByRestart) {
  std::string data = "the right bytes";
  std::string d = sha256_digest(data);
  auto w = store().begin_blob(d, static_cast<int64_t>(data.size()));
  ASSERT_TRUE(w.ok() && w->has_value());
  (*w)->record_diff_id(sha256_digest("of other bytes"));
  ASSERT_TRUE((*w)->restart().ok());
  ASSERT_TRUE((*w)->write(data.data(), data.size()).ok());
  ASSERT_TRUE((*w)->commit().ok());
  EXPECT_EQ(recorded_diff_id(store().blob_path(d)), "");
}

TEST_F(StoreTest, OversizedPartialIsRestarted) {
  std::string d = sha256_digest("abc");
  ASSERT_TRUE(write_file_atomic(tmp_path(d, ".partial"), "abcdef").ok());
  auto w = store().begin_blob(d, 3);
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->offset(), 0u);
  ASSERT_TRUE((*w)->write("abc", 3).ok());
  ASSERT_TRUE((*w)->commit().ok());
  EXPECT_EQ(*store().read_blob(d), "abc");
}

TEST_F(StoreTest, WriterRefusesToGrowPastExpectedSize) {
  std::string d = sha256_digest("abc");
  auto w = store().begin_blob(d, 3);
  ASSERT_TRUE(w.ok() && w->has_value());
  ASSERT_TRUE((*w)->write("ab", 2).ok());
  auto st = (*w)->write("cd", 2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "write blob " + d + ": blob larger than the manifest says");
  ASSERT_TRUE((*w)->write("c", 1).ok());  // nothing of the refused write was kept
  EXPECT_TRUE((*w)->commit().ok());
}

TEST_F(StoreTest, RestartDropsWrittenBytes) {
  std::string d = sha256_digest("good");
  auto w = store().begin_blob(d, 4);
  ASSERT_TRUE(w.ok() && w->has_value());
  ASSERT_TRUE((*w)->write("ba", 2).ok());
  ASSERT_TRUE((*w)->restart().ok());
  EXPECT_EQ((*w)->offset(), 0u);
  ASSERT_TRUE((*w)->write("good", 4).ok());
  EXPECT_TRUE((*w)->commit().ok());
  EXPECT_EQ(*store().read_blob(d), "good");
}

TEST_F(StoreTest, TamperedBytesAreNeverPublished) {
  std::string d = sha256_digest("good");
  auto w = store().begin_blob(d, 4);
  ASSERT_TRUE(w.ok() && w->has_value());
  ASSERT_TRUE((*w)->write("evil", 4).ok());
  auto st = (*w)->commit();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(),
            "verify " + d + ": digest mismatch: got " + sha256_digest("evil"));
  EXPECT_FALSE(store().has_blob(d));
  EXPECT_FALSE(path_exists(tmp_path(d, ".partial")));
  EXPECT_FALSE((*w)->commit().ok());  // the writer is closed
}

TEST_F(StoreTest, TamperedPartialIsCaughtAfterResume) {
  std::string d = sha256_digest("good data");
  ASSERT_TRUE(write_file_atomic(tmp_path(d, ".partial"), "bad ").ok());
  auto w = store().begin_blob(d, 9);
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->offset(), 4u);
  ASSERT_TRUE((*w)->write("data", 4).ok() && (*w)->write("!", 1).ok());
  EXPECT_FALSE((*w)->commit().ok());
  EXPECT_FALSE(store().has_blob(d));
  EXPECT_FALSE(path_exists(tmp_path(d, ".partial")));
}

TEST_F(StoreTest, ShortBlobKeepsPartialForResume) {
  std::string d = sha256_digest("abcdef");
  auto w = store().begin_blob(d, 6);
  ASSERT_TRUE(w.ok() && w->has_value());
  ASSERT_TRUE((*w)->write("abc", 3).ok());
  auto st = (*w)->commit();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().detail, "size mismatch: expected 6 bytes, got 3");
  EXPECT_FALSE(store().has_blob(d));
  EXPECT_TRUE(path_exists(tmp_path(d, ".partial")));
}

TEST_F(StoreTest, ConcurrentPullsOfOneBlobWriteItOnce) {
  std::string data(size_t{64} * 1024, 'q');
  for (size_t i = 0; i < data.size(); i += 97) data[i] = static_cast<char>(i);
  std::string d = sha256_digest(data);
  constexpr int kChildren = 5;
  constexpr int kWrote = 10, kFound = 11;
  std::vector<pid_t> pids;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 1;
      auto s = Store::open(root_);
      if (s.ok()) {
        auto w = s->begin_blob(d, static_cast<int64_t>(data.size()));
        if (w.ok() && !w->has_value()) {
          rc = s->has_blob(d) ? kFound : 2;
        } else if (w.ok()) {
          rc = kWrote;
          for (size_t off = 0; off < data.size(); off += 8192) {
            if (!(*w)->write(data.data() + off, std::min<size_t>(8192, data.size() - off)).ok())
              rc = 3;
            usleep(2000);
          }
          if (!(*w)->commit().ok()) rc = 4;
        }
      }
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int wrote = 0, found = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    int rc = WEXITSTATUS(status);
    EXPECT_TRUE(rc == kWrote || rc == kFound) << "child exit " << rc;
    wrote += rc == kWrote;
    found += rc == kFound;
  }
  EXPECT_EQ(wrote, 1);
  EXPECT_EQ(found, kChildren - 1);
  EXPECT_EQ(*store().read_blob(d), data);
  EXPECT_TRUE(tmp_files(".partial").empty());
  EXPECT_TRUE(tmp_files(".lock").empty());
}

TEST_F(StoreTest, IndexAddReplaceAndList) {
  EXPECT_TRUE(store().list_images()->empty());
  ImageRecord b = image("docker.io/library/busybox:latest", "cfg-b", {"layer-b"});
  ImageRecord a = image("docker.io/library/alpine:latest", "cfg-a", {"layer-a"});
  ASSERT_TRUE(store().add_image(b).ok());
  ASSERT_TRUE(store().add_image(a).ok());
  auto list = store().list_images();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, a.name);
  EXPECT_EQ((*list)[1].name, b.name);
  EXPECT_EQ((*list)[0].layers, a.layers);
  EXPECT_EQ((*list)[0].platform, a.platform);
  EXPECT_EQ((*list)[0].pulled, a.pulled);

  ImageRecord a2 = image(a.name, "cfg-a2", {"layer-a2"});
  ASSERT_TRUE(store().add_image(a2).ok());
  list = store().list_images();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].config_digest, a2.config_digest);

  ImageRecord bad = a;
  bad.layers.push_back("sha256:../../etc");
  EXPECT_FALSE(store().add_image(bad).ok());
}

TEST_F(StoreTest, FindByNameShortNameIdAndDigest) {
  ImageRecord a = image("docker.io/library/alpine:latest", "cfg-a", {"l1"});
  ImageRecord app = image("127.0.0.1:5000/app:latest", "cfg-app", {"l2"});
  app.index_digest = blob("an index");
  ASSERT_TRUE(store().add_image(a).ok());
  ASSERT_TRUE(store().add_image(app).ok());

  EXPECT_EQ(store().find_image("docker.io/library/alpine:latest")->name, a.name);
  EXPECT_EQ(store().find_image("alpine")->name, a.name);
  EXPECT_EQ(store().find_image("alpine:latest")->name, a.name);
  EXPECT_EQ(store().find_image("127.0.0.1:5000/app")->name, app.name);
  EXPECT_EQ(store().find_image(a.config_digest)->name, a.name);
  EXPECT_EQ(store().find_image(a.short_id())->name, a.name);
  EXPECT_EQ(store().find_image(std::string(digest_hex(app.config_digest)).substr(0, 4))->name,
            app.name);
  EXPECT_EQ(store().find_image(app.manifest_digest)->name, app.name);
  EXPECT_EQ(store().find_image(app.index_digest)->name, app.name);
  EXPECT_EQ(a.short_id(), std::string(digest_hex(a.config_digest)).substr(0, 12));

  auto missing = store().find_image("ubuntu");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "find image ubuntu: no such image");
  EXPECT_EQ(missing.error().hint, "see 'berth images'");
  EXPECT_FALSE(store().find_image(std::string(digest_hex(a.config_digest)).substr(0, 3)).ok());
}

TEST_F(StoreTest, AmbiguousIdPrefix) {
  // Find two configs whose digests share the first four hex digits.
  std::map<std::string, std::string> by_prefix;
  std::string c1, c2;
  for (int i = 0; c1.empty(); ++i) {
    std::string c = "config " + std::to_string(i);
    std::string p(digest_hex(sha256_digest(c)).substr(0, 4));
    auto [it, fresh] = by_prefix.emplace(p, c);
    if (!fresh) c1 = it->second, c2 = c;
  }
  ASSERT_TRUE(store().add_image(image("r.io/one:1", c1, {})).ok());
  ASSERT_TRUE(store().add_image(image("r.io/two:1", c2, {})).ok());
  std::string prefix(digest_hex(sha256_digest(c1)).substr(0, 4));
  auto r = store().find_image(prefix);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "find image " + prefix + ": image ID prefix " + prefix + " is ambiguous");
  EXPECT_EQ(store().find_image(std::string(digest_hex(sha256_digest(c2)).substr(0, 12)))->name,
            "r.io/two:1");
}

TEST_F(StoreTest, RemoveKeepsSharedBlobsUntilLastUser) {
  ImageRecord one = image("r.io/one:1", "cfg-1", {"base", "only-one"});
  ImageRecord two = image("r.io/two:1", "cfg-2", {"base", "only-two"});
  ASSERT_TRUE(store().add_image(one).ok());
  ASSERT_TRUE(store().add_image(two).ok());
  std::string base = sha256_digest("base");

  auto removed = store().remove_image("r.io/one:1");
  ASSERT_TRUE(removed.ok()) << removed.error().message();
  EXPECT_EQ(removed->names, std::vector<std::string>{"r.io/one:1"});
  EXPECT_EQ(removed->blobs_deleted, 3u);  // its own layer, config and manifest
  EXPECT_TRUE(store().has_blob(base));
  EXPECT_FALSE(store().has_blob(sha256_digest("only-one")));
  EXPECT_FALSE(store().has_blob(one.config_digest));
  EXPECT_FALSE(store().has_blob(one.manifest_digest));
  EXPECT_TRUE(store().has_blob(two.manifest_digest));
  EXPECT_FALSE(store().find_image("r.io/one:1").ok());

  removed = store().remove_image(two.short_id());
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->names, std::vector<std::string>{"r.io/two:1"});
  EXPECT_EQ(removed->blobs_deleted, 4u);  // now the shared base layer goes too
  EXPECT_FALSE(store().has_blob(base));
  EXPECT_FALSE(store().has_blob(two.config_digest));
  EXPECT_TRUE(store().list_images()->empty());
  EXPECT_FALSE(store().remove_image("r.io/two:1").ok());
}

TEST_F(StoreTest, RemoveByNameKeepsOtherTagsAndByIdRemovesAll) {
  ImageRecord a = image("r.io/app:1", "same config", {"l"});
  ImageRecord b = a;
  b.name = "r.io/app:latest";
  ImageRecord other = image("r.io/other:1", "other config", {"m"});
  for (const auto* r : {&a, &b, &other}) ASSERT_TRUE(store().add_image(*r).ok());

  ASSERT_EQ(store().remove_image("r.io/app:1")->names, std::vector<std::string>{"r.io/app:1"});
  EXPECT_TRUE(store().has_blob(a.config_digest));  // still tagged r.io/app:latest
  ASSERT_TRUE(store().add_image(a).ok());
  auto removed = store().remove_image(a.config_digest);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->names, (std::vector<std::string>{"r.io/app:1", "r.io/app:latest"}));
  EXPECT_FALSE(store().has_blob(a.config_digest));
  EXPECT_FALSE(store().has_blob(sha256_digest("l")));
  EXPECT_TRUE(store().has_blob(other.config_digest));
  EXPECT_EQ(store().list_images()->size(), 1u);
}

TEST_F(StoreTest, TagAddsANameAndRefusesAMissingImage) {
  ImageRecord a = image("docker.io/library/app:1", "cfg-a", {"l1"});
  ASSERT_TRUE(store().add_image(a).ok());
  auto t = store().tag_image("app:1", "example.org/team/app:stable");
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->name, "example.org/team/app:stable");
  EXPECT_EQ(store().find_image("example.org/team/app:stable")->config_digest, a.config_digest);
  EXPECT_EQ(store().list_images()->size(), 2u);
  auto missing = store().tag_image("nope:1", "x:1");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "find image nope:1: no such image");
  EXPECT_FALSE(store().tag_image("app:1", "Bad Name").ok());
  EXPECT_EQ(store().list_images()->size(), 2u);
}

TEST_F(StoreTest, TheRegistryAnImageCameFromIsKeptAndTagged) {
  ImageRecord pulled = image("127.0.0.1:5000/app:1", "cfg-p", {"l1"});
  pulled.registry = "127.0.0.1:5000";
  ImageRecord imported = image("127.0.0.1:5000/local:1", "cfg-i", {"l2"});
  imported.registry = "";
  ImageRecord older = image("r.io/old:1", "cfg-o", {"l3"});  // nullopt: before the field
  for (const auto* r : {&pulled, &imported, &older}) ASSERT_TRUE(store().add_image(*r).ok());
  EXPECT_EQ(store().find_image("127.0.0.1:5000/app:1")->registry, "127.0.0.1:5000");
  EXPECT_EQ(store().find_image("127.0.0.1:5000/local:1")->registry, "");
  EXPECT_EQ(store().find_image("r.io/old:1")->registry, std::nullopt);
  // A tag keeps where the image came from; an older record's goes by its name.
  EXPECT_EQ(store().tag_image("127.0.0.1:5000/app:1", "mine:1")->registry, "127.0.0.1:5000");
  EXPECT_EQ(store().find_image("mine:1")->registry, "127.0.0.1:5000");
  EXPECT_EQ(store().tag_image("r.io/old:1", "old:2")->registry, "r.io");
  EXPECT_EQ(store().tag_image("127.0.0.1:5000/local:1", "local:2")->registry, "");
}

TEST_F(StoreTest, ProtectedImageIsNotRemoved) {
  ImageRecord a = image("docker.io/library/app:1", "cfg-a", {"l1"});
  ASSERT_TRUE(store().add_image(a).ok());
  ASSERT_TRUE(store().tag_image("app:1", "app:2").ok());
  auto names = store().set_protected("app:1", true);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"docker.io/library/app:1"});
  auto rm = store().remove_image("app:1");
  ASSERT_FALSE(rm.ok());
  EXPECT_EQ(rm.error().message(), "rmi app:1: image docker.io/library/app:1 is protected");
  EXPECT_EQ(rm.error().hint, "run 'berth unprotect docker.io/library/app:1' first");
  EXPECT_FALSE(store().remove_image(a.short_id()).ok());  // by ID it would take app:1 too
  ASSERT_TRUE(store().remove_image("app:2").ok());        // the other tag goes
  EXPECT_TRUE(store().has_blob(a.layers[0]));
  ASSERT_TRUE(store().add_image(a).ok());  // a new pull of the name keeps the mark
  EXPECT_TRUE(store().find_image("app:1")->is_protected);
  // Another image under the protected name (import, load, pull) is refused, as tag refuses it.
  auto replaced = store().add_image(image("docker.io/library/app:1", "cfg-b", {"l2"}));
  ASSERT_FALSE(replaced.ok());
  EXPECT_EQ(replaced.error().message(),
            "replace image docker.io/library/app:1: image docker.io/library/app:1 is protected");
  EXPECT_EQ(store().find_image("app:1")->config_digest, a.config_digest);
  ASSERT_TRUE(store().set_protected("app:1", false).ok());
  EXPECT_TRUE(store().remove_image("app:1").ok());
}

TEST_F(StoreTest, CorruptIndexIsReportedWithItsPath) {
  ASSERT_TRUE(write_file_atomic(root_ + "/images.json", "{\"version\":1,\"images\":[{").ok());
  auto r = store().list_images();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().op.word(), "read image index");
  EXPECT_EQ(r.error().subject, root_ + "/images.json");
  EXPECT_NE(r.error().message().find("corrupt"), std::string::npos);
  EXPECT_FALSE(store().find_image("alpine").ok());
  EXPECT_FALSE(store().add_image(image("r.io/a:1", "c", {})).ok());

  ASSERT_TRUE(
      write_file_atomic(root_ + "/images.json", "{\"version\":1,\"images\":[{\"name\":1}]}").ok());
  r = store().list_images();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().subject, root_ + "/images.json");

  ASSERT_TRUE(write_file_atomic(root_ + "/images.json", "{\"version\":7,\"images\":[]}").ok());
  r = store().list_images();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "read image index " + root_ + "/images.json: version 7 is not supported");
}

TEST_F(StoreTest, VerifyFindsMissingAndCorruptBlobs) {
  ImageRecord a = image("r.io/a:1", "cfg", {"layer one", "layer two"});
  EXPECT_TRUE(store().verify(a)->empty());

  std::string l1 = a.layers[0], l2 = a.layers[1];
  ASSERT_EQ(unlink(store().blob_path(l1).c_str()), 0);
  ASSERT_EQ(chmod(store().blob_path(l2).c_str(), 0644), 0);
  ASSERT_TRUE(write_file_atomic(store().blob_path(l2), "tampered").ok());
  auto problems = store().verify(a);
  ASSERT_TRUE(problems.ok());
  ASSERT_EQ(problems->size(), 2u);
  EXPECT_EQ((*problems)[0].digest, l1);
  EXPECT_EQ((*problems)[0].what, "missing");
  EXPECT_EQ((*problems)[1].digest, l2);
  EXPECT_EQ((*problems)[1].what, "digest mismatch: got " + sha256_digest("tampered"));
}

TEST_F(StoreTest, LayerInputsPairEachBlobWithItsDiffId) {
  ImageRecord a = image("r.io/a:1", R"({"rootfs":{"type":"layers","diff_ids":["sha256:1111"]}})",
                        {"layer one"});
  auto in = store().layer_inputs(a, "create");
  ASSERT_TRUE(in.ok()) << in.error().message();
  ASSERT_EQ(in->size(), 1u);
  EXPECT_EQ((*in)[0].path, store().blob_path(a.layers[0]));
  EXPECT_EQ((*in)[0].digest, a.layers[0]);
  EXPECT_EQ((*in)[0].diff_id, "sha256:1111");
  EXPECT_TRUE((*in)[0].use_diff_id_record);  // a store of one's own
}

TEST_F(StoreTest, LayerInputsCountDiffIdsAgainstLayers) {
  ImageRecord a = image("r.io/a:1", R"({"rootfs":{"type":"layers","diff_ids":[]}})", {"layer one"});
  auto in = store().layer_inputs(a, "create");
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.error().message(),
            "create r.io/a:1: the image config lists 0 diff_ids for 1 layers");
}

TEST_F(StoreTest, LayerInputsReportAConfigThatDoesNotParse) {
  ImageRecord a = image("r.io/a:1", "[]", {"layer one"});
  auto in = store().layer_inputs(a, "unpack");
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.error().message(), "unpack r.io/a:1: parse config " + a.config_digest +
                                      ": malformed image config: not a JSON object");
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

TEST_F(StoreTest, ASquashedImageUsesItsFileNotItsLayers) {
  ImageRecord plain = image("a:1", "config a", {"shared layer", "own layer"});
  ImageRecord sq = image("b:1", "config b", {"shared layer", "b layer"});
  sq.squash = blob("squashfs of b");
  EXPECT_EQ(image_blobs(sq),
            (std::vector<std::string>{sq.manifest_digest, sq.config_digest, sq.squash}));
  ASSERT_TRUE(store().add_image(plain).ok());
  ASSERT_TRUE(store().add_image(sq).ok());
  // The record keeps the squash digest and its listed layers.
  auto back = store().find_image("b:1");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->squash, sq.squash);
  EXPECT_EQ(back->layers, sq.layers);
  // Its layer blobs are garbage unless another record uses them.
  std::string b_layer = sq.layers[1];
  auto removed = store().remove_image("a:1");
  ASSERT_TRUE(removed.ok()) << removed.error().message();
  EXPECT_FALSE(store().has_blob(plain.layers[0]));  // the shared layer: only b lists it
  EXPECT_TRUE(store().has_blob(b_layer));           // never named by b's record: gc's
  EXPECT_TRUE(store().has_blob(sq.squash));
  // Nothing needing layers gets them.
  auto layers = store().layer_inputs(*back, "unpack");
  ASSERT_FALSE(layers.ok());
  EXPECT_EQ(layers.error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(layers.error().message(),
            "unpack b:1: the image is stored as one squashfs file (pull --squash), without its "
            "layers");
  removed = store().remove_image("b:1");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->blobs_deleted, 3u);
  EXPECT_FALSE(store().has_blob(sq.squash));
}

TEST_F(StoreTest, ASquashedRecordWithABadLayerDigestIsRefused) {
  ImageRecord sq = image("b:1", "config b", {"b layer"});
  sq.squash = blob("squashfs of b");
  sq.layers.push_back("sha256:../../etc");
  EXPECT_FALSE(store().add_image(sq).ok());
}

TEST_F(StoreTest, ASharedStoreIsReadOnlyAndChecksWhatItReads) {
  ImageRecord sq = image("b:1", "config b", {"b layer"});
  sq.squash = blob("squashfs of b");
  ASSERT_TRUE(store().add_image(sq).ok());
  std::vector<std::string> before = list_dir(root_);
  auto shared = Store::open_shared(root_);
  ASSERT_TRUE(shared.ok()) << shared.error().message();
  EXPECT_TRUE(shared->shared());
  auto rec = shared->find_image("b:1");
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  EXPECT_TRUE(shared->read_blob(rec->config_digest).ok());
  EXPECT_EQ(list_dir(root_), before);  // no lock or other file made
  // A shared store's layers are unpacked with their diff_ids hashed, never by a record.
  ImageRecord layered =
      image("l:1", R"({"rootfs":{"type":"layers","diff_ids":["sha256:1"]}})", {"l layer"});
  auto in = shared->layer_inputs(layered, "create");
  ASSERT_TRUE(in.ok()) << in.error().message();
  EXPECT_FALSE((*in)[0].use_diff_id_record);

  // A file others may write is refused, named, in one line.
  std::string config = shared->blob_path(rec->config_digest);
  ASSERT_EQ(::chmod(config.c_str(), 0664), 0);
  auto read = shared->read_blob(rec->config_digest);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().code, ErrorCode::kPermission);
  EXPECT_EQ(read.error().message(),
            "central store " + config + ": refused: writable by group or others");
  ASSERT_EQ(::chmod(config.c_str(), 0444), 0);
  ASSERT_EQ(::chmod((root_ + "/images.json").c_str(), 0666), 0);
  auto listed = shared->list_images();
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().message(),
            "central store " + root_ + "/images.json: refused: writable by group or others");
  ASSERT_EQ(::chmod((root_ + "/images.json").c_str(), 0644), 0);
  ASSERT_EQ(::chmod((root_ + "/blobs").c_str(), 0775), 0);
  auto again = Store::open_shared(root_);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().message(),
            "central store " + root_ + "/blobs: refused: writable by group or others");
  ASSERT_EQ(::chmod((root_ + "/blobs").c_str(), 0755), 0);
  // A folder that is no store at all: its missing layout is an error, and nothing is made.
  TempDir empty("not-a-store");
  auto none = Store::open_shared(empty.path);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(list_dir(empty.path).empty());
}

}  // namespace
}  // namespace berth

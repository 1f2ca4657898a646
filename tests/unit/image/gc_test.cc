// What gc takes for garbage, and that it takes nothing whose owner still runs.
#include "image/gc.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "core/dir.h"
#include "core/sha256.h"
#include "runtime/containers.h"
#include "test_util.h"

namespace berth {
namespace {

std::string d(const std::string& s) {
  return sha256_digest(s);
}

ImageRecord record(const std::string& name, const std::string& config,
                   const std::vector<std::string>& layers, const std::string& index = "") {
  ImageRecord r;
  r.name = name;
  r.manifest_digest = d("manifest " + name + config);
  r.index_digest = index.empty() ? "" : d(index);
  r.config_digest = d(config);
  for (const auto& l : layers) r.layers.push_back(d(l));
  return r;
}

TEST(UnreferencedBlobs, EveryKindOfReferenceKeepsABlob) {
  ImageRecord a = record("r.io/a:1", "cfg-a", {"base", "only-a", "base"}, "index-a");
  ImageRecord b = record("r.io/b:1", "cfg-b", {"base"});
  std::vector<std::string> stored = {
      d("stray-2"), a.manifest_digest, a.index_digest,  a.config_digest, d("base"),
      d("only-a"),  b.manifest_digest, b.config_digest, d("stray-1"),    d("stray-1")};
  std::vector<std::string> want = {d("stray-1"), d("stray-2")};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(unreferenced_blobs(stored, {a, b}), want);
  // Without b, only its own blobs go: the layer it shares with a stays.
  std::vector<std::string> without_b = unreferenced_blobs(stored, {a});
  std::vector<std::string> want_b = {d("stray-1"), d("stray-2"), b.manifest_digest,
                                     b.config_digest};
  std::sort(want_b.begin(), want_b.end());
  EXPECT_EQ(without_b, want_b);
  // No image: everything stored is unreferenced, each once.
  EXPECT_EQ(unreferenced_blobs(stored, {}).size(), 9u);
  EXPECT_TRUE(unreferenced_blobs({}, {a, b}).empty());
}

TEST(PruneCandidates, ProtectedAndUsedImagesStayDanglingOnesGoWithoutAll) {
  ImageRecord tagged = record("r.io/app:1", "cfg-1", {"l"});
  ImageRecord by_digest = record("r.io/app@" + d("m"), "cfg-2", {"l"});
  ImageRecord used = record("r.io/used:1", "cfg-3", {"l"});
  ImageRecord used_by_digest = record("r.io/used@" + d("n"), "cfg-3", {"l"});
  ImageRecord kept = record("r.io/kept@" + d("o"), "cfg-4", {"l"});
  kept.is_protected = true;
  std::vector<ImageRecord> all = {tagged, by_digest, used, used_by_digest, kept};
  std::set<std::string> used_ids = {used.config_digest};
  auto names = [](const std::vector<ImageRecord>& rs) {
    std::vector<std::string> out;
    out.reserve(rs.size());
    for (const auto& r : rs) out.push_back(r.name);
    return out;
  };
  EXPECT_EQ(names(prune_candidates(all, used_ids, false)),
            std::vector<std::string>{by_digest.name});
  EXPECT_EQ(names(prune_candidates(all, used_ids, true)),
            (std::vector<std::string>{tagged.name, by_digest.name}));
  EXPECT_TRUE(prune_candidates({}, {}, true).empty());
}

class GcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::open(tmp_.path);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_.emplace(std::move(*s));
  }
  Store& store() { return *store_; }
  std::string blob(const std::string& data) {
    std::string digest = d(data);
    EXPECT_TRUE(store().put_blob(digest, data).ok());
    return digest;
  }
  /// An image record whose blobs are stored.
  ImageRecord stored(const std::string& name, const std::string& config,
                     const std::vector<std::string>& layers) {
    ImageRecord r = record(name, config, layers);
    blob("manifest " + name + config);
    blob(config);
    for (const auto& l : layers) blob(l);
    r.manifest_media_type = "application/vnd.oci.image.manifest.v1+json";
    return r;
  }
  std::set<std::string> tmp_names() {
    auto v = list_dir(tmp_ / "tmp");
    return {v.begin(), v.end()};
  }
  TempDir tmp_{"gc"};
  std::optional<Store> store_;
};

TEST_F(GcTest, ReplacingANameReleasesTheOldImagesBlobs) {
  ImageRecord old = stored("r.io/app:1", "cfg-old", {"base", "old-layer"});
  ASSERT_TRUE(store().add_image(old).ok());
  ImageRecord now = stored("r.io/app:1", "cfg-new", {"base", "new-layer"});
  std::optional<ImageRecord> replaced;
  ASSERT_TRUE(store().add_image(now, &replaced).ok());
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->config_digest, old.config_digest);

  // While a pull holds the store, nothing is released (it may rely on these blobs).
  {
    FileLock pin = *store().pin();
    EXPECT_EQ(*store().release_blobs({*replaced}), 0u);
    EXPECT_TRUE(store().has_blob(old.config_digest));
  }
  EXPECT_EQ(*store().release_blobs({*replaced}), 3u);  // manifest, config, its own layer
  EXPECT_FALSE(store().has_blob(old.config_digest));
  EXPECT_FALSE(store().has_blob(d("old-layer")));
  EXPECT_TRUE(store().has_blob(d("base")));  // the new image uses it
  for (const auto& b : image_blobs(now)) EXPECT_TRUE(store().has_blob(b)) << b;
}

TEST_F(GcTest, UnreferencedBlobFilesAreOnlyDeletedUnderTheSweepLock) {
  ImageRecord img = stored("r.io/app:1", "cfg", {"layer"});
  ASSERT_TRUE(store().add_image(img).ok());
  std::string stray = blob("a refused pull's layer");
  write_text(tmp_ / "blobs/sha256/not-a-digest", "stranger");
  auto found = unreferenced_blob_files(store());
  ASSERT_TRUE(found.ok()) << found.error().message();
  ASSERT_EQ(found->size(), 1u);
  EXPECT_EQ((*found)[0].digest, stray);
  EXPECT_EQ((*found)[0].bytes, 22);
  EXPECT_EQ((*found)[0].path, store().blob_path(stray));

  FileLock none;
  EXPECT_EQ(remove_blobs(*found, none).error().message(),
            "gc: blobs may be deleted only under the store's sweep lock");
  {
    FileLock pin = *store().pin();  // a pull in progress: the sweep lock is not to be had
    EXPECT_FALSE(store().sweep_lock(false)->held());
  }
  FileLock sweep = *store().sweep_lock(false);
  ASSERT_TRUE(sweep.held());
  ASSERT_TRUE(remove_blobs(*found, sweep).ok());
  EXPECT_FALSE(store().has_blob(stray));
  EXPECT_TRUE(path_exists(tmp_ / "blobs/sha256/not-a-digest"));  // not ours: left alone
  for (const auto& b : image_blobs(img)) EXPECT_TRUE(store().has_blob(b));
}

TEST_F(GcTest, SweepTakesOnlyWhatNoLiveProcessHolds) {
  std::string dead_hex(64, 'a'), live_hex(64, 'b');
  write_text(tmp_ / ("tmp/" + dead_hex + ".partial"), "12345");
  write_text(tmp_ / ("tmp/" + dead_hex + ".lock"), "");
  write_text(tmp_ / ("tmp/" + live_hex + ".partial"), "123");
  FileLock download = *FileLock::acquire(tmp_ / ("tmp/" + live_hex + ".lock"));
  write_text(tmp_ / "tmp/stage-dead00/f0", "staged bytes");
  write_text(tmp_ / "tmp/stage-dead00/lock", "");
  write_text(tmp_ / "tmp/stage-live00/f0", "x");
  FileLock staging = *FileLock::acquire(tmp_ / "tmp/stage-live00/lock");
  ASSERT_EQ(::mkdir((tmp_ / "tmp/.new-young0").c_str(), 0755), 0);  // not locked yet: in use
  write_text(tmp_ / "images.json.tmp.99999.0", "{half");

  auto dry = sweep_tmp(store(), true);
  ASSERT_TRUE(dry.ok()) << dry.error().message();
  std::set<std::string> before = tmp_names();
  std::map<std::string, std::pair<int64_t, bool>> seen;  // path -> bytes, in use
  for (const Leftover& l : *dry) seen[l.path] = {l.bytes, l.in_use};
  using P = std::pair<int64_t, bool>;
  EXPECT_EQ(seen, (std::map<std::string, P>{
                      {tmp_ / ("tmp/" + dead_hex + ".partial"), P{5, false}},
                      {tmp_ / ("tmp/" + live_hex + ".partial"), P{3, true}},
                      {tmp_ / "tmp/stage-dead00", P{12, false}},
                      {tmp_ / "tmp/stage-live00", P{1, true}},
                      {tmp_ / "tmp/.new-young0", P{0, true}},
                      {tmp_ / "images.json.tmp.99999.0", P{5, false}},
                  }));
  EXPECT_EQ(tmp_names(), before);  // a dry run removes nothing, makes nothing
  EXPECT_TRUE(path_exists(tmp_ / "images.json.tmp.99999.0"));

  auto swept = sweep_tmp(store(), false);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(tmp_names(), (std::set<std::string>{live_hex + ".partial", live_hex + ".lock",
                                                "stage-live00", ".new-young0"}));
  EXPECT_FALSE(path_exists(tmp_ / "images.json.tmp.99999.0"));
  // Once its owner is gone, the rest goes too.
  download = FileLock();
  staging = FileLock();
  ASSERT_TRUE(sweep_tmp(store(), false).ok());
  EXPECT_EQ(tmp_names(), std::set<std::string>{".new-young0"});
}

TEST_F(GcTest, AVersionTemporaryGoesOnceAMinuteOld) {
  // A first open killed between writing the layout version and renaming it into place.
  write_text(tmp_ / "version.tmp.99999.0", "{\"version\":1}\n");
  write_text(tmp_ / "version.tmp.99998.0", "{\"version\":1}\n");  // being written now
  struct timespec old[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (tmp_ / "version.tmp.99999.0").c_str(), old, 0), 0);
  auto dry = sweep_tmp(store(), true);
  ASSERT_TRUE(dry.ok()) << dry.error().message();
  std::map<std::string, bool> seen;  // path -> in use
  for (const Leftover& l : *dry)
    if (l.kind == LeftoverKind::kTempFile) seen[l.path] = l.in_use;
  EXPECT_EQ(seen, (std::map<std::string, bool>{{tmp_ / "version.tmp.99999.0", false},
                                               {tmp_ / "version.tmp.99998.0", true}}));
  EXPECT_TRUE(path_exists(tmp_ / "version.tmp.99999.0"));
  ASSERT_TRUE(sweep_tmp(store(), false).ok());
  EXPECT_FALSE(path_exists(tmp_ / "version.tmp.99999.0"));
  EXPECT_TRUE(path_exists(tmp_ / "version.tmp.99998.0"));
  EXPECT_TRUE(path_exists(tmp_ / "version"));
}

TEST_F(GcTest, ContainerLeftoversGoOnlyWhenTheirOwnerIsGone) {
  auto cs = ContainerStore::open(tmp_.path);
  ASSERT_TRUE(cs.ok());
  std::string dead(64, 'c'), live(64, 'd'), real(64, 'e');
  write_text(tmp_ / ("containers/.tmp-" + dead + "/rootfs/etc/motd"), "half made\n");
  write_text(tmp_ / ("containers/.tmp-" + live + "/rootfs/etc/motd"), "x");
  FileLock creating = *FileLock::acquire(tmp_ / ("containers/.tmp-" + live + ".lock"));
  write_text(tmp_ / ("containers/" + real + "/container.json"),
             R"({"id":")" + real + R"(","image":"x","image_id":"y"})");
  write_text(tmp_ / ("containers/" + real + "/container.json.tmp.4242.0"), "{");
  ASSERT_EQ(
      ::symlink(("../containers/" + std::string(64, 'f')).c_str(), (tmp_ / "names/gone").c_str()),
      0);
  ASSERT_EQ(::symlink(("../containers/" + real).c_str(), (tmp_ / "names/here").c_str()), 0);

  auto dry = cs->sweep(true);
  ASSERT_TRUE(dry.ok()) << dry.error().message();
  std::map<std::string, std::pair<LeftoverKind, bool>> seen;
  for (const Leftover& l : *dry) seen[l.path] = {l.kind, l.in_use};
  using P = std::pair<LeftoverKind, bool>;
  EXPECT_EQ(seen, (std::map<std::string, P>{
                      {tmp_ / ("containers/.tmp-" + dead), P{LeftoverKind::kContainer, false}},
                      {tmp_ / ("containers/.tmp-" + live), P{LeftoverKind::kContainer, true}},
                      {tmp_ / ("containers/" + real + "/container.json.tmp.4242.0"),
                       P{LeftoverKind::kTempFile, false}},
                      {tmp_ / "names/gone", P{LeftoverKind::kName, false}},
                  }));
  EXPECT_TRUE(path_exists(tmp_ / ("containers/.tmp-" + dead)));
  EXPECT_FALSE(path_exists(tmp_ / ("containers/.tmp-" + dead + ".lock")));  // no trace

  ASSERT_TRUE(cs->sweep(false).ok());
  auto left = list_dir(tmp_ / "containers");
  EXPECT_EQ(left, (std::vector<std::string>{".tmp-" + live, ".tmp-" + live + ".lock", real}));
  EXPECT_EQ(list_dir(tmp_ / ("containers/" + real)), std::vector<std::string>{"container.json"});
  EXPECT_EQ(list_dir(tmp_ / "names"), std::vector<std::string>{"here"});
}

TEST(FileLockTest, ALockFileUnlinkedUnderItsLockIsNotHeldByTheNextWaiter) {
  TempDir tmp("lock");
  std::string path = tmp / "x.lock";
  FileLock first = *FileLock::acquire(path);
  std::optional<FileLock> second;
  std::thread waiter([&] { second.emplace(*FileLock::acquire(path)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the waiter is in flock now
  ASSERT_EQ(::unlink(path.c_str()), 0);  // as gc and a published blob's writer do
  first = FileLock();
  waiter.join();
  // The waiter holds the file the path names, so that a newcomer contends with it.
  struct stat held, named;
  ASSERT_EQ(::fstat(second->fd(), &held), 0);
  ASSERT_EQ(::stat(path.c_str(), &named), 0);
  EXPECT_EQ(held.st_ino, named.st_ino);
  EXPECT_FALSE(FileLock::try_acquire(path)->held());
}

}  // namespace
}  // namespace berth

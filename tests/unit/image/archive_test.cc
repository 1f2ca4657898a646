// import, load and save at the store level: the image/import.h, image/load.h, image/save.h
// and image/staging.h contracts, with archives made by TarWriter.
#include "image/load.h"
#include "image/save.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>

#include "core/dir.h"
#include "core/sha256.h"
#include "image/import.h"
#include "image/search.h"
#include "image/staging.h"
#include "image/tar_writer.h"
#include "test_util.h"

namespace berth {
namespace {

using nlohmann::json;

/// Writes a tar to `path` through `fill`.
void write_tar(const std::string& path, const std::function<void(TarWriter&)>& fill) {
  UniqueFd fd = *open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
  auto w = TarWriter::open(fd.get(), path);
  ASSERT_TRUE(w.ok());
  fill(*w);
  ASSERT_TRUE(w->finish().ok());
}

std::string rootfs_tar_bytes(const std::string& dir, const std::string& motd) {
  std::string path = dir + "/rootfs-src.tar";
  write_tar(path, [&](TarWriter& w) {
    ASSERT_TRUE(w.add_dir("etc").ok());
    ASSERT_TRUE(w.add_bytes("etc/motd", motd).ok());
    ASSERT_TRUE(w.add_bytes("bin/tool", "#!/bin/sh\n", 0755).ok());
  });
  return *read_file(path);
}

class ArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path;
    store_.emplace(*Store::open(dir_ + "/a"));
    other_.emplace(*Store::open(dir_ + "/b"));
  }

  std::string file(const std::string& name, const std::string& data) {
    std::string p = dir_ + "/" + name;
    EXPECT_TRUE(write_file_atomic(p, data).ok());
    return p;
  }
  Result<ImageRecord> import_file(Store& s, const std::string& path, const std::string& name,
                                  std::vector<std::string> changes = {}) {
    UniqueFd fd = *open_file(path, O_RDONLY);
    ImportOptions o;
    o.changes = std::move(changes);
    o.platform = {"linux", "amd64", ""};
    return import_rootfs(s, fd.get(), path, *parse_reference(name), o);
  }
  Result<std::vector<ImageRecord>> load_file(Store& s, const std::string& path) {
    UniqueFd fd = *open_file(path, O_RDONLY);
    return load_archive(s, fd.get(), path);
  }
  /// Entries of the store's tmp/ that start with `prefix`.
  std::vector<std::string> tmp_entries(const Store& s, const std::string& prefix) {
    std::vector<std::string> out;
    for (const std::string& n : list_dir(s.root() + "/tmp"))
      if (n.starts_with(prefix)) out.push_back(n);
    return out;
  }
  json config_of(const Store& s, const ImageRecord& r) {
    return json::parse(*s.read_blob(r.config_digest));
  }

  TempDir tmp_{"archive"};
  std::string dir_;
  std::optional<Store> store_, other_;
};

TEST(ApplyChange, DockerfileInstructions) {
  json c = json::object();
  ASSERT_TRUE(apply_change(c, "ENV A=1 B=\"two words\"").ok());
  ASSERT_TRUE(apply_change(c, "ENV A=3").ok());
  ASSERT_TRUE(apply_change(c, "env C value with spaces").ok());
  EXPECT_EQ(c["Env"], json({"A=3", "B=two words", "C=value with spaces"}));
  ASSERT_TRUE(apply_change(c, "CMD [\"/bin/sh\", \"-c\", \"echo hi\"]").ok());
  EXPECT_EQ(c["Cmd"], json({"/bin/sh", "-c", "echo hi"}));
  ASSERT_TRUE(apply_change(c, "ENTRYPOINT exec tool --flag").ok());
  EXPECT_EQ(c["Entrypoint"], json({"/bin/sh", "-c", "exec tool --flag"}));
  ASSERT_TRUE(apply_change(c, "WORKDIR /srv").ok());
  ASSERT_TRUE(apply_change(c, "USER 1000:1000").ok());
  ASSERT_TRUE(apply_change(c, "LABEL org.example=yes").ok());
  ASSERT_TRUE(apply_change(c, "EXPOSE 80 53/udp").ok());
  EXPECT_EQ(c["WorkingDir"], "/srv");
  EXPECT_EQ(c["User"], "1000:1000");
  EXPECT_EQ(c["Labels"]["org.example"], "yes");
  EXPECT_TRUE(c["ExposedPorts"].contains("80/tcp"));
  EXPECT_TRUE(c["ExposedPorts"].contains("53/udp"));
  auto bad = apply_change(c, "RUN make");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "change RUN make: unknown or unsupported instruction 'RUN'");
  EXPECT_EQ(apply_change(c, "ENV").error().detail, "ENV needs an argument");
}

TEST_F(ArchiveTest, ImportMakesAOneLayerImage) {
  std::string tar = rootfs_tar_bytes(dir_, "hello\n");
  auto rec = import_file(*store_, file("rootfs.tar", tar), "example/app:1", {"ENV A=1"});
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  EXPECT_EQ(rec->name, "docker.io/example/app:1");
  ASSERT_EQ(rec->layers.size(), 1u);
  EXPECT_EQ(rec->layers[0], sha256_digest(tar));
  json config = config_of(*store_, *rec);
  EXPECT_EQ(config["rootfs"]["diff_ids"], json({sha256_digest(tar)}));
  EXPECT_EQ(config["config"]["Env"], json({"A=1"}));
  EXPECT_EQ(config["os"], "linux");
  EXPECT_EQ(config["history"][0]["created_by"], "berth import");
  EXPECT_FALSE(config["created"].get<std::string>().empty());
  json manifest = json::parse(*store_->read_blob(rec->manifest_digest));
  EXPECT_EQ(manifest["layers"][0]["mediaType"], "application/vnd.oci.image.layer.v1.tar");
  EXPECT_TRUE(store_->verify(*rec)->empty());
  EXPECT_TRUE(tmp_entries(*store_, "stage-").empty());  // the staging area went away
}

TEST_F(ArchiveTest, ImportRefusesBadTarballsAndLeavesNothing) {
  std::string escaping = dir_ + "/escape.tar";
  write_tar(escaping, [](TarWriter& w) { ASSERT_TRUE(w.add_bytes("../evil", "x").ok()); });
  auto r = import_file(*store_, escaping, "bad:1");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().message().ends_with(": entry \"../evil\" escapes the root"))
      << r.error().message();
  std::string tar = rootfs_tar_bytes(dir_, std::string(20000, 'x'));
  auto cut = import_file(*store_, file("cut.tar", tar.substr(0, 12000)), "bad:2");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message().find("runcated"), std::string::npos) << cut.error().message();
  EXPECT_FALSE(import_file(*store_, file("empty.tar", ""), "bad:3").ok());
  EXPECT_TRUE(store_->list_images()->empty());
  EXPECT_TRUE(tmp_entries(*store_, "stage-").empty());
}

TEST_F(ArchiveTest, AbandonedStagingIsSweptAndALiveOneKept) {
  ASSERT_TRUE(make_dirs(store_->root() + "/tmp/stage-dead01").ok());
  file("a/tmp/stage-dead01/f0", "half a layer");
  auto live = Staging::create(*store_);
  ASSERT_TRUE(live.ok());
  EXPECT_FALSE(path_exists(store_->root() + "/tmp/stage-dead01"));
  auto second = Staging::create(*store_);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(path_exists(live->dir()));  // its lock is held: not abandoned
}

TEST_F(ArchiveTest, SaveThenLoadRoundTrips) {
  auto rec = *import_file(*store_, file("rootfs.tar", rootfs_tar_bytes(dir_, "hi\n")),
                          "127.0.0.1:5000/team/app:2");
  auto tagged = store_->tag_image("127.0.0.1:5000/team/app:2", "app:latest");
  ASSERT_TRUE(tagged.ok()) << tagged.error().message();
  std::string out = dir_ + "/saved.tar";
  {
    UniqueFd fd = *open_file(out, O_WRONLY | O_CREAT | O_TRUNC);
    ASSERT_TRUE(save_archive(*store_, {rec, *tagged}, fd.get(), out).ok());
  }
  auto loaded = load_file(*other_, out);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  ASSERT_EQ(loaded->size(), 2u);
  auto images = *other_->list_images();
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].name, "127.0.0.1:5000/team/app:2");
  EXPECT_EQ(images[1].name, "docker.io/library/app:latest");
  for (const auto& i : images) {
    EXPECT_EQ(i.manifest_digest, rec.manifest_digest);
    EXPECT_EQ(i.config_digest, rec.config_digest);
    EXPECT_EQ(i.layers, rec.layers);
    EXPECT_TRUE(other_->verify(i)->empty());
  }
}

TEST_F(ArchiveTest, LoadRefusesADigestMismatch) {
  std::string blob = "not what the name says";
  std::string wrong = sha256_digest("something else");
  std::string path = dir_ + "/lying.tar";
  write_tar(path, [&](TarWriter& w) {
    ASSERT_TRUE(w.add_bytes("oci-layout", R"({"imageLayoutVersion":"1.0.0"})").ok());
    ASSERT_TRUE(w.add_bytes("blobs/sha256/" + std::string(digest_hex(wrong)), blob).ok());
    json index = {{"schemaVersion", 2},
                  {"manifests",
                   {{{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                     {"digest", wrong},
                     {"size", blob.size()}}}}};
    ASSERT_TRUE(w.add_bytes("index.json", index.dump()).ok());
  });
  auto r = load_file(*store_, path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "load " + path + ": blob " + wrong +
                                     ": digest mismatch: the archive holds " + sha256_digest(blob));
  EXPECT_TRUE(store_->list_images()->empty());
  EXPECT_FALSE(store_->has_blob(sha256_digest(blob)));
}

TEST_F(ArchiveTest, LoadsDockerSaveArchivesAndChecksDiffIds) {
  std::string layer = rootfs_tar_bytes(dir_, "from docker\n");
  auto make = [&](const std::string& diff_id) {
    json config = {{"architecture", "amd64"},
                   {"os", "linux"},
                   {"config", {{"Cmd", {"/bin/sh"}}}},
                   {"rootfs", {{"type", "layers"}, {"diff_ids", {diff_id}}}}};
    std::string text = config.dump();
    std::string path = dir_ + "/docker-" + std::string(digest_hex(diff_id)).substr(0, 6) + ".tar";
    write_tar(path, [&](TarWriter& w) {
      std::string cfg = std::string(digest_hex(sha256_digest(text))) + ".json";
      ASSERT_TRUE(w.add_bytes(cfg, text).ok());
      ASSERT_TRUE(w.add_bytes("0123abcd/layer.tar", layer).ok());
      json m = json::array({{{"Config", cfg},
                             {"RepoTags", {"busybox:latest", "example.org/x/busybox:1"}},
                             {"Layers", {"0123abcd/layer.tar"}}}});
      ASSERT_TRUE(w.add_bytes("manifest.json", m.dump()).ok());
    });
    return path;
  };
  std::string bad = sha256_digest("another layer");
  auto r = load_file(*store_, make(bad));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("layer 1: digest mismatch: the config says " + bad),
            std::string::npos)
      << r.error().message();
  EXPECT_TRUE(store_->list_images()->empty());

  auto ok = load_file(*store_, make(sha256_digest(layer)));
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].name, "docker.io/library/busybox:latest");
  EXPECT_EQ((*ok)[1].name, "example.org/x/busybox:1");
  EXPECT_EQ((*ok)[0].layers, std::vector<std::string>{sha256_digest(layer)});
  EXPECT_TRUE(store_->verify((*ok)[0])->empty());
}

TEST_F(ArchiveTest, LoadRefusesAConfigOfTheWrongShape) {
  // A number where the os belongs used to throw out of load (an uncaught JSON type error).
  std::string layer = rootfs_tar_bytes(dir_, "x\n");
  json config = {{"architecture", "amd64"},
                 {"os", 7},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", {sha256_digest(layer)}}}}};
  std::string text = config.dump();
  std::string cfg = std::string(digest_hex(sha256_digest(text))) + ".json";
  std::string path = dir_ + "/odd-config.tar";
  write_tar(path, [&](TarWriter& w) {
    ASSERT_TRUE(w.add_bytes(cfg, text).ok());
    ASSERT_TRUE(w.add_bytes("l/layer.tar", layer).ok());
    json m = json::array({{{"Config", cfg}, {"RepoTags", {"odd:1"}}, {"Layers", {"l/layer.tar"}}}});
    ASSERT_TRUE(w.add_bytes("manifest.json", m.dump()).ok());
  });
  auto r = load_file(*store_, path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "load " + path + ": parse config " + sha256_digest(text) +
                                     ": malformed image config: os is not a string");
  EXPECT_TRUE(store_->list_images()->empty());
}

TEST_F(ArchiveTest, LoadRefusesGarbageAndTruncatedArchives) {
  std::string path = dir_ + "/rootfs.tar";
  write_tar(path, [](TarWriter& w) { ASSERT_TRUE(w.add_bytes("etc/motd", "x").ok()); });
  auto rec = *import_file(*store_, path, "fine:1");
  std::string saved = dir_ + "/saved.tar";
  {
    UniqueFd fd = *open_file(saved, O_WRONLY | O_CREAT | O_TRUNC);
    ASSERT_TRUE(save_archive(*store_, {rec}, fd.get(), saved).ok());
  }
  EXPECT_TRUE(load_file(*other_, saved).ok());
  EXPECT_FALSE(load_file(*other_, file("garbage.tar", "this is not a tar archive at all")).ok());
  std::string half = read_file(saved)->substr(0, 1500);
  auto cut = load_file(*other_, file("half.tar", half));
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(other_->list_images()->size(), 1u);
}

TEST(Annotations, NamesFromIndexEntries) {
  EXPECT_EQ(name_from_annotations(
                {{kContainerdNameAnnotation, "docker.io/library/a:1"}, {kRefNameAnnotation, "1"}}),
            "docker.io/library/a:1");
  EXPECT_EQ(name_from_annotations({{kRefNameAnnotation, "example.org/a:2"}}), "example.org/a:2");
  EXPECT_EQ(name_from_annotations({{kRefNameAnnotation, "latest"}}), "");
  EXPECT_EQ(name_from_annotations(nullptr), "");
  std::string id = sha256_digest("config");
  EXPECT_EQ(unnamed_image_name(id, "v1"),
            "localhost/" + std::string(digest_hex(id)).substr(0, 12) + ":v1");
  EXPECT_EQ(unnamed_image_name(id, "no good!"),
            "localhost/" + std::string(digest_hex(id)).substr(0, 12) + ":latest");
}

TEST(Search, SplitsTermsAndFiltersCatalogs) {
  EXPECT_EQ(split_search_term("127.0.0.1:5000/busy"),
            (std::pair<std::string, std::string>{"127.0.0.1:5000", "busy"}));
  EXPECT_EQ(split_search_term("localhost/x"),
            (std::pair<std::string, std::string>{"localhost", "x"}));
  EXPECT_EQ(split_search_term("team/app"),
            (std::pair<std::string, std::string>{"docker.io", "team/app"}));
  std::vector<std::string> repos = {"e2e/busybox", "lib/BusyTool", "other/alpine"};
  EXPECT_EQ(filter_catalog(repos, "busy", 10),
            (std::vector<std::string>{"e2e/busybox", "lib/BusyTool"}));
  EXPECT_EQ(filter_catalog(repos, "busy", 1), (std::vector<std::string>{"e2e/busybox"}));
  EXPECT_EQ(filter_catalog(repos, "", 10).size(), 3u);
}

}  // namespace
}  // namespace berth

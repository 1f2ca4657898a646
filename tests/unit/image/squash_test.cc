// berth squash's writer and reader (image/squash.h): real layers in, a real squashfs out, read
// back with libsquashfs and, where installed, with squashfs-tools' unsquashfs.
#include "image/squash.h"
#include "image/squashfs_superblock.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "test_util.h"

namespace berth {
namespace {

struct Entry {
  std::string name;
  mode_t type = AE_IFREG;
  std::string data;
  std::string link;  // symlink target, or hard-link target when `hard`
  bool hard = false;
};

/// Writes a gzip pax layer.
void write_layer(const std::string& path, const std::vector<Entry>& entries) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_gzip(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const Entry& e : entries) {
    archive_entry* en = archive_entry_new();
    archive_entry_set_pathname(en, e.name.c_str());
    archive_entry_set_filetype(en, e.type);
    archive_entry_set_perm(en, e.type == AE_IFDIR ? 0755 : 0644);
    archive_entry_set_mtime(en, 1600000000, 0);
    if (e.hard)
      archive_entry_set_hardlink(en, e.link.c_str());
    else if (e.type == AE_IFLNK)
      archive_entry_set_symlink(en, e.link.c_str());
    else if (e.type == AE_IFREG)
      archive_entry_set_size(en, static_cast<la_int64_t>(e.data.size()));
    ASSERT_EQ(archive_write_header(a, en), ARCHIVE_OK);
    if (!e.data.empty()) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(en);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

Entry f(std::string n, std::string data) {
  return {std::move(n), AE_IFREG, std::move(data)};
}
Entry d(std::string n) {
  return {std::move(n), AE_IFDIR};
}
Entry wh(std::string n) {
  return {std::move(n), AE_IFREG};
}
Entry hard(std::string n, std::string t) {
  return {std::move(n), AE_IFREG, "", std::move(t), true};
}

/// `unsquashfs -lln` of `file`, one "mode owner path[ -> target]" line per entry; "" when
/// squashfs-tools is not installed.
std::string unsquashfs_listing(const std::string& file) {
  if (std::system("command -v unsquashfs >/dev/null 2>&1") != 0) return "";
  std::string cmd = "unsquashfs -lln '" + file + "' | awk '{$3=$4=$5=\"\"; print}' | tr -s ' '";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

class Squash : public ::testing::Test {
 protected:
  TempDir tmp_{"squash"};
  std::vector<LayerInput> layers_;

  void SetUp() override {
    // Lower: a file whose first name the upper layer deletes, linked under a second name.
    std::string lower = tmp_ / "lower.tar.gz";
    write_layer(lower, {d("a"), f("a/first", "payload\n"), hard("a/second", "a/first"),
                        f("a/gone", "x"), d("o"), f("o/old", "old")});
    std::string upper = tmp_ / "upper.tar.gz";
    write_layer(upper, {wh("a/.wh.first"), wh("a/.wh.gone"), wh("o/.wh..wh..opq"),
                        f("o/new", "new"), hard("a/third", "a/second")});
    layers_ = {LayerInput(lower, *sha256_file(lower)), LayerInput(upper, *sha256_file(upper))};
  }
};

TEST_F(Squash, OptionsAreChecked) {
  EXPECT_TRUE(check_squash_options({}).ok());
  EXPECT_EQ(check_squash_options({"lzo", 0}).error().message(), "squash lzo: unknown compressor");
  EXPECT_EQ(check_squash_options({"lz4", 3}).error().message(),
            "squash lz4: this compressor has no levels");
  EXPECT_EQ(check_squash_options({"gzip", 10}).error().message(),
            "squash gzip: level 10 is out of range 1-9");
  EXPECT_TRUE(check_squash_options({"zstd", 19}).ok());
}

TEST(SquashOptionsText, MksquashfsSyntax) {
  auto o = parse_squash_options("  -comp gzip\t-Xcompression-level 6 -processors 4 ");
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->compressor, "gzip");
  EXPECT_EQ(o->level, 6);
  EXPECT_EQ(o->workers, 4u);
  auto d = parse_squash_options("");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->compressor, "lz4");
  EXPECT_EQ(d->level, 0);
  struct Case {
    const char* text;
    const char* detail;
  };
  for (const Case& t : {
           Case{"-comp", "-comp needs a compressor (lz4, zstd or gzip)"},
           Case{"-comp xz", "-comp xz: not a compressor Berth builds with (lz4, zstd or gzip)"},
           Case{"-comp zstd -comp lz4", "-comp is given twice"},
           Case{"-Xcompression-level", "-Xcompression-level needs a number"},
           Case{"-comp zstd -Xcompression-level x",
                "-Xcompression-level x: not a whole number of 1 to 99"},
           Case{"-processors 0", "-processors 0: not a whole number of 1 to 1024"},
           Case{"-comp lz4 -Xcompression-level 3", "lz4: this compressor has no levels"},
           Case{"-noappend",
                "\"-noappend\" is not an option Berth's squash takes (-comp, -Xcompression-level, "
                "-processors)"},
       }) {
    SCOPED_TRACE(t.text);
    auto r = parse_squash_options(t.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().detail, t.detail);
    EXPECT_EQ(r.error().message(), std::string("squash ") + t.text + ": " + t.detail);
  }
}

TEST_F(Squash, LayersMergeAndMetadataReadsBack) {
  std::string out = tmp_ / "img.sqsh";
  auto s = squash_layers(layers_, R"({"schemaVersion":1,"reference":"x"})", {}, out);
  ASSERT_TRUE(s.ok()) << s.error().message();
  // root, .berth, image.json, a, a/second+a/third (one inode), o, o/new
  EXPECT_EQ(s->inodes, 7u);
  EXPECT_EQ(s->size, std::filesystem::file_size(out));
  auto info = read_squash_info(out);
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->compressor, "lz4");
  EXPECT_EQ(info->inodes, 7u);
  ASSERT_TRUE(info->metadata.has_value());
  EXPECT_EQ((*info->metadata)["reference"], "x");

  std::string listing = unsquashfs_listing(out);
  if (listing.empty()) GTEST_SKIP() << "unsquashfs (squashfs-tools) is not installed";
  EXPECT_EQ(listing,
            "drwxr-xr-x 0/0 squashfs-root\n"
            "drwxr-xr-x 0/0 squashfs-root/.berth\n"
            "-rw-r--r-- 0/0 squashfs-root/.berth/image.json\n"
            "drwxr-xr-x 0/0 squashfs-root/a\n"
            "-rw-r--r-- 0/0 squashfs-root/a/second\n"
            "-rw-r--r-- 0/0 squashfs-root/a/third\n"
            "drwxr-xr-x 0/0 squashfs-root/o\n"
            "-rw-r--r-- 0/0 squashfs-root/o/new\n");
}

TEST_F(Squash, ChangedLayerFailsAndLeavesNoFile) {
  std::string dir = tmp_ / "out";
  ASSERT_TRUE(make_dirs(dir).ok());
  layers_[0].digest = "sha256:" + std::string(64, '0');
  auto s = squash_layers(layers_, "{}", {}, dir + "/img.sqsh");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("verify " + layers_[0].path + ": the layer file hashes to"),
            std::string::npos)
      << s.error().message();
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST_F(Squash, TreeKeepsHardLinksAndMapsTheOwnerToRoot) {
  std::string root = tmp_ / "root";
  tmp_.write("root/etc/motd", "hello\n");
  ASSERT_EQ(::link((root + "/etc/motd").c_str(), (root + "/etc/motd2").c_str()), 0);
  ASSERT_EQ(::symlink("motd", (root + "/etc/link").c_str()), 0);
  std::string out = tmp_ / "tree.sqsh";
  auto s = squash_tree(root, "{}", {"gzip", 1}, out, ::geteuid(), ::getegid());
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->inodes, 6u);  // root, .berth, image.json, etc, motd (two names), link
  auto info = read_squash_info(out);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->compressor, "gzip");
  std::string listing = unsquashfs_listing(out);
  if (listing.empty()) GTEST_SKIP() << "unsquashfs (squashfs-tools) is not installed";
  EXPECT_NE(listing.find("lrwxrwxrwx 0/0 squashfs-root/etc/link -> motd\n"), std::string::npos)
      << listing;
  EXPECT_NE(listing.find("-rw-r--r-- 0/0 squashfs-root/etc/motd2\n"), std::string::npos) << listing;
}

TEST_F(Squash, NotASquashfsFileIsOneLine) {
  std::string p = tmp_.write("plain.txt", std::string(8192, 'x'));
  auto info = read_squash_info(p);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().message(),
            "read squashfs " + p + ": not a squashfs image (no squashfs magic number)");
}

TEST_F(Squash, InspectAndRunSayTheSameOfATruncatedFile) {
  std::string out = tmp_ / "whole.sqsh";
  ASSERT_TRUE(squash_layers(layers_, "{}", {}, out).ok());
  std::string whole = slurp(out);
  std::string p = tmp_.write("half.sqsh", whole.substr(0, 200));
  auto info = read_squash_info(p);
  ASSERT_FALSE(info.ok());
  auto sb = check_squashfs_superblock(whole.substr(0, kSquashfsSuperblockSize), 200, p);
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(info.error().message(), sb.error().message());
  auto full = check_squashfs_superblock(whole, whole.size(), out);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(info.error().message(), "read squashfs " + p + ": truncated squashfs image: it says " +
                                        std::to_string(full->bytes_used) +
                                        " bytes, the file has 200");
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

/// A symlink entry.
Entry sym(std::string n, std::string target) {
  return {std::move(n), AE_IFLNK, "", std::move(target)};
}

/// "path type content-or-target" for everything below `root` (Berth's /.berth left out),
/// sorted: what a run would see, compared between squash and unpack.
std::string tree_listing(const std::string& root) {
  std::vector<std::string> lines;
  for (auto it = std::filesystem::recursive_directory_iterator(root);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    std::string rel = it->path().lexically_relative(root).string();
    if (rel == ".berth" || rel.starts_with(".berth/")) continue;
    if (it->is_symlink())
      lines.push_back(rel + " -> " + std::filesystem::read_symlink(it->path()).string());
    else if (it->is_directory())
      lines.push_back(rel + "/");
    else
      lines.push_back(rel + " = " + slurp(it->path().string()));
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

class SquashLikeUnpack : public ::testing::Test {
 protected:
  TempDir tmp_{"squash-unpack"};

  /// Writes `layers` (bottom first), squashes and unpacks them, and returns both trees'
  /// listings; the squash's is "" (and the test skipped) without unsquashfs.
  std::pair<std::string, std::string> both(const std::vector<std::vector<Entry>>& layers) {
    std::vector<LayerInput> inputs;
    for (size_t i = 0; i < layers.size(); ++i) {
      std::string p = tmp_ / ("layer" + std::to_string(i) + ".tar.gz");
      write_layer(p, layers[i]);
      inputs.emplace_back(p, *sha256_file(p));
    }
    std::string unpacked = tmp_ / "unpacked";
    auto u = unpack_layers(inputs, unpacked);
    EXPECT_TRUE(u.ok()) << u.error().message();
    std::string file = tmp_ / "img.sqsh";
    auto s = squash_layers(inputs, "{}", {}, file);
    EXPECT_TRUE(s.ok()) << s.error().message();
    if (!s.ok() || std::system("command -v unsquashfs >/dev/null 2>&1") != 0) return {};
    std::string extracted = tmp_ / "extracted";
    std::string cmd = "unsquashfs -no-xattrs -q -d '" + extracted + "' '" + file + "' >/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return {tree_listing(unpacked), tree_listing(extracted)};
  }
};

TEST_F(SquashLikeUnpack, AnOlderLayersSymlinkTakesANewerLayersFilesWhereItLeads) {
  // Merged /usr: the base makes lib a link to usr/lib; a newer layer writes lib/x without
  // listing lib itself, so unpack writes usr/lib/x through the link.
  auto [unpacked, squashed] =
      both({{d("usr"), d("usr/lib"), f("usr/lib/base", "b"), sym("lib", "usr/lib")},
            {f("lib/x", "x"), d("lib/sub"), f("lib/sub/y", "y")}});
  if (squashed.empty()) GTEST_SKIP() << "unsquashfs (squashfs-tools) is not installed";
  EXPECT_EQ(squashed, unpacked);
  EXPECT_EQ(unpacked,
            "lib -> usr/lib\nusr/\nusr/lib/\nusr/lib/base = b\nusr/lib/sub/\nusr/lib/sub/y = y\n"
            "usr/lib/x = x\n");
}

TEST_F(SquashLikeUnpack, AnEntryBelowASymlinkOfItsOwnLayerGoesWhereItLeads) {
  auto [unpacked, squashed] = both({{sym("lib", "usr/lib"), d("usr"), d("usr/lib"), f("lib/x", "x"),
                                     sym("etc", "./usr/../usr"), f("etc/e", "e")}});
  if (squashed.empty()) GTEST_SKIP() << "unsquashfs (squashfs-tools) is not installed";
  EXPECT_EQ(squashed, unpacked);
  EXPECT_EQ(unpacked,
            "etc -> ./usr/../usr\nlib -> usr/lib\nusr/\nusr/e = e\nusr/lib/\nusr/lib/x = x\n");
}

TEST_F(SquashLikeUnpack, AHardLinkKeepsTheFileANewerLayerReplaced) {
  auto [unpacked, squashed] =
      both({{f("a", "old"), f("keep", "k")}, {hard("b", "a")}, {f("a", "new")}});
  if (squashed.empty()) GTEST_SKIP() << "unsquashfs (squashfs-tools) is not installed";
  EXPECT_EQ(squashed, unpacked);
  EXPECT_EQ(unpacked, "a = new\nb = old\nkeep = k\n");
}

TEST_F(SquashLikeUnpack, ASymlinkOutOfTheRootIsRefusedByBoth) {
  std::string p = tmp_ / "l.tar.gz";
  write_layer(p, {sym("lib", "../../usr/lib"), f("lib/x", "x")});
  std::vector<LayerInput> in{LayerInput(p, *sha256_file(p))};
  auto s = squash_layers(in, "{}", {}, tmp_ / "x.sqsh");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(
      s.error().message(),
      "squash " + p + ": entry \"lib/x\" escapes the root: it goes through a symlink outside");
  EXPECT_FALSE(unpack_layers(in, tmp_ / "u").ok());
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

TEST(EnrootImageConfig, TheScriptRunsWithTheEnvironment) {
  const std::string rc = "cd \"/srv\" || exit 1\nif [ $# -gt 0 ]; then\n    exec  \"$@\"\nfi\n";
  auto c = enroot_image_config(rc, "PATH=/bin\r\n# a comment\n\nGREETING=a=b c\n=bad\nnoequals\n");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(
      *c, nlohmann::json::parse(
              R"({"Entrypoint": ["/bin/sh", "/etc/rc"], "Env": ["PATH=/bin", "GREETING=a=b c"]})"));
  EXPECT_FALSE(c->contains("Cmd"));
  // Without an environment file, no Env; an /etc/rc that is not enroot's (a distribution's
  // own script, which does not pass a command on) or none at all: no config.
  EXPECT_FALSE(enroot_image_config(rc, "")->contains("Env"));
  EXPECT_FALSE(enroot_image_config(std::string("#!/bin/sh\nmount -a\n"), "A=1\n").has_value());
  EXPECT_FALSE(enroot_image_config(std::nullopt, "A=1\n").has_value());
}

}  // namespace
}  // namespace berth

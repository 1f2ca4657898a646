#include "image/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "core/sha256.h"
#include "image/diff_id_stream.h"
#include "image/layer_file.h"
#include "image/rootfs_path.h"
#include "test_util.h"

namespace berth {
namespace {

enum class Compression { kNone, kGzip, kZstd };

/// One tar entry to write; `link` is the symlink or hard-link target.
struct E {
  std::string name;
  mode_t type = AE_IFREG;
  int perm = 0644;
  std::string data;
  std::string link;
  bool hardlink = false;
};

E file(std::string n, std::string data, int perm = 0644) {
  return {std::move(n), AE_IFREG, perm, std::move(data), ""};
}
E dir(std::string n, int perm = 0755) {
  return {std::move(n), AE_IFDIR, perm, "", ""};
}
E symlink(std::string n, std::string target) {
  return {std::move(n), AE_IFLNK, 0777, "", std::move(target)};
}
E hardlink(std::string n, std::string target) {
  return {std::move(n), AE_IFREG, 0644, "", std::move(target), true};
}
E special(std::string n, mode_t type) {
  return {std::move(n), type, 0644, "", ""};
}

/// Writes a pax tar layer with libarchive's write API.
void write_layer(const std::string& path, const std::vector<E>& entries,
                 Compression c = Compression::kGzip) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (c == Compression::kGzip) archive_write_add_filter_gzip(a);
  if (c == Compression::kZstd) archive_write_add_filter_zstd(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK) << archive_error_string(a);
  for (const E& e : entries) {
    archive_entry* en = archive_entry_new();
    archive_entry_set_pathname(en, e.name.c_str());
    archive_entry_set_filetype(en, e.type);
    archive_entry_set_perm(en, e.perm);
    archive_entry_set_mtime(en, 1600000000, 0);
    if (e.hardlink) {
      archive_entry_set_hardlink(en, e.link.c_str());
    } else if (e.type == AE_IFLNK) {
      archive_entry_set_symlink(en, e.link.c_str());
    } else if (e.type == AE_IFREG) {
      archive_entry_set_size(en, static_cast<la_int64_t>(e.data.size()));
    }
    if (e.type == AE_IFCHR) archive_entry_set_rdev(en, makedev(1, 3));
    ASSERT_EQ(archive_write_header(a, en), ARCHIVE_OK) << archive_error_string(a);
    if (!e.data.empty()) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(en);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

struct stat lstat_of(const std::string& path) {
  struct stat st = {};
  ::lstat(path.c_str(), &st);
  return st;
}

class Unpack : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = tmp_dir_.path;
    root_ = tmp_ + "/root";
    sentinel_ = tmp_ + "/sentinel";
    ASSERT_TRUE(make_dirs(root_).ok());
    ASSERT_TRUE(make_dirs(sentinel_).ok());
  }

  std::string layer(const std::string& name, const std::vector<E>& entries,
                    Compression c = Compression::kGzip) {
    std::string p = tmp_ + "/" + name;
    write_layer(p, entries, c);
    return p;
  }
  std::string at(const std::string& rel) const { return root_ + "/" + rel; }
  bool sentinel_empty() const { return std::filesystem::is_empty(sentinel_); }
  /// Applies a layer that must fail, returning the error message.
  std::string refused(const std::string& l) {
    auto r = apply_layer(root_, l);
    return r.ok() ? "<accepted>" : r.error().message();
  }

  TempDir tmp_dir_{"unpack"};
  std::string tmp_, root_, sentinel_;
};

class UnpackCompression : public Unpack, public ::testing::WithParamInterface<Compression> {};

TEST_P(UnpackCompression, BuildsTree) {
  std::string l = layer("l.tar",
                        {dir("./"), dir("./etc/", 0750), file("./etc/hosts", "127.0.0.1\n", 0640),
                         file("usr/bin/tool", "#!/bin/sh\n", 0755), symlink("bin", "usr/bin"),
                         hardlink("usr/bin/tool2", "usr/bin/tool"), dir("ro", 0555)},
                        GetParam());
  auto r = apply_layer(root_, l);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->entries, 7u);
  EXPECT_EQ(r->bytes, 20u);
  EXPECT_EQ(slurp(at("etc/hosts")), "127.0.0.1\n");
  EXPECT_EQ(lstat_of(at("etc/hosts")).st_mode & 07777, 0640u);
  EXPECT_EQ(lstat_of(at("etc")).st_mode & 07777, 0750u);
  EXPECT_EQ(lstat_of(at("usr/bin/tool")).st_mode & 07777, 0755u);
  EXPECT_EQ(lstat_of(at("usr/bin/tool")).st_mtime, 1600000000);
  EXPECT_EQ(lstat_of(at("usr")).st_mode & 07777, 0755u);  // made as a missing parent
  EXPECT_EQ(std::filesystem::read_symlink(at("bin")).string(), "usr/bin");
  EXPECT_EQ(lstat_of(at("usr/bin/tool2")).st_ino, lstat_of(at("usr/bin/tool")).st_ino);
  EXPECT_EQ(lstat_of(at("ro")).st_mode & 07777, 0755u);  // owner keeps rwx
  EXPECT_EQ(lstat_of(at("etc")).st_mtime, 1600000000);   // set after the layer's files
}

INSTANTIATE_TEST_SUITE_P(AllCompressions, UnpackCompression,
                         ::testing::Values(Compression::kNone, Compression::kGzip,
                                           Compression::kZstd));

TEST_F(Unpack, SetIdBitsDroppedUnlessOwnershipKept) {
  std::string l = layer("l.tar", {file("su", "x", 04755), dir("shared", 02775)});
  ASSERT_TRUE(apply_layer(root_, l).ok());
  EXPECT_EQ(lstat_of(at("su")).st_mode & 07777, 0755u);
  EXPECT_EQ(lstat_of(at("shared")).st_mode & 07777, 0775u);
}

TEST_F(Unpack, EntriesGoThroughRelativeSymlinksInsideTheRoot) {
  std::string l = layer("l.tar", {dir("real"), symlink("lnk", "real"),
                                  symlink("real/up", "../real"), file("lnk/up/f", "ok")});
  auto r = apply_layer(root_, l);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(slurp(at("real/f")), "ok");
}

TEST_F(Unpack, FileReplacesSymlinkWithoutFollowingIt) {
  std::string lower = layer("lower.tar", {symlink("f", sentinel_ + "/x"), symlink("d", sentinel_)});
  std::string upper = layer("upper.tar", {file("f", "new"), dir("d")});
  auto r = unpack_layers({lower, upper}, root_);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(S_ISREG(lstat_of(at("f")).st_mode));
  EXPECT_TRUE(S_ISDIR(lstat_of(at("d")).st_mode));
  EXPECT_EQ(slurp(at("f")), "new");
  EXPECT_TRUE(sentinel_empty());
}

TEST_F(Unpack, WhiteoutRemovesLowerFile) {
  std::string lower = layer("lower.tar", {file("etc/a", "a"), file("etc/b", "b")});
  std::string upper = layer("upper.tar", {file("etc/.wh.a", "")});
  auto r = unpack_layers({lower, upper}, root_);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(path_exists(at("etc/a")));
  EXPECT_FALSE(path_exists(at("etc/.wh.a")));
  EXPECT_EQ(slurp(at("etc/b")), "b");
}

TEST_F(Unpack, WhiteoutAtLayerRoot) {
  std::string lower = layer("lower.tar", {file("top", "t"), file("keep", "k")});
  std::string upper = layer("upper.tar", {file(".wh.top", ""), file("./.wh.absent", "")});
  auto r = unpack_layers({lower, upper}, root_);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(path_exists(at("top")));
  EXPECT_TRUE(path_exists(at("keep")));
}

TEST_F(Unpack, WhiteoutRemovesDirectoryTreeAndSymlinkNotTarget) {
  std::string lower = layer("lower.tar", {dir("opt/app", 0555), file("opt/app/x/y/z", "z", 0444),
                                          symlink("opt/out", sentinel_), file("opt/stay", "s")});
  ASSERT_TRUE(write_file_atomic(sentinel_ + "/keepme", "k").ok());
  std::string upper = layer("upper.tar", {file("opt/.wh.app", ""), file("opt/.wh.out", "")});
  auto r = unpack_layers({lower, upper}, root_);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(path_exists(at("opt/app")));
  EXPECT_FALSE(path_exists(at("opt/out")));
  EXPECT_TRUE(path_exists(at("opt/stay")));
  EXPECT_EQ(slurp(sentinel_ + "/keepme"), "k");
}

TEST_F(Unpack, OpaqueDirectoryKeepsThisLayersEntries) {
  std::string lower = layer("lower.tar", {file("d/old", "o"), file("d/sub/old2", "o"),
                                          file("d/sub2/old3", "o"), file("other", "o")});
  // The opaque marker comes after entries of its own layer on purpose.
  std::string upper = layer("upper.tar", {dir("d"), file("d/new", "n"), file("d/sub2/new2", "n"),
                                          file("d/.wh..wh..opq", "")});
  auto r = unpack_layers({lower, upper}, root_);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(slurp(at("d/new")), "n");
  EXPECT_EQ(slurp(at("d/sub2/new2")), "n");
  EXPECT_FALSE(path_exists(at("d/old")));
  EXPECT_FALSE(path_exists(at("d/sub")));
  EXPECT_FALSE(path_exists(at("d/sub2/old3")));
  EXPECT_FALSE(path_exists(at("d/.wh..wh..opq")));
  EXPECT_TRUE(path_exists(at("other")));
}

TEST_F(Unpack, DirectoryAndFileReplaceEachOther) {
  std::string lower = layer("lower.tar", {file("was_dir/inner", "i"), file("was_file", "f")});
  std::string upper = layer(
      "upper.tar", {file("was_dir", "now a file"), dir("was_file"), file("was_file/child", "c")});
  auto r = unpack_layers({lower, upper}, root_);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(slurp(at("was_dir")), "now a file");
  EXPECT_TRUE(S_ISDIR(lstat_of(at("was_file")).st_mode));
  EXPECT_EQ(slurp(at("was_file/child")), "c");
}

TEST_F(Unpack, DevicesSkippedFifoMade) {
  std::string l = layer("l.tar", {special("dev/null", AE_IFCHR), special("dev/sda", AE_IFBLK),
                                  special("run/pipe", AE_IFIFO)});
  auto r = apply_layer(root_, l);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->skipped_devices, 2u);
  EXPECT_FALSE(path_exists(at("dev/null")));
  EXPECT_TRUE(S_ISFIFO(lstat_of(at("run/pipe")).st_mode));
  EXPECT_EQ(lstat_of(at("run/pipe")).st_mode & 07777, 0644u);
}

TEST_F(Unpack, RefusesNamesThatEscape) {
  for (const char* name : {"../evil", "/abs", "a/../../evil", "ok/.."}) {
    std::string l = layer("l.tar", {file(name, "bad")});
    EXPECT_EQ(refused(l), "unpack " + l + ": entry \"" + name + "\" escapes the root");
  }
  EXPECT_TRUE(sentinel_empty());
  EXPECT_FALSE(path_exists(tmp_ + "/evil"));
}

TEST_F(Unpack, RefusesPathsThroughSymlinksLeavingTheRoot) {
  for (const char* target : {"/", "../../..", "../sentinel", "/etc"}) {
    std::string l = layer("l.tar", {symlink("link", target), file("link/evil", "bad")});
    EXPECT_EQ(
        refused(l),
        "unpack " + l + ": entry \"link/evil\" escapes the root: it goes through a symlink outside")
        << target;
    ASSERT_TRUE(remove_tree(at("link")).ok());
  }
  std::string deep =
      layer("deep.tar", {dir("a"), symlink("a/up", "../.."), file("a/up/sentinel/x", "bad")});
  EXPECT_EQ(refused(deep),
            "unpack " + deep +
                ": entry \"a/up/sentinel/x\" escapes the root: it goes through a symlink outside");
  std::string wh = layer("wh.tar", {symlink("s", "../sentinel"), file("s/.wh.keepme", "")});
  ASSERT_TRUE(write_file_atomic(sentinel_ + "/keepme", "k").ok());
  EXPECT_EQ(refused(wh),
            "unpack " + wh +
                ": entry \"s/.wh.keepme\" escapes the root: it goes through a symlink outside");
  EXPECT_EQ(slurp(sentinel_ + "/keepme"), "k");
  ASSERT_TRUE(remove_tree(sentinel_ + "/keepme").ok());
  EXPECT_TRUE(sentinel_empty());
}

TEST_F(Unpack, RefusedLayerRemovesTarget) {
  std::string good = layer("good.tar", {file("a", "a")});
  std::string bad = layer("bad.tar", {symlink("link", "/"), file("link/evil", "bad")});
  std::string target = tmp_ + "/rootfs";
  auto r = unpack_layers({good, bad}, target);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "unpack " + bad +
                ": entry \"link/evil\" escapes the root: it goes through a symlink outside");
  EXPECT_FALSE(path_exists(target));
  EXPECT_TRUE(sentinel_empty());
}

TEST_F(Unpack, RefusesHardLinksOutsideTheRoot) {
  for (const char* target : {"../../etc/passwd", "/etc/passwd"}) {
    std::string l = layer("l.tar", {hardlink("evil", target)});
    EXPECT_EQ(refused(l),
              "unpack " + l + ": entry \"evil\" escapes the root: it links to \"" + target + "\"");
  }
  std::string via = layer("via.tar", {symlink("etc", "/etc"), hardlink("evil", "etc/passwd")});
  EXPECT_EQ(refused(via), "unpack " + via +
                              ": entry \"evil\" escapes the root: it links to \"etc/passwd\" "
                              "through a symlink outside");
  std::string missing = layer("missing.tar", {hardlink("evil", "nope")});
  EXPECT_EQ(refused(missing),
            "unpack " + missing + ": entry \"evil\": link to \"nope\": No such file or directory");
  EXPECT_FALSE(path_exists(at("evil")));
}

TEST_F(Unpack, RefusesInvalidWhiteout) {
  std::string l = layer("l.tar", {file("d/.wh...", "")});
  EXPECT_EQ(refused(l), "unpack " + l + ": entry \"d/.wh...\" is an invalid whiteout");
}

TEST_F(Unpack, TruncatedAndGarbageLayersFail) {
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  std::string l = layer("l.tar.gz", {file("big", big), file("after", "a")});
  std::string bytes = slurp(l);
  ASSERT_TRUE(write_file_atomic(l, bytes.substr(0, bytes.size() / 2)).ok());
  std::string msg = refused(l);
  EXPECT_EQ(msg.rfind("unpack " + l + ": entry \"big\": ", 0), 0u) << msg;

  std::string garbage = tmp_ + "/garbage";
  ASSERT_TRUE(write_file_atomic(garbage, std::string(4096, 'z')).ok());
  EXPECT_EQ(refused(garbage), "unpack " + garbage + ": Unrecognized archive format");

  std::string target = tmp_ + "/rootfs";
  auto r = unpack_layers({layer("ok.tar", {file("a", "a")}), l}, target);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(path_exists(target));
}

TEST_P(UnpackCompression, ChecksDigestAndDiffIdWhileUnpacking) {
  std::string l =
      layer("l.layer", {file("a", "a"), file("b", std::string(300000, 'b'))}, GetParam());
  std::string digest = *sha256_file(l);
  std::string diff_id = inspect_layer_file(l, digest, l)->diff_id;
  std::string wrong = sha256_digest("something else");
  std::string target = tmp_ + "/rootfs";
  auto r = unpack_layers({LayerInput(l, digest, diff_id)}, target);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_TRUE(remove_tree(target).ok());

  r = unpack_layers({LayerInput(l, wrong, diff_id)}, target);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "verify " + l + ": the layer file hashes to " + digest + ", not " + wrong);
  EXPECT_EQ(r.error().hint, "the file changed after it was stored: pull the image again");
  EXPECT_FALSE(path_exists(target));

  r = unpack_layers({LayerInput(l, digest, wrong)}, target);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "verify " + l + ": the uncompressed layer hashes to " + diff_id +
                                     ", not the diff_id " + wrong + " the image config lists");
  EXPECT_FALSE(path_exists(target));
}

TEST_P(UnpackCompression, ADiffIdRecordStandsForTheHashOnlyOfTheBytesItWasMadeFor) {
  std::string l =
      layer("l.layer", {file("a", "a"), file("b", std::string(300000, 'b'))}, GetParam());
  std::string digest = *sha256_file(l);
  std::string diff_id = inspect_layer_file(l, digest, l)->diff_id;
  // A record that is not the truth shows whether it was used: the unpacker cannot tell.
  std::string recorded = sha256_digest("what the record says");
  if (::setxattr(l.c_str(), kDiffIdRecordAttr, recorded.data(), recorded.size(), 0) != 0)
    GTEST_SKIP() << "this file system keeps no user attributes: " << std::strerror(errno);
  std::string target = tmp_ + "/rootfs";
  auto unpack = [&](const std::string& want_digest, const std::string& want_diff_id, bool use) {
    LayerInput in(l, want_digest, want_diff_id);
    in.use_diff_id_record = use;
    auto r = unpack_layers({in}, target);
    if (r.ok()) {
      EXPECT_TRUE(remove_tree(target).ok());
    }
    return r.ok() ? std::string() : r.error().message();
  };
  std::string compressed_plain = "verify " + l + ": the uncompressed layer hashes to ";
  if (GetParam() == Compression::kNone) {
    // A plain tar's diff_id is its digest, hashed anyway: no record is read.
    EXPECT_EQ(unpack(digest, diff_id, true), "");
    EXPECT_EQ(unpack(digest, recorded, true), compressed_plain + diff_id + ", not the diff_id " +
                                                  recorded + " the image config lists");
    return;
  }
  // Used: the record is what the decompressed stream is taken to hash to.
  EXPECT_EQ(unpack(digest, recorded, true), "");
  EXPECT_EQ(unpack(digest, diff_id, true), compressed_plain + recorded + ", not the diff_id " +
                                               diff_id + " the image config lists");
  EXPECT_FALSE(path_exists(target));
  // Not asked for (a file not from one's own store): the stream is hashed, the record ignored.
  EXPECT_EQ(unpack(digest, diff_id, false), "");
  EXPECT_EQ(unpack(digest, recorded, false), compressed_plain + diff_id + ", not the diff_id " +
                                                 recorded + " the image config lists");
  // Bytes changed after the record was made (the file rewritten in place, its attribute
  // kept; here with another whole layer): the file's own digest refuses them.
  std::string bytes = slurp(layer("other.layer", {file("a", "another a")}, GetParam()));
  {
    UniqueFd fd(::open(l.c_str(), O_WRONLY | O_TRUNC));
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(write_all(fd.get(), bytes, l).ok());
  }
  std::string changed = sha256_digest(bytes);
  EXPECT_EQ(unpack(digest, recorded, true),
            "verify " + l + ": the layer file hashes to " + changed + ", not " + digest);
  EXPECT_FALSE(path_exists(target));
}

/// The diff_id DiffIdStream gives for `bytes` fed in chunks of `chunk` bytes.
Result<std::string> stream_diff_id(const std::string& bytes, size_t chunk) {
  DiffIdStream s("layer");
  for (size_t at = 0; at < bytes.size(); at += chunk)
    s.feed(bytes.data() + at, std::min(chunk, bytes.size() - at));
  return s.finish();
}

TEST_P(UnpackCompression, StreamedDiffIdMatchesTheFile) {
  // More than ChunkQueue::kDefaultBound of incompressible data: the feeder must wait, not grow.
  std::string noise;
  uint32_t x = 1;
  for (size_t i = 0; i < (size_t{10} << 20); ++i) {
    x = x * 1103515245 + 12345;
    noise.push_back(static_cast<char>(x >> 16));
  }
  std::string l = layer("l.layer", {file("a", "a"), file("noise", noise)}, GetParam());
  std::string want = inspect_layer_file(l, *sha256_file(l), l)->diff_id;
  std::string bytes = slurp(l);
  for (size_t chunk : {size_t{1} << 20, size_t{16384}, size_t{7}}) {
    if (chunk == 7 && bytes.size() > (size_t{1} << 21)) continue;  // one small-chunk pass is enough
    auto got = stream_diff_id(bytes, chunk);
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_EQ(*got, want) << chunk;
  }
  auto small = stream_diff_id(slurp(layer("s.layer", {file("a", "a")}, GetParam())), 7);
  ASSERT_TRUE(small.ok()) << small.error().message();
}

TEST_F(Unpack, StreamedDiffIdRefusesACorruptStream) {
  std::string l = layer("l.tar.gz", {file("a", std::string(300000, 'x'))});
  std::string bytes = slurp(l);
  std::string want = inspect_layer_file(l)->diff_id;
  bytes[bytes.size() / 2] ^= 0x55;
  auto r = stream_diff_id(bytes, 4096);
  // Either the decompressor notices (crc, bad code) or the hash differs: never the right one.
  EXPECT_TRUE(!r.ok() || *r != want);
  if (!r.ok()) {
    EXPECT_EQ(r.error().message().rfind("verify layer: ", 0), 0u) << r.error().message();
  }
}

TEST_P(UnpackCompression, StreamedDiffIdRefusesATruncatedStream) {
  std::string l = layer("l.layer", {file("a", std::string(300000, 'x'))}, GetParam());
  std::string bytes = slurp(l);
  std::string want = inspect_layer_file(l)->diff_id;
  auto r = stream_diff_id(bytes.substr(0, bytes.size() / 2), 4096);
  if (GetParam() == Compression::kNone) {
    ASSERT_TRUE(r.ok());  // a plain tar cut short still hashes, to something else
    EXPECT_NE(*r, want);
  } else {
    ASSERT_FALSE(r.ok()) << *r;
    EXPECT_EQ(r.error().message().rfind("verify layer: ", 0), 0u) << r.error().message();
  }
}

TEST_F(Unpack, StreamedDiffIdEndedEarlyJoinsItsThread) {
  // Destroyed without finish() (a download that failed half way): nothing hangs or leaks.
  std::string bytes = slurp(layer("l.tar.gz", {file("a", std::string(300000, 'x'))}));
  DiffIdStream s("layer");
  s.feed(bytes.data(), bytes.size() / 3);
}

/// `n` bytes of noise (incompressible), seeded.
std::string noise_of(size_t n, uint32_t seed) {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1103515245 + 12345;
    out.push_back(static_cast<char>(seed >> 16));
  }
  return out;
}

TEST_P(UnpackCompression, ALayerManyTimesTheQueueUnpacksWholeAndChecked) {
  // Ten times ChunkQueue::kDefaultBound: the decompressing thread must wait for the writer
  // many times over, and every byte still reaches both hashes and the files.
  std::vector<E> entries;
  std::string noise = noise_of(size_t{24} << 20, 3);
  entries.push_back(file("noise", noise));
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "line " + std::to_string(i) + " of some text\n";
  for (int i = 0; i < 300; ++i) entries.push_back(file("t/" + std::to_string(i), text));
  entries.push_back(file("last", "the end"));
  std::string l = layer("l.layer", entries, GetParam());
  std::string digest = *sha256_file(l);
  std::string diff_id = inspect_layer_file(l, digest, l)->diff_id;
  std::string target = tmp_ + "/rootfs";
  auto r = unpack_layers({LayerInput(l, digest, diff_id)}, target);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->entries, 302u);
  EXPECT_EQ(slurp(target + "/noise"), noise);
  EXPECT_EQ(slurp(target + "/t/299"), text);
  EXPECT_EQ(slurp(target + "/last"), "the end");
  ASSERT_TRUE(remove_tree(target).ok());

  std::string wrong = sha256_digest("something else");
  r = unpack_layers({LayerInput(l, digest, wrong)}, target);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "verify " + l + ": the uncompressed layer hashes to " + diff_id +
                                     ", not the diff_id " + wrong + " the image config lists");
  EXPECT_FALSE(path_exists(target));
}

TEST_P(UnpackCompression, ALayerRefusedAtItsFirstEntryIsStillHashedWhole) {
  // The reader stops at the first entry, the decompressing thread is many MB from the end:
  // it is stopped, the rest of the file is read and hashed, and a changed file is named.
  std::string l =
      layer("l.layer", {file("../escape", "x"), file("noise", noise_of(12 << 20, 5))}, GetParam());
  std::string digest = *sha256_file(l);
  std::string target = tmp_ + "/rootfs";
  auto r = unpack_layers({LayerInput(l, digest, "")}, target);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "unpack " + l + ": entry \"../escape\" escapes the root");
  EXPECT_FALSE(path_exists(target));
  // The same refusal of a file that is not the one stored: the digest is what is wrong.
  std::string wrong = sha256_digest("something else");
  r = unpack_layers({LayerInput(l, wrong, "")}, target);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "verify " + l + ": the layer file hashes to " + digest + ", not " + wrong);
  EXPECT_FALSE(path_exists(target));
}

TEST_F(Unpack, EveryByteOfTheFileIsChecked) {
  // Bytes after the tar's end-of-archive blocks are never read by the tar reader; the digest
  // still covers them.
  std::string l = layer("l.tar", {file("a", "a")}, Compression::kNone);
  std::string digest = *sha256_file(l);
  ASSERT_TRUE(write_file_atomic(l, slurp(l) + std::string(8192, '\0') + "trailing").ok());
  std::string target = tmp_ + "/rootfs";
  auto r = unpack_layers({LayerInput(l, digest, digest)}, target);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "verify " + l + ": the layer file hashes to " + *sha256_file(l) + ", not " + digest);
  EXPECT_FALSE(path_exists(target));
}

TEST_F(Unpack, AChangedFileIsNamedBeforeWhatItBroke) {
  // A flipped byte in a compressed layer breaks decompression; the digest says why.
  std::string l = layer("l.tar.gz", {file("a", std::string(100000, 'x'))});
  std::string digest = *sha256_file(l);
  std::string bytes = slurp(l);
  bytes[bytes.size() / 2] ^= 0x55;
  ASSERT_TRUE(write_file_atomic(l, bytes).ok());
  auto r = unpack_layers({LayerInput(l, digest, "")}, tmp_ + "/rootfs");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message().rfind("verify " + l + ": the layer file hashes to ", 0), 0u)
      << r.error().message();
}

TEST_F(Unpack, TargetMustBeEmpty) {
  ASSERT_TRUE(write_file_atomic(root_ + "/x", "x").ok());
  auto r = unpack_layers({layer("l.tar", {file("a", "a")})}, root_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "unpack " + root_ + ": target exists and is not an empty directory");
  EXPECT_TRUE(path_exists(root_ + "/x"));  // not removed: it was not ours
}

TEST(RootfsPath, NormalizesEntryNames) {
  std::string out;
  EXPECT_EQ(normalize_entry_name("./a//b/./c/", out), EntryName::kPath);
  EXPECT_EQ(out, "a/b/c");
  EXPECT_EQ(normalize_entry_name("./", out), EntryName::kRoot);
  for (const char* root : {"/", "//", "/.", "/./"}) {
    EXPECT_EQ(normalize_entry_name(root, out), EntryName::kRoot) << root;
    EXPECT_EQ(out, "") << root;
  }
  EXPECT_EQ(normalize_entry_name("/..", out), EntryName::kEscapes);
  EXPECT_EQ(normalize_entry_name("/etc", out), EntryName::kEscapes);
  EXPECT_EQ(normalize_entry_name("a/..", out), EntryName::kEscapes);
  EXPECT_EQ(normalize_entry_name("/a", out), EntryName::kEscapes);
  EXPECT_EQ(normalize_entry_name("..a/b..", out), EntryName::kPath);
}

TEST_F(Unpack, FallbackWalkFollowsOnlyInRootSymlinks) {
  std::string l = layer("l.tar", {dir("a/b"), symlink("a/rel", "b"), symlink("a/up", "../a/b"),
                                  symlink("abs", "/"), symlink("a/out", "../.."), file("f", "")});
  ASSERT_TRUE(apply_layer(root_, l).ok());
  UniqueFd root(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat want = lstat_of(at("a/b"));
  for (const char* p : {"a/b", "a/rel", "a/up", "a/up/../b"}) {
    UniqueFd fd(open_beneath_walk(root.get(), p));
    ASSERT_TRUE(fd.valid()) << p << ": " << std::strerror(errno);
    struct stat st;
    ASSERT_EQ(::fstat(fd.get(), &st), 0);
    EXPECT_EQ(st.st_ino, want.st_ino) << p;
  }
  for (const char* p : {"abs", "a/out", "abs/tmp", ".."}) {
    errno = 0;
    EXPECT_EQ(open_beneath_walk(root.get(), p), -1) << p;
    EXPECT_EQ(errno, EXDEV) << p;
  }
  EXPECT_EQ(open_beneath_walk(root.get(), "f"), -1);
  EXPECT_EQ(errno, ENOTDIR);
  EXPECT_EQ(open_beneath_walk(root.get(), "missing/x"), -1);
  EXPECT_EQ(errno, ENOENT);
}

}  // namespace
}  // namespace berth

// berth-squashfs's image reader (site/squashfs_fuse/squashfs_reader.h), on images written by
// Berth's own squash_tree: node ids, listings, lookups, attributes, file data, symlinks, hard
// links, and a corrupt image refused in one line.
#include "site/squashfs_fuse/squashfs_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "image/squash.h"
#include "test_util.h"

namespace berth::sqfuse {
namespace {

class SquashfsReaderTest : public ::testing::Test {
 protected:
  /// One image for all the tests (writing it is most of their time).
  static void SetUpTestSuite() {
    tmp_ = new TempDir("sqfs-reader");
    std::string root = *tmp_ / "root";
    // 130 KB and more: whole 128 KiB blocks and a tail in a fragment; bytes that differ.
    for (size_t i = 0; i < 300000; ++i) big_ += static_cast<char>('a' + (i * 7 + i / 1000) % 26);
    tmp_->write("root/big", big_);
    // More than the reader's data block cache holds, with a tail.
    for (size_t i = 0; i < SquashfsReader::kCachedDataBytes + 3 * kBlock + 100; ++i)
      large_ += static_cast<char>('a' + (i * 13 + i / 4093) % 26);
    tmp_->write("root/large", large_);
    tmp_->write("root/etc/motd", "hello\n");
    ASSERT_EQ(::chmod((root + "/etc/motd").c_str(), 0640), 0);
    ASSERT_EQ(::link((root + "/etc/motd").c_str(), (root + "/etc/hard").c_str()), 0);
    ASSERT_EQ(::symlink("../big", (root + "/etc/link").c_str()), 0);
    for (int i = 0; i < 700; ++i) tmp_->write("root/many/f" + std::to_string(1000 + i), "x");
    image_ = *tmp_ / "img.sqsh";
    auto s = squash_tree(root, "{}", {"lz4", 0, 1}, image_, ::geteuid(), ::getegid());
    ASSERT_TRUE(s.ok()) << s.error().message();
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override {
    ASSERT_FALSE(image_.empty());
    auto r = SquashfsReader::open(image_, "img.sqsh");
    ASSERT_TRUE(r.ok()) << r.error().message();
    reader_ = std::move(*r);
  }

  /// The entry `name` under node `dir`, its inode read into *inode.
  DirEntry find(uint64_t dir, const std::string& name, InodePtr* inode) {
    InodePtr d;
    DirEntry e;
    EXPECT_EQ(reader_->inode(reader_->ref_of(dir), &d), 0);
    EXPECT_EQ(reader_->lookup(*d, reader_->ref_of(dir), name, &e), 0) << name;
    EXPECT_EQ(reader_->inode(e.ref, inode), 0);
    return e;
  }

  static inline TempDir* tmp_ = nullptr;
  static constexpr size_t kBlock = size_t{128} * 1024;  ///< squash_tree's block size
  static inline std::string image_, big_, large_;
  std::unique_ptr<SquashfsReader> reader_;
};

TEST_F(SquashfsReaderTest, NodeIdsAreStableAndTheRootIsOne) {
  InodePtr root;
  ASSERT_EQ(reader_->inode(reader_->ref_of(kRootNode), &root), 0);
  EXPECT_EQ(type_mode(root->base.type), S_IFDIR);
  InodePtr etc;
  DirEntry e = find(kRootNode, "etc", &etc);
  uint64_t node = reader_->node_of(e.ref);
  EXPECT_GT(node, kRootNode);
  EXPECT_EQ(reader_->ref_of(node), e.ref);
  EXPECT_EQ(etc->base.inode_number, e.inode_number);
}

TEST_F(SquashfsReaderTest, ListsInOrderAndLooksUp) {
  InodePtr many;
  DirEntry m = find(kRootNode, "many", &many);
  std::shared_ptr<const Listing> listing;
  ASSERT_EQ(reader_->list(*many, m.ref, &listing), 0);
  ASSERT_EQ(listing->size(), 700u);
  EXPECT_EQ(listing->front().name, "f1000");
  EXPECT_EQ(listing->back().name, "f1699");
  DirEntry e;
  EXPECT_EQ(reader_->lookup(*many, m.ref, "f1350", &e), 0);
  EXPECT_EQ(e.name, "f1350");
  EXPECT_EQ(reader_->lookup(*many, m.ref, "f9999", &e), ENOENT);
  EXPECT_EQ(reader_->lookup(*many, m.ref, "f135", &e), ENOENT);
  // A file is not a directory.
  InodePtr big;
  DirEntry b = find(kRootNode, "big", &big);
  EXPECT_EQ(reader_->list(*big, b.ref, &listing), ENOTDIR);
}

TEST_F(SquashfsReaderTest, ListingByReferenceKnowsDotAndDotDot) {
  InodePtr root, many;
  ASSERT_EQ(reader_->inode(reader_->ref_of(kRootNode), &root), 0);
  DirEntry m = find(kRootNode, "many", &many);
  std::shared_ptr<const Listing> listing;
  ASSERT_EQ(reader_->listing(m.ref, &listing), 0);
  EXPECT_EQ(listing->size(), 700u);
  EXPECT_EQ(listing->self, m.inode_number);
  EXPECT_EQ(listing->parent, root->base.inode_number);
  std::shared_ptr<const Listing> again;
  ASSERT_EQ(reader_->listing(m.ref, &again), 0);
  EXPECT_EQ(again.get(), listing.get());  // kept
  DirEntry e;
  EXPECT_EQ(reader_->lookup(m.ref, "f1699", &e), 0);
  EXPECT_EQ(e.name, "f1699");
  EXPECT_EQ(reader_->lookup(m.ref, "f1700", &e), ENOENT);
  InodePtr big;
  DirEntry b = find(kRootNode, "big", &big);
  EXPECT_EQ(reader_->listing(b.ref, &listing), ENOTDIR);
  EXPECT_EQ(reader_->lookup(b.ref, "x", &e), ENOTDIR);
}

TEST_F(SquashfsReaderTest, AttributesAreTheImagesWithTheCallerAsOwner) {
  InodePtr etc, motd;
  DirEntry d = find(kRootNode, "etc", &etc);
  DirEntry f = find(reader_->node_of(d.ref), "motd", &motd);
  struct stat st;
  reader_->attributes(*motd, 4321, 8765, &st);
  EXPECT_EQ(st.st_mode, S_IFREG | 0640);
  EXPECT_EQ(st.st_size, 6);
  EXPECT_EQ(st.st_nlink, 2u);
  EXPECT_EQ(st.st_uid, 4321u);
  EXPECT_EQ(st.st_gid, 8765u);
  EXPECT_EQ(st.st_ino, f.inode_number);
  EXPECT_EQ(st.st_blksize, static_cast<blksize_t>(kBlock));  // stdio reads whole blocks
  // The hard link is the same inode, so the same node.
  InodePtr hard;
  DirEntry h = find(reader_->node_of(d.ref), "hard", &hard);
  EXPECT_EQ(h.ref, f.ref);
  reader_->attributes(*etc, 0, 0, &st);
  EXPECT_EQ(st.st_mode & S_IFMT, static_cast<mode_t>(S_IFDIR));
  EXPECT_EQ(st.st_blksize, 4096);  // readdir buffers of 32 KiB (glibc's least), not 128
}

TEST_F(SquashfsReaderTest, ReadsFileDataAnywhere) {
  InodePtr big;
  find(kRootNode, "big", &big);
  std::string all(big_.size() + 10, '\0');
  EXPECT_EQ(reader_->read(*big, 0, all.data(), all.size()), static_cast<long>(big_.size()));
  all.resize(big_.size());
  EXPECT_EQ(all, big_);
  // Across the first block boundary, into the tail, and past the end.
  std::string part(1000, '\0');
  EXPECT_EQ(reader_->read(*big, 131000, part.data(), part.size()), 1000);
  EXPECT_EQ(part, big_.substr(131000, 1000));
  EXPECT_EQ(reader_->read(*big, 299500, part.data(), part.size()), 500);
  EXPECT_EQ(part.substr(0, 500), big_.substr(299500));
  EXPECT_EQ(reader_->read(*big, 400000, part.data(), part.size()), 0);
}

TEST_F(SquashfsReaderTest, ReadsOfOneBlockDecompressItOnce) {
  InodePtr large;
  find(kRootNode, "large", &large);
  // Readahead windows that do not start on a block, in no order, over blocks 0-2.
  std::string part(4096, '\0');
  for (size_t off : {kBlock + 5000, size_t{0}, 2 * kBlock + 1, kBlock - 100, size_t{77},
                     kBlock + 5000, 3 * kBlock - 4096}) {
    ASSERT_EQ(reader_->read(*large, off, part.data(), part.size()), 4096) << off;
    EXPECT_EQ(part, large_.substr(off, 4096)) << off;
  }
  EXPECT_EQ(reader_->blocks_decompressed(), 3u);
}

TEST_F(SquashfsReaderTest, ReadsPastWhatTheCacheHolds) {
  InodePtr large;
  find(kRootNode, "large", &large);
  std::string all(large_.size(), '\0');
  // Twice, in reads of 100,000 bytes (across block boundaries), and once backwards.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t off = 0; off < all.size(); off += 100000) {
      size_t n = std::min<size_t>(100000, all.size() - off);
      ASSERT_EQ(reader_->read(*large, off, all.data() + off, n), static_cast<long>(n)) << off;
    }
    EXPECT_TRUE(all == large_) << "pass " << pass;
  }
  std::fill(all.begin(), all.end(), '\0');
  for (size_t off = all.size(); off > 0;) {
    size_t n = std::min<size_t>(65536, off);
    off -= n;
    ASSERT_EQ(reader_->read(*large, off, all.data() + off, n), static_cast<long>(n)) << off;
  }
  EXPECT_TRUE(all == large_);
  // In one call, more than the cache holds.
  std::fill(all.begin(), all.end(), '\0');
  ASSERT_EQ(reader_->read(*large, 0, all.data(), all.size()), static_cast<long>(all.size()));
  EXPECT_TRUE(all == large_);
  // Each pass forward decompressed every block again (least recently used first out).
  size_t blocks = large_.size() / kBlock;
  EXPECT_GE(reader_->blocks_decompressed(), 2 * blocks);
}

TEST_F(SquashfsReaderTest, SymlinkTargets) {
  InodePtr etc, link;
  DirEntry d = find(kRootNode, "etc", &etc);
  find(reader_->node_of(d.ref), "link", &link);
  EXPECT_EQ(SquashfsReader::symlink_target(*link), "../big");
  struct stat st;
  reader_->attributes(*link, 0, 0, &st);
  EXPECT_EQ(st.st_mode & S_IFMT, static_cast<mode_t>(S_IFLNK));
  EXPECT_EQ(st.st_size, 6);
  EXPECT_EQ(SquashfsReader::symlink_target(*etc), "");
}

TEST_F(SquashfsReaderTest, CorruptInodeTableIsOneLine) {
  std::string text = slurp(image_);
  uint64_t inodes = 0, dirs = 0;
  for (int i = 7; i >= 0; --i) {
    inodes = inodes << 8 | static_cast<unsigned char>(text[64 + i]);
    dirs = dirs << 8 | static_cast<unsigned char>(text[72 + i]);
  }
  for (uint64_t i = inodes; i < dirs; ++i) text[i] = '\xff';
  std::string bad = *tmp_ / "bad.sqsh";
  write_text(bad, text);
  auto r = SquashfsReader::open(bad, "bad.sqsh");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "mount squashfs bad.sqsh: corrupt squashfs image: its root directory cannot be read "
            "(Input/output error)");
  auto missing = SquashfsReader::open(*tmp_ / "none.sqsh", "none.sqsh");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "open none.sqsh: No such file or directory");
}

TEST_F(SquashfsReaderTest, NoXattrsInAnImageWithout) {
  InodePtr big;
  find(kRootNode, "big", &big);
  Xattrs x = {{"stale", "entry"}};
  EXPECT_EQ(reader_->xattrs(*big, &x), 0);
  EXPECT_TRUE(x.empty());
}

TEST(SquashfsReaderXattrs, NamesAndValuesAsStored) {
  // Berth's own writer keeps no xattrs: squashfs-tools' mksquashfs makes this image.
  if (std::system("command -v mksquashfs >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mksquashfs (squashfs-tools) is not installed";
  TempDir tmp("sqfs-xattr");
  std::string file = tmp.write("root/f", "x");
  if (::setxattr(file.c_str(), "user.color", "blue", 4, 0) != 0)
    GTEST_SKIP() << "the temporary folder takes no user xattrs: " << std::strerror(errno);
  ASSERT_EQ(::setxattr(file.c_str(), "user.empty", "", 0, 0), 0);
  std::string image = tmp / "x.sqsh";
  std::string cmd =
      "mksquashfs '" + tmp / "root" + "' '" + image + "' -noappend -quiet -no-progress >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto r = SquashfsReader::open(image, "x.sqsh");
  ASSERT_TRUE(r.ok()) << r.error().message();
  SquashfsReader& reader = **r;
  ASSERT_TRUE(reader.has_xattrs());
  InodePtr root, f;
  DirEntry e;
  ASSERT_EQ(reader.inode(reader.ref_of(kRootNode), &root), 0);
  ASSERT_EQ(reader.lookup(*root, reader.ref_of(kRootNode), "f", &e), 0);
  ASSERT_EQ(reader.inode(e.ref, &f), 0);
  Xattrs x;
  ASSERT_EQ(reader.xattrs(*f, &x), 0);
  std::sort(x.begin(), x.end());
  EXPECT_EQ(x, (Xattrs{{"user.color", "blue"}, {"user.empty", ""}}));
  ASSERT_EQ(reader.xattrs(*root, &x), 0);
  EXPECT_TRUE(x.empty());
}

TEST(SquashfsReaderInodes, InodesAcrossBlocksAndPastTheCache) {
  // 700 symlinks of 3,000 to 3,699 bytes: about two inodes per 8 KiB metadata block, many
  // running over a block's end, in more blocks than the reader keeps.
  TempDir tmp("sqfs-inodes");
  std::string root = tmp / "root";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  auto target = [](int i) {
    std::string t = "t" + std::to_string(i) + "/";
    while (t.size() < 3000 + static_cast<size_t>(i))
      t += static_cast<char>('a' + (t.size() + i) % 26);
    return t;
  };
  constexpr int kLinks = 700;
  for (int i = 0; i < kLinks; ++i) {
    std::string link = root + "/l" + std::to_string(1000 + i);
    ASSERT_EQ(::symlink(target(i).c_str(), link.c_str()), 0);
  }
  std::string image = tmp / "i.sqsh";
  auto s = squash_tree(root, "{}", {"lz4", 0, 1}, image, ::geteuid(), ::getegid());
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto r = SquashfsReader::open(image, "i.sqsh");
  ASSERT_TRUE(r.ok()) << r.error().message();
  SquashfsReader& reader = **r;
  std::shared_ptr<const Listing> listing;
  ASSERT_EQ(reader.listing(reader.ref_of(kRootNode), &listing), 0);
  ASSERT_GE(listing->size(), static_cast<size_t>(kLinks));  // and the image's own metadata
  auto check = [&](int i) {
    DirEntry e;
    ASSERT_EQ(reader.lookup(reader.ref_of(kRootNode), "l" + std::to_string(1000 + i), &e), 0);
    InodePtr inode;
    ASSERT_EQ(reader.inode(e.ref, &inode), 0) << e.name;
    EXPECT_EQ(SquashfsReader::symlink_target(*inode), target(i)) << e.name;
  };
  for (int i = 0; i < kLinks; ++i) check(i);
  uint64_t once = reader.inode_blocks_read();
  EXPECT_GT(once, SquashfsReader::kCachedInodeBlocks);  // every block read once, no more
  EXPECT_LT(once, SquashfsReader::kCachedInodeBlocks * 2);
  for (int i = kLinks - 1; i >= 0; --i) check(i);  // back again, through evicted blocks
  // The last quarter's blocks were still kept: read again, nothing is read from the image.
  uint64_t before = reader.inode_blocks_read();
  for (int i = kLinks / 4 * 3; i < kLinks; i += 7) check(i);
  uint64_t after_kept = reader.inode_blocks_read();
  for (int i = kLinks / 4 * 3; i < kLinks; i += 7) check(i);
  EXPECT_EQ(reader.inode_blocks_read(), after_kept);
  EXPECT_GE(after_kept, before);
}

TEST(SquashfsReaderBlocks, SparseBlocksAndATailOfItsOwn) {
  // mksquashfs stores a block of zeros as sparse and, with -no-fragments, a file's tail as a
  // short block of its own; Berth's writer does neither.
  if (std::system("command -v mksquashfs >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mksquashfs (squashfs-tools) is not installed";
  TempDir tmp("sqfs-sparse");
  constexpr size_t kBlock = size_t{128} * 1024;
  std::string data(kBlock, '\0');
  for (size_t i = 0; i < 2 * kBlock + 1000; ++i) data += static_cast<char>('a' + i % 23);
  tmp.write("root/f", data);
  std::string image = tmp / "s.sqsh";
  std::string cmd = "mksquashfs '" + tmp / "root" + "' '" + image +
                    "' -noappend -no-fragments -comp lz4 -quiet -no-progress >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto r = SquashfsReader::open(image, "s.sqsh");
  ASSERT_TRUE(r.ok()) << r.error().message();
  SquashfsReader& reader = **r;
  InodePtr root, f;
  DirEntry e;
  ASSERT_EQ(reader.inode(reader.ref_of(kRootNode), &root), 0);
  ASSERT_EQ(reader.lookup(*root, reader.ref_of(kRootNode), "f", &e), 0);
  ASSERT_EQ(reader.inode(e.ref, &f), 0);
  std::string all(data.size() + 10, 'x');
  ASSERT_EQ(reader.read(*f, 0, all.data(), all.size()), static_cast<long>(data.size()));
  all.resize(data.size());
  EXPECT_TRUE(all == data);
  EXPECT_EQ(reader.blocks_decompressed(), 3u);  // the sparse one is not read
  std::string part(3000, 'x');
  ASSERT_EQ(reader.read(*f, kBlock - 1000, part.data(), part.size()), 3000);
  EXPECT_EQ(part, data.substr(kBlock - 1000, 3000));
  ASSERT_EQ(reader.read(*f, data.size() - 500, part.data(), part.size()), 500);
  EXPECT_EQ(part.substr(0, 500), data.substr(data.size() - 500));
}

}  // namespace
}  // namespace berth::sqfuse

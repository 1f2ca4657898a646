// The one-pass, newest-first layer merge behind `berth squash` (image/squash_merge.h).
#include "image/squash_merge.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <functional>
#include <string>
#include <vector>

namespace berth {
namespace {

MergeInode file(uint32_t perm = 0644) {
  MergeInode m;
  m.mode = S_IFREG | perm;
  return m;
}

MergeInode dir(uint32_t perm = 0755, uint32_t uid = 0) {
  MergeInode m;
  m.mode = S_IFDIR | perm;
  m.uid = uid;
  return m;
}

/// Offers an entry and adds it when the tree says so; returns the verdict.
Verdict put(MergeTree& t, int layer, const std::string& path, const MergeInode& m) {
  Verdict v = t.offer(layer, path, S_ISDIR(m.mode), S_ISLNK(m.mode));
  if (v == Verdict::kAdd || v == Verdict::kDirMeta) {
    if (S_ISDIR(m.mode))
      t.set_dir_meta(layer, path, m);
    else
      t.add(layer, path, m);
  }
  return v;
}

/// Every present path, sorted, with "/" after directories.
std::vector<std::string> listing(MergeTree& t) {
  std::vector<std::string> out;
  std::function<void(MergeTree::Node&, const std::string&)> walk = [&](MergeTree::Node& n,
                                                                       const std::string& prefix) {
    for (auto& [name, child] : n.children) {
      if (child->inode == nullptr) continue;
      std::string p = prefix + name;
      out.push_back(child->is_dir() ? p + "/" : p);
      if (child->is_dir()) walk(*child, p + "/");
    }
  };
  walk(t.root(), "");
  return out;
}

using V = std::vector<std::string>;

TEST(SquashMerge, WhiteoutHidesOlderFileAndTree) {
  MergeTree t;
  // Layer 1 (newest) first.
  t.whiteout(1, "a/gone");
  t.whiteout(1, "a/subdir");
  EXPECT_EQ(put(t, 1, "kept", file()), Verdict::kAdd);
  // Layer 0.
  EXPECT_EQ(put(t, 0, "a", dir()), Verdict::kAdd);
  EXPECT_EQ(put(t, 0, "a/keep", file()), Verdict::kAdd);
  EXPECT_EQ(put(t, 0, "a/gone", file()), Verdict::kShadowed);
  EXPECT_EQ(put(t, 0, "a/subdir", dir()), Verdict::kShadowed);
  EXPECT_EQ(put(t, 0, "a/subdir/deep", file()), Verdict::kShadowed);
  EXPECT_EQ(put(t, 0, "kept", file()), Verdict::kShadowed);
  EXPECT_EQ(listing(t), (V{"a/", "a/keep", "kept"}));
}

TEST(SquashMerge, OpaqueDirectoryHidesOlderContentsButNotItself) {
  MergeTree t;
  t.opaque(1, "opq");
  EXPECT_EQ(put(t, 1, "opq/new", file()), Verdict::kAdd);
  // The newer layer only implied opq: the older layer's metadata applies to it.
  EXPECT_EQ(put(t, 0, "opq", dir(0700, 42)), Verdict::kDirMeta);
  EXPECT_EQ(put(t, 0, "opq/old", file()), Verdict::kShadowed);
  EXPECT_EQ(put(t, 0, "opq/sub", dir()), Verdict::kShadowed);
  EXPECT_EQ(put(t, 0, "opq/sub/old2", file()), Verdict::kShadowed);
  EXPECT_EQ(listing(t), (V{"opq/", "opq/new"}));
  EXPECT_EQ(t.find("opq")->inode->mode, static_cast<uint32_t>(S_IFDIR | 0700));
  EXPECT_EQ(t.find("opq")->inode->uid, 42u);
}

TEST(SquashMerge, WhiteoutAndOpaqueNeverHideTheirOwnLayer) {
  MergeTree t;
  t.opaque(1, "d");
  EXPECT_EQ(put(t, 1, "d", dir()), Verdict::kAdd);
  EXPECT_EQ(put(t, 1, "d/mine", file()), Verdict::kAdd);
  t.whiteout(1, "x");
  EXPECT_EQ(put(t, 1, "x", file()), Verdict::kAdd);
  EXPECT_EQ(listing(t), (V{"d/", "d/mine", "x"}));
}

TEST(SquashMerge, NewerNonDirectoryReplacesAnOlderDirectoryTree) {
  MergeTree t;
  EXPECT_EQ(put(t, 2, "d", file()), Verdict::kAdd);
  EXPECT_EQ(put(t, 1, "d", dir()), Verdict::kShadowed);
  EXPECT_EQ(put(t, 1, "d/x", file()), Verdict::kShadowed);
  EXPECT_EQ(put(t, 0, "d/y/z", file()), Verdict::kShadowed);
  EXPECT_EQ(listing(t), (V{"d"}));
}

TEST(SquashMerge, NewestDirectoryMetadataWinsAndContentsMerge) {
  MergeTree t;
  EXPECT_EQ(put(t, 1, "etc", dir(0700, 5)), Verdict::kAdd);
  EXPECT_EQ(put(t, 1, "etc/new", file()), Verdict::kAdd);
  EXPECT_EQ(put(t, 0, "etc", dir(0755, 0)), Verdict::kShadowed);
  EXPECT_EQ(put(t, 0, "etc/old", file()), Verdict::kAdd);
  EXPECT_EQ(listing(t), (V{"etc/", "etc/new", "etc/old"}));
  EXPECT_EQ(t.find("etc")->inode->mode, static_cast<uint32_t>(S_IFDIR | 0700));
  EXPECT_EQ(t.find("etc")->inode->uid, 5u);
}

TEST(SquashMerge, ImpliedDirectoriesAreRootOwned0755UntilAnOlderLayerListsThem) {
  MergeTree t;
  EXPECT_EQ(put(t, 1, "usr/local/bin/tool", file(0755)), Verdict::kAdd);
  const MergeTree::Node* usr = t.find("usr");
  ASSERT_NE(usr, nullptr);
  EXPECT_EQ(usr->inode->mode, static_cast<uint32_t>(S_IFDIR | 0755));
  EXPECT_EQ(usr->entry_layer, -1);
  EXPECT_EQ(put(t, 0, "usr/local", dir(0775, 7)), Verdict::kDirMeta);
  EXPECT_EQ(t.find("usr/local")->inode->uid, 7u);
  // A file where newer layers imply a directory loses; a symlink there conflicts (the squasher
  // then moves what is below it to where it leads: MovedBelowASymlinksTarget).
  EXPECT_EQ(put(t, 0, "usr", file()), Verdict::kShadowed);
  MergeInode link;
  link.mode = S_IFLNK | 0777;
  EXPECT_EQ(t.offer(0, "usr/local/bin", false, true), Verdict::kConflict);
}

TEST(SquashMerge, MovedBelowASymlinksTarget) {
  MergeTree t;
  EXPECT_EQ(put(t, 2, "lib/x", file(0600)), Verdict::kAdd);
  EXPECT_EQ(put(t, 2, "usr/lib/y", file()), Verdict::kAdd);
  EXPECT_EQ(put(t, 1, "lib/y", file(0640)), Verdict::kAdd);
  t.opaque(2, "lib");
  EXPECT_EQ(t.offer(0, "lib", false, true), Verdict::kConflict);
  EXPECT_EQ(t.symlink_on_path(0, "lib"), 0u);
  t.move_below("lib", "usr/lib");
  EXPECT_EQ(t.find("lib"), nullptr);
  EXPECT_EQ(t.find("usr/lib/x")->inode->mode, static_cast<uint32_t>(S_IFREG | 0600));
  // Both layers wrote usr/lib/y (through the link or not): the newer one stays.
  EXPECT_EQ(t.find("usr/lib/y")->entry_layer, 2);
  EXPECT_EQ(t.find("usr/lib")->opaque_layer, 2);
  EXPECT_EQ(t.offer(0, "lib", false, true), Verdict::kAdd);
  // A symlink of the entry's own layer on its path: where it is.
  MergeInode link;
  link.mode = S_IFLNK | 0777;
  link.target = "usr/lib";
  EXPECT_EQ(put(t, 0, "lib", link), Verdict::kAdd);
  EXPECT_EQ(t.offer(0, "lib/z/w", false, false), Verdict::kConflict);
  EXPECT_EQ(t.symlink_on_path(0, "lib/z/w"), 3u);
}

TEST(SquashMerge, LaterEntryOfTheSameLayerWins) {
  MergeTree t;
  MergeInode a = file(0600);
  EXPECT_EQ(put(t, 0, "f", a), Verdict::kAdd);
  EXPECT_EQ(put(t, 0, "f", file(0640)), Verdict::kAdd);
  EXPECT_EQ(t.find("f")->inode->mode, static_cast<uint32_t>(S_IFREG | 0640));
}

TEST(SquashMerge, WhiteoutOfAParentHidesEverythingBelowInOlderLayersOnly) {
  MergeTree t;
  t.whiteout(2, "usr");
  EXPECT_EQ(put(t, 1, "usr/bin/x", file()), Verdict::kShadowed);
  EXPECT_EQ(put(t, 1, "usr", dir()), Verdict::kShadowed);
  EXPECT_EQ(put(t, 3, "usr/bin/y", file()), Verdict::kAdd);  // newer than the whiteout
  EXPECT_EQ(listing(t), (V{"usr/", "usr/bin/", "usr/bin/y"}));
}

TEST(SquashMerge, RootMetadataFromTheNewestLayerThatListsIt) {
  MergeTree t;
  EXPECT_EQ(t.offer(1, "", true, false), Verdict::kDirMeta);
  t.set_dir_meta(1, "", dir(0700));
  EXPECT_EQ(t.offer(0, "", true, false), Verdict::kShadowed);
  EXPECT_EQ(t.offer(0, "", false, false), Verdict::kShadowed);
  EXPECT_EQ(t.root().inode->mode, static_cast<uint32_t>(S_IFDIR | 0700));
}

TEST(SquashMerge, HardLinkSharesOneInode) {
  MergeTree t;
  MergeInode* orig = t.add(0, "data/orig", file(0640));
  ASSERT_EQ(t.offer(0, "data/hard", false, false), Verdict::kAdd);
  t.link(0, "data/hard", orig);
  EXPECT_EQ(t.find("data/hard")->inode, orig);
  EXPECT_EQ(listing(t), (V{"data/", "data/hard", "data/orig"}));
}

}  // namespace
}  // namespace berth

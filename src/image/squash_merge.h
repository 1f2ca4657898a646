// Merging an image's layers into one tree in a single pass, newest layer first, for the
// squashfs writer (image/squash.h).
//
// Layers are offered newest first, each layer's entries in its tar order. An entry of an older
// layer is kept only when nothing newer hides it: no newer entry at the same path (two
// directories: the newer one's metadata wins, their contents merge), no newer whiteout of the
// path or of a parent, no newer opaque directory above it, no newer non-directory in place of
// a parent. So every surviving file's data is read once and written once, and a hidden file's
// data is never read at all. A whiteout or opaque marker hides only what older layers hold,
// never entries of its own layer (the OCI image spec's rule). Within one layer the last of two
// entries at one path wins, as tar extraction does.
//
// Directories that no layer lists but entries imply get mode 0755, owner 0:0 and mtime 0,
// until an older layer lists them (its metadata then applies). A path through a symlink goes
// where `berth unpack` takes it (through the link, within the root): an entry below a
// symlink of its own layer is offered again at the link's target (the squasher rewrites the
// path), and when an older layer makes a symlink of a path newer layers only put entries
// below, move_below() moves those entries to the link's target first. `berth unpack` still
// differs in one edge case: its own whiteouts also remove same-layer entries that came
// before them.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>

struct sqfs_inode_generic_t;

namespace berth {

/// One file system object of the merged tree: several names share one for hard links.
struct MergeInode {
  uint32_t mode = 0;  ///< type and permission bits, S_IFREG | 0644
  uint32_t uid = 0, gid = 0;
  uint32_t mtime = 0;
  std::string target;                    ///< a symlink's target
  sqfs_inode_generic_t* file = nullptr;  ///< a regular file's inode from the block processor
  // Filled when the tree is written.
  uint32_t nlink = 0;
  uint32_t number = 0;  ///< 1-based; 0: not numbered yet
  uint64_t ref = 0;     ///< where the inode is in the inode table
};

/// What to do with an entry offered to the tree.
enum class Verdict {
  kAdd,       ///< visible: add it (replacing an earlier entry of the same layer at that path)
  kDirMeta,   ///< a directory that newer layers only implied: this entry's metadata applies
  kShadowed,  ///< hidden by a newer layer: skip it, without reading its data
  kConflict,  ///< a symlink (or a non-directory of the same layer) where newer entries need a
              ///< directory: symlink_on_path() says which; the caller resolves it or refuses
};

class MergeTree {
 public:
  struct Node {
    std::map<std::string, std::unique_ptr<Node>, std::less<>>
        children;                 ///< sorted as squashfs wants
    MergeInode* inode = nullptr;  ///< nullptr: nothing here (a node that only holds marks)
    int entry_layer = -1;         ///< the layer whose entry this is; -1: an implied directory
    int whiteout_layer = -1;      ///< a whiteout of this path in that layer hides older ones
    int opaque_layer = -1;        ///< an opaque marker: older layers' contents are hidden
    bool is_dir() const;
  };

  MergeTree();

  /// Whether layer `layer`'s entry at `path` (normalised, "" = the root) is visible under what
  /// newer layers (higher numbers) put in the tree. Layers must be offered newest first.
  Verdict offer(int layer, std::string_view path, bool is_dir, bool is_symlink);
  /// Adds the entry offer() allowed (kAdd): a new inode with `meta`, parents implied as needed.
  MergeInode* add(int layer, std::string_view path, const MergeInode& meta);
  /// Adds a name for an existing inode (a hard link), after offer() allowed it.
  void link(int layer, std::string_view path, MergeInode* inode);
  /// Applies a directory's metadata (kDirMeta, or kAdd of a directory already implied).
  void set_dir_meta(int layer, std::string_view path, const MergeInode& meta);
  /// A whiteout in `layer` of `path`: hides it and what is below it in older layers.
  void whiteout(int layer, std::string_view path);
  /// An opaque marker in `layer` on directory `path`: hides older layers' contents of it.
  void opaque(int layer, std::string_view path);

  /// After offer() said kConflict for `path` in `layer`: the length of the prefix of `path`
  /// that is a symlink of that layer (a parent the entry goes through), or 0 when the conflict
  /// is another (the entry itself is a symlink over newer layers' entries, or a parent is a
  /// file of that layer).
  size_t symlink_on_path(int layer, std::string_view path);
  /// Moves what newer layers put below `from` (a directory they only implied) to `to`, merged
  /// with what is there (the newer entry wins at a path both hold), and removes `from`: an
  /// older layer makes `from` a symlink to `to`, through which `berth unpack` wrote them.
  void move_below(std::string_view from, std::string_view to);

  /// The node at `path`, or nullptr.
  Node* find(std::string_view path);
  Node& root() { return root_; }
  /// Every inode made, including those replaced later (for freeing their file inodes).
  std::deque<MergeInode>& inodes() { return inodes_; }

 private:
  Node* walk(std::string_view path, bool create);
  MergeInode* new_inode(const MergeInode& meta);

  Node root_;
  std::deque<MergeInode> inodes_;
};

}  // namespace berth

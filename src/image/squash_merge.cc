#include "image/squash_merge.h"

#include <sys/stat.h>

#include <algorithm>

namespace berth {
namespace {

/// Splits "a/b/c" into its components, in order (no empty ones: names are normalised).
template <class F>
void for_each_component(std::string_view path, F&& f) {
  size_t pos = 0;
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    f(path.substr(pos, slash - pos), slash == path.size());
    pos = slash + 1;
  }
}

MergeInode implied_dir() {
  MergeInode d;
  d.mode = S_IFDIR | 0755;
  return d;
}

}  // namespace

bool MergeTree::Node::is_dir() const {
  return inode != nullptr && S_ISDIR(inode->mode);
}

MergeTree::MergeTree() {
  root_.inode = new_inode(implied_dir());
}

MergeInode* MergeTree::new_inode(const MergeInode& meta) {
  inodes_.push_back(meta);
  return &inodes_.back();
}

MergeTree::Node* MergeTree::walk(std::string_view path, bool create) {
  Node* n = &root_;
  for_each_component(path, [&](std::string_view comp, bool) {
    if (n == nullptr) return;
    auto it = n->children.find(comp);
    if (it == n->children.end()) {
      if (!create) {
        n = nullptr;
        return;
      }
      it = n->children.emplace(std::string(comp), std::make_unique<Node>()).first;
    }
    n = it->second.get();
  });
  return n;
}

MergeTree::Node* MergeTree::find(std::string_view path) {
  return walk(path, false);
}

Verdict MergeTree::offer(int layer, std::string_view path, bool is_dir, bool is_symlink) {
  if (path.empty()) {  // the root: only a directory's metadata means anything
    if (!is_dir || root_.entry_layer > layer) return Verdict::kShadowed;
    return Verdict::kDirMeta;
  }
  Node* n = &root_;
  bool hidden = false, conflict = false;
  for_each_component(path, [&](std::string_view comp, bool last) {
    if (hidden || conflict) return;
    if (n->opaque_layer > layer) {  // n is a directory above the entry
      hidden = true;
      return;
    }
    auto it = n->children.find(comp);
    if (it == n->children.end()) {
      // Nothing newer at or below this path: create the rest without checking.
      it = n->children.emplace(std::string(comp), std::make_unique<Node>()).first;
    }
    Node* child = it->second.get();
    if (child->whiteout_layer > layer) {
      hidden = true;
      return;
    }
    if (!last && child->inode != nullptr && !child->is_dir()) {
      // A newer non-directory replaced this parent; one of the same layer is a broken layer.
      if (child->entry_layer > layer)
        hidden = true;
      else
        conflict = true;
      return;
    }
    n = child;
  });
  if (conflict) return Verdict::kConflict;
  if (hidden) return Verdict::kShadowed;
  if (n->inode == nullptr) return Verdict::kAdd;
  if (n->entry_layer > layer) return Verdict::kShadowed;
  if (n->entry_layer == layer) return Verdict::kAdd;  // a later entry of the same layer wins
  // An implied directory: newer layers have entries below it but none for it.
  if (is_dir) return Verdict::kDirMeta;
  return is_symlink ? Verdict::kConflict : Verdict::kShadowed;
}

MergeInode* MergeTree::add(int layer, std::string_view path, const MergeInode& meta) {
  if (S_ISDIR(meta.mode)) {
    set_dir_meta(layer, path, meta);
    return walk(path, false)->inode;
  }
  MergeInode* inode = new_inode(meta);
  link(layer, path, inode);
  return inode;
}

void MergeTree::link(int layer, std::string_view path, MergeInode* inode) {
  Node* n = &root_;
  for_each_component(path, [&](std::string_view comp, bool last) {
    auto it = n->children.find(comp);
    if (it == n->children.end())
      it = n->children.emplace(std::string(comp), std::make_unique<Node>()).first;
    n = it->second.get();
    if (!last && n->inode == nullptr) n->inode = new_inode(implied_dir());
  });
  n->children.clear();  // a same-layer directory replaced by a file takes its contents along
  n->inode = inode;
  n->entry_layer = layer;
}

void MergeTree::set_dir_meta(int layer, std::string_view path, const MergeInode& meta) {
  Node* n = &root_;
  for_each_component(path, [&](std::string_view comp, bool) {
    auto it = n->children.find(comp);
    if (it == n->children.end())
      it = n->children.emplace(std::string(comp), std::make_unique<Node>()).first;
    n = it->second.get();
    if (n->inode == nullptr) n->inode = new_inode(implied_dir());
  });
  if (!n->is_dir()) n->inode = new_inode(implied_dir());  // replacing a same-layer non-directory
  MergeInode& d = *n->inode;
  d.mode = S_IFDIR | (meta.mode & 07777);
  d.uid = meta.uid;
  d.gid = meta.gid;
  d.mtime = meta.mtime;
  n->entry_layer = layer;
}

size_t MergeTree::symlink_on_path(int layer, std::string_view path) {
  Node* n = &root_;
  size_t found = 0;
  for_each_component(path, [&](std::string_view comp, bool last) {
    if (n == nullptr || found != 0) return;
    auto it = n->children.find(comp);
    n = it == n->children.end() ? nullptr : it->second.get();
    if (n != nullptr && !last && n->inode != nullptr && S_ISLNK(n->inode->mode) &&
        n->entry_layer == layer)
      found = static_cast<size_t>(comp.data() + comp.size() - path.data());
  });
  return found;
}

namespace {

/// Merges node `from` into node `into`: children `into` lacks move over; at a name both hold,
/// two directories merge and otherwise the newer entry (higher layer) stays, with its subtree.
void merge_nodes(MergeTree::Node& into, MergeTree::Node& from) {
  into.whiteout_layer = std::max(into.whiteout_layer, from.whiteout_layer);
  into.opaque_layer = std::max(into.opaque_layer, from.opaque_layer);
  for (auto& [name, child] : from.children) {
    auto it = into.children.find(name);
    if (it == into.children.end()) {
      into.children.emplace(name, std::move(child));
      continue;
    }
    MergeTree::Node& there = *it->second;
    bool dirs =
        (there.inode == nullptr || there.is_dir()) && (child->inode == nullptr || child->is_dir());
    if (dirs) {
      if (child->entry_layer > there.entry_layer || there.inode == nullptr) {
        if (child->inode != nullptr) there.inode = child->inode;
        there.entry_layer = std::max(there.entry_layer, child->entry_layer);
      }
      merge_nodes(there, *child);
    } else if (child->entry_layer > there.entry_layer) {
      it->second = std::move(child);
    }
  }
  from.children.clear();
}

}  // namespace

void MergeTree::move_below(std::string_view from, std::string_view to) {
  size_t slash = from.rfind('/');
  Node* parent = slash == std::string_view::npos ? &root_ : walk(from.substr(0, slash), false);
  if (parent == nullptr) return;
  auto it = parent->children.find(from.substr(slash == std::string_view::npos ? 0 : slash + 1));
  if (it == parent->children.end()) return;
  std::unique_ptr<Node> moved = std::move(it->second);
  parent->children.erase(it);
  Node* n = &root_;
  for_each_component(to, [&](std::string_view comp, bool) {
    auto c = n->children.find(comp);
    if (c == n->children.end())
      c = n->children.emplace(std::string(comp), std::make_unique<Node>()).first;
    n = c->second.get();
    if (n->inode == nullptr) n->inode = new_inode(implied_dir());
  });
  merge_nodes(*n, *moved);
}

void MergeTree::whiteout(int layer, std::string_view path) {
  Node* n = walk(path, true);
  if (n->whiteout_layer < layer) n->whiteout_layer = layer;
}

void MergeTree::opaque(int layer, std::string_view path) {
  Node* n = walk(path, true);
  if (n->opaque_layer < layer) n->opaque_layer = layer;
}

}  // namespace berth

// squash_layers() (image/squash.h): an image's layers, newest first, merged into one squashfs
// as they are read through the unpacker's checks (image/layer_stream.h), each entry offered to
// the merge tree (image/squash_merge.h) and its data streamed into the Builder
// (image/squash_writer.h); hard links across layers resolved at the end.
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "image/layer_stream.h"
#include "image/rootfs_path.h"
#include "image/squash.h"
#include "image/squash_writer.h"

namespace berth {
namespace {

using namespace squash_internal;

class LayerSquasher {
 public:
  LayerSquasher(MergeTree& tree, Builder& b, SquashStats& stats)
      : tree_(tree), b_(b), stats_(stats) {}

  Status layer(int index, const LayerInput& layer) {
    index_ = index;
    layer_ = &layer;
    names_.clear();
    shadowed_files_.clear();
    wanted_.clear();
    BERTH_CHECK(read_layer(
        [this](archive* a, archive_entry* e, std::string_view raw) { return entry(a, e, raw); }));
    if (!wanted_.empty()) {
      // Hard links whose target a newer layer hides: the target's data is needed after all,
      // once, under the link's name. Read the layer again for those files only.
      BERTH_CHECK(read_layer([this](archive* a, archive_entry* e, std::string_view raw) {
        return wanted_entry(a, e, raw);
      }));
      for (auto& [target, w] : wanted_)
        if (w.inode->file == nullptr)
          return refuse(fmt::format("entry \"{}\": link to \"{}\": no such file in the layer",
                                    w.raw, target));
    }
    return {};
  }

  /// Hard links to files of older layers, resolved against the merged tree.
  Status resolve_cross_links() {
    for (const CrossLink& l : cross_) {
      if (l.has_data) continue;  // given the data of the older file it named (entry())
      MergeTree::Node* t = tree_.find(l.target);
      MergeTree::Node* n = tree_.find(l.name);
      if (n == nullptr || n->inode != l.placeholder) continue;  // replaced in its own layer
      if (t == nullptr || t->inode == nullptr || t->is_dir() || t->inode == l.placeholder) {
        return make_error(
            "squash", l.layer,
            fmt::format("entry \"{}\": link to \"{}\": no such file", l.raw, l.target));
      }
      if (t->entry_layer > l.index) {
        return make_error(
                   "squash", l.layer,
                   fmt::format(
                       "entry \"{}\" links to \"{}\", which a newer layer replaced: squash cannot "
                       "merge that yet",
                       l.raw, l.target))
            .with_hint("use berth unpack, or rebuild the image");
      }
      tree_.link(l.index, l.name, t->inode);
    }
    return {};
  }

 private:
  using EntryFn = std::function<Status(archive*, archive_entry*, std::string_view)>;

  struct Wanted {
    MergeInode* inode;
    std::string raw;  // the link's entry name, for errors
  };
  struct CrossLink {
    int index;
    std::string layer, name, target, raw;
    MergeInode* placeholder;
    bool decided = false;   // an older layer's entry at `target` was met (newest first)
    bool has_data = false;  // ...and was hidden by a layer newer than the link's: its data
                            // went into the placeholder, as `berth unpack` keeps it
  };

  Error refuse(std::string detail) const {
    return make_error("squash", layer_->path, std::move(detail));
  }

  /// Reads every entry of the layer through the unpacker's checks (see image/layer_stream.h).
  Status read_layer(const EntryFn& fn) {
    UniqueFd fd = BERTH_TRY(open_file(layer_->path, O_RDONLY));
    CheckedStream stream(fd.get(), *layer_);
    Status st = [&]() -> Status {
      ArchiveReader a = BERTH_TRY(stream.open_tar());
      stream_ = &stream;
      for (;;) {
        archive_entry* e = nullptr;
        int r = ar().read_next_header(a.get(), &e);
        if (r == ARCHIVE_EOF) break;
        if (r == ARCHIVE_RETRY) continue;
        if (r < ARCHIVE_WARN) return archive_err(a.get(), {});
        const char* raw = ar().entry_pathname(e);
        if (raw == nullptr) return refuse("entry without a name");
        BERTH_CHECK(fn(a.get(), e, raw));
      }
      return {};
    }();
    if (!st.ok()) {
      Status file = stream.check_file();  // a changed file explains a failure best
      return file.ok() ? st : file;
    }
    return stream.finish();
  }

  Error archive_err(archive* a, std::string_view raw) const {
    const Error* below = stream_->failure();
    if (below && below->sys_errno != 0) return *below;
    std::string msg = below ? below->detail : archive_message(a);
    if (raw.empty()) return make_error("squash", layer_->path, msg);
    return make_error("squash", layer_->path, fmt::format("entry \"{}\": {}", raw, msg));
  }

  static MergeInode meta_of(archive_entry* e, mode_t type) {
    MergeInode m;
    m.mode = type | (ar().entry_perm(e) & 07777);
    m.uid = static_cast<uint32_t>(ar().entry_uid(e));
    m.gid = static_cast<uint32_t>(ar().entry_gid(e));
    m.mtime = ar().entry_mtime_is_set(e) ? clamp_time(ar().entry_mtime(e)) : 0;
    return m;
  }

  Status entry(archive* a, archive_entry* e, std::string_view raw) {
    EntryName kind = normalize_entry_name(raw, name_);
    if (kind == EntryName::kEscapes)
      return refuse(fmt::format("entry \"{}\" escapes the root", raw));
    mode_t type = ar().entry_filetype(e);
    const char* hardlink = ar().entry_hardlink(e);
    if (kind == EntryName::kRoot) {
      if (type == AE_IFDIR && hardlink == nullptr &&
          tree_.offer(index_, "", true, false) == Verdict::kDirMeta)
        tree_.set_dir_meta(index_, "", meta_of(e, S_IFDIR));
      return {};
    }
    size_t slash = name_.rfind('/');
    std::string_view parent =
        slash == std::string::npos ? std::string_view() : std::string_view(name_).substr(0, slash);
    std::string_view base =
        std::string_view(name_).substr(slash == std::string::npos ? 0 : slash + 1);
    if (base.starts_with(".wh.")) {
      if (base == ".wh..wh..opq") {
        tree_.opaque(index_, parent);
        return {};
      }
      if (base.starts_with(".wh..wh.")) return {};  // other aufs metadata: nothing to apply
      std::string_view victim = base.substr(4);
      if (victim.empty() || victim == "." || victim == "..")
        return refuse(fmt::format("entry \"{}\" is an invalid whiteout", raw));
      tree_.whiteout(index_, name_.substr(0, name_.size() - base.size()) + std::string(victim));
      return {};
    }
    if (hardlink == nullptr && (type == AE_IFCHR || type == AE_IFBLK)) {
      ++stats_.skipped_devices;  // as the unpacker: the runtime binds the host's device nodes
      return {};
    }
    if (hardlink == nullptr && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK &&
        type != AE_IFIFO)
      return {};  // sockets and unknown types carry nothing worth keeping

    bool is_dir = hardlink == nullptr && type == AE_IFDIR;
    bool is_symlink = hardlink == nullptr && type == AE_IFLNK;
    Verdict v = BERTH_TRY(offer_through_links(e, raw, is_dir, is_symlink));
    bool plain_file = hardlink == nullptr && type == AE_IFREG;
    if (MergeInode* ino = older_link_target(v, plain_file)) {
      ++stats_.shadowed;  // hidden under its own name, kept under a newer layer's link
      MergeInode m = meta_of(e, S_IFREG);
      ino->mode = m.mode;
      ino->uid = m.uid;
      ino->gid = m.gid;
      ino->mtime = m.mtime;
      return write_data(a, e, raw, ino);
    }
    if (v == Verdict::kShadowed) {
      ++stats_.shadowed;
      if (plain_file) shadowed_files_.insert(name_);
      return {};  // its data is skipped by the next header read, never decompressed into a file
    }
    if (hardlink != nullptr) return add_hardlink(raw, hardlink);
    if (is_dir) {
      tree_.set_dir_meta(index_, name_, meta_of(e, S_IFDIR));
      return {};
    }
    if (v == Verdict::kDirMeta) return {};  // (only directories get kDirMeta)
    if (is_symlink) {
      const char* target = ar().entry_symlink(e);
      if (target == nullptr)
        return refuse(fmt::format("entry \"{}\" is a symlink without a target", raw));
      MergeInode m = meta_of(e, S_IFLNK);
      m.target = target;  // verbatim, as the unpacker stores it
      names_[name_] = tree_.add(index_, name_, m);
      return {};
    }
    if (type == AE_IFIFO) {
      names_[name_] = tree_.add(index_, name_, meta_of(e, S_IFIFO));
      return {};
    }
    MergeInode* ino = tree_.add(index_, name_, meta_of(e, S_IFREG));
    names_[name_] = ino;
    return write_data(a, e, raw, ino);
  }

  /// offer() of name_, following symlinks as `berth unpack` does: an entry below a symlink of
  /// its own layer goes where the link leads; a symlink an older layer puts where newer layers
  /// only put entries below first takes those entries to where it leads.
  Result<Verdict> offer_through_links(archive_entry* e, std::string_view raw, bool is_dir,
                                      bool is_symlink) {
    for (int hops = 0;; ++hops) {
      Verdict v = tree_.offer(index_, name_, is_dir, is_symlink);
      if (v != Verdict::kConflict) return v;
      if (hops == kMaxLinkHops)
        return refuse(fmt::format("entry \"{}\" goes through too many symlinks", raw));
      if (size_t through = tree_.symlink_on_path(index_, name_)) {
        std::string link = name_.substr(0, through);
        std::string to = BERTH_TRY(link_target(raw, link, tree_.find(link)->inode->target));
        name_ = to + (to.empty() ? name_.substr(through + 1) : name_.substr(through));
        continue;
      }
      if (!is_symlink)
        return refuse(
            fmt::format("entry \"{}\": a file where this layer puts files below it", raw));
      const char* target = ar().entry_symlink(e);
      if (target == nullptr)
        return refuse(fmt::format("entry \"{}\" is a symlink without a target", raw));
      std::string to = BERTH_TRY(link_target(raw, name_, target));
      if (to == name_ || to.starts_with(name_ + "/"))
        return refuse(fmt::format("entry \"{}\" goes through too many symlinks", raw));
      // Every step to the target must be a directory (or nothing yet) in the merged tree.
      for (size_t end = 0; end != std::string::npos && !to.empty();) {
        end = to.find('/', end == 0 ? 0 : end + 1);
        MergeTree::Node* on = tree_.find(to.substr(0, end));
        if (on != nullptr && on->inode != nullptr && !on->is_dir())
          return refuse(
              fmt::format("entry \"{}\": its target \"{}\" is not a directory in the "
                          "merged layers",
                          raw, target));
      }
      tree_.move_below(name_, to);
      move_paths(name_, to);
    }
  }

  /// Where a symlink at `link` (a normalised path) to `target` leads, normalised, within the
  /// root: "" for the root itself. Refused as the unpacker refuses them (open_beneath()): an
  /// absolute target, or one that climbs out of the root.
  Result<std::string> link_target(std::string_view raw, std::string_view link,
                                  std::string_view target) const {
    auto escapes = [&] {
      return refuse(
          fmt::format("entry \"{}\" escapes the root: it goes through a symlink outside", raw));
    };
    if (target.starts_with('/')) return escapes();
    size_t slash = link.rfind('/');
    std::vector<std::string_view> parts;
    std::string_view dir = slash == std::string_view::npos ? "" : link.substr(0, slash);
    std::string joined = std::string(dir) + "/" + std::string(target);
    std::string_view rest = joined;
    while (!rest.empty()) {
      size_t cut = rest.find('/');
      std::string_view comp = rest.substr(0, cut);
      rest = cut == std::string_view::npos ? "" : rest.substr(cut + 1);
      if (comp.empty() || comp == ".") continue;
      if (comp == "..") {
        if (parts.empty()) return escapes();
        parts.pop_back();
        continue;
      }
      parts.push_back(comp);
    }
    std::string out;
    for (std::string_view p : parts) out += (out.empty() ? "" : "/") + std::string(p);
    return out;
  }

  /// Paths recorded under `from` now live under `to` (MergeTree::move_below()).
  void move_paths(const std::string& from, const std::string& to) {
    auto moved = [&](std::string& p) {
      if (p.size() > from.size() && p.starts_with(from) && p[from.size()] == '/')
        p = to.empty() ? p.substr(from.size() + 1) : to + p.substr(from.size());
    };
    for (CrossLink& l : cross_) {
      moved(l.name);
      moved(l.target);
    }
  }

  /// The first entry at name_ of a layer older than links to it from newer layers decides
  /// what they link to (layers come newest first). When a layer newer than the link hides it,
  /// the link keeps its data anyway, as `berth unpack` does: the placeholder inode to write
  /// the data into (nullptr when there is none to write).
  MergeInode* older_link_target(Verdict v, bool plain_file) {
    MergeInode* data = nullptr;
    for (CrossLink& l : cross_) {
      if (l.decided || l.index <= index_ || l.target != name_) continue;
      l.decided = true;
      if (v != Verdict::kShadowed || !plain_file) continue;  // resolve_cross_links() links it
      MergeTree::Node* n = tree_.find(l.name);
      if (n == nullptr || n->inode != l.placeholder) continue;  // replaced in its own layer
      l.has_data = true;
      if (data == nullptr)
        data = l.placeholder;
      else
        tree_.link(l.index, l.name, data);
    }
    return data;
  }

  Status add_hardlink(std::string_view raw, const char* target) {
    std::string tname;
    if (normalize_entry_name(target, tname) != EntryName::kPath)
      return refuse(fmt::format("entry \"{}\" escapes the root: it links to \"{}\"", raw, target));
    if (tname == name_) return {};  // a link to itself: the file is already there
    if (auto it = names_.find(tname); it != names_.end()) {
      tree_.link(index_, name_, it->second);
      names_[name_] = it->second;
      return {};
    }
    MergeInode placeholder;
    placeholder.mode = S_IFREG | 0644;
    MergeInode* ino = tree_.add(index_, name_, placeholder);
    names_[name_] = ino;
    if (shadowed_files_.count(tname) != 0) {
      // The target's own name is hidden by a newer layer, but this name is not.
      auto [it, fresh] = wanted_.try_emplace(tname, Wanted{ino, std::string(raw)});
      if (!fresh) tree_.link(index_, name_, it->second.inode);
      return {};
    }
    cross_.push_back({index_, layer_->path, name_, tname, std::string(raw), ino});
    return {};
  }

  Status wanted_entry(archive* a, archive_entry* e, std::string_view raw) {
    if (ar().entry_hardlink(e) != nullptr || ar().entry_filetype(e) != AE_IFREG) return {};
    if (normalize_entry_name(raw, name_) != EntryName::kPath) return {};
    auto it = wanted_.find(name_);
    if (it == wanted_.end() || it->second.inode->file != nullptr) return {};
    MergeInode& ino = *it->second.inode;
    MergeInode m = meta_of(e, S_IFREG);
    ino.mode = m.mode;
    ino.uid = m.uid;
    ino.gid = m.gid;
    ino.mtime = m.mtime;
    return write_data(a, e, raw, &ino);
  }

  Status write_data(archive* a, archive_entry* e, std::string_view raw, MergeInode* ino) {
    BERTH_CHECK(b_.begin_file(ino));
    const void* buf = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    uint64_t at = 0;
    for (;;) {
      int r = ar().read_data_block(a, &buf, &size, &offset);
      if (r == ARCHIVE_EOF) break;
      if (r < ARCHIVE_WARN) return archive_err(a, raw);
      if (static_cast<uint64_t>(offset) > at) {  // a hole of a sparse member
        BERTH_CHECK(b_.append_zeros(static_cast<uint64_t>(offset) - at));
        at = static_cast<uint64_t>(offset);
      }
      BERTH_CHECK(b_.append(buf, size));
      at += size;
      stats_.bytes += size;
    }
    int64_t want = ar().entry_size(e);
    if (want > 0 && at < static_cast<uint64_t>(want))
      BERTH_CHECK(b_.append_zeros(static_cast<uint64_t>(want) - at));
    ++stats_.files;
    return b_.end_file();
  }

  MergeTree& tree_;
  Builder& b_;
  SquashStats& stats_;
  int index_ = 0;
  const LayerInput* layer_ = nullptr;
  const CheckedStream* stream_ = nullptr;
  std::string name_;
  std::unordered_map<std::string, MergeInode*> names_;  // this layer's kept non-directories
  std::unordered_set<std::string> shadowed_files_;      // this layer's hidden regular files
  std::map<std::string, Wanted> wanted_;                // hidden files that links still need
  std::vector<CrossLink> cross_;                        // links to older layers' files
  static constexpr int kMaxLinkHops = 40;               // the kernel's own limit
};

}  // namespace

Result<SquashStats> squash_layers(const std::vector<LayerInput>& layers, std::string_view metadata,
                                  const SquashOptions& opts, const std::string& output) {
  return write_squashfs(opts, output,
                        [&](MergeTree& tree, Builder& b, SquashStats& stats) -> Status {
                          int newest = static_cast<int>(layers.size());
                          BERTH_CHECK(add_metadata(tree, b, newest, metadata, stats));
                          LayerSquasher s(tree, b, stats);
                          for (int i = newest - 1; i >= 0; --i)
                            BERTH_CHECK(s.layer(i, layers[static_cast<size_t>(i)]));
                          return s.resolve_cross_links();
                        });
}

}  // namespace berth

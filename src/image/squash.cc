// Squashfs files besides their writing (image/squash.h): libsquashfs bound on first use, the
// options (mksquashfs's words, the compressor's levels), /.berth/image.json's document, the
// reproducible time, a squashed image's copy, and reading a file's super block and metadata
// back. The writing itself: squash_writer.{h,cc} (the Builder), squash_layers.cc (an image's
// layers) and squash_tree.cc (a directory tree).
#include "image/squash.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/fs.h"
#include "core/json.h"
#include "image/sif.h"
#include "image/sqfs_api.h"
#include "image/sqfs_decompressor.h"
#include "image/sqfs_read_file.h"
#include "image/squash_writer.h"
#include "image/squashfs_superblock.h"

namespace berth {

const SqfsApi& sqfs_api() {
  static const SqfsApi api;
  return api;
}

using squash_internal::CompressorChoice;
using squash_internal::find_compressor;
using squash_internal::OutputFile;
using squash_internal::sq;

Result<SquashStats> copy_squash_file(const std::string& from, const std::string& output) {
  SquashInfo info = BERTH_TRY(read_squash_info(from));
  UniqueFd in = BERTH_TRY(open_file(from, O_RDONLY));
  OutputFile out = BERTH_TRY(OutputFile::create(output));
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read", from);
    }
    if (n == 0) break;
    BERTH_CHECK(write_all(out.fd(), std::string_view(buf.data(), static_cast<size_t>(n)), output));
  }
  BERTH_CHECK(out.commit());
  SquashStats stats;
  stats.inodes = info.inodes;
  stats.size = info.file_size;
  return stats;
}

nlohmann::ordered_json squash_metadata(const std::string& reference, const std::string& digest,
                                       const nlohmann::json& config) {
  nlohmann::ordered_json m;
  m["schemaVersion"] = 1;
  m["reference"] = reference;
  m["digest"] = digest;
  m["config"] = config;
  return m;
}

Status check_squash_options(const SquashOptions& opts) {
  const CompressorChoice* c = find_compressor(opts.compressor);
  if (c == nullptr)
    return make_error("squash", opts.compressor, "unknown compressor", ErrorCode::kInvalidInput)
        .with_hint("use --compressor lz4, zstd or gzip");
  if (opts.level != 0 && c->max_level == 0)
    return make_error("squash", opts.compressor, "this compressor has no levels",
                      ErrorCode::kInvalidInput)
        .with_hint("leave out --level, or use zstd (1-22) or gzip (1-9)");
  if (opts.level != 0 && (opts.level < c->min_level || opts.level > c->max_level))
    return make_error(
        "squash", opts.compressor,
        fmt::format("level {} is out of range {}-{}", opts.level, c->min_level, c->max_level),
        ErrorCode::kInvalidInput);
  return {};
}

Result<SquashOptions> parse_squash_options(std::string_view text) {
  auto bad = [&](const std::string& what) {
    return make_error("squash", std::string(text), what, ErrorCode::kInvalidInput)
        .with_hint(
            "squash options are mksquashfs's: -comp lz4|zstd|gzip, "
            "-Xcompression-level N, -processors N");
  };
  std::vector<std::string> words;
  for (size_t i = 0; i < text.size();) {
    size_t end = text.find_first_of(" \t\n", i);
    if (end == std::string_view::npos) end = text.size();
    if (end > i) words.emplace_back(text.substr(i, end - i));
    i = end + 1;
  }
  SquashOptions opts;
  bool comp = false, level = false, processors = false;
  auto number = [&](size_t i, int most, int* out) -> Status {
    if (i + 1 >= words.size()) return bad(words[i] + " needs a number");
    const std::string& n = words[i + 1];
    long v = 0;
    if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos ||
        (v = std::stol(n)) < 1 || v > most)
      return bad(fmt::format("{} {}: not a whole number of 1 to {}", words[i], n, most));
    *out = static_cast<int>(v);
    return {};
  };
  for (size_t i = 0; i < words.size(); i += 2) {
    const std::string& w = words[i];
    bool* seen = w == "-comp"                 ? &comp
                 : w == "-Xcompression-level" ? &level
                 : w == "-processors"         ? &processors
                                              : nullptr;
    if (seen == nullptr)
      return bad("\"" + w +
                 "\" is not an option Berth's squash takes (-comp, "
                 "-Xcompression-level, -processors)");
    if (*seen) return bad(w + " is given twice");
    *seen = true;
    if (w == "-comp") {
      if (i + 1 >= words.size()) return bad("-comp needs a compressor (lz4, zstd or gzip)");
      opts.compressor = words[i + 1];
      if (find_compressor(opts.compressor) == nullptr)
        return bad("-comp " + opts.compressor +
                   ": not a compressor Berth builds with (lz4, "
                   "zstd or gzip)");
    } else if (w == "-Xcompression-level") {
      BERTH_CHECK(number(i, 99, &opts.level));
    } else {
      int n = 0;
      BERTH_CHECK(number(i, 1024, &n));
      opts.workers = static_cast<unsigned>(n);
    }
  }
  if (Status st = check_squash_options(opts); !st.ok())
    return bad(st.error().subject + ": " + st.error().detail);
  return opts;
}

std::optional<int64_t> reproducible_time(const nlohmann::json& config) {
  // The reproducible-builds convention first: a build system pins every time it makes.
  if (const char* epoch = std::getenv("SOURCE_DATE_EPOCH"); epoch != nullptr && *epoch != '\0') {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(epoch, &end, 10);
    if (errno == 0 && *end == '\0' && v >= 0) return v;
  }
  if (config.is_object()) {
    if (auto it = config.find("created"); it != config.end() && it->is_string()) {
      int64_t t = parse_rfc3339(it->get<std::string>());
      if (t >= 0) return t;
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Reading back.

Result<SquashInfo> read_squash_info(const std::string& path) {
  UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return sys_error("stat", path);
  if (!S_ISREG(st.st_mode)) return make_error("read squashfs", path, "not a regular file");
  SquashInfo info;
  info.file_size = static_cast<uint64_t>(st.st_size);
  // The whole file, or a SIF file's squashfs partition (image/sif.h); the superblock check
  // `berth run FILE.sqsh` makes, so that both say the same of one file.
  SquashfsExtent at = BERTH_TRY(locate_squashfs(fd.get(), info.file_size, path));
  BERTH_CHECK(read_squashfs_superblock(fd.get(), at, path));
  if (at.sif) info.sif = at;
  SqfsReadFile file(fd.get(), at.offset, at.size);
  auto fail = [&](std::string_view what, int r) -> Error {
    if (int e = file.err.load()) return sys_error("read", path, e);
    return make_error("read squashfs", path,
                      fmt::format("{}{}: {}", at.sif ? "SIF file's squashfs partition: " : "", what,
                                  sqfs_error_text(r)),
                      ErrorCode::kInvalidInput);
  };
  sqfs_super_t super{};
  int r = sq().super_read(&super, &file.base);
  if (r != 0) return fail("super block", r);
  const char* cname =
      sq().compressor_name_from_id(static_cast<SQFS_COMPRESSOR>(super.compression_id));
  info.compressor = cname ? cname : fmt::format("unknown ({})", super.compression_id);
  info.block_size = super.block_size;
  info.inodes = super.inode_count;
  info.mtime = super.modification_time;
  info.bytes_used = super.bytes_used;

  SqfsPtr<sqfs_compressor_t> cmp(BERTH_TRY(make_squashfs_decompressor(
      super, &file.base, {sq().compressor_config_init, sq().compressor_create}, "read squashfs",
      path)));
  SqfsPtr<sqfs_dir_reader_t> dr(sq().dir_reader_create(&super, cmp.get(), &file.base, 0));
  if (!dr) return fail("directory reader", SQFS_ERROR_ALLOC);
  sqfs_inode_generic_t* raw_inode = nullptr;
  if ((r = sq().dir_reader_get_root_inode(dr.get(), &raw_inode)) != 0) return fail("root inode", r);
  SqfsInodePtr root(raw_inode);
  raw_inode = nullptr;
  SqfsPtr<sqfs_data_reader_t> data(
      sq().data_reader_create(&file.base, super.block_size, cmp.get(), 0));
  if (!data) return fail("data reader", SQFS_ERROR_ALLOC);
  if ((r = sq().data_reader_load_fragment_table(data.get(), &super)) != 0)
    return fail("fragment table", r);
  // A small regular file of the image (no symbolic link followed); nullopt when absent.
  auto read_small = [&](const std::string& rel) -> Result<std::optional<std::string>> {
    sqfs_inode_generic_t* found = nullptr;
    int rc = sq().dir_reader_find_by_path(dr.get(), root.get(), rel.c_str(), &found);
    if (rc == SQFS_ERROR_NO_ENTRY || rc == SQFS_ERROR_NOT_DIR) return std::optional<std::string>();
    if (rc != 0) return fail("/" + rel, rc);
    SqfsInodePtr inode(found);
    if (inode->base.type != SQFS_INODE_FILE && inode->base.type != SQFS_INODE_EXT_FILE)
      return std::optional<std::string>();
    sqfs_u64 size = 0;
    sq().inode_get_file_size(inode.get(), &size);
    if (size > kJsonMaxBytes)
      return make_error("read squashfs", path, "/" + rel + " is larger than 16 MiB",
                        ErrorCode::kInvalidInput);
    std::string text(size, '\0');
    sqfs_s32 n =
        sq().data_reader_read(data.get(), inode.get(), 0, text.data(), static_cast<sqfs_u32>(size));
    if (n < 0) return fail("/" + rel, n);
    text.resize(static_cast<size_t>(n));
    return std::optional<std::string>(std::move(text));
  };
  const std::string mpath(kSquashMetadataPath);
  if (auto text = BERTH_TRY(read_small(mpath))) {
    info.metadata = BERTH_TRY(parse_json(*text, path + ":/" + mpath));
    return info;
  }
  // Not made by Berth: perhaps by enroot.
  auto rc = BERTH_TRY(read_small("etc/rc"));
  if (rc) {
    auto environment = BERTH_TRY(read_small("etc/environment"));
    info.enroot_config = enroot_image_config(rc, environment.value_or(""));
    if (info.enroot_config) return info;
  }
  // Or by Apptainer/Singularity (a SIF file's partition, or an image taken out of one).
  auto runscript = BERTH_TRY(read_small(".singularity.d/runscript"));
  auto docker_env = BERTH_TRY(read_small(".singularity.d/env/10-docker2singularity.sh"));
  auto environment = BERTH_TRY(read_small(".singularity.d/env/90-environment.sh"));
  info.singularity_config = sif_image_config(runscript.has_value(), docker_env, environment);
  return info;
}

std::optional<nlohmann::json> enroot_image_config(const std::optional<std::string>& rc,
                                                  const std::string& environment) {
  if (!rc || rc->find("\"$@\"") == std::string::npos) return std::nullopt;
  nlohmann::json env = nlohmann::json::array();
  size_t at = 0;
  while (at < environment.size()) {
    size_t end = environment.find('\n', at);
    if (end == std::string::npos) end = environment.size();
    std::string_view line(environment.data() + at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // enroot writes the image's Env as it is, one KEY=VALUE a line.
    size_t eq = line.find('=');
    if (line.empty() || line.front() == '#' || eq == 0 || eq == std::string_view::npos) continue;
    env.push_back(std::string(line));
  }
  nlohmann::json config = {{"Entrypoint", {"/bin/sh", "/etc/rc"}}};
  if (!env.empty()) config["Env"] = env;
  return config;
}

}  // namespace berth

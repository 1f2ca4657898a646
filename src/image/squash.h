// Single-file squashfs images, written straight from an image's layer streams (or from a
// directory tree, for a container) with squashfs-tools-ng's libsquashfs, and read back.
//
// squash_layers() reads each layer once, newest first, through the same checks as the unpacker
// (the blob digest and the diff_id are computed over every byte while the entries are read; a
// mismatch fails the whole squash), and merges them with image/squash_merge.h: every surviving
// file's data goes straight from the decompressed tar into the squashfs data blocks, so no tree
// is written to disk and read again, and hidden files are never even decompressed twice.
//
// What is kept, and how it compares with `berth unpack`:
// - paths: the unpacker's rules (image/rootfs_path.h): a name that is absolute or climbs out
//   with ".." fails the squash; "/" and "./" entries give the root its metadata; a path through
//   a symlink (of its own layer, or one an older layer puts where newer layers wrote below)
//   goes where the link leads within the root, as unpack's open_beneath() takes it;
// - hard links to a file a newer layer replaced keep the older file's data, as in unpack;
// - whiteouts and opaque directories as OCI layers define them;
// - ownership and modes as the image says: uid/gid from the tar (root's files stay 0:0), setuid
//   and setgid bits kept (a rootless unpack cannot keep either; a FUSE or user-namespace mount
//   is nosuid anyway), directories exactly as listed (unpack adds u+rwx for itself);
// - symlinks verbatim, hard links as shared inodes, FIFOs;
// - device nodes, sockets and xattrs skipped, as the unpacker skips them (devices are bound
//   from the host at run time);
// - mtimes in seconds (squashfs has no nanoseconds), clamped to 0..2^32-1.
//
// The image's config rides along as /.berth/image.json (kSquashMetadataPath):
// {"schemaVersion":1,"reference":...,"digest":...,"config":{...the OCI image config...}},
// which `berth inspect FILE.sqsh` and `berth run FILE.sqsh` read. Apptainer's /.singularity.d is
// the precedent for metadata inside the image.
//
// The output is written beside its final name as an unnamed file (O_TMPFILE) and given its
// name only when complete, so a failure or a kill never leaves a partial file under that name
// (a file system without O_TMPFILE gets a dot-file that is removed on failure).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "image/sif.h"
#include "image/unpack.h"

namespace berth {

/// Where the image metadata lives inside a squashfs made by Berth.
inline constexpr std::string_view kSquashMetadataPath = ".berth/image.json";

/// The default compressor: lz4. Building is bound by compression on a login node's few cores:
/// mksquashfs on a 15k-file tree with 2 cores took 0.9 s with lz4 and 25-26 s with gzip or zstd
/// (docs/squashfs.md has Berth's own figures), and lz4 also decompresses fastest when thousands
/// of ranks read the image through FUSE. zstd or gzip trade that time for a smaller file.
inline constexpr const char* kDefaultCompressor = "lz4";

struct SquashOptions {
  std::string compressor = kDefaultCompressor;  ///< lz4, zstd or gzip
  int level = 0;         ///< 0: the compressor's default (zstd 15, gzip 9); lz4 has no levels
  unsigned workers = 0;  ///< compression threads; 0: one per CPU this process may use
  /// The file system's own time (Unix seconds: the super block's, and /.berth's); nullopt:
  /// now. With it, the same input gives the same bytes (reproducible_time()).
  std::optional<int64_t> made;
};

/// The time that makes a squash of an image reproducible: $SOURCE_DATE_EPOCH when set (the
/// reproducible-builds convention), else the image config's "created"; nullopt when neither.
std::optional<int64_t> reproducible_time(const nlohmann::json& config);

struct SquashStats {
  uint64_t inodes = 0;
  uint64_t files = 0;            ///< regular files written
  uint64_t bytes = 0;            ///< their bytes, uncompressed
  uint64_t shadowed = 0;         ///< layer entries hidden by newer layers (never read)
  uint64_t skipped_devices = 0;  ///< device nodes left out
  uint64_t size = 0;             ///< of the squashfs file
};

/// The document kept at /.berth/image.json: {"schemaVersion":1,"reference","digest","config"}.
nlohmann::ordered_json squash_metadata(const std::string& reference, const std::string& digest,
                                       const nlohmann::json& config);

/// Checks the compressor name and level: one line naming what is allowed.
Status check_squash_options(const SquashOptions& opts);

/// Parses options written as mksquashfs takes them (enroot's ENROOT_SQUASH_OPTIONS, the site
/// policy's squash_options): "-comp lz4|zstd|gzip", "-Xcompression-level N" (zstd 1-22, gzip
/// 1-9) and "-processors N", separated by blanks, each at most once; "" gives the defaults.
/// Anything else, and what check_squash_options() refuses, is an error whose detail says what
/// and which word.
Result<SquashOptions> parse_squash_options(std::string_view text);

/// Writes `layers` (bottom first, as Store::layer_inputs() gives them) merged into one
/// squashfs file at `output`, with `metadata` (JSON text) as /.berth/image.json.
Result<SquashStats> squash_layers(const std::vector<LayerInput>& layers, std::string_view metadata,
                                  const SquashOptions& opts, const std::string& output);

/// Writes the directory tree at `root` (a container's root filesystem) as a squashfs file.
/// Files owned by `host_uid`/`host_gid` are written as owned by 0 (what the container sees
/// in its user namespace, as export does); -1 keeps every owner as it is on the host.
Result<SquashStats> squash_tree(const std::string& root, std::string_view metadata,
                                const SquashOptions& opts, const std::string& output,
                                uid_t host_uid = static_cast<uid_t>(-1),
                                gid_t host_gid = static_cast<gid_t>(-1));

/// Copies the squashfs file `from` (a squashed image's blob) to `output`, published only when
/// whole, as squash_layers() publishes; the stats give its inodes and size only.
Result<SquashStats> copy_squash_file(const std::string& from, const std::string& output);

/// The run settings enroot keeps in the images it makes (`enroot import`): the image config's
/// Env as the lines of /etc/environment, and WorkingDir, Entrypoint and Cmd in the script
/// /etc/rc, which enroot runs with /bin/sh and the user's command as its arguments (it changes
/// to the working directory, sources /etc/rc.local, and execs the entrypoint with the command
/// or the image's Cmd). From the two files' texts (`rc` nullopt: absent), an image config
/// ("config" object) that runs the image as enroot does: Env from /etc/environment and
/// Entrypoint `/bin/sh /etc/rc`. nullopt when /etc/rc is absent or is not enroot's (it always
/// passes the command on as "$@").
std::optional<nlohmann::json> enroot_image_config(const std::optional<std::string>& rc,
                                                  const std::string& environment);

/// What a squashfs file says about itself, read without mounting it.
struct SquashInfo {
  std::string compressor;
  uint32_t block_size = 0;
  uint32_t inodes = 0;
  uint32_t mtime = 0;       ///< the super block's modification time
  uint64_t bytes_used = 0;  ///< of the file system (the file may be padded beyond)
  uint64_t file_size = 0;
  std::optional<nlohmann::json> metadata;  ///< /.berth/image.json; nullopt: none (not Berth's)
  /// Without Berth's metadata, the run settings of an image enroot made
  /// (enroot_image_config()); nullopt: none.
  std::optional<nlohmann::json> enroot_config;
  /// Without either, the run settings of an image Apptainer/Singularity made
  /// (sif_image_config()); nullopt: none.
  std::optional<nlohmann::json> singularity_config;
  /// Where the squashfs image lies in a SIF file; nullopt: the file is the squashfs image.
  std::optional<SquashfsExtent> sif;
};

/// Reads the super block and /.berth/image.json of the squashfs file at `path` (without it,
/// enroot's /etc/rc and /etc/environment, then Apptainer's /.singularity.d), or of a SIF
/// file's squashfs partition. A file that is
/// not squashfs, or is truncated or corrupt, is a one-line error naming it.
Result<SquashInfo> read_squash_info(const std::string& path);

}  // namespace berth

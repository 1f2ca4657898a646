// Writing tar archives (POSIX pax format) with libarchive: the files of `berth save` and the
// root filesystem of `berth export`.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"

struct archive;

namespace berth {

/// A tar archive being written to a file descriptor (not owned). finish() writes the end
/// blocks; an archive dropped without finish() is incomplete, which the caller removes.
class TarWriter {
 public:
  /// Starts an archive on `fd`; `what` names the destination in errors ("-" for stdout).
  static Result<TarWriter> open(int fd, std::string what);
  TarWriter(TarWriter&&) noexcept;
  TarWriter& operator=(TarWriter&&) noexcept;
  ~TarWriter();

  /// A regular file holding `data`.
  Status add_bytes(const std::string& name, std::string_view data, int mode = 0644);
  /// A regular file with the contents of the host file `path`.
  Status add_file(const std::string& name, const std::string& path, int mode = 0644);
  /// A directory entry.
  Status add_dir(const std::string& name, int mode = 0755);
  /// Everything under the directory `root`, names relative to it (after `prefix`, "DIR/" or
  /// ""), sorted: directories, files, symlinks (never followed), FIFOs and hard links (stored
  /// once, then linked), with mode, owner and mtime as stored. Sockets and device nodes are
  /// left out.
  Status add_tree(const std::string& root, const std::string& prefix = "");
  /// From now on, writes owners as a rootless container sees them (what `docker export`
  /// writes): `host_uid`/`host_gid`, which the container's user namespace maps to root, as 0,
  /// and every other ID as 65534, the kernel's overflow ID for unmapped owners.
  void set_owner_view(uid_t host_uid, gid_t host_gid);
  /// Writes the end of the archive.
  Status finish();

 private:
  TarWriter() = default;
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace berth

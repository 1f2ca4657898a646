// Shared unit-test fixtures: a temporary folder removed at the end of the test,
// and small file helpers for building trees in it.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/fs.h"

namespace berth {

/// A fresh folder (mkdtemp under gtest's temp dir) removed, with all in it, on destruction.
class TempDir {
 public:
  /// `tag` names the folder ("berth-<tag>-XXXXXX") so a leftover says whose it was.
  explicit TempDir(std::string_view tag = "test") {
    std::string tmpl = ::testing::TempDir();
    if (tmpl.empty() || tmpl.back() != '/') tmpl += '/';
    tmpl += "berth-" + std::string(tag) + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      // Nothing can run without it; a constructor cannot ASSERT.
      std::fprintf(stderr, "mkdtemp %s: %s\n", tmpl.c_str(), std::strerror(errno));
      std::abort();
    }
    path = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { (void)remove_tree(path); }  // best effort: a leftover is only litter

  /// `rel` under this folder.
  std::string operator/(std::string_view rel) const { return path_join(path, rel); }
  /// Writes `text` to `rel` under this folder (parents made), adding `mode`'s bits; the path.
  std::string write(std::string_view rel, std::string_view text, mode_t mode = 0644) const;

  std::string path;  ///< the folder, absolute
};

/// Writes `text` to `path`, creating its parents; replaces an existing file.
inline void write_text(const std::string& path, std::string_view text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

/// The whole file at `path`, or "<missing>" when it cannot be read.
inline std::string slurp(const std::string& path) {
  auto r = read_file(path);
  return r.ok() ? *r : "<missing>";
}

inline std::string TempDir::write(std::string_view rel, std::string_view text, mode_t mode) const {
  std::string p = *this / rel;
  write_text(p, text);
  struct stat st;
  if (::stat(p.c_str(), &st) == 0) (void)::chmod(p.c_str(), (st.st_mode & 07777) | mode);
  return p;
}

}  // namespace berth

// A private folder under the store's tmp/ where `import` and `load` put what they read
// before anything becomes visible in the store.
//
//   tmp/stage-XXXXXX/lock    flock held while the import or load runs
//   tmp/stage-XXXXXX/f<N>    staged files, hashed while written
//
// Staged files become blobs by rename (Store::adopt_blob), and the image record is added
// last, so a killed import or load leaves only this folder behind: `images` never shows a
// half-read image. Each new staging area removes the folders whose lock nobody holds, as
// `berth gc` does (image/gc.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "image/store.h"

namespace berth {

/// A file written into a staging area, with the digest and size of its bytes.
struct StagedFile {
  std::string path;
  std::string digest;  ///< "sha256:<hex>"
  int64_t size = 0;
};

class Staging {
 public:
  /// Makes a new staging area under `store`'s tmp/, removing abandoned ones.
  static Result<Staging> create(const Store& store);
  Staging(Staging&& o) noexcept;
  Staging& operator=(Staging&&) = delete;
  /// Removes the folder and whatever is still in it.
  ~Staging();

  const std::string& dir() const { return dir_; }
  /// A fresh path inside the folder (nothing is created).
  std::string new_path();
  /// Copies `fd` to its end into a new staged file; `what` names the source in errors.
  Result<StagedFile> stage_fd(int fd, const std::string& what);
  /// Begins a staged file fed piecewise through StagedWriter.
  Result<class StagedWriter> begin();

 private:
  Staging() = default;
  std::string dir_;
  FileLock lock_;
  int next_ = 0;
};

/// A staged file being written: bytes are hashed as they come.
class StagedWriter {
 public:
  StagedWriter(StagedWriter&&) noexcept;
  StagedWriter& operator=(StagedWriter&&) noexcept;
  ~StagedWriter();
  Status write(const char* data, size_t len);
  /// Closes the file and returns it with its digest.
  Result<StagedFile> finish();

 private:
  friend class Staging;
  StagedWriter();
  struct State;
  std::unique_ptr<State> s_;
};

/// An image read into a staging area, ready to become visible in the store.
struct StagedImage {
  ImageRecord record;              ///< all but the name; `pulled` is set when published
  std::vector<std::string> names;  ///< references to record it under, at least one
  std::vector<StagedFile> files;   ///< staged blobs (layers; configs and manifests from archives)
  std::vector<std::pair<std::string, std::string>> made;  ///< {digest, bytes} made in memory
};

/// The last step of import and load: publishes the blobs, then adds one record per name, so
/// that a record never points at a missing blob. Returns the records added.
Result<std::vector<ImageRecord>> publish_staged(Store& store, const StagedImage& image);

}  // namespace berth

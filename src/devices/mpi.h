// Host MPI injection (`--mpi[=TYPE]`): the site policy declares the host's MPIs ([mpi.TYPE]
// tables: libraries, dependencies, mounts, abi rule); a run asking for one gets the host's
// libraries bound over the image's ABI-compatible ones (devices/mpi_abi.h decides), or beside
// them in Berth's run directory, with the loader cache remade for the run only (the same
// ldconfig step GPU injection uses): nothing is written into the image.
//
// Where things go:
//  - verdict "over": the host's real file is bound read-only over the real file the image's
//    ld.so.cache entry resolves to (its links stay the image's, so every soname link of the
//    chain now reaches the host library);
//  - verdict "beside", a host library the image lacks, and every dependency: bound into
//    kMpiLibDir with a soname link, which the loader searches first;
//  - mounts: the declaration's extra binds, as -v.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "devices/mpi_abi.h"
#include "runtime/container_spec.h"

namespace berth {

inline constexpr const char* kMpiLibDir = "/usr/lib/berth/mpi";

/// One host MPI, as the site policy declares it ([mpi.TYPE]): the one form the policy file's
/// reader fills (site/config.h) and --mpi injects.
struct MpiDeclaration {
  std::string type;                       ///< the [mpi.TYPE] name ("mpich")
  std::vector<std::string> libraries;     ///< host paths of the MPI libraries
  std::vector<std::string> dependencies;  ///< host paths of libraries they need
  std::vector<std::string> mounts;        ///< -v syntax: HOST:CTR[:ro|:rw]
  MpiAbiRule abi = MpiAbiRule::kMajor;    ///< the declaration's abi, major when it gives none
};

/// A host library, resolved: `path` as declared, `real` its real file, `soname` its DT_SONAME.
struct HostLibrary {
  std::string path;
  std::string real;
  std::string soname;
};

/// A library of the image's ld.so.cache: `soname` (the key), `real` the container path of the
/// real file its entry resolves to inside the root.
struct ImageLibrary {
  std::string soname;
  std::string real;
};

/// The plan, pure: device edits, loader directories, warnings. An image without any library
/// of the declared linker names is an error, as is an incompatible pair (one line naming both
/// files and versions).
struct MpiPlan {
  std::vector<DeviceEdit> edits;
  std::vector<std::string> library_dirs;
  std::vector<std::string> warnings;
};
Result<MpiPlan> plan_mpi(const MpiDeclaration& decl, const std::vector<HostLibrary>& host,
                         const std::vector<HostLibrary>& dependencies,
                         const std::vector<ImageLibrary>& image);

/// Resolves the declaration's host files (real file, soname).
Result<std::vector<HostLibrary>> resolve_host_libraries(const std::vector<std::string>& paths);

/// The image's ld.so.cache entries under `rootfs`, each resolved to its real file inside the
/// root; empty when the image has no cache.
Result<std::vector<ImageLibrary>> image_libraries(const std::string& rootfs);

/// `--mpi[=TYPE]` for `spec`: the declaration `type` names ("" = `default_type`) among
/// `declared`, planned against the image and added to `spec`.
Status add_mpi(const std::vector<MpiDeclaration>& declared, const std::string& default_type,
               const std::string& type, ContainerSpec& spec);

}  // namespace berth

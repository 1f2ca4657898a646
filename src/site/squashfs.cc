#include "site/squashfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/json.h"
#include "core/root_path.h"
#include "image/image_config.h"
#include "image/squash.h"

namespace berth {
namespace {

/// The text of `path` beneath `root_fd`, nullopt when absent (or empty).
Result<std::optional<std::string>> optional_file(int root_fd, const char* path) {
  std::string text = BERTH_TRY(read_file_in_root(root_fd, path));
  if (text.empty()) return std::optional<std::string>();
  return std::optional<std::string>(std::move(text));
}

/// sif_image_config() of the image beneath `root_fd`.
Result<std::optional<nlohmann::json>> singularity_config(int root_fd) {
  UniqueFd script(open_in_root(root_fd, "/.singularity.d/runscript", O_PATH));
  struct stat st;
  bool runscript = script.valid() && ::fstat(script.get(), &st) == 0 && S_ISREG(st.st_mode);
  auto docker_env =
      BERTH_TRY(optional_file(root_fd, "/.singularity.d/env/10-docker2singularity.sh"));
  auto environment = BERTH_TRY(optional_file(root_fd, "/.singularity.d/env/90-environment.sh"));
  return sif_image_config(runscript, docker_env, environment);
}

}  // namespace

Result<SquashfsFile> open_squashfs(const std::string& path) {
  SquashfsFile f;
  f.path = path;
  f.fd = BERTH_TRY(open_file(path, O_RDONLY));
  if (::fstat(f.fd.get(), &f.st) != 0) return sys_error("stat", path);
  if (!S_ISREG(f.st.st_mode))
    return make_error("read squashfs", path, "not a regular file", ErrorCode::kInvalidInput);
  f.extent = BERTH_TRY(locate_squashfs(f.fd.get(), static_cast<uint64_t>(f.st.st_size), path));
  f.superblock = BERTH_TRY(read_squashfs_superblock(f.fd.get(), f.extent, path));
  return f;
}

std::string squashfs_key(const struct stat& st) {
  // The fields themselves, in hex: no two versions share a key, and no hash function to load
  // (a SHA-256 here pulled libcrypto into every squashfs start, half a millisecond).
  auto u = [](auto v) { return static_cast<uint64_t>(v); };
  return fmt::format("{:x}-{:x}-{:x}-{:x}.{:x}-{:x}.{:x}", u(st.st_dev), u(st.st_ino),
                     u(st.st_size), u(st.st_mtim.tv_sec), u(st.st_mtim.tv_nsec),
                     u(st.st_ctim.tv_sec), u(st.st_ctim.tv_nsec));
}

Result<nlohmann::json> read_squashfs_image_config(int root_fd, const std::string& image,
                                                  bool* found) {
  *found = false;
  std::string text = BERTH_TRY(read_file_in_root(root_fd, "/.berth/image.json"));
  if (text.empty()) {
    // Not made by Berth: an image enroot made runs as under enroot (image/squash.h).
    std::string rc = BERTH_TRY(read_file_in_root(root_fd, "/etc/rc"));
    std::optional<nlohmann::json> config;
    if (!rc.empty())
      config = enroot_image_config(rc, BERTH_TRY(read_file_in_root(root_fd, "/etc/environment")));
    // Else one Apptainer/Singularity made (a SIF file's partition): it runs as under Apptainer.
    if (!config) config = BERTH_TRY(singularity_config(root_fd));
    if (!config) return nlohmann::json::object();
    *found = true;
    return *config;
  }
  std::string what = image + ":/.berth/image.json";
  nlohmann::json j = BERTH_TRY(parse_json(text, what));
  if (!j.is_object())
    return make_error("read image metadata", what, "not a JSON object", ErrorCode::kInvalidInput);
  auto version = j.find("schemaVersion");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 1)
    return make_error("read image metadata", what, "schemaVersion must be 1",
                      ErrorCode::kUnsupported);
  *found = true;
  auto config = j.find("config");
  if (config == j.end() || config->is_null()) return nlohmann::json::object();
  ImageConfig parsed = BERTH_TRY(parse_image_config(to_text(*config), what));
  return parsed.config;
}

}  // namespace berth

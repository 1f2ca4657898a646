// The image config (OCI image-spec config.json, Docker's image JSON): the one parser of the
// blob that pull, load, create, run and inspect read. Writers (import) build the same JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "image/platform.h"

namespace berth {

/// What Berth reads from an image config blob.
struct ImageConfig {
  Platform platform;                  ///< "os", "architecture", "variant" as written ("" absent)
  std::vector<std::string> diff_ids;  ///< "rootfs"."diff_ids", one per layer
  /// The "config" object (Env, Entrypoint, Cmd, WorkingDir, User, Labels...), kept whole for
  /// the container record and `inspect`; an empty object when absent or null.
  nlohmann::json config = nlohmann::json::object();
};

/// Parses an image config blob; `what` (its digest or path) names it in errors.
Result<ImageConfig> parse_image_config(std::string_view text, const std::string& what);

/// What a run takes from the "config" object (Docker's rules for each field).
struct RunSettings {
  std::vector<std::string> entrypoint;  ///< "Entrypoint"
  std::vector<std::string> cmd;         ///< "Cmd"
  std::vector<std::string> env;         ///< "Env", "K=V"
  std::string user;                     ///< "User"; "" when absent or not a string
  std::string working_dir;              ///< "WorkingDir"; "" when absent or not a string
};

/// Reads the run settings from a "config" object: Entrypoint, Cmd and Env must be lists of
/// strings (absent or null: empty).
Result<RunSettings> parse_run_settings(const nlohmann::json& config);

}  // namespace berth

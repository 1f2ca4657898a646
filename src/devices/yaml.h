// YAML documents as JSON values, for CDI specs (nvidia-ctk writes YAML by
// default). libyaml (linked statically: it is small and only CDI reads it)
// does the parsing; this turns its events into nlohmann::json.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace berth {

/// Parses the first document of `text`. Plain scalars that read as integers,
/// true/false or null become those; quoted scalars stay strings. Anchors and
/// aliases are refused. `where` names the file in errors.
Result<nlohmann::json> parse_yaml(std::string_view text, const std::string& where);

}  // namespace berth

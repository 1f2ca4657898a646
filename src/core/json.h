// Small reads of nlohmann::json values that never throw.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace berth {

/// The string at j[key], or "" when `j` is not an object, or the key is absent or not a string.
std::string string_field(const nlohmann::json& j, const char* key);

}  // namespace berth

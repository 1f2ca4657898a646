// JSON from outside Berth, parsed with limits, and small reads of nlohmann::json values that
// never throw.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

#include "core/error.h"

namespace berth {

/// The deepest nesting of arrays and objects parse_json accepts (containerd and Go's
/// encoding/json stop far deeper documents; no real manifest, config or CDI spec nests beyond 20).
inline constexpr int kJsonMaxDepth = 256;
/// The largest document parse_json accepts by default (16 MiB: a manifest is at most 4 MiB,
/// as containerd and the distribution client limit it; a long image config stays well under).
inline constexpr size_t kJsonMaxBytes = size_t{16} << 20;

/// Parses `text` after checking, in one linear pass, that it is at most `max_bytes` long and
/// nested at most kJsonMaxDepth deep. Errors are one line: "parse <what>: <detail>", e.g.
/// "parse manifest sha256:...: nested deeper than 256 levels".
Result<nlohmann::json> parse_json(std::string_view text, const std::string& what,
                                  size_t max_bytes = kJsonMaxBytes);

/// parse_json's value, or a discarded value (is_discarded()) when `text` is not JSON within the
/// limits: for best-effort reads where a bad document is simply ignored.
nlohmann::json parse_json_or_discarded(std::string_view text, size_t max_bytes = kJsonMaxBytes);

/// nlohmann's exception text without its "[json.exception.parse_error.101] " prefix.
std::string json_error_text(const std::exception& e);

/// The string at j[key], or "" when `j` is not an object, or the key is absent or not a string.
std::string string_field(const nlohmann::json& j, const char* key);

}  // namespace berth

// JSON from outside Berth, parsed with limits; JSON to text without exceptions; small reads of
// nlohmann::json values that never throw.
//
// nlohmann::json throws from dump() when a string holds bytes that are not UTF-8, and such
// strings reach Berth's JSON from outside (an argument, an environment variable, a file name).
// Every JSON document Berth writes or prints goes through to_text(), which writes U+FFFD in
// place of each invalid byte instead (as Docker's JSON encoder does), so no byte from outside can
// throw out of a command.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
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

/// `j` as JSON text: `indent` spaces per level, or one line when -1; never throws.
std::string to_text(const nlohmann::json& j, int indent = -1);
/// The same for a document that keeps its keys in insertion order.
std::string to_text(const nlohmann::ordered_json& j, int indent = -1);

/// Appends `s` as a JSON string, quoted, with exactly the bytes to_text() writes for it: for a
/// writer of text too hot to build a value first (berthd's job lists).
void append_json_string(std::string& out, std::string_view s);
/// Appends `v` as a JSON number, as to_text() writes it.
void append_json_number(std::string& out, int64_t v);

/// The string at j[key], or "" when `j` is not an object, or the key is absent or not a string.
std::string string_field(const nlohmann::json& j, const char* key);

}  // namespace berth

// JSON to text without exceptions.
//
// nlohmann::json throws from dump() when a string holds bytes that are not UTF-8, and such
// strings reach Berth's JSON from outside (an argument, an environment variable, a file name).
// Every JSON document Berth writes or prints goes through to_text(), which writes U+FFFD in
// place of each invalid byte instead (as Docker's JSON encoder does), so no byte from outside can
// throw out of a command.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace berth {

/// `j` as JSON text: `indent` spaces per level, or one line when -1; never throws.
std::string to_text(const nlohmann::json& j, int indent = -1);
/// The same for a document that keeps its keys in insertion order.
std::string to_text(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace berth

// One TOML file read as Berth reports it (site/toml.h): parse_toml() turns a syntax error into
// one line naming the file, the line and the column, and TomlReader's typed reads name the
// file, the value's line and its key, with a hint where the keys are documented. The site
// policy's reader (site/policy_reader.h) and berthd's (gateway/config.cc) build on it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "site/toml.h"

namespace berth {

/// Parses the TOML text of the file `path` (which names it in errors); a syntax error is one
/// line: "read config PATH: line L, column C: DESCRIPTION".
Result<toml::table> parse_toml(std::string_view text, const std::string& path);

class TomlReader {
 public:
  /// `path` must outlive the reader; `hint` says where the keys are documented.
  TomlReader(const std::string& path, std::string hint) : path_(path), hint_(std::move(hint)) {}

  Error bad(const toml::node& node, std::string_view key, const std::string& what) const {
    std::string where;
    if (node.source().begin.line > 0)
      where = "line " + std::to_string(node.source().begin.line) + ": ";
    return make_error("read config", path_, where + "\"" + std::string(key) + "\" " + what,
                      ErrorCode::kInvalidInput)
        .with_hint(hint_);
  }

  Result<std::string> string(const toml::node& node, std::string_view key) const {
    auto s = node.value<std::string>();
    if (!node.is_string() || !s) return bad(node, key, "is not a string");
    return *s;
  }

  Result<bool> boolean(const toml::node& node, std::string_view key) const {
    if (!node.is_boolean()) return bad(node, key, "is not true or false");
    return *node.value<bool>();
  }

  Result<std::vector<std::string>> strings(const toml::node& node, std::string_view key) const {
    const toml::array* a = node.as_array();
    if (a == nullptr) return bad(node, key, "is not a list of strings");
    std::vector<std::string> out;
    for (const toml::node& item : *a) {
      if (!item.is_string()) return bad(node, key, "is not a list of strings");
      out.push_back(*item.value<std::string>());
    }
    return out;
  }

 protected:
  const std::string& path() const { return path_; }
  const std::string& hint() const { return hint_; }

 private:
  const std::string& path_;
  std::string hint_;
};

}  // namespace berth

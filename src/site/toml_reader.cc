#include "site/toml_reader.h"

namespace berth {

Result<toml::table> parse_toml(std::string_view text, const std::string& path) {
  toml::parse_result parsed = toml::parse(text, path);
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    return make_error("read config", path,
                      "line " + std::to_string(e.source().begin.line) + ", column " +
                          std::to_string(e.source().begin.column) + ": " +
                          std::string(e.description()),
                      ErrorCode::kInvalidInput);
  }
  return std::move(parsed).table();
}

}  // namespace berth

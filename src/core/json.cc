#include "core/json.h"

#include <charconv>

namespace berth {

namespace {

/// "" when `text` is within the limits, else why not. Strings are skipped so that brackets
/// inside them do not count; the pass is linear and allocates nothing.
std::string limit_problem(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes)
    return "the document is " + std::to_string(text.size()) + " bytes, more than the " +
           std::to_string(max_bytes) + " allowed";
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kJsonMaxDepth)
        return "nested deeper than " + std::to_string(kJsonMaxDepth) + " levels";
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;  // unbalanced brackets are the parser's to report
    }
  }
  return "";
}

}  // namespace

std::string json_error_text(const std::exception& e) {
  std::string_view w = e.what();
  if (!w.empty() && w.front() == '[') {
    if (size_t close = w.find("] "); close != std::string_view::npos) w.remove_prefix(close + 2);
  }
  return std::string(w);
}

Result<nlohmann::json> parse_json(std::string_view text, const std::string& what,
                                  size_t max_bytes) {
  if (std::string p = limit_problem(text, max_bytes); !p.empty())
    return make_error("parse", what, p);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return make_error("parse", what, json_error_text(e));
  }
}

nlohmann::json parse_json_or_discarded(std::string_view text, size_t max_bytes) {
  if (!limit_problem(text, max_bytes).empty())
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

void append_json_string(std::string& out, std::string_view s) {
  // Printable ASCII but the quote and the backslash is written as it is; any other byte (a
  // control character, UTF-8, an invalid byte) leaves the string to nlohmann's writer, so that
  // escapes and replacements are to_text()'s own.
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e || c == '"' || c == '\\') {
      out += to_text(nlohmann::json(std::string(s)));
      return;
    }
  }
  out.push_back('"');
  out.append(s);
  out.push_back('"');
}

void append_json_number(std::string& out, int64_t v) {
  char buf[24];
  auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
  out.append(buf, end);
}

std::string string_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::string();
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string to_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string to_text(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace berth

#include "devices/yaml.h"

#include <yaml.h>

#include <charconv>
#include <memory>
#include <vector>

#include "core/json.h"

namespace berth {
namespace {

using nlohmann::json;

/// The largest YAML document read (a CDI spec is a few kB; JSON's limit serves both).
constexpr size_t kYamlMaxBytes = kJsonMaxBytes;

json scalar(const yaml_event_t& ev) {
  std::string v(reinterpret_cast<const char*>(ev.data.scalar.value), ev.data.scalar.length);
  if (ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return v;
  if (v == "true" || v == "True") return true;
  if (v == "false" || v == "False") return false;
  if (v == "null" || v == "~" || v.empty()) return nullptr;
  long long n = 0;
  const char* end = v.data() + v.size();
  auto [p, ec] = std::from_chars(v.data() + (v[0] == '+' ? 1 : 0), end, n);
  if (ec == std::errc() && p == end) return n;
  return v;
}

}  // namespace

Result<json> parse_yaml(std::string_view text, const std::string& where) {
  // Limits before and while parsing, so that a hostile file costs neither time nor memory:
  // the size here, the nesting depth at each open container below, and aliases (the
  // "billion laughs" anchor bomb) are refused outright, as before.
  if (text.size() > kYamlMaxBytes)
    return make_error("parse YAML", where,
                      "the document is " + std::to_string(text.size()) + " bytes, more than the " +
                          std::to_string(kYamlMaxBytes) + " allowed");
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return make_error("parse YAML", where, "out of memory");
  std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> guard(&parser, yaml_parser_delete);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  // A stack of open containers; a mapping's pending key waits beside it.
  struct Open {
    json value;
    std::optional<std::string> key;
  };
  std::vector<Open> stack;
  json root;
  bool done = false;
  auto add = [&](json v) -> Status {
    if (stack.empty()) {
      root = std::move(v);
      done = true;
      return {};
    }
    Open& top = stack.back();
    if (top.value.is_array()) {
      top.value.push_back(std::move(v));
    } else if (!top.key) {
      if (!v.is_string() && !v.is_number() && !v.is_boolean())
        return make_error("parse YAML", where, "a mapping key must be a scalar");
      top.key = v.is_string() ? v.get<std::string>() : to_text(v);
    } else {
      top.value[*top.key] = std::move(v);
      top.key.reset();
    }
    return {};
  };
  while (!done) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&parser, &ev)) {
      return make_error("parse YAML", where,
                        std::string(parser.problem ? parser.problem : "syntax error") +
                            " at line " + std::to_string(parser.problem_mark.line + 1));
    }
    std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> ev_guard(&ev, yaml_event_delete);
    switch (ev.type) {
      case YAML_STREAM_END_EVENT:
        done = true;
        break;
      case YAML_ALIAS_EVENT:
        return make_error("parse YAML", where, "aliases are not supported");
      case YAML_SCALAR_EVENT:
        BERTH_CHECK(add(scalar(ev)));
        break;
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT:
        if (stack.size() >= static_cast<size_t>(kJsonMaxDepth))
          return make_error("parse YAML", where,
                            "nested deeper than " + std::to_string(kJsonMaxDepth) + " levels");
        stack.push_back(
            {ev.type == YAML_SEQUENCE_START_EVENT ? json::array() : json::object(), std::nullopt});
        break;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        json v = std::move(stack.back().value);
        stack.pop_back();
        BERTH_CHECK(add(std::move(v)));
        break;
      }
      default:  // stream/document start and end: nothing to build
        break;
    }
  }
  return root;
}

}  // namespace berth

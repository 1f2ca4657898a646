#include "core/go_template.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/json.h"

namespace berth {
namespace {

/// One operand of a command: a field path from the dot, or a literal.
struct Arg {
  bool is_field = false;
  std::vector<std::string> path;  ///< is_field: the names after the dot (empty: the dot)
  nlohmann::json literal;         ///< otherwise
};

/// A function with its arguments, or (func empty) a single operand.
struct Cmd {
  std::string func;
  std::vector<Arg> args;
};
using Pipeline = std::vector<Cmd>;

struct Node {
  enum class Kind { kText, kAction, kRange, kIf };
  Kind kind = Kind::kText;
  std::string text;
  Pipeline pipe;
  std::vector<Node> body, else_body;
};

/// A value, or "missing" (a map key that is not there: Go prints <no value>).
struct Value {
  nlohmann::json v;
  bool missing = false;
};

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  /// Nodes up to the end or to {{end}}/{{else}} (returned in `stop`).
  Result<std::vector<Node>> nodes(std::string* stop) {
    std::vector<Node> out;
    while (pos_ < t_.size()) {
      size_t open = t_.find("{{", pos_);
      std::string text(t_.substr(pos_, open == std::string_view::npos ? open : open - pos_));
      // "{{- " and " -}}" trim; "{{-3}}" is a number, as in Go.
      bool trim_before = open != std::string_view::npos && t_.substr(open + 2, 2) == "- ";
      if (trim_before) {
        while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
          text.pop_back();
      }
      if (!text.empty()) out.push_back(Node{Node::Kind::kText, text, {}, {}, {}});
      if (open == std::string_view::npos) {
        pos_ = t_.size();
        break;
      }
      size_t start = open + 2 + (trim_before ? 1 : 0);
      size_t close = t_.find("}}", start);
      if (close == std::string_view::npos) return fail("unclosed action");
      bool trim_after = close >= start + 2 && t_.substr(close - 2, 2) == " -";
      std::string_view action = t_.substr(start, close - start - (trim_after ? 1 : 0));
      pos_ = close + 2;
      if (trim_after)
        while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
      auto tokens = BERTH_TRY(lex(action));
      if (tokens.empty()) return fail("empty action");
      if (tokens[0] == "end" || tokens[0] == "else") {
        if (tokens.size() != 1) return fail("{{" + tokens[0] + "}} takes nothing");
        *stop = tokens[0];
        return out;
      }
      Node n;
      n.kind = Node::Kind::kAction;
      if (tokens[0] == "range" || tokens[0] == "if") {
        n.kind = tokens[0] == "range" ? Node::Kind::kRange : Node::Kind::kIf;
        tokens.erase(tokens.begin());
        n.pipe = BERTH_TRY(pipeline(tokens));
        std::string inner;
        n.body = BERTH_TRY(nodes(&inner));
        if (inner == "else") {
          n.else_body = BERTH_TRY(nodes(&inner));
          if (inner == "else") return fail("a second {{else}}");
        }
        if (inner != "end") return fail("missing {{end}}");
      } else {
        n.pipe = BERTH_TRY(pipeline(tokens));
      }
      out.push_back(std::move(n));
    }
    *stop = "";
    return out;
  }

  Error fail(const std::string& why) const {
    return make_error("template", std::string(t_), why, ErrorCode::kInvalidInput)
        .with_hint("see 'Templates' in docs/docker.md for what is understood");
  }

 private:
  /// Words of an action: fields, quoted strings (kept with their quote), numbers, names, '|'.
  Result<std::vector<std::string>> lex(std::string_view a) const {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < a.size()) {
      char ch = a[i];
      if (std::isspace(static_cast<unsigned char>(ch))) {
        ++i;
      } else if (ch == '|') {
        out.emplace_back("|");
        ++i;
      } else if (ch == '"') {
        std::string s = "\"";
        ++i;
        for (; i < a.size() && a[i] != '"'; ++i) {
          if (a[i] == '\\' && i + 1 < a.size()) {
            char e = a[++i];
            s += e == 'n' ? '\n' : e == 't' ? '\t' : e;
          } else {
            s += a[i];
          }
        }
        if (i >= a.size()) return fail("unterminated string");
        ++i;
        out.push_back(s);
      } else {
        size_t j = i;
        while (j < a.size() && !std::isspace(static_cast<unsigned char>(a[j])) && a[j] != '|' &&
               a[j] != '"')
          ++j;
        out.emplace_back(a.substr(i, j - i));
        i = j;
      }
    }
    return out;
  }

  Result<Arg> operand(const std::string& w) const {
    Arg a;
    if (w.starts_with("\"")) {
      a.literal = w.substr(1);
    } else if (w.starts_with(".")) {
      a.is_field = true;
      if (w != ".") {
        std::string_view rest = std::string_view(w).substr(1);
        size_t p = 0;
        while (p <= rest.size()) {
          size_t dot = rest.find('.', p);
          std::string name(rest.substr(p, dot == std::string_view::npos ? dot : dot - p));
          if (name.empty()) return fail("bad field path " + w);
          a.path.push_back(name);
          if (dot == std::string_view::npos) break;
          p = dot + 1;
        }
      }
    } else if (!w.empty() && (std::isdigit(static_cast<unsigned char>(w[0])) || w[0] == '-')) {
      char* end = nullptr;
      long long n = std::strtoll(w.c_str(), &end, 10);
      if (end == nullptr || *end != '\0') return fail("bad number " + w);
      a.literal = n;
    } else if (w == "true" || w == "false") {
      a.literal = w == "true";
    } else {
      return fail("unknown word " + w);
    }
    return a;
  }

  Result<Pipeline> pipeline(const std::vector<std::string>& tokens) const {
    Pipeline p;
    size_t i = 0;
    while (i <= tokens.size()) {
      size_t j = i;
      while (j < tokens.size() && tokens[j] != "|") ++j;
      if (j == i) return fail("empty command in a pipeline");
      Cmd c;
      size_t k = i;
      static constexpr std::string_view kFuncs[] = {"json",  "index", "join",   "len",
                                                    "upper", "lower", "println"};
      if (std::find(std::begin(kFuncs), std::end(kFuncs), tokens[k]) != std::end(kFuncs))
        c.func = tokens[k++];
      for (; k < j; ++k) {
        Arg a = BERTH_TRY(operand(tokens[k]));
        c.args.push_back(std::move(a));
      }
      if (c.func.empty() && c.args.size() != 1)
        return fail(c.args.empty() ? "nothing to print" : "unknown function " + tokens[i]);
      p.push_back(std::move(c));
      if (j == tokens.size()) break;
      i = j + 1;
    }
    return p;
  }

  std::string_view t_;
  size_t pos_ = 0;
};

/// Go's %v of a JSON value.
std::string go_text(const Value& val) {
  if (val.missing) return "<no value>";
  const nlohmann::json& v = val.v;
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return "<nil>";
    case nlohmann::json::value_t::string:
      return v.get<std::string>();
    case nlohmann::json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::number_float: {
      double d = v.get<double>();
      char buf[64];
      if (std::floor(d) == d && std::fabs(d) < 1e21)
        std::snprintf(buf, sizeof buf, "%.0f", d);
      else
        std::snprintf(buf, sizeof buf, "%g", d);
      return buf;
    }
    case nlohmann::json::value_t::array: {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + go_text({v[i], false});
      return s + "]";
    }
    case nlohmann::json::value_t::object: {
      std::string s = "map[";
      bool first = true;
      for (const auto& [k, x] : v.items()) {  // nlohmann's object keeps keys sorted, as Go prints
        s += (first ? "" : " ") + k + ":" + go_text({x, false});
        first = false;
      }
      return s + "]";
    }
    default:
      return v.dump();
  }
}

bool truthy(const Value& val) {
  if (val.missing) return false;
  const nlohmann::json& v = val.v;
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

class Executor {
 public:
  explicit Executor(const Parser& p) : parser_(p) {}

  Status run(const std::vector<Node>& nodes, const nlohmann::json& dot, std::string& out) {
    for (const Node& n : nodes) {
      switch (n.kind) {
        case Node::Kind::kText:
          out += n.text;
          break;
        case Node::Kind::kAction: {
          Value v = BERTH_TRY(pipeline(n.pipe, dot));
          out += go_text(v);
          break;
        }
        case Node::Kind::kIf: {
          Value v = BERTH_TRY(pipeline(n.pipe, dot));
          BERTH_CHECK(run(truthy(v) ? n.body : n.else_body, dot, out));
          break;
        }
        case Node::Kind::kRange: {
          Value v = BERTH_TRY(pipeline(n.pipe, dot));
          if (!v.missing && !v.v.is_null() && !v.v.is_array() && !v.v.is_object())
            return parser_.fail("range over " + go_text(v) + ", which is not a list or map");
          if (!truthy(v)) {
            BERTH_CHECK(run(n.else_body, dot, out));
            break;
          }
          for (const auto& x : v.v) BERTH_CHECK(run(n.body, x, out));
          break;
        }
      }
    }
    return {};
  }

 private:
  Result<Value> arg(const Arg& a, const nlohmann::json& dot) const {
    if (!a.is_field) return Value{a.literal, false};
    const nlohmann::json* cur = &dot;
    std::string walked;
    for (const std::string& name : a.path) {
      walked += "." + name;
      if (!cur->is_object()) return parser_.fail("can't evaluate field " + walked);
      auto it = cur->find(name);
      if (it == cur->end())
        return parser_.fail("can't evaluate field " + walked + ": no such field");
      cur = &*it;
    }
    return Value{*cur, false};
  }

  Result<Value> pipeline(const Pipeline& p, const nlohmann::json& dot) const {
    Value piped;
    bool have_piped = false;
    for (const Cmd& c : p) {
      std::vector<Value> args;
      for (const Arg& a : c.args) {
        Value v = BERTH_TRY(arg(a, dot));
        args.push_back(std::move(v));
      }
      if (have_piped) args.push_back(piped);
      piped = BERTH_TRY(call(c.func, args));
      have_piped = true;
    }
    return piped;
  }

  Result<Value> call(const std::string& f, const std::vector<Value>& args) const {
    auto want = [&](size_t n) -> Status {
      if (args.size() != n)
        return parser_.fail((f.empty() ? "a value" : f) + " takes " + std::to_string(n) +
                            " argument" + (n == 1 ? "" : "s"));
      return {};
    };
    if (f.empty()) {
      BERTH_CHECK(want(1));
      return args[0];
    }
    if (f == "json") {
      BERTH_CHECK(want(1));
      return Value{to_text(args[0].missing ? nlohmann::json(nullptr) : args[0].v), false};
    }
    if (f == "upper" || f == "lower") {
      BERTH_CHECK(want(1));
      std::string s = go_text(args[0]);
      for (char& ch : s)
        ch = static_cast<char>(f == "upper" ? std::toupper(static_cast<unsigned char>(ch))
                                            : std::tolower(static_cast<unsigned char>(ch)));
      return Value{s, false};
    }
    if (f == "println") {
      std::string s;
      for (size_t i = 0; i < args.size(); ++i) s += (i ? " " : "") + go_text(args[i]);
      return Value{s + "\n", false};
    }
    if (f == "len") {
      BERTH_CHECK(want(1));
      const nlohmann::json& v = args[0].v;
      if (args[0].missing || !(v.is_array() || v.is_object() || v.is_string()))
        return parser_.fail("len of " + go_text(args[0]));
      return Value{v.is_string() ? v.get<std::string>().size() : v.size(), false};
    }
    if (f == "join") {
      BERTH_CHECK(want(2));
      const nlohmann::json& v = args[0].v;
      if (args[0].missing || !v.is_array() || !args[1].v.is_string())
        return parser_.fail("join takes a list and a string");
      std::string s;
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? args[1].v.get<std::string>() : "") + go_text({v[i], false});
      return Value{s, false};
    }
    // index X K...: one step per key.
    if (args.size() < 2) return parser_.fail("index takes a value and at least one key");
    Value cur = args[0];
    for (size_t i = 1; i < args.size(); ++i) {
      const nlohmann::json& k = args[i].v;
      if (cur.missing || cur.v.is_null()) return Value{nullptr, true};
      if (cur.v.is_object() && k.is_string()) {
        auto it = cur.v.find(k.get<std::string>());
        // Go's index gives the element type's zero value: "" for a map of strings (Docker's
        // Labels, map[string]string, empty ones too), <no value> for a map of anything.
        if (it == cur.v.end()) {
          bool strings = std::all_of(cur.v.begin(), cur.v.end(),
                                     [](const nlohmann::json& e) { return e.is_string(); });
          return strings ? Value{"", false} : Value{nullptr, true};
        }
        cur = Value{*it, false};
      } else if (cur.v.is_array() && k.is_number_integer()) {
        auto n = k.get<int64_t>();
        if (n < 0 || static_cast<size_t>(n) >= cur.v.size())
          return parser_.fail("index " + std::to_string(n) + " out of range");
        cur = Value{cur.v[static_cast<size_t>(n)], false};
      } else {
        return parser_.fail("cannot index " + go_text(cur) + " with " + go_text(args[i]));
      }
    }
    return cur;
  }

  const Parser& parser_;
};

}  // namespace

Result<std::string> render_template(std::string_view tmpl, const nlohmann::json& data) {
  Parser p(tmpl);
  std::string stop;
  std::vector<Node> nodes = BERTH_TRY(p.nodes(&stop));
  if (!stop.empty()) return p.fail("{{" + stop + "}} without {{range}} or {{if}}");
  std::string out;
  BERTH_CHECK(Executor(p).run(nodes, data, out));
  return out;
}

}  // namespace berth

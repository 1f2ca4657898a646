// The typed reads of a policy file's values (site/toml_reader.h), which the table of keys
// (site/policy_keys.cc) names as each key's parser. Internal to site/: it brings toml++.
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/env_list.h"
#include "core/error.h"
#include "core/strings.h"
#include "core/vocabulary.h"
#include "site/config.h"
#include "site/toml_reader.h"

namespace berth {

/// Reads one policy file's values, each failure naming the file, the line and the key.
class PolicyReader : public TomlReader {
 public:
  explicit PolicyReader(const std::string& path)
      : TomlReader(path, "see docs/site.md for the keys and their types") {}

  Result<std::string> absolute_path(const toml::node& node, std::string_view key) const {
    std::string s = BERTH_TRY(string(node, key));
    if (s.empty() || s[0] != '/') return bad(node, key, "is not an absolute path: \"" + s + "\"");
    return s;
  }

  Result<std::string> one_of(const toml::node& node, std::string_view key,
                             std::initializer_list<std::string_view> allowed) const {
    std::string s = BERTH_TRY(string(node, key));
    std::string names;
    for (std::string_view a : allowed) {
      if (s == a) return s;
      names += std::string(names.empty() ? "" : " or ") + "\"" + std::string(a) + "\"";
    }
    return bad(node, key, "is not " + names + ": \"" + s + "\"");
  }

  /// A word of one of the runtime's vocabularies (core/vocabulary.h), as its enum.
  template <class E, size_t N>
  Result<E> word(const toml::node& node, std::string_view key, const Word<E> (&words)[N]) const {
    std::string s = BERTH_TRY(string(node, key));
    if (auto value = parse_word(words, s)) return *value;
    return bad(node, key, "is not " + word_list(words, " or ", " or ", "\"") + ": \"" + s + "\"");
  }

  /// An engine's name or alias (runtime/engines.h), or auto.
  Result<EngineChoice> engine(const toml::node& node, std::string_view key,
                              const std::string& s) const {
    auto choice = parse_engine(s);
    if (!choice)
      return bad(node, key, "names \"" + s + "\", which is not an engine (" + engine_names() + ")");
    return *choice;
  }
  Result<EngineChoice> engine(const toml::node& node, std::string_view key) const {
    return engine(node, key, BERTH_TRY(string(node, key)));
  }
  /// Engines' names: auto, which allows none, is refused.
  Result<std::vector<EngineChoice>> engines(const toml::node& node, std::string_view key) const {
    std::vector<EngineChoice> out;
    for (const std::string& s : BERTH_TRY(strings(node, key))) {
      out.push_back(BERTH_TRY(engine(node, key, s)));
      if (out.back().is_auto())
        return bad(node, key, "names \"auto\", a choice among engines rather than one to allow");
    }
    return out;
  }

  Result<long> count(const toml::node& node, std::string_view key) const {
    auto v = node.value<int64_t>();
    if (!node.is_integer() || !v || *v < 0 || *v > 1'000'000'000)
      return bad(node, key, "is not a whole number of 0 to 1000000000");
    return static_cast<long>(*v);
  }

  Result<std::vector<std::string>> absolute_paths(const toml::node& node,
                                                  std::string_view key) const {
    std::vector<std::string> out = BERTH_TRY(strings(node, key));
    for (const std::string& s : out)
      if (s.empty() || s[0] != '/')
        return bad(node, key, "holds a path that is not absolute: \"" + s + "\"");
    return out;
  }

  /// SRC:DST[:ro|:rw] with absolute paths (the runtime parses it again when it mounts).
  Result<std::vector<std::string>> mounts(const toml::node& node, std::string_view key) const {
    std::vector<std::string> out = BERTH_TRY(strings(node, key));
    for (const std::string& m : out) {
      auto parts = split(m, ':');
      bool ok = (parts.size() == 2 || parts.size() == 3) && parts[0].starts_with("/") &&
                parts[1].starts_with("/") &&
                (parts.size() == 2 || parts[2] == "ro" || parts[2] == "rw");
      if (!ok)
        return bad(node, key,
                   "holds \"" + m + "\", not SOURCE:DESTINATION[:ro|:rw] with absolute paths");
    }
    return out;
  }

  Result<std::map<std::string, std::vector<std::string>>> mirrors(const toml::node& node,
                                                                  std::string_view key) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, key, "is not a table of registry = [mirrors]");
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& [registry, value] : *t) {
      std::string name = std::string(key) + "." + std::string(registry.str());
      if (value.is_string())
        out[std::string(registry.str())] = {*value.value<std::string>()};
      else
        out[std::string(registry.str())] = BERTH_TRY(strings(value, name));
      for (const std::string& m : out[std::string(registry.str())])
        if (m.empty() || m.find_first_of(" \t") != std::string::npos)
          return bad(value, name, "holds a mirror that is not host[:port][/path]: \"" + m + "\"");
    }
    return out;
  }

  Result<std::vector<EnvEdit>> env(const toml::node& node, std::string_view key) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, key, "is not a table with set, prepend, append, unset");
    std::vector<EnvEdit> out;
    auto valid_name = [](std::string_view n) {
      return !n.empty() && n.find_first_of("= \t\n") == std::string_view::npos;
    };
    // A fixed order whatever the file's: set, prepend, append, unset (as Sarus applies them).
    for (auto [word, kind] :
         {std::pair{"set", EnvEdit::Kind::kSet}, std::pair{"prepend", EnvEdit::Kind::kPrepend},
          std::pair{"append", EnvEdit::Kind::kAppend}}) {
      const toml::node* sub = t->get(word);
      if (sub == nullptr) continue;
      std::string name = std::string(key) + "." + word;
      const toml::table* vars = sub->as_table();
      if (vars == nullptr) return bad(*sub, name, "is not a table of NAME = \"value\"");
      for (const auto& [var, value] : *vars) {
        if (!valid_name(var.str()))
          return bad(value, name, "names an invalid variable \"" + std::string(var.str()) + "\"");
        std::string v = BERTH_TRY(string(value, name + "." + std::string(var.str())));
        out.push_back(EnvEdit{kind, std::string(var.str()), v});
      }
    }
    if (const toml::node* sub = t->get("unset")) {
      for (const std::string& var : BERTH_TRY(strings(*sub, std::string(key) + ".unset"))) {
        if (!valid_name(var))
          return bad(*sub, std::string(key) + ".unset",
                     "names an invalid variable \"" + var + "\"");
        out.push_back(EnvEdit{EnvEdit::Kind::kUnset, var, ""});
      }
    }
    for (const auto& [k, v] : *t) {
      std::string_view s = k.str();
      if (s != "set" && s != "prepend" && s != "append" && s != "unset")
        return bad(v, std::string(key) + "." + std::string(s),
                   "is not a key of [env] (set, prepend, append, unset)");
    }
    return out;
  }

  /// [mpi.TYPE] tables: libraries (required), dependencies, mounts, abi.
  Result<std::vector<MpiDeclaration>> mpi(const toml::node& node, std::string_view key) const {
    const toml::table* t = node.as_table();
    if (t == nullptr) return bad(node, key, "is not a table of [mpi.TYPE] tables");
    std::vector<MpiDeclaration> out;
    for (const auto& [name, sub] : *t) {
      std::string where = std::string(key) + "." + std::string(name.str());
      const toml::table* m = sub.as_table();
      if (m == nullptr) return bad(sub, where, "is not a table");
      MpiDeclaration p;
      p.type = std::string(name.str());
      for (const auto& [k, v] : *m) {
        std::string_view s = k.str();
        std::string full = where + "." + std::string(s);
        if (s == "libraries")
          p.libraries = BERTH_TRY(absolute_paths(v, full));
        else if (s == "dependencies")
          p.dependencies = BERTH_TRY(absolute_paths(v, full));
        else if (s == "mounts")
          p.mounts = BERTH_TRY(mounts(v, full));
        else if (s == "abi")
          p.abi = BERTH_TRY(word(v, full, kMpiAbiRuleWords));
        else
          return bad(v, full, "is not a key of [mpi.TYPE] (libraries, dependencies, mounts, abi)");
      }
      if (p.libraries.empty()) return bad(sub, where, "names no libraries");
      out.push_back(std::move(p));
    }
    return out;
  }
};

}  // namespace berth

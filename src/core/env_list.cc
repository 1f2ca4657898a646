#include "core/env_list.h"

#include <unistd.h>  // environ

#include "core/strings.h"

namespace berth {

std::string_view env_name(std::string_view kv) {
  return kv.substr(0, kv.find('='));
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

std::optional<std::string> env_lookup(const std::vector<std::string>& env, std::string_view key) {
  std::optional<std::string> out;
  for (const auto& kv : env)
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      out = kv.substr(key.size() + 1);
    else if (kv == key)
      out = std::nullopt;  // "K" alone unsets
  return out;
}

void set_env(std::vector<std::string>& env, std::string kv) {
  std::string_view key = env_name(kv);
  for (std::string& e : env)
    if (env_name(e) == key) {
      e = std::move(kv);
      return;
    }
  env.push_back(std::move(kv));
}

void unset_env(std::vector<std::string>& env, std::string_view key) {
  std::erase_if(env, [key](const std::string& e) { return env_name(e) == key; });
}

void apply_env_edit(std::vector<std::string>& env, const EnvEdit& edit) {
  if (edit.kind == EnvEdit::Kind::kUnset) {
    unset_env(env, edit.name);
    return;
  }
  std::string value = edit.value;
  if (edit.kind != EnvEdit::Kind::kSet) {
    std::string old = env_lookup(env, edit.name).value_or("");
    if (!old.empty())
      value = edit.kind == EnvEdit::Kind::kPrepend ? value + ":" + old : old + ":" + value;
  }
  set_env(env, edit.name + "=" + value);
}

std::vector<std::string> split_path(std::string_view list) {
  std::vector<std::string> out;
  for (std::string_view entry : split(list, ':')) out.emplace_back(entry);
  return out;
}

}  // namespace berth

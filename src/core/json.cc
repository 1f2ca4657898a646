#include "core/json.h"

namespace berth {

std::string string_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::string();
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace berth

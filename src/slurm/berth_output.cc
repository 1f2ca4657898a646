#include "slurm/berth_output.h"

#include <nlohmann/json.hpp>

#include <array>
#include <utility>

namespace berth::slurm {
namespace {

using Json = nlohmann::json;

constexpr std::array<std::pair<ContainerStatus, std::string_view>, 3> kStatusWords = {{
    {ContainerStatus::kCreated, "created"},
    {ContainerStatus::kRunning, "running"},
    {ContainerStatus::kExited, "exited"},
}};

Json parse(std::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr, false);
}

/// j[key] when it is a string, else "".
std::string text_at(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

Problem parse_container(std::string_view json, ContainerFacts* out) {
  Json j = parse(json);
  if (j.is_discarded() || !j.is_object()) return "berth inspect: not a JSON object";
  ContainerFacts f;
  std::string status = text_at(j, "status");
  bool known = false;
  for (const auto& [value, word] : kStatusWords) {
    if (status != word) continue;
    f.status = value;
    known = true;
  }
  if (!known) return "berth inspect: unknown container status '" + status + "'";
  auto pid = j.find("pid");
  if (pid == j.end() || !pid->is_number_integer() || pid->get<long>() < 0)
    return "berth inspect: no pid";
  f.pid = pid->get<long>();
  f.rootfs = text_at(j, "rootfs");
  if (auto config = j.find("config"); config != j.end() && config->is_object())
    f.workdir = text_at(*config, "WorkingDir");
  f.error = text_at(j, "error");
  *out = std::move(f);
  return {};
}

Problem parse_container_names(std::string_view json, std::vector<std::string>* out) {
  Json j = parse(json);
  if (j.is_discarded() || !j.is_array()) return "berth ps --json: not a JSON array";
  out->clear();
  for (const Json& c : j) {
    if (!c.is_object()) return "berth ps --json: an item is not an object";
    if (std::string name = text_at(c, "name"); !name.empty()) out->push_back(name);
  }
  return {};
}

BerthError parse_berth_error(std::string_view text) {
  BerthError last_line;
  size_t end = text.size();
  while (end > 0) {
    size_t start = text.rfind('\n', end - 1);
    start = start == std::string_view::npos ? 0 : start + 1;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty()) {
      Json j = parse(line);
      if (!j.is_discarded() && j.is_object()) {
        auto e = j.find("error");
        if (e != j.end() && e->is_object() && !text_at(*e, "message").empty())
          return {text_at(*e, "message"), text_at(*e, "code")};
      }
      if (last_line.message.empty()) last_line.message = std::string(line);
    }
    if (start == 0) break;
    end = start - 1;
  }
  return last_line;
}

}  // namespace berth::slurm

// Slurm's own text, the same in every slurmrestd version (gateway/slurm_types.h).
#include "gateway/slurm_types.h"

#include <algorithm>

#include "core/strings.h"

namespace berth::gateway {

int gres_gpus(std::string_view gres) {
  // Entries are separated by commas outside parentheses: NAME[:TYPE]:COUNT[(...)].
  int total = 0;
  size_t pos = 0;
  while (pos < gres.size()) {
    size_t end = pos;
    int depth = 0;
    while (end < gres.size() && (gres[end] != ',' || depth > 0)) {
      if (gres[end] == '(') ++depth;
      if (gres[end] == ')' && depth > 0) --depth;
      ++end;
    }
    std::string_view entry = gres.substr(pos, end - pos);
    pos = end + 1;
    entry = entry.substr(0, entry.find('('));
    if (entry.substr(0, entry.find(':')) != "gpu") continue;
    size_t colon = entry.rfind(':');
    if (colon == std::string_view::npos) {
      total += 1;  // "gpu" alone is one
      continue;
    }
    std::string_view digits = entry.substr(colon + 1);
    if (digits.empty() || digits.size() > 6 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos)
      continue;  // "gpu:a100" (a type without count) or "N/A"
    total += std::stoi(std::string(digits));
  }
  return total;
}

std::string gres_gpu_type(std::string_view gres) {
  for (size_t pos = 0; pos < gres.size();) {
    size_t end = std::min(gres.find(',', pos), gres.size());
    std::string_view entry = gres.substr(pos, end - pos);
    pos = end + 1;
    entry = entry.substr(0, entry.find('('));
    if (!entry.starts_with("gpu:")) continue;
    entry.remove_prefix(4);
    size_t colon = entry.find(':');
    if (colon == std::string_view::npos) continue;  // "gpu:4": untyped
    return std::string(entry.substr(0, colon));
  }
  return "";
}

int tres_gpus(std::string_view tres) {
  int gpus = 0;
  for (size_t pos = 0; pos < tres.size();) {
    size_t end = std::min(tres.find(',', pos), tres.size());
    std::string_view item = tres.substr(pos, end - pos);
    pos = end + 1;
    std::string_view digits = item.substr(std::min(item.size(), sizeof("gres/gpu=") - 1));
    if (item.starts_with("gres/gpu=") && !digits.empty() && digits.size() <= 6 &&
        digits.find_first_not_of("0123456789") == std::string_view::npos)
      gpus = std::stoi(std::string(digits));
  }
  return gpus;
}

int tres_per_gpus(std::string_view tres) {
  int gpus = 0;
  for (size_t pos = 0; pos < tres.size();) {
    size_t end = std::min(tres.find(',', pos), tres.size());
    std::string_view item = tres.substr(pos, end - pos);
    pos = end + 1;
    if (item.starts_with("gres:") || item.starts_with("gres/")) gpus += gres_gpus(item.substr(5));
  }
  return gpus;
}

std::string node_availability(std::string_view base, std::span<const std::string> flags) {
  for (const std::string& flag : flags) {
    std::string f = lower(flag);
    if (f == "drain" || f == "fail" || f == "maintenance" || f == "not_responding" ||
        f == "powered_down" || f == "powering_down" || f == "reboot_issued")
      return "unavailable";
  }
  std::string b = lower(base);
  if (b == "idle" || b == "mixed" || b == "allocated") return b;
  if (b == "completing") return "allocated";
  return "unavailable";
}

}  // namespace berth::gateway

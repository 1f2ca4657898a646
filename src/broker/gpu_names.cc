// GPU model names brought to one spelling and matched (broker/gpu_names.h).
#include "broker/gpu_names.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <vector>

namespace berth::broker {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

/// Words that name a vendor, a product family or a form factor, not a model: "NVIDIA Tesla
/// V100-SXM2-16GB" and "V100" are one model. NVL (H100 NVL) is a form factor too: its memory
/// (94 GB) tells it apart where that matters.
bool is_dropped_word(std::string_view w) {
  static constexpr std::array<std::string_view, 17> kWords = {
      "NVIDIA", "TESLA", "GEFORCE", "QUADRO",   "AMD", "INSTINCT", "RADEON", "INTEL",     "DATA",
      "CENTER", "GPU",   "PCIE",    "GRAPHICS", "NVL", "NVLINK",   "PCI",    "GENERATION"};
  if (std::find(kWords.begin(), kWords.end(), w) != kWords.end()) return true;
  // SXM, SXM2 ... and HBM, HBM2, HBM2E, HBM3, HBM3E: how the memory or the socket is built.
  for (std::string_view prefix : {std::string_view("SXM"), std::string_view("HBM")}) {
    if (w.substr(0, 3) != prefix) continue;
    std::string_view rest = w.substr(3);
    if (!rest.empty() && rest.back() == 'E') rest.remove_suffix(1);
    if (std::all_of(rest.begin(), rest.end(), is_digit)) return true;
  }
  return false;
}

/// The GB of a memory word ("80GB", "80G", "141GB"), or 0 when `w` is not one.
double memory_word_gb(std::string_view w) {
  if (w.size() > 2 && w.substr(w.size() - 2) == "GB")
    w.remove_suffix(2);
  else if (w.size() > 1 && w.back() == 'G')
    w.remove_suffix(1);
  else
    return 0;
  if (w.empty() || !std::all_of(w.begin(), w.end(), is_digit) || w.size() > 6) return 0;
  return std::strtod(std::string(w).c_str(), nullptr);
}

/// A canonical name taken apart: "A100-80GB" is {"A100", 80}; "H100" is {"H100", 0}.
struct ModelName {
  std::string base;
  double memory_gb = 0;  ///< the memory variant; 0 for none
};

ModelName split_name(std::string_view name) {
  std::vector<std::string> words;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) words.push_back(cur);
    cur.clear();
  };
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.')
      cur.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    else
      flush();
  }
  flush();
  ModelName m;
  std::vector<std::string> kept;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (is_dropped_word(w)) continue;
    if (double gb = memory_word_gb(w); gb > 0) {
      if (m.memory_gb == 0) m.memory_gb = gb;
      continue;
    }
    // "RTX 4090", "RTX A6000": SkyPilot writes them as one word (RTX4090, RTXA6000).
    if ((w == "RTX" || w == "GTX") && i + 1 < words.size() && !is_dropped_word(words[i + 1]) &&
        memory_word_gb(words[i + 1]) == 0) {
      kept.push_back(w + words[i + 1]);
      ++i;
      continue;
    }
    kept.push_back(w);
  }
  for (const std::string& w : kept) m.base += (m.base.empty() ? "" : "-") + w;
  if (m.base.empty() && !words.empty()) {
    // Only vendor or form-factor words ("NVIDIA"): kept as written rather than lost.
    for (const std::string& w : words) m.base += (m.base.empty() ? "" : "-") + w;
    m.memory_gb = 0;
  }
  return m;
}

std::string memory_suffix(double gb) {
  auto whole = static_cast<int64_t>(gb);
  return "-" + std::to_string(whole) + "GB";
}

/// Whether a GPU with `mib` MiB (as NVML reports it) is a card sold as `gb` GB: NVML reports a
/// little less than the nominal size (81559 MiB for 80 GB, 143771 for H200's 141 GB, 46068 for
/// L40S's 48 GB), so 90% of it up to 5% above still is that card; the closest variants of one
/// model (40 and 48 GB, 80 and 94 GB) stay apart.
bool memory_is_variant(int64_t mib, double gb) {
  const double nominal = gb * 1024;
  const auto have = static_cast<double>(mib);
  return have >= nominal * 0.9 && have <= nominal * 1.05;
}

}  // namespace

std::string canonical_gpu_name(std::string_view name) {
  ModelName m = split_name(name);
  if (m.base.empty()) return "";
  return m.memory_gb > 0 ? m.base + memory_suffix(m.memory_gb) : m.base;
}

std::string gpu_vendor_of(std::string_view canonical) {
  const std::string base = split_name(canonical).base;
  auto starts = [&](std::string_view p) { return base.substr(0, p.size()) == p; };
  auto letter_then_digit = [&](std::string_view letters) {
    return base.size() >= 2 && letters.find(base[0]) != std::string_view::npos && is_digit(base[1]);
  };
  if (starts("MI") && base.size() > 2 && is_digit(base[2])) return "amd";  // MI250X, MI300X
  if (starts("RX") && base.size() > 2 && is_digit(base[2])) return "amd";  // Radeon RX 7900
  if (starts("GAUDI") || starts("MAX-") || starts("FLEX-") || starts("ARC-")) return "intel";
  // Arc A310..A770 and B570, B580 are Intel's; A30, A800, B200, B300 are NVIDIA's.
  if (base.size() == 4 && std::all_of(base.begin() + 1, base.end(), is_digit) &&
      ((base[0] == 'A' && (base[1] == '3' || base[1] == '5' || base[1] == '7')) ||
       (base[0] == 'B' && (base[1] == '5' || base[1] == '7'))))
    return "intel";
  // A10 A100 B200 H100 H200 K80 L4 L40S M60 P100 T4 V100; GH200, GB200; RTX, GTX, TITAN.
  if (letter_then_digit("ABHKLMPTV") || starts("GH") || starts("GB") || starts("RTX") ||
      starts("GTX") || starts("TITAN"))
    return "nvidia";
  return "";
}

bool gpu_model_matches(std::string_view wanted, const NodeClass& c) {
  const ModelName want = split_name(wanted);
  const std::string_view published = !c.gpu_model.empty() ? c.gpu_model : c.gpu_type;
  if (want.base.empty() || published.empty()) return false;
  const ModelName have = split_name(published);
  if (have.base != want.base) return false;
  if (want.memory_gb == 0) return true;
  if (have.memory_gb > 0) return have.memory_gb == want.memory_gb;
  // The name has no variant; the published memory tells which it is. Unknown memory never
  // passes a variant asked for.
  return c.gpu_memory_mib > 0 && memory_is_variant(c.gpu_memory_mib, want.memory_gb);
}

}  // namespace berth::broker

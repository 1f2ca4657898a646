#include "devices/gpu_select.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>

#include "core/env_list.h"
#include "core/strings.h"

namespace berth {
namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Splits one CSV record: commas separate fields, double quotes group ("" is a quote).
Result<std::vector<std::string>> split_csv(std::string_view s, const std::string& what) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quoted) {
      if (c == '"' && i + 1 < s.size() && s[i + 1] == '"')
        out.back() += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  if (quoted) return make_error("parse", what, "unterminated quote");
  return out;
}

Result<int> parse_count(const std::string& v, const std::string& what) {
  if (!all_digits(v) || v.size() > 6)
    return make_error("parse", what, "'" + v + "' is not a GPU count (a number or all)");
  return std::stoi(v);
}

bool truthy(std::string v) {
  v = lower(trim(v));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

/// A version value of a constraint, with its key named in errors.
bool constraint_holds(const Constraint& c, const HostFacts& f) {
  auto cmp_ok = [&c](int r) {
    if (c.op == "=") return r == 0;
    if (c.op == ">") return r > 0;
    if (c.op == ">=") return r >= 0;
    if (c.op == "<") return r < 0;
    return r <= 0;  // "<="
  };
  if (c.key == "brand") {
    // Unknown facts are not held against the container (see check_requirements).
    for (const auto& b : f.brands)
      if (lower(b) != lower(c.value)) return false;
    return true;
  }
  Version want = *parse_version(c.value);  // validated by parse_requirement
  if (c.key == "arch") {
    for (const auto& a : f.archs)
      if (!a.known() || !cmp_ok(compare_versions(a, want))) return false;
    return true;
  }
  const Version& have = c.key == "cuda" ? f.cuda : f.driver;
  return !have.known() || cmp_ok(compare_versions(have, want));
}

}  // namespace

Result<GpuRequest> parse_gpus_flag(std::string_view value) {
  const std::string what = "--gpus " + std::string(value);
  std::vector<std::string> fields = BERTH_TRY(split_csv(value, what));
  GpuRequest r;
  bool have_count = false, have_devices = false;
  std::vector<std::string>* list =
      nullptr;  // a bare field after device=/capabilities= continues it
  std::vector<std::string> caps;
  bool have_caps = false;
  for (std::string f : fields) {
    f = std::string(trim(f));
    if (f.empty()) return make_error("parse", what, "empty field");
    size_t eq = f.find('=');
    if (eq == std::string::npos) {
      if (list) {
        list->push_back(f);
      } else if (f == "all" || all_digits(f)) {
        if (have_count) return make_error("parse", what, "the GPU count is given twice");
        have_count = true;
        r.kind = f == "all" ? GpuRequest::Kind::kAll : GpuRequest::Kind::kCount;
        if (f != "all") r.count = BERTH_TRY(parse_count(f, what));
      } else if (f == "none") {
        have_count = true;
        r.kind = GpuRequest::Kind::kNoDevices;
      } else {
        return make_error("parse", what, "unknown field '" + f + "'");
      }
      continue;
    }
    std::string key = lower(trim(f.substr(0, eq))), val(trim(f.substr(eq + 1)));
    list = nullptr;
    if (key == "count") {
      if (have_count) return make_error("parse", what, "the GPU count is given twice");
      have_count = true;
      r.kind = val == "all" ? GpuRequest::Kind::kAll : GpuRequest::Kind::kCount;
      if (val != "all") r.count = BERTH_TRY(parse_count(val, what));
    } else if (key == "device" || key == "devices") {
      have_devices = true;
      for (auto& d : split_trimmed(val, ',')) r.devices.push_back(d);
      list = &r.devices;
    } else if (key == "capabilities") {
      have_caps = true;
      for (auto& c : split_trimmed(val, ',')) caps.push_back(c);
      list = &caps;
    } else if (key == "driver") {
      if (val != "nvidia") return make_error("parse", what, "only the nvidia driver is supported");
    } else if (key == "options") {
      // Docker passes these to the device driver; Berth has none to pass them to.
    } else {
      return make_error("parse", what, "unknown field '" + key + "'");
    }
  }
  if (have_devices) {
    if (have_count) return make_error("parse", what, "give either a count or devices, not both");
    for (const auto& d : r.devices)
      if (d.empty()) return make_error("parse", what, "empty device in the list");
    r.kind = GpuRequest::Kind::kList;
  }
  if (r.kind == GpuRequest::Kind::kCount && r.count == 0) r.kind = GpuRequest::Kind::kNothing;
  if (have_caps) {
    CapabilitySet set = 0;
    std::string joined;
    for (const auto& c : caps) {
      if (c == "gpu") continue;  // Docker's generic GPU capability, not a driver capability
      joined += (joined.empty() ? "" : ",") + c;
    }
    set = joined.empty() ? kCapDefault : BERTH_TRY(parse_capabilities(joined));
    r.caps = set;
  }
  if (!have_count && !have_devices)
    return make_error("parse", what, "say which GPUs: all, a count, or device=...");
  return r;
}

Result<GpuRequest> parse_visible_devices(std::optional<std::string_view> value) {
  GpuRequest r;
  if (!value) return r;
  std::string v(trim(*value));
  if (v.empty() || v == "void") return r;
  if (v == "none") {
    r.kind = GpuRequest::Kind::kNoDevices;
  } else if (v == "all") {
    r.kind = GpuRequest::Kind::kAll;
  } else {
    r.kind = GpuRequest::Kind::kList;
    r.devices = split_trimmed(v, ',');
    for (const auto& d : r.devices)
      if (d.empty())
        return make_error("parse", "NVIDIA_VISIBLE_DEVICES=" + v, "empty device in the list");
  }
  return r;
}

Result<CapabilitySet> parse_capabilities(std::optional<std::string_view> value) {
  if (!value || trim(*value).empty()) return kCapDefault;
  CapabilitySet set = 0;
  for (const auto& name : split_trimmed(*value, ',')) {
    if (name.empty()) continue;
    if (name == "all") {
      set |= kCapAll;
      continue;
    }
    bool known = false;
    for (const auto& c : capability_names())
      if (name == c.name) set |= c.cap, known = true;
    if (!known)
      return make_error(
          "parse", "NVIDIA_DRIVER_CAPABILITIES=" + std::string(*value),
          "unknown capability '" + name + "' (known: " + capabilities_str(kCapAll) + ", all)");
  }
  return set == 0 ? kCapDefault : set;
}

std::optional<std::vector<int>> parse_cuda_visible_devices(std::optional<std::string_view> value,
                                                           const std::vector<NvidiaGpu>& gpus) {
  if (!value) return std::nullopt;
  std::vector<int> out;
  std::string v(trim(*value));
  if (v.empty() || v == "NoDevFiles") return out;
  for (const auto& e : split_trimmed(v, ',')) {
    int idx = -1;
    if (all_digits(e) && e.size() < 6) {
      idx = std::stoi(e);
      if (idx >= static_cast<int>(gpus.size())) break;
    } else {
      // A UUID or a unique prefix of one, as CUDA accepts them.
      for (const auto& g : gpus) {
        if (e.empty() || lower(g.uuid).rfind(lower(e), 0) != 0) continue;
        if (idx >= 0) {
          idx = -2;  // ambiguous
          break;
        }
        idx = g.index;
      }
      if (idx < 0) break;
    }
    if (std::find(out.begin(), out.end(), idx) != out.end()) break;
    out.push_back(idx);
  }
  return out;
}

Result<std::vector<int>> select_gpus(const GpuRequest& req, const std::vector<NvidiaGpu>& gpus,
                                     const std::optional<std::vector<int>>& allowed) {
  std::vector<int> pool;
  if (allowed)
    pool = *allowed;
  else
    for (const auto& g : gpus) pool.push_back(g.index);
  const std::string where =
      allowed ? " visible to this job (CUDA_VISIBLE_DEVICES)" : " on this host";
  const auto n = std::to_string(pool.size()) + (pool.size() == 1 ? " GPU is" : " GPUs are");
  std::vector<int> out;
  switch (req.kind) {
    case GpuRequest::Kind::kNothing:
    case GpuRequest::Kind::kNoDevices:
      return out;
    case GpuRequest::Kind::kAll:
      return pool;
    case GpuRequest::Kind::kCount:
      if (req.count > static_cast<int>(pool.size()))
        return make_error("select GPUs", std::to_string(req.count) + " GPUs", "only " + n + where);
      return std::vector<int>(pool.begin(), pool.begin() + req.count);
    case GpuRequest::Kind::kList:
      break;
  }
  for (const auto& d : req.devices) {
    int pick = -1;
    if (all_digits(d)) {
      size_t i = d.size() < 6 ? std::stoul(d) : pool.size();
      if (i >= pool.size())
        return make_error("select GPUs", "GPU " + d, fmt::format("no such GPU: {}{}", n, where));
      pick = pool[i];
    } else if (d.rfind("MIG-", 0) == 0) {
      return make_error("select GPUs", d,
                        "MIG devices cannot be selected yet; select the whole GPU");
    } else {
      for (const auto& g : gpus)
        if (lower(g.uuid) == lower(d)) pick = g.index;
      if (pick < 0) return make_error("select GPUs", d, "no GPU with this UUID" + where);
      if (std::find(pool.begin(), pool.end(), pick) == pool.end())
        return make_error("select GPUs", d,
                          "this GPU is not visible to this job (CUDA_VISIBLE_DEVICES)");
    }
    if (std::find(out.begin(), out.end(), pick) == out.end()) out.push_back(pick);
  }
  return out;
}

Result<Requirement> parse_requirement(std::string_view expr) {
  Requirement req;
  std::string e(expr);
  for (char& c : e)
    if (c == '\t' || c == '\n') c = ' ';
  for (const auto& alt : split_trimmed(e, ' ')) {
    if (alt.empty()) continue;
    std::vector<Constraint> all;
    for (const auto& term : split_trimmed(alt, ',')) {
      if (term.empty()) continue;
      size_t k = 0;
      while (k < term.size() && std::isalpha(static_cast<unsigned char>(term[k]))) ++k;
      Constraint c;
      c.key = lower(term.substr(0, k));
      size_t o = k;
      while (o < term.size() && (term[o] == '<' || term[o] == '>' || term[o] == '=')) ++o;
      c.op = term.substr(k, o - k);
      c.value = std::string(trim(term.substr(o)));
      if (c.key != "cuda" && c.key != "driver" && c.key != "arch" && c.key != "brand")
        return make_error("parse requirement", term,
                          "unknown key '" + c.key + "' (known: cuda, driver, arch, brand)");
      if (c.op != "=" && c.op != ">" && c.op != ">=" && c.op != "<" && c.op != "<=")
        return make_error("parse requirement", term, "expected one of = > >= < <= after " + c.key);
      if (c.value.empty()) return make_error("parse requirement", term, "no value");
      if (c.key == "brand" && c.op != "=")
        return make_error("parse requirement", term, "brand can only be compared with =");
      if (c.key != "brand" && !parse_version(c.value))
        return make_error("parse requirement", term, "'" + c.value + "' is not a version");
      all.push_back(std::move(c));
    }
    if (!all.empty()) req.push_back(std::move(all));
  }
  return req;
}

bool requirement_met(const Requirement& req, const HostFacts& f) {
  if (req.empty()) return true;
  for (const auto& alt : req)
    if (std::all_of(alt.begin(), alt.end(),
                    [&f](const Constraint& c) { return constraint_holds(c, f); }))
      return true;
  return false;
}

Status check_requirements(const std::vector<std::string>& env, const HostFacts& facts) {
  if (auto d = env_lookup(env, "NVIDIA_DISABLE_REQUIRE"); d && truthy(*d)) return {};
  // NVIDIA_REQUIRE_* in first-seen order, each with its last value.
  std::vector<std::pair<std::string, std::string>> reqs;
  const std::string prefix = "NVIDIA_REQUIRE_";
  for (const auto& kv : env) {
    size_t eq = kv.find('=');
    if (kv.rfind(prefix, 0) != 0 || eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    auto it =
        std::find_if(reqs.begin(), reqs.end(), [&key](const auto& p) { return p.first == key; });
    if (it == reqs.end())
      reqs.emplace_back(key, kv.substr(eq + 1));
    else
      it->second = kv.substr(eq + 1);
  }
  bool has_cuda_req = std::any_of(reqs.begin(), reqs.end(),
                                  [](const auto& p) { return p.first == "NVIDIA_REQUIRE_CUDA"; });
  if (auto cv = env_lookup(env, "CUDA_VERSION"); cv && !has_cuda_req) {
    if (auto v = parse_version(trim(*cv)); v && v->parts.size() >= 2)
      reqs.emplace_back("CUDA_VERSION",
                        "cuda>=" + std::to_string(v->parts[0]) + "." + std::to_string(v->parts[1]));
  }
  for (const auto& [key, expr] : reqs) {
    Requirement r = BERTH_TRY(parse_requirement(expr).with_context("check " + key));
    if (requirement_met(r, facts)) continue;
    std::string host = "driver " + facts.driver.str() + ", CUDA " + facts.cuda.str();
    for (size_t i = 0; i < facts.archs.size(); ++i)
      host += (i ? "/" : ", arch ") + facts.archs[i].str();
    return make_error("check requirement", fmt::format("{}=\"{}\"", key, expr),
                      "not met by this host (" + host + ")")
        .with_hint(
            "use an image built for CUDA " + facts.cuda.str() +
            " or older, update the host driver, or set NVIDIA_DISABLE_REQUIRE=1 to skip the check");
  }
  return {};
}

bool use_cuda_compat(const Version& host_driver, const Version& compat_driver) {
  return host_driver.known() && compat_driver.known() &&
         compat_driver.major() > host_driver.major();
}

Version compat_libcuda_version(const std::vector<std::string>& names) {
  Version best;
  for (const auto& n : names) {
    if (n.rfind("libcuda.so.", 0) != 0) continue;
    auto v = parse_version(n.substr(11));
    if (v && v->parts.size() >= 2 && (!best.known() || compare_versions(*v, best) > 0)) best = *v;
  }
  return best;
}

}  // namespace berth

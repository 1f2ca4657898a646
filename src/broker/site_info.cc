// GLUE and CMDB documents read into node classes (broker/site_info.h).
#include "broker/site_info.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/strings.h"
#include "devices/version.h"

namespace berth::broker {
namespace {

using nlohmann::json;

/// Counts (CPUs, GPUs, nodes, jobs) and sizes (MB, seconds) above these are not a site's.
constexpr int64_t kMaxCount = 100'000'000;
constexpr int64_t kMaxSize = int64_t{1} << 40;

/// The document being read: its errors name it.
struct Doc {
  std::string subject;  ///< "GLUE document of site hpc1"
  Error bad(const std::string& detail) const {
    return make_error("parse", subject, detail, ErrorCode::kInvalidInput);
  }
};

/// GLUE's placeholder for a string nobody knows (GLUE 2.1 appendix A; cloud-info-provider's
/// default vendor and model) reads as nothing known.
std::string known(const std::string& s) {
  return s == "UNKNOWN" ? std::string() : s;
}

std::string in_quotes(const std::string& s) {
  return "\"" + s + "\"";
}

/// One entity of a GLUE list: its object, ID and how errors name it.
struct Entity {
  const json* j = nullptr;
  std::string id;
  std::string where;  ///< ExecutionEnvironment "urn:glue2:..."
};

const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

/// A whole number in [0, max] at obj[key]; std::nullopt where absent or null.
Result<std::optional<int64_t>> whole(const Doc& d, const json& obj, const std::string& where,
                                     const char* key, int64_t max) {
  const json* v = field(obj, key);
  if (v == nullptr) return std::optional<int64_t>();
  bool fits = v->is_number_unsigned()  ? v->get<uint64_t>() <= static_cast<uint64_t>(max)
              : v->is_number_integer() ? v->get<int64_t>() >= 0 && v->get<int64_t>() <= max
                                       : false;
  if (!fits)
    return d.bad(where + ": " + in_quotes(key) + " is not a whole number from 0 to " +
                 std::to_string(max));
  return std::optional<int64_t>(v->get<int64_t>());
}

/// whole(), with `fallback` where absent.
Result<int64_t> whole_or(const Doc& d, const json& obj, const std::string& where, const char* key,
                         int64_t max, int64_t fallback) {
  auto v = BERTH_TRY(whole(d, obj, where, key, max));
  return v.value_or(fallback);
}

/// The string at obj[key] ("" where absent or null; "UNKNOWN" reads as "").
Result<std::string> text(const Doc& d, const json& obj, const std::string& where, const char* key) {
  const json* v = field(obj, key);
  if (v == nullptr) return std::string();
  if (!v->is_string()) return d.bad(where + ": " + in_quotes(key) + " is not a string");
  return known(v->get<std::string>());
}

/// The strings at obj[key]: a list of strings, or one string (EGI writes NetworkInfo so).
Result<std::vector<std::string>> texts(const Doc& d, const json& obj, const std::string& where,
                                       const char* key) {
  const json* v = field(obj, key);
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) return d.bad(where + ": " + in_quotes(key) + " is not a list of strings");
  for (const json& s : *v) {
    if (!s.is_string()) return d.bad(where + ": " + in_quotes(key) + " is not a list of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

/// The list doc[kind] as entities: absent is empty unless `required`.
Result<std::vector<Entity>> entities(const Doc& d, const json& doc, const char* kind,
                                     bool required) {
  std::vector<Entity> out;
  auto it = doc.find(kind);
  if (it == doc.end()) {
    if (required) return d.bad("there is no " + in_quotes(kind) + " list");
    return out;
  }
  if (!it->is_array()) return d.bad(in_quotes(kind) + " is not a list");
  std::set<std::string> ids;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    std::string at = std::string(kind) + "[" + std::to_string(i) + "]";
    if (!e.is_object()) return d.bad(at + " is not an object");
    const json* id = field(e, "ID");
    if (id == nullptr || !id->is_string() || id->get<std::string>().empty())
      return d.bad(at + " has no \"ID\" string");
    std::string s = id->get<std::string>();
    if (!ids.insert(s).second)
      return d.bad("two " + std::string(kind) + " entities have ID " + in_quotes(s));
    out.push_back({&e, s, std::string(kind) + " " + in_quotes(s)});
  }
  return out;
}

/// The IDs of `kind` entities that `e` names: in its "Associations" as "<kind>ID" (berthd) or
/// "<kind>" (EGI), or as one of the plain attributes `plain` (OGF's JSON).
Result<std::vector<std::string>> links(const Doc& d, const Entity& e, const std::string& kind,
                                       std::initializer_list<const char*> plain) {
  std::vector<std::string> out;
  auto add = [&](const json& v, const std::string& name) -> Result<void> {
    if (v.is_string()) {
      out.push_back(v.get<std::string>());
      return {};
    }
    bool ok = v.is_array() &&
              std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); });
    if (!ok) return d.bad(e.where + ": " + name + " is not an ID or a list of IDs");
    for (const json& x : v) out.push_back(x.get<std::string>());
    return {};
  };
  if (const json* a = field(*e.j, "Associations")) {
    if (!a->is_object()) return d.bad(e.where + ": \"Associations\" is not an object");
    for (const std::string& key : {kind + "ID", kind})
      if (const json* v = field(*a, key.c_str()))
        BERTH_CHECK(add(*v, "\"Associations\"." + in_quotes(key)));
  }
  for (const char* key : plain)
    if (const json* v = field(*e.j, key)) BERTH_CHECK(add(*v, in_quotes(key)));
  return out;
}

/// ID -> position in `list`.
std::map<std::string, size_t> index_of(const std::vector<Entity>& list) {
  std::map<std::string, size_t> out;
  for (size_t i = 0; i < list.size(); ++i) out[list[i].id] = i;
  return out;
}

/// The position of `id` in `index`, or an error naming `from` and the missing `kind`.
Result<size_t> find_linked(const Doc& d, const std::map<std::string, size_t>& index,
                           const Entity& from, const std::string& kind, const std::string& id) {
  auto it = index.find(id);
  if (it == index.end())
    return d.bad(from.where + " names " + kind + " " + in_quotes(id) +
                 ", which the document lacks");
  return it->second;
}

/// Whether an accelerator entity is a GPU one (GLUE 2.1's Type; absent counts as GPU).
Result<bool> is_gpu(const Doc& d, const Entity& e) {
  std::string type = lower(BERTH_TRY(text(d, *e.j, e.where, "Type")));
  return type.empty() || type == "gpu";
}

/// OtherInfo's value for `key`: "Key=Value" strings (berthd) or an object (EGI's other_info).
Result<std::string> other_info(const Doc& d, const Entity& e, const std::string& key) {
  const json* v = field(*e.j, "OtherInfo");
  if (v == nullptr) return std::string();
  if (v->is_object()) return BERTH_TRY(text(d, *v, e.where + " OtherInfo", key.c_str()));
  for (const std::string& s : BERTH_TRY(texts(d, *e.j, e.where, "OtherInfo")))
    if (s.size() > key.size() && s.compare(0, key.size(), key) == 0 && s[key.size()] == '=')
      return known(s.substr(key.size() + 1));
  return std::string();
}

/// What a GPU AcceleratorEnvironment says, into `c`.
Result<void> read_accelerator(const Doc& d, const Entity& a, NodeClass& c) {
  const json& j = *a.j;
  c.gpu_vendor = BERTH_TRY(text(d, j, a.where, "Vendor"));
  c.gpu_model = BERTH_TRY(text(d, j, a.where, "Model"));
  c.gpu_type = BERTH_TRY(other_info(d, a, "GRESType"));
  auto numbers = BERTH_TRY(whole(d, j, a.where, "Numbers", kMaxCount));
  if (!numbers) numbers = BERTH_TRY(whole(d, j, a.where, "Number", kMaxCount));
  c.gpus_per_node = static_cast<int>(numbers.value_or(0));
  // GLUE's Memory is MB; berthd wrote NVML's MiB rounded down (gateway/resources.cc), so
  // rounding up gives them back.
  int64_t mb = BERTH_TRY(whole_or(d, j, a.where, "Memory", kMaxSize, 0));
  c.gpu_memory_mib = (mb * 1000000 + 1048575) / 1048576;
  for (const std::string& cc : BERTH_TRY(texts(d, j, a.where, "ComputeCapability"))) {
    auto v = parse_version(cc);
    if (!v)
      return d.bad(a.where + ": \"ComputeCapability\" holds " + in_quotes(cc) + ", not a version");
    if (c.compute_capability.empty() ||
        compare_versions(*v, *parse_version(c.compute_capability)) > 0)
      c.compute_capability = cc;
  }
  c.driver_version = BERTH_TRY(text(d, j, a.where, "Version"));
  c.cuda_version = BERTH_TRY(other_info(d, a, "CUDAVersion"));
  return {};
}

/// What an ExecutionEnvironment says, into `c`.
Result<void> read_environment(const Doc& d, const Entity& e, NodeClass& c) {
  const json& j = *e.j;
  c.name = BERTH_TRY(text(d, j, e.where, "Name"));
  c.id = e.id;
  if (c.name.empty()) c.name = e.id;
  c.cpus_per_node =
      static_cast<int>(BERTH_TRY(whole_or(d, j, e.where, "LogicalCPUs", kMaxCount, 0)));
  c.memory_mb_per_node = BERTH_TRY(whole_or(d, j, e.where, "MainMemorySize", kMaxSize, 0));
  int64_t total = BERTH_TRY(whole_or(d, j, e.where, "TotalInstances", kMaxCount, 0));
  int64_t used = BERTH_TRY(whole_or(d, j, e.where, "UsedInstances", kMaxCount, 0));
  int64_t down = BERTH_TRY(whole_or(d, j, e.where, "UnavailableInstances", kMaxCount, 0));
  if (used + down > total)
    return d.bad(e.where + ": UsedInstances " + std::to_string(used) +
                 " and UnavailableInstances " + std::to_string(down) + " exceed TotalInstances " +
                 std::to_string(total));
  c.total_nodes = static_cast<int>(total);
  c.used_nodes = static_cast<int>(used);
  c.unavailable_nodes = static_cast<int>(down);
  for (const std::string& n : BERTH_TRY(texts(d, j, e.where, "NetworkInfo")))
    if (lower(n) == "infiniband") c.infiniband = true;
  return {};
}

/// What a ComputingShare (and its GPU share accelerator, if any) says, into `c`.
Result<void> read_share(const Doc& d, const Entity& s, const Entity* gpus, NodeClass& c) {
  const json& j = *s.j;
  c.partition = BERTH_TRY(text(d, j, s.where, "MappingQueue"));
  if (c.partition.empty()) c.partition = BERTH_TRY(text(d, j, s.where, "Name"));
  c.max_walltime_s = BERTH_TRY(whole_or(d, j, s.where, "MaxWallTime", kMaxSize, -1));
  std::string state = BERTH_TRY(text(d, j, s.where, "ServingState"));
  c.production = state.empty() || state == "production";
  c.running_jobs =
      static_cast<int>(BERTH_TRY(whole_or(d, j, s.where, "RunningJobs", kMaxCount, 0)));
  c.waiting_jobs =
      static_cast<int>(BERTH_TRY(whole_or(d, j, s.where, "WaitingJobs", kMaxCount, 0)));
  if (gpus != nullptr)
    c.max_gpus_per_job = static_cast<int>(
        BERTH_TRY(whole_or(d, *gpus->j, gpus->where, "MaxSlotsPerJob", kMaxCount, -1)));
  return {};
}

/// free_gpus where the class alone tells: none to have, or no node of it busy.
int free_gpus_of(const NodeClass& c) {
  if (c.gpus_per_node == 0) return 0;
  if (c.used_nodes == 0)
    return static_cast<int>(std::min<int64_t>(
        int64_t{c.total_nodes - c.unavailable_nodes} * c.gpus_per_node, kMaxCount));
  return -1;
}

/// The document's time and validity: the first service's, else the first environment's.
Result<void> read_stamp(const Doc& d, const std::vector<Entity>& services,
                        const std::vector<Entity>& envs, SiteInfo& out) {
  const Entity* from = !services.empty() ? &services[0] : !envs.empty() ? &envs[0] : nullptr;
  if (from == nullptr) return {};
  out.creation_time = BERTH_TRY(text(d, *from->j, from->where, "CreationTime"));
  out.validity_s = BERTH_TRY(whole_or(d, *from->j, from->where, "Validity", kMaxSize, 0));
  return {};
}

}  // namespace

Result<SiteInfo> read_glue(std::string_view site, const nlohmann::json& doc) {
  const Doc d{"GLUE document of site " + std::string(site)};
  if (!doc.is_object()) return d.bad("the document is not a JSON object");
  auto services = BERTH_TRY(entities(d, doc, "ComputingService", false));
  auto shares = BERTH_TRY(entities(d, doc, "ComputingShare", false));
  auto share_accs = BERTH_TRY(entities(d, doc, "ComputingShareAccelerator", false));
  auto envs = BERTH_TRY(entities(d, doc, "ExecutionEnvironment", true));
  auto accs = BERTH_TRY(entities(d, doc, "AcceleratorEnvironment", false));
  const auto share_at = index_of(shares), env_at = index_of(envs), acc_at = index_of(accs);

  // Which environments each share holds, named from either end.
  std::vector<std::set<size_t>> members(shares.size());
  std::vector<bool> shared(envs.size(), false);
  for (size_t s = 0; s < shares.size(); ++s)
    for (const std::string& id : BERTH_TRY(
             links(d, shares[s], "ExecutionEnvironment", {"Resource", "ExecutionEnvironment"})))
      members[s].insert(BERTH_TRY(find_linked(d, env_at, shares[s], "ExecutionEnvironment", id)));
  for (size_t e = 0; e < envs.size(); ++e)
    for (const std::string& id :
         BERTH_TRY(links(d, envs[e], "ComputingShare", {"Share", "ComputingShare"})))
      members[BERTH_TRY(find_linked(d, share_at, envs[e], "ComputingShare", id))].insert(e);
  for (const auto& m : members)
    for (size_t e : m) shared[e] = true;

  // Each environment's GPU accelerator, named from either end; one at most.
  std::vector<std::optional<size_t>> gpu_of(envs.size());
  auto attach = [&](size_t e, size_t a) -> Result<void> {
    if (gpu_of[e] && *gpu_of[e] != a)
      return d.bad(envs[e].where + " has two GPU AcceleratorEnvironments, " +
                   in_quotes(accs[*gpu_of[e]].id) + " and " + in_quotes(accs[a].id));
    gpu_of[e] = a;
    return {};
  };
  for (size_t a = 0; a < accs.size(); ++a) {
    if (!BERTH_TRY(is_gpu(d, accs[a]))) continue;
    for (const std::string& id :
         BERTH_TRY(links(d, accs[a], "ExecutionEnvironment", {"ExecutionEnvironment"})))
      BERTH_CHECK(
          attach(BERTH_TRY(find_linked(d, env_at, accs[a], "ExecutionEnvironment", id)), a));
  }
  for (size_t e = 0; e < envs.size(); ++e)
    for (const std::string& id :
         BERTH_TRY(links(d, envs[e], "AcceleratorEnvironment", {"AcceleratorEnvironment"}))) {
      size_t a = BERTH_TRY(find_linked(d, acc_at, envs[e], "AcceleratorEnvironment", id));
      if (BERTH_TRY(is_gpu(d, accs[a]))) BERTH_CHECK(attach(e, a));
    }

  // Each share's GPU share accelerator; one at most.
  std::vector<const Entity*> gpus_of(shares.size(), nullptr);
  for (const Entity& a : share_accs) {
    if (!BERTH_TRY(is_gpu(d, a))) continue;
    for (const std::string& id :
         BERTH_TRY(links(d, a, "ComputingShare", {"ComputingShare", "Share"}))) {
      size_t s = BERTH_TRY(find_linked(d, share_at, a, "ComputingShare", id));
      if (gpus_of[s] != nullptr && gpus_of[s] != &a)
        return d.bad(shares[s].where + " has two GPU ComputingShareAccelerators, " +
                     in_quotes(gpus_of[s]->id) + " and " + in_quotes(a.id));
      gpus_of[s] = &a;
    }
  }

  // The classes of each environment alone, then crossed with the shares.
  std::vector<NodeClass> of_env(envs.size());
  for (size_t e = 0; e < envs.size(); ++e) {
    BERTH_CHECK(read_environment(d, envs[e], of_env[e]));
    if (gpu_of[e]) BERTH_CHECK(read_accelerator(d, accs[*gpu_of[e]], of_env[e]));
  }
  SiteInfo out;
  out.site = std::string(site);
  BERTH_CHECK(read_stamp(d, services, envs, out));
  for (size_t s = 0; s < shares.size(); ++s) {
    auto gpu_classes = std::count_if(members[s].begin(), members[s].end(),
                                     [&](size_t e) { return of_env[e].gpus_per_node > 0; });
    std::optional<int64_t> share_free;
    if (gpus_of[s] != nullptr)
      share_free = BERTH_TRY(whole(d, *gpus_of[s]->j, gpus_of[s]->where, "FreeSlots", kMaxCount));
    for (size_t e = 0; e < envs.size(); ++e) {
      if (members[s].count(e) == 0) continue;
      NodeClass c = of_env[e];
      BERTH_CHECK(read_share(d, shares[s], gpus_of[s], c));
      c.free_gpus = free_gpus_of(c);
      // The share's free GPUs are this class's when it is the share's only GPU class.
      if (c.gpus_per_node > 0 && gpu_classes == 1 && share_free)
        c.free_gpus = static_cast<int>(*share_free);
      out.classes.push_back(std::move(c));
    }
  }
  for (size_t e = 0; e < envs.size(); ++e) {
    if (shared[e]) continue;
    NodeClass c = of_env[e];
    c.free_gpus = free_gpus_of(c);
    out.classes.push_back(std::move(c));
  }
  return out;
}

Result<SiteInfo> read_cmdb(std::string_view site, const nlohmann::json& doc) {
  const Doc d{"CMDB document of site " + std::string(site)};
  if (!doc.is_array()) return d.bad("the document is not a JSON list");
  SiteInfo out;
  out.site = std::string(site);
  std::string cuda, driver;
  std::vector<const json*> flavours;
  std::vector<std::string> where;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& entry = doc[i];
    std::string at = "entry " + std::to_string(i);
    if (!entry.is_object() || field(entry, "type") == nullptr || !entry["type"].is_string())
      return d.bad(at + " has no \"type\" string");
    std::string type = entry["type"].get<std::string>();
    if (type != "flavor" && type != "service") continue;
    const json* data = field(entry, "data");
    if (data == nullptr || !data->is_object())
      return d.bad(at.append(" (").append(type).append(") has no \"data\" object"));
    if (type == "flavor") {
      flavours.push_back(data);
      where.push_back(at + " (flavor)");
      continue;
    }
    if (const json* p = field(*data, "properties")) {
      if (!p->is_object()) return d.bad(at + " (service): \"properties\" is not an object");
      if (cuda.empty())
        cuda = BERTH_TRY(text(d, *p, at + " (service) properties", "gpu_cuda_version"));
      if (driver.empty())
        driver = BERTH_TRY(text(d, *p, at + " (service) properties", "gpu_driver_version"));
    }
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < flavours.size(); ++i) {
    const json& f = *flavours[i];
    const std::string& at = where[i];
    NodeClass c;
    const json* name = field(f, "flavor_name");
    if (name == nullptr || !name->is_string() || name->get<std::string>().empty())
      return d.bad(at + " has no \"flavor_name\" string");
    c.name = name->get<std::string>();
    std::string id = BERTH_TRY(text(d, f, at, "flavor_id"));
    if (!seen.insert(id.empty() ? c.name : id).second) continue;
    c.id = id.empty() ? c.name : id;
    c.cpus_per_node = static_cast<int>(BERTH_TRY(whole_or(d, f, at, "num_vcpus", kMaxCount, 0)));
    c.memory_mb_per_node = BERTH_TRY(whole_or(d, f, at, "ram", kMaxSize, 0));
    c.gpus_per_node = static_cast<int>(BERTH_TRY(whole_or(d, f, at, "num_gpus", kMaxCount, 0)));
    if (c.gpus_per_node > 0) {
      c.gpu_vendor = BERTH_TRY(text(d, f, at, "gpu_vendor"));
      c.gpu_model = BERTH_TRY(text(d, f, at, "gpu_model"));
      c.cuda_version = cuda;
      c.driver_version = driver;
    }
    if (const json* ib = field(f, "infiniband_support")) {
      if (!ib->is_boolean()) return d.bad(at + ": \"infiniband_support\" is not true or false");
      c.infiniband = ib->get<bool>();
    }
    c.total_nodes = 1;
    out.classes.push_back(std::move(c));
  }
  return out;
}

}  // namespace berth::broker

#include "gateway/gpu_facts.h"

#include "gateway/jobs_db.h"

namespace berth::gateway {
namespace {

using nlohmann::json;

constexpr const char* kMetaKey = "gpu_facts";

std::string text_of(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

json to_json(const GpuFactsMap& facts) {
  json out = json::object();
  for (const auto& [node, n] : facts) {
    json gpus = json::object();
    for (const auto& [uuid, g] : n.gpus)
      gpus[uuid] = {{"compute_capability", g.compute_capability}, {"memory_mib", g.memory_mib}};
    out[node] = {{"driver_version", n.driver_version}, {"gpus", gpus}};
  }
  return out;
}

GpuFactsMap from_json(const json& doc) {
  GpuFactsMap out;
  if (!doc.is_object()) return out;
  for (const auto& [node, n] : doc.items()) {
    if (!n.is_object()) continue;
    NodeGpus& facts = out[node];
    facts.driver_version = text_of(n, "driver_version");
    const json gpus = n.value("gpus", json::object());
    if (!gpus.is_object()) continue;
    for (const auto& [uuid, g] : gpus.items()) {
      if (!g.is_object()) continue;
      MeasuredGpu& m = facts.gpus[uuid];
      m.compute_capability = text_of(g, "compute_capability");
      if (auto mib = g.find("memory_mib"); mib != g.end() && mib->is_number_integer())
        m.memory_mib = mib->get<int64_t>();
    }
  }
  return out;
}

/// `from`'s driver (where it names one) and GPUs into `into`, replacing what `into` said of them.
void merge(const NodeGpus& from, NodeGpus& into) {
  if (!from.driver_version.empty()) into.driver_version = from.driver_version;
  for (const auto& [uuid, g] : from.gpus) into.gpus[uuid] = g;
}

}  // namespace

void add_measured_gpus(const json& doc, GpuFactsMap& out) {
  if (!doc.is_object()) return;
  const std::string node = text_of(doc, "node");
  auto gpus = doc.find("gpus");
  if (node.empty() || gpus == doc.end() || !gpus->is_array()) return;
  NodeGpus measured;
  measured.driver_version = text_of(doc, "driver_version");
  for (const json& g : *gpus) {
    if (!g.is_object()) continue;
    const std::string uuid = text_of(g, "uuid");
    if (uuid.empty()) continue;
    MeasuredGpu m;
    m.compute_capability = text_of(g, "compute_capability");
    const json memory = g.value("memory", json::object());
    if (auto total = memory.find("total_mib"); total != memory.end() && total->is_number())
      m.memory_mib = total->get<int64_t>();
    measured.gpus[uuid] = m;
  }
  if (!measured.gpus.empty()) merge(measured, out[node]);
}

GpuFacts::GpuFacts(JobsDb* db) : db_(db) {
  if (db_ == nullptr) return;
  // What an earlier run measured; a value that does not parse is forgotten, to be measured
  // again by the next GPU job.
  if (auto stored = db_->meta(kMetaKey); stored.ok() && stored->has_value())
    nodes_ = from_json(json::parse(**stored, nullptr, false));
}

Status GpuFacts::observe(const GpuFactsMap& measured) {
  std::string stored;
  {
    std::lock_guard lock(mu_);
    GpuFactsMap next = nodes_;
    for (const auto& [node, n] : measured) merge(n, next[node]);
    if (next == nodes_) return {};
    nodes_ = std::move(next);
    if (db_ == nullptr) return {};
    stored = to_json(nodes_).dump();
  }
  return db_->set_meta(kMetaKey, stored);
}

GpuFactsMap GpuFacts::nodes() const {
  std::lock_guard lock(mu_);
  return nodes_;
}

}  // namespace berth::gateway

// TOSCA templates of INDIGO's types read into broker job bodies (broker/tosca.h).
#include "broker/tosca.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "broker/job_body.h"
#include "core/json.h"
#include "core/strings.h"
#include "devices/yaml.h"

namespace berth::broker {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxBody = size_t{1} << 20;

const std::string kDocker = "tosca.nodes.indigo.Container.Application.Docker";
const std::string kMarathon = kDocker + ".Marathon";
const std::string kChronos = kDocker + ".Chronos";
const std::string kQcg = "tosca.nodes.indigo.Qcg.Job";

// The properties each type declares (indigo-dc/tosca-types custom_types.yaml and TOSCA's
// normative types): anything else is a mistake worth an error, not a silent default.
const std::set<std::string> kDockerProperties = {
    "command", "uris",       "environment_variables", "constraints", "secrets",
    "labels",  "privileged", "force_pull_image"};
const std::set<std::string> kMarathonExtra = {"enable_https"};
const std::set<std::string> kChronosExtra = {"schedule", "description", "retries", "epsilon"};
const std::set<std::string> kQcgProperties = {"executable",
                                              "arguments",
                                              "environment",
                                              "schema",
                                              "note",
                                              "directory",
                                              "stdout",
                                              "stderr",
                                              "std_outerr",
                                              "stdin",
                                              "total_cores",
                                              "total_nodes",
                                              "cores_per_node",
                                              "memory_per_node",
                                              "memory_per_core",
                                              "gpus",
                                              "queue",
                                              "wall_clock",
                                              "batch_system_options"};
const std::set<std::string> kHostProperties = {
    "num_cpus",   "cpu_frequency", "disk_size",          "mem_size",      "num_gpus",
    "gpu_vendor", "gpu_model",     "infiniband_support", "instance_type", "preemtible_instance",
    "sgx",        "sgx_epc_size",  "publish_all",        "publish_ports", "expose_ports",
    "volumes",    "versions"};
const std::set<std::string> kOsProperties = {
    "architecture",       "type",         "distribution",     "version",       "gpu_driver",
    "gpu_driver_version", "cuda_support", "cuda_min_version", "cuDNN_version", "image",
    "credential"};
const std::set<std::string> kScalableProperties = {"min_instances", "max_instances",
                                                   "default_instances", "count", "removal_list"};

Error bad(const std::string& where, const std::string& what) {
  return make_error("parse", "TOSCA template", where + ": " + what, ErrorCode::kInvalidInput);
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// TOSCA's booleans, with the YAML 1.1 words INDIGO's templates use.
std::optional<bool> boolean(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string()) {
    std::string s = lower(v.get<std::string>());
    if (s == "true" || s == "yes") return true;
    if (s == "false" || s == "no") return false;
  }
  return std::nullopt;
}

std::string scalar_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

/// A value known only once a deployment exists (get_attribute): the environment variable it
/// sets is dropped; anywhere else it is an error.
json runtime_value() {
  return json(json::value_t::discarded);
}

/// The template's inputs: the declarations, and the values the request gives.
struct Inputs {
  const json* declared = nullptr;  ///< topology_template.inputs, an object
  const json* given = nullptr;     ///< the request's, an object
};

Result<json> input_value(const Inputs& in, const std::string& name, const std::string& where) {
  if (in.declared == nullptr || !in.declared->contains(name))
    return bad(where, "get_input names \"" + name + "\", which is not an input of the template");
  if (in.given != nullptr && in.given->contains(name)) return (*in.given)[name];
  const json& decl = (*in.declared)[name];
  if (decl.is_object() && decl.contains("default")) return decl["default"];
  bool required = true;  // TOSCA's default
  if (decl.is_object() && decl.contains("required")) required = boolean(decl["required"]) != false;
  if (required) return bad(where, "input \"" + name + "\" is required and has no value");
  return json(nullptr);
}

/// `v` with get_input and concat evaluated; runtime_value() for get_attribute.
Result<json> evaluate(const json& v, const Inputs& in, const std::string& where, int depth = 0) {
  if (depth > 16) return bad(where, "nests functions too deeply");
  if (v.is_object() && v.size() == 1) {
    const std::string fn = v.begin().key();
    const json& arg = v.begin().value();
    if (fn == "get_input") {
      if (arg.is_string()) return input_value(in, arg.get<std::string>(), where);
      if (arg.is_array() && arg.size() == 1 && arg[0].is_string())
        return input_value(in, arg[0].get<std::string>(), where);
      return bad(where, "get_input must name one input");
    }
    if (fn == "concat") {
      if (!arg.is_array()) return bad(where, "concat must be given a list");
      std::string out;
      for (const json& part : arg) {
        json p = BERTH_TRY(evaluate(part, in, where, depth + 1));
        if (p.is_discarded()) return p;
        if (p.is_structured()) return bad(where, "concat joins strings and numbers only");
        if (!p.is_null()) out += scalar_text(p);
      }
      return json(out);
    }
    if (fn == "get_attribute" || fn == "get_operation_output") return runtime_value();
    if (fn == "get_property" || fn == "get_artifact" || fn == "get_nodes_of_type" ||
        fn == "token" || fn == "join" || fn == "get_secret")
      return bad(where, fn + " is not evaluated here (get_input and concat are)");
  }
  if (v.is_array()) {
    json out = json::array();
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(
          BERTH_TRY(evaluate(v[i], in, where + "[" + std::to_string(i) + "]", depth + 1)));
    return out;
  }
  return v;
}

/// The properties of one section of one node: "node N: PREFIXname" in errors.
struct Section {
  std::string node;
  std::string prefix;  ///< "" for the node's own properties, "host." for a capability's
  const json* props = nullptr;
  const Inputs* in = nullptr;

  std::string where(const std::string& name) const { return "node " + node + ": " + prefix + name; }

  /// The property's value, evaluated; null where absent.
  Result<json> get(const std::string& name) const {
    if (props == nullptr || !props->contains(name)) return json(nullptr);
    json v = BERTH_TRY(evaluate((*props)[name], *in, where(name)));
    if (v.is_discarded()) return bad(where(name), "is only known once deployed (get_attribute)");
    return v;
  }

  Status check_names(const std::set<std::string>& known, const std::string& of) const {
    if (props == nullptr) return {};
    if (!props->is_object())
      return bad("node " + node + ": " + prefix + "properties", "must be a mapping");
    for (const auto& [key, v] : props->items())
      if (known.count(key) == 0) return bad(where(key), "is not a property of " + of);
    return {};
  }

  Result<std::optional<int64_t>> whole(const std::string& name, int64_t min, int64_t max) const {
    json v = BERTH_TRY(get(name));
    if (v.is_null()) return std::optional<int64_t>();
    std::optional<int64_t> n;
    if (v.is_number_integer()) n = v.get<int64_t>();
    if (v.is_string() && !v.get<std::string>().empty() && v.get<std::string>().size() < 12 &&
        v.get<std::string>().find_first_not_of("0123456789") == std::string::npos)
      n = std::stoll(v.get<std::string>());
    if (!n || *n < min || *n > max)
      return bad(where(name), scalar_text(v) + " is not a whole number from " +
                                  std::to_string(min) + " to " + std::to_string(max));
    return n;
  }

  Result<std::optional<double>> number(const std::string& name, double max) const {
    json v = BERTH_TRY(get(name));
    if (v.is_null()) return std::optional<double>();
    std::optional<double> n;
    if (v.is_number()) n = v.get<double>();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size()) n = d;
    }
    if (!n || !std::isfinite(*n) || *n < 0 || *n > max)
      return bad(where(name), scalar_text(v) + " is not a number from 0 to " +
                                  std::to_string(static_cast<int64_t>(max)));
    return n;
  }

  Result<std::optional<std::string>> text(const std::string& name) const {
    json v = BERTH_TRY(get(name));
    if (v.is_null()) return std::optional<std::string>();
    if (v.is_structured()) return bad(where(name), "must be a string");
    return std::optional<std::string>(scalar_text(v));
  }

  Result<std::optional<bool>> flag(const std::string& name) const {
    json v = BERTH_TRY(get(name));
    if (v.is_null()) return std::optional<bool>();
    std::optional<bool> b = boolean(v);
    if (!b) return bad(where(name), scalar_text(v) + " is not true or false");
    return b;
  }

  /// A TOSCA scalar-unit.size ("8 GB", "4096 MB", "2 GiB") in MB of 10^6 bytes, rounded up:
  /// what INDIGO's orchestrator reads a mem_size as.
  Result<std::optional<int64_t>> size_mb(const std::string& name) const {
    json v = BERTH_TRY(get(name));
    if (v.is_null()) return std::optional<int64_t>();
    const std::string s = v.is_string() ? v.get<std::string>() : "";
    size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) != 0 || s[i] == '.'))
      ++i;
    size_t u = i;
    while (u < s.size() && s[u] == ' ') ++u;
    static const std::map<std::string, double> kUnits = {{"b", 1},
                                                         {"kb", 1e3},
                                                         {"kib", 1024.0},
                                                         {"mb", 1e6},
                                                         {"mib", 1048576.0},
                                                         {"gb", 1e9},
                                                         {"gib", 1073741824.0},
                                                         {"tb", 1e12},
                                                         {"tib", 1099511627776.0}};
    auto unit = kUnits.find(lower(s.substr(u)));
    char* end = nullptr;
    const std::string digits = s.substr(0, i);
    double n = digits.empty() ? -1 : std::strtod(digits.c_str(), &end);
    if (unit == kUnits.end() || digits.empty() || end != digits.c_str() + digits.size() ||
        !(n >= 0) || n * unit->second > 1e18)
      return bad(where(name), scalar_text(v) +
                                  " is not a size such as \"8 GB\" (B, kB, KiB, MB, "
                                  "MiB, GB, GiB, TB, TiB)");
    return std::optional<int64_t>(static_cast<int64_t>(std::ceil(n * unit->second / 1e6)));
  }
};

/// Section `cap` of a node's capabilities (host, os, scalable).
Section capability(const std::string& node, const json& n, const std::string& cap,
                   const Inputs& in) {
  Section s{node, cap + ".", nullptr, &in};
  auto caps = n.find("capabilities");
  if (caps == n.end() || !caps->is_object()) return s;
  auto c = caps->find(cap);
  if (c == caps->end() || !c->is_object()) return s;
  auto p = c->find("properties");
  if (p != c->end() && !p->is_null()) s.props = &*p;
  return s;
}

/// The node a node's `host` requirement names; "" where none.
Result<std::string> host_of(const std::string& node, const json& n) {
  auto reqs = n.find("requirements");
  if (reqs == n.end() || reqs->is_null()) return std::string();
  if (!reqs->is_array()) return bad("node " + node + ": requirements", "must be a list");
  for (const json& r : *reqs) {
    if (!r.is_object() || !r.contains("host")) continue;
    const json& h = r["host"];
    if (h.is_string()) return h.get<std::string>();
    if (h.is_object() && h.contains("node") && h["node"].is_string())
      return h["node"].get<std::string>();
    return bad("node " + node + ": requirements.host", "must name a node");
  }
  return std::string();
}

/// What the job's host chain says, the nearest host first; `origin` maps each job body path
/// set to the property it came from, for the errors of parse_broker_job().
struct Resources {
  std::optional<double> cpus;
  std::optional<int64_t> memory_mb, gpus, count, walltime_s;
  std::optional<std::string> vendor, model, cuda_min;
  std::optional<bool> infiniband;
  std::map<std::string, std::string> origin;
};

template <typename T>
void set_once(std::optional<T>& field, const std::optional<T>& v, Resources& r,
              const std::string& path, const std::string& where) {
  if (field || !v) return;
  field = v;
  r.origin[path] = where;
}

Status read_host(const std::string& node, const json& n, const Inputs& in, Resources& r) {
  Section host = capability(node, n, "host", in);
  Section os = capability(node, n, "os", in);
  Section scalable = capability(node, n, "scalable", in);
  BERTH_CHECK(host.check_names(kHostProperties, "a host capability"));
  BERTH_CHECK(os.check_names(kOsProperties, "an os capability"));
  BERTH_CHECK(scalable.check_names(kScalableProperties, "a scalable capability"));
  set_once(r.cpus, BERTH_TRY(host.number("num_cpus", 10000)), r, "resources.cpus_per_task",
           host.where("num_cpus"));
  set_once(r.memory_mb, BERTH_TRY(host.size_mb("mem_size")), r, "resources.memory_mb",
           host.where("mem_size"));
  set_once(r.gpus, BERTH_TRY(host.whole("num_gpus", 0, 10000)), r, "resources.gpus",
           host.where("num_gpus"));
  std::optional<std::string> vendor = BERTH_TRY(host.text("gpu_vendor"));
  if (vendor) {
    std::string v = lower(*vendor);
    if (v != "nvidia" && v != "amd" && v != "intel")
      return bad(host.where("gpu_vendor"), "\"" + *vendor + "\" is not nvidia, amd or intel");
    vendor = v;
  }
  set_once(r.vendor, vendor, r, "resources.gpu.vendor", host.where("gpu_vendor"));
  set_once(r.model, BERTH_TRY(host.text("gpu_model")), r, "resources.gpu.model",
           host.where("gpu_model"));
  set_once(r.infiniband, BERTH_TRY(host.flag("infiniband_support")), r, "resources.infiniband",
           host.where("infiniband_support"));
  set_once(r.cuda_min, BERTH_TRY(os.text("cuda_min_version")), r, "resources.gpu.cuda_min",
           os.where("cuda_min_version"));
  std::optional<int64_t> count = BERTH_TRY(scalable.whole("count", 1, 10000));
  if (!count) count = BERTH_TRY(scalable.whole("default_instances", 1, 10000));
  set_once(r.count, count, r, "resources.nodes", scalable.where("count"));
  return {};
}

/// "hh:mm:ss" in seconds.
Result<int64_t> wall_clock(const Section& s) {
  std::optional<std::string> v = BERTH_TRY(s.text("wall_clock"));
  int h = 0, m = 0, sec = 0;
  char tail = 0;
  if (!v || std::sscanf(v->c_str(), "%d:%d:%d%c", &h, &m, &sec, &tail) != 3 || h < 0 ||
      h > 366 * 24 || m < 0 || m > 59 || sec < 0 || sec > 59)
    return bad(s.where("wall_clock"), "\"" + v.value_or("") + "\" is not hh:mm:ss");
  return int64_t{h} * 3600 + int64_t{m} * 60 + sec;
}

/// Single quotes for sh.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// A map of environment variables, evaluated; runtime values and nulls dropped.
Status read_env(const Section& s, const std::string& name, json& env,
                std::map<std::string, std::string>& origin) {
  if (s.props == nullptr || !s.props->contains(name)) return {};
  const json& m = (*s.props)[name];
  if (m.is_null()) return {};
  if (!m.is_object()) return bad(s.where(name), "must be a mapping of names to values");
  for (const auto& [key, raw] : m.items()) {
    const std::string where = s.where(std::string(name).append(".").append(key));
    json v = BERTH_TRY(evaluate(raw, *s.in, where));
    if (v.is_discarded() || v.is_null()) continue;
    if (v.is_structured()) return bad(where, "must be a string");
    env[key] = scalar_text(v);
    origin["env." + key] = where;
  }
  return {};
}

/// The job node's image: its artifact `image` (a string or {file}).
Result<std::string> artifact_image(const std::string& node, const json& n, const Inputs& in) {
  auto arts = n.find("artifacts");
  if (arts == n.end() || !arts->is_object() || !arts->contains("image")) return std::string();
  const json& a = (*arts)["image"];
  const std::string where = "node " + node + ": artifacts.image";
  json file = a.is_object() ? (a.contains("file") ? a["file"] : json(nullptr)) : a;
  file = BERTH_TRY(evaluate(file, in, where));
  if (!file.is_string() || file.get<std::string>().empty())
    return bad(where, "must name a container image (file: \"repository/image:tag\")");
  return file.get<std::string>();
}

/// Rewrites an error of parse_broker_job() on the translated body to name the template's node
/// and property that set the field.
Error named(const Error& e, const std::map<std::string, std::string>& origin) {
  std::string best;
  for (const auto& [path, where] : origin)
    if (e.detail.rfind(path, 0) == 0 && e.detail.size() > path.size() &&
        (e.detail[path.size()] == ':' || e.detail[path.size()] == '.' ||
         e.detail[path.size()] == '[') &&
        path.size() > best.size())
      best = path;
  if (best.empty())
    return make_error("parse", "TOSCA template", e.detail, ErrorCode::kInvalidInput);
  std::string rest = e.detail.substr(best.size());
  if (rest.rfind(": ", 0) == 0) rest = rest.substr(2);
  return bad(origin.at(best), rest);
}

}  // namespace

Result<json> tosca_job_body(const json& tmpl, const json& inputs) {
  if (!tmpl.is_object()) return bad("the template", "is not a mapping");
  auto topo = tmpl.find("topology_template");
  if (topo == tmpl.end() || !topo->is_object())
    return bad("topology_template", "is required (a mapping with node_templates)");
  Inputs in;
  if (auto d = topo->find("inputs"); d != topo->end() && !d->is_null()) {
    if (!d->is_object()) return bad("topology_template.inputs", "must be a mapping");
    in.declared = &*d;
  }
  if (!inputs.is_null()) {
    if (!inputs.is_object()) return bad("inputs", "must be a mapping of input names to values");
    for (const auto& [key, v] : inputs.items())
      if (in.declared == nullptr || !in.declared->contains(key))
        return bad("inputs." + key, "is not an input of the template");
    in.given = &inputs;
  }
  auto nodes_it = topo->find("node_templates");
  if (nodes_it == topo->end() || !nodes_it->is_object())
    return bad("topology_template.node_templates", "is required (a mapping of nodes)");
  const json& nodes = *nodes_it;
  std::vector<std::string> jobs;
  for (const auto& [name, n] : nodes.items()) {
    if (!n.is_object() || !n.contains("type") || !n["type"].is_string())
      return bad("node " + name, "must be a mapping with a type");
    const std::string type = n["type"].get<std::string>();
    if (type == kDocker || type == kMarathon || type == kChronos || type == kQcg)
      jobs.push_back(name);
  }
  if (jobs.empty())
    return bad("topology_template.node_templates", "has no job node: Berth runs one node of type " +
                                                       kMarathon + ", " + kChronos + ", " +
                                                       kDocker + " or " + kQcg);
  if (jobs.size() > 1)
    return bad("topology_template.node_templates", "has " + std::to_string(jobs.size()) +
                                                       " job nodes (" + joined(jobs) +
                                                       "): Berth runs one job per template");
  const std::string& job = jobs[0];
  const json& n = nodes[job];
  const std::string type = n["type"].get<std::string>();
  const bool qcg = type == kQcg;

  Section props{job, "", nullptr, &in};
  if (auto p = n.find("properties"); p != n.end() && !p->is_null()) props.props = &*p;
  if (props.props != nullptr && !props.props->is_object())
    return bad("node " + job + ": properties", "must be a mapping");
  std::set<std::string> known = qcg ? kQcgProperties : kDockerProperties;
  if (type == kMarathon) known.insert(kMarathonExtra.begin(), kMarathonExtra.end());
  if (type == kChronos) known.insert(kChronosExtra.begin(), kChronosExtra.end());
  BERTH_CHECK(props.check_names(known, type));

  Resources r;
  json body = {{"name", job}};
  json env = json::object();
  BERTH_CHECK(read_env(props, qcg ? "environment" : "environment_variables", env, r.origin));
  if (!qcg) BERTH_CHECK(read_env(props, "secrets", env, r.origin));

  std::string image = BERTH_TRY(artifact_image(job, n, in));
  r.origin["image"] = "node " + job + ": artifacts.image";
  if (image.empty() && qcg && env.contains("DOCKER_IMAGE")) {
    image = env["DOCKER_IMAGE"].get<std::string>();
    r.origin["image"] = props.where("environment.DOCKER_IMAGE");
  }
  if (image.empty())
    return bad("node " + job + ": artifacts.image",
               std::string("is required: Berth runs a job in a container image") +
                   (qcg ? " (or give environment.DOCKER_IMAGE, as DEEP's templates do)" : ""));
  body["image"] = image;

  if (qcg) {
    std::optional<std::string> exe = BERTH_TRY(props.text("executable"));
    if (!exe || exe->empty()) return bad(props.where("executable"), "is required");
    std::string line = *exe;
    json args = BERTH_TRY(props.get("arguments"));
    if (args.is_string()) {
      line += " " + args.get<std::string>();
    } else if (args.is_array()) {
      for (const json& a : args) {
        if (a.is_structured() || a.is_null())
          return bad(props.where("arguments"), "must be a list of strings");
        line += " " + quoted(scalar_text(a));
      }
    } else if (!args.is_null()) {
      return bad(props.where("arguments"), "must be a list of strings");
    }
    body["command"] = {"/bin/sh", "-c", line};
    r.origin["command"] = props.where("executable");
    std::optional<int64_t> nodes_n = BERTH_TRY(props.whole("total_nodes", 1, 10000));
    set_once(r.count, nodes_n, r, "resources.nodes", props.where("total_nodes"));
    const int64_t count = r.count.value_or(1);
    std::optional<int64_t> per_node = BERTH_TRY(props.whole("cores_per_node", 1, 10000));
    std::optional<int64_t> total = BERTH_TRY(props.whole("total_cores", 1, 10000000));
    if (per_node)
      set_once(r.cpus, std::optional<double>(*per_node), r, "resources.cpus_per_task",
               props.where("cores_per_node"));
    else if (total)
      set_once(r.cpus, std::optional<double>(std::ceil(static_cast<double>(*total) / count)), r,
               "resources.cpus_per_task", props.where("total_cores"));
    std::optional<int64_t> mem = BERTH_TRY(props.whole("memory_per_node", 0, int64_t{1} << 40));
    std::optional<int64_t> per_core =
        BERTH_TRY(props.whole("memory_per_core", 0, int64_t{1} << 30));
    if (mem)
      set_once(r.memory_mb, mem, r, "resources.memory_mb", props.where("memory_per_node"));
    else if (per_core)
      set_once(r.memory_mb,
               std::optional<int64_t>(*per_core * static_cast<int64_t>(r.cpus.value_or(1))), r,
               "resources.memory_mb", props.where("memory_per_core"));
    set_once(r.gpus, BERTH_TRY(props.whole("gpus", 0, 10000)), r, "resources.gpus",
             props.where("gpus"));
    if (props.props != nullptr && props.props->contains("wall_clock")) {
      r.walltime_s = BERTH_TRY(wall_clock(props));
      r.origin["resources.walltime_s"] = props.where("wall_clock");
    }
  } else {
    std::optional<std::string> cmd = BERTH_TRY(props.text("command"));
    if (type == kChronos && (!cmd || cmd->empty()))
      return bad(props.where("command"), "is required (a Chronos job runs a command)");
    if (cmd && !cmd->empty()) {
      body["command"] = {"/bin/sh", "-c", *cmd};
      r.origin["command"] = props.where("command");
    }
  }
  if (!env.empty()) body["env"] = std::move(env);

  // The host chain: the nearest host's word on each resource stands.
  std::set<std::string> seen = {job};
  std::string from = job;
  std::string host = BERTH_TRY(host_of(job, n));
  while (!host.empty()) {
    if (!nodes.contains(host))
      return bad("node " + from + ": requirements.host",
                 "names \"" + host + "\", which is not a node of the template");
    if (!seen.insert(host).second)
      return bad("node " + from + ": requirements.host", "hosts come round to \"" + host + "\"");
    BERTH_CHECK(read_host(host, nodes[host], in, r));
    from = host;
    host = BERTH_TRY(host_of(host, nodes[host]));
  }

  json res = json::object();
  const int64_t count = r.count.value_or(1);
  if (count != 1) {
    res["nodes"] = count;
    res["tasks"] = count;
    r.origin["resources.tasks"] = r.origin["resources.nodes"];
  }
  if (r.cpus && *r.cpus > 0) res["cpus_per_task"] = static_cast<int64_t>(std::ceil(*r.cpus));
  if (r.memory_mb) res["memory_mb"] = *r.memory_mb;
  if (r.walltime_s) res["walltime_s"] = *r.walltime_s;
  // As INDIGO reads them, the GPU's vendor, model and CUDA ask something only of a job that
  // asks for GPUs; num_gpus is per host.
  if (r.gpus && *r.gpus > 0) {
    res["gpus"] = *r.gpus * count;
    json gpu = json::object();
    if (r.vendor) gpu["vendor"] = *r.vendor;
    if (r.model && !r.model->empty()) gpu["model"] = *r.model;
    if (r.cuda_min && !r.cuda_min->empty()) gpu["cuda_min"] = *r.cuda_min;
    if (!gpu.empty()) res["gpu"] = std::move(gpu);
  }
  if (r.infiniband.value_or(false)) res["infiniband"] = true;
  if (!res.empty()) body["resources"] = std::move(res);

  auto check = parse_broker_job(body);
  if (!check.ok()) return named(check.error(), r.origin);
  return body;
}

Result<PostedBody> read_job_body(std::string_view text) {
  json j = parse_json_or_discarded(text, kMaxBody);
  if (!j.is_discarded()) {
    if (!j.is_object() || !(j.contains("template") || j.contains("tosca_definitions_version")))
      return PostedBody{std::move(j), false};
    if (j.contains("tosca_definitions_version"))
      return PostedBody{BERTH_TRY(tosca_job_body(j, nullptr)), true};
    // The JSON wrapper: the template with the request's inputs and the broker's own fields.
    auto wrong = [](const std::string& field, const std::string& what) {
      return make_error("parse", "TOSCA request", field + ": " + what, ErrorCode::kInvalidInput);
    };
    json tmpl;
    json inputs;
    for (const auto& [key, v] : j.items()) {
      if (key == "template") {
        if (v.is_object()) {
          tmpl = v;
        } else if (v.is_string()) {
          auto y = parse_yaml(v.get<std::string>(), "template");
          if (!y.ok()) return wrong("template", "is not YAML: " + y.error().detail);
          tmpl = std::move(*y);
        } else {
          return wrong("template", "must be the template's YAML text, or the template");
        }
      } else if (key == "inputs") {
        if (!v.is_object()) return wrong("inputs", "must be an object of input values");
        inputs = v;
      } else if (key != "name" && key != "group" && key != "placement" && key != "failover") {
        return wrong(key,
                     "is not a field of a TOSCA request (template, inputs, name, group, "
                     "placement, failover)");
      }
    }
    json body = BERTH_TRY(tosca_job_body(tmpl, inputs));
    for (const char* key : {"name", "group", "placement", "failover"})
      if (j.contains(key)) body[key] = j[key];
    return PostedBody{std::move(body), true};
  }
  // Not JSON: a TOSCA template as YAML, or nothing the broker reads.
  if (text.size() > kMaxBody || text.find("tosca_definitions_version") == std::string_view::npos)
    return PostedBody{std::move(j), false};
  auto y = parse_yaml(text, "job body");
  if (!y.ok())
    return make_error("parse", "TOSCA template", "not YAML: " + y.error().detail,
                      ErrorCode::kInvalidInput);
  if (!y->is_object() || !y->contains("tosca_definitions_version"))
    return PostedBody{json(json::value_t::discarded), false};
  return PostedBody{BERTH_TRY(tosca_job_body(*y, nullptr)), true};
}

}  // namespace berth::broker

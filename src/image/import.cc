#include "image/import.h"

#include <algorithm>
#include <cctype>

#include "core/clock.h"
#include "core/json.h"
#include "core/strings.h"
#include "image/layer_file.h"
#include "image/manifest.h"
#include "image/staging.h"
#include "image/unpack.h"

namespace berth {

namespace {

using nlohmann::json;

/// CMD/ENTRYPOINT: the JSON (exec) form, else the shell form wrapped in /bin/sh -c.
json command_form(std::string_view args) {
  if (args.starts_with("[")) {
    json j = parse_json_or_discarded(args);
    if (j.is_array() &&
        std::all_of(j.begin(), j.end(), [](const json& x) { return x.is_string(); }))
      return j;
  }
  return json::array({"/bin/sh", "-c", std::string(args)});
}

/// KEY=VALUE pairs (ENV, LABEL), or the old "KEY VALUE" form.
std::vector<std::pair<std::string, std::string>> key_values(std::string_view args) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t eq = args.find('='), sp = args.find_first_of(" \t");
  if (eq == std::string_view::npos || (sp != std::string_view::npos && sp < eq)) {
    if (sp == std::string_view::npos) return out;
    out.emplace_back(std::string(args.substr(0, sp)), std::string(trim(args.substr(sp))));
    return out;
  }
  while (!args.empty()) {
    size_t e = args.find('=');
    if (e == std::string_view::npos) break;
    std::string key(args.substr(0, e));
    args.remove_prefix(e + 1);
    std::string value;
    if (!args.empty() && args.front() == '"') {
      size_t close = args.find('"', 1);
      value = std::string(args.substr(1, close == std::string_view::npos ? args.npos : close - 1));
      args.remove_prefix(close == std::string_view::npos ? args.size() : close + 1);
    } else {
      size_t end = args.find_first_of(" \t");
      value = std::string(args.substr(0, end));
      args.remove_prefix(end == std::string_view::npos ? args.size() : end);
    }
    out.emplace_back(std::move(key), std::move(value));
    args = trim(args);
  }
  return out;
}

}  // namespace

Status apply_change(json& config, std::string_view change) {
  std::string_view line = trim(change);
  size_t sp = line.find_first_of(" \t");
  std::string op(line.substr(0, sp));
  std::transform(op.begin(), op.end(), op.begin(), [](unsigned char c) { return std::toupper(c); });
  std::string_view args = sp == std::string_view::npos ? "" : trim(line.substr(sp));
  auto bad = [&](const std::string& why) {
    return make_error("change", std::string(change), why)
        .with_hint("use ENV, CMD, ENTRYPOINT, WORKDIR, USER, LABEL, EXPOSE, VOLUME or STOPSIGNAL");
  };
  if (args.empty()) return bad(op.empty() ? "empty instruction" : op + " needs an argument");
  if (op == "ENV") {
    auto kvs = key_values(args);
    if (kvs.empty()) return bad("ENV needs KEY=VALUE");
    json env = config.value("Env", json::array());
    for (const auto& [k, v] : kvs) {
      std::string prefix = k + "=";
      auto it = std::find_if(env.begin(), env.end(), [&](const json& e) {
        return e.is_string() && e.get<std::string>().starts_with(prefix);
      });
      if (it != env.end())
        *it = prefix + v;
      else
        env.push_back(prefix + v);
    }
    config["Env"] = env;
  } else if (op == "LABEL") {
    auto kvs = key_values(args);
    if (kvs.empty()) return bad("LABEL needs KEY=VALUE");
    for (const auto& [k, v] : kvs) config["Labels"][k] = v;
  } else if (op == "CMD") {
    config["Cmd"] = command_form(args);
  } else if (op == "ENTRYPOINT") {
    config["Entrypoint"] = command_form(args);
  } else if (op == "WORKDIR") {
    config["WorkingDir"] = std::string(args);
  } else if (op == "USER") {
    config["User"] = std::string(args);
  } else if (op == "STOPSIGNAL") {
    config["StopSignal"] = std::string(args);
  } else if (op == "EXPOSE" || op == "VOLUME") {
    const char* key = op == "EXPOSE" ? "ExposedPorts" : "Volumes";
    json items = args.starts_with("[") ? parse_json_or_discarded(args) : json();
    if (!items.is_array()) {
      items = json::array();
      std::string rest(args);
      for (size_t pos = 0; pos < rest.size();) {
        size_t end = rest.find_first_of(" \t", pos);
        if (end == std::string::npos) end = rest.size();
        if (end > pos) items.push_back(rest.substr(pos, end - pos));
        pos = end + 1;
      }
    }
    for (const auto& item : items) {
      if (!item.is_string()) return bad(op + " takes strings");
      std::string v = item.get<std::string>();
      if (op == "EXPOSE" && v.find('/') == std::string::npos) v += "/tcp";
      config[key][v] = json::object();
    }
  } else {
    return bad("unknown or unsupported instruction '" + op + "'");
  }
  return {};
}

json import_config(const std::string& diff_id, const Platform& platform, const std::string& created,
                   const json& config, const std::string& comment) {
  json history = {{"created", created}, {"created_by", "berth import"}};
  if (!comment.empty()) history["comment"] = comment;
  json j = {{"architecture", platform.architecture},
            {"os", platform.os},
            {"created", created},
            {"config", config},
            {"rootfs", {{"type", "layers"}, {"diff_ids", json::array({diff_id})}}},
            {"history", json::array({history})}};
  if (!platform.variant.empty()) j["variant"] = platform.variant;
  return j;
}

Result<ImageRecord> import_rootfs(Store& store, int fd, const std::string& what,
                                  const Reference& name, const ImportOptions& opts) {
  json config = json::object();
  for (const std::string& c : opts.changes) BERTH_CHECK(apply_change(config, c));
  Staging staging = BERTH_TRY(Staging::create(store));
  StagedFile layer = BERTH_TRY(staging.stage_fd(fd, what));
  if (layer.size == 0) return make_error("import", what, "empty input: not a tar archive");
  LayerFileInfo info =
      BERTH_TRY(inspect_layer_file(layer.path, layer.digest, what).with_context("import"));
  // Unpacked once, as `create` will: a truncated tar or an escaping entry fails here.
  std::string check = staging.new_path();
  if (auto st = unpack_layers({layer.path}, check); !st.ok()) {
    Error e = std::move(st).error();
    if (e.subject == layer.path) e.subject = what;  // the user's file, not the staged copy
    return std::move(e).with_context("import");
  }
  (void)remove_tree(check);  // best effort: the staging folder goes away with it

  std::string created = now_rfc3339();
  std::string config_text =
      to_text(import_config(info.diff_id, opts.platform, created, config, opts.message));
  std::string config_digest = sha256_digest(config_text);
  json manifest = {
      {"schemaVersion", 2},
      {"mediaType", media::kOciManifest},
      {"config",
       {{"mediaType", media::kOciConfig}, {"digest", config_digest}, {"size", config_text.size()}}},
      {"layers", json::array({{{"mediaType", oci_layer_media_type(info.compression)},
                               {"digest", layer.digest},
                               {"size", layer.size}}})}};
  std::string manifest_text = to_text(manifest);
  StagedImage img;
  img.record.manifest_digest = sha256_digest(manifest_text);
  img.record.config_digest = config_digest;
  img.record.manifest_media_type = media::kOciManifest;
  img.record.platform = opts.platform;
  img.record.layers = {layer.digest};
  img.record.size = layer.size;
  img.names = {name.str()};
  img.files = {layer};
  img.made = {{config_digest, config_text}, {img.record.manifest_digest, manifest_text}};
  auto recs = BERTH_TRY(publish_staged(store, img));
  return recs.front();
}

}  // namespace berth

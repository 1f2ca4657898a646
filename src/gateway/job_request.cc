// A job request, its Slurm form, and its answer (gateway/job_request.h).
#include "gateway/job_request.h"

#include <algorithm>
#include <cmath>

#include "core/json.h"
#include "core/strings.h"
#include "gateway/reclaim.h"

namespace berth::gateway {
namespace {

Error bad_field(const std::string& field, const std::string& what) {
  return make_error("parse", "job request", "\"" + field + "\" " + what, ErrorCode::kInvalidInput);
}

Result<int64_t> count(const nlohmann::json& j, const std::string& field, int64_t max) {
  if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > max)
    return bad_field(field, "is not a whole number from 0 to " + std::to_string(max));
  return j.get<int64_t>();
}

Result<std::string> text(const nlohmann::json& j, const std::string& field) {
  if (!j.is_string()) return bad_field(field, "is not a string");
  std::string s = j.get<std::string>();
  if (s.find('\0') != std::string::npos) return bad_field(field, "holds a NUL byte");
  return s;
}

Result<std::vector<std::string>> texts(const nlohmann::json& j, const std::string& field) {
  if (!j.is_array()) return bad_field(field, "is not a list of strings");
  std::vector<std::string> out;
  for (const auto& v : j) out.push_back(BERTH_TRY(text(v, field)));
  return out;
}

/// A name of the site's (a GRES type, a partition): letters, digits, '_', '.', '-'.
Result<std::string> name(const nlohmann::json& j, const std::string& field, const char* what) {
  std::string s = BERTH_TRY(text(j, field));
  if (s.empty() || s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789_.-") != std::string::npos)
    return bad_field(field,
                     std::string("is not a ") + what + " name (letters, digits, '_', '.', '-')");
  return s;
}

}  // namespace

Result<JobRequest> parse_job_request(const nlohmann::json& body) {
  if (!body.is_object())
    return make_error("parse", "job request", "the body is not a JSON object",
                      ErrorCode::kInvalidInput);
  JobRequest r;
  std::string gpu_field;  // "resources.gpu_model" or "resources.gpu_type", once given
  for (const auto& [key, v] : body.items()) {
    if (key == "name")
      r.name = BERTH_TRY(text(v, key));
    else if (key == "image")
      r.image = BERTH_TRY(text(v, key));
    else if (key == "command")
      r.command = BERTH_TRY(texts(v, key));
    else if (key == "mounts")
      r.mounts = BERTH_TRY(texts(v, key));
    else if (key == "workdir")
      r.workdir = BERTH_TRY(text(v, key));
    else if (key == "group") {
      r.group = BERTH_TRY(text(v, key));
      if (r.group.empty()) return bad_field(key, "is empty: name one of your token groups");
    } else if (key == "class") {
      r.job_class = BERTH_TRY(text(v, key));
      if (r.job_class != "batch" && r.job_class != "cloud")
        return bad_field(key, "is not \"batch\" or \"cloud\"");
    } else if (key == "env") {
      if (!v.is_object()) return bad_field(key, "is not an object of strings");
      for (const auto& [name, value] : v.items()) {
        if (name.empty() || name.find_first_of("=\0", 0, 2) != std::string::npos)
          return bad_field("env", "names a variable \"" + name + "\"");
        r.env[name] = BERTH_TRY(text(value, "env." + name));
      }
    } else if (key == "resources") {
      if (!v.is_object()) return bad_field(key, "is not an object");
      for (const auto& [rk, rv] : v.items()) {
        std::string f = "resources." + rk;
        if (rk == "nodes")
          r.nodes = static_cast<int>(BERTH_TRY(count(rv, f, 10000)));
        else if (rk == "tasks")
          r.tasks = static_cast<int>(BERTH_TRY(count(rv, f, 1000000)));
        else if (rk == "cpus_per_task")
          r.cpus_per_task = static_cast<int>(BERTH_TRY(count(rv, f, 10000)));
        else if (rk == "gpus")
          r.gpus = static_cast<int>(BERTH_TRY(count(rv, f, 10000)));
        else if (rk == "gpu_share") {
          if (!rv.is_number() || !(rv.get<double>() > 0 && rv.get<double>() < 1))
            return bad_field(f, "is not a number above 0 and below 1");
          r.gpu_share = rv.get<double>();
        } else if (rk == "gpu_model" || rk == "gpu_type") {
          // Two names of one field: the GRES type (gpu_type, as Slurm and the broker's classes
          // call it) is the model the site's [gpu_models] names.
          if (!gpu_field.empty())
            return bad_field("resources",
                             "names both gpu_model and gpu_type (one is the other's "
                             "name): give one");
          gpu_field = f;
          // A GRES type as gres.conf spells one; the site's [gpu_models] decides which exist.
          r.gpu_model = BERTH_TRY(name(rv, f, "GPU model"));
        } else if (rk == "partition")
          // The site's allow-list ([slurm] partitions) decides which exist (check_partition()).
          r.partition = BERTH_TRY(name(rv, f, "partition"));
        else if (rk == "memory_mb")
          r.memory_mb = BERTH_TRY(count(rv, f, int64_t{1} << 40));
        else if (rk == "walltime_s")
          r.walltime_s = BERTH_TRY(count(rv, f, int64_t{366} * 86400));
        else
          return bad_field(f, "is not a field of a job request");
      }
    } else {
      return bad_field(key, "is not a field of a job request");
    }
  }
  if (r.image.empty()) return bad_field("image", "is required");
  if (r.nodes < 1 || r.tasks < 1 || r.cpus_per_task < 1)
    return bad_field("resources", "asks for no nodes, tasks or CPUs");
  if (r.gpus > 0 && r.gpu_share > 0)
    return bad_field("resources", "asks for both gpus and gpu_share (a share is of one GPU)");
  if (!r.gpu_model.empty() && r.gpus == 0)
    return bad_field(gpu_field, "names a GPU model but resources.gpus asks for no GPUs: give both");
  return r;
}

Result<JobRequest> read_stored_request(const std::string& text) {
  return parse_job_request(parse_json_or_discarded(text));
}

Status check_share(const JobRequest& r, const ShareConfig& share) {
  if (r.gpu_share > 0 && !share.enabled)
    return bad_field("resources.gpu_share",
                     "asks for a share of a GPU, which this site does not offer");
  return {};
}

Status check_gpu_model(const JobRequest& r, const std::vector<std::string>& known) {
  if (r.gpu_model.empty() || std::find(known.begin(), known.end(), r.gpu_model) != known.end())
    return {};
  std::string names;
  for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
  return bad_field("resources.gpu_model",
                   "is \"" + r.gpu_model + "\", not a GPU model of this site (" +
                       (names.empty() ? "it names none in [gpu_models]" : "known: " + names) + ")");
}

Status check_partition(const JobRequest& r, const std::vector<std::string>& allowed) {
  if (r.partition.empty() ||
      std::find(allowed.begin(), allowed.end(), r.partition) != allowed.end())
    return {};
  std::string names;
  for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + a;
  return make_error("parse", "job request",
                    "resources.partition: \"" + r.partition +
                        "\" is not one of this site's partitions (" +
                        (names.empty() ? "it names none in [slurm] partitions" : names) + ")",
                    ErrorCode::kInvalidInput);
}

std::string share_gres(double x, const ShareConfig& share) {
  const double units = x * static_cast<double>(share.units_per_gpu);
  // Shards are whole slots, rounded up so that the job has at least its share; MPS counts are
  // a percentage of the GPU's threads, rounded to the nearest. The epsilon keeps 0.3 * 10
  // (3.0000000000000004 in binary) at 3 shards.
  auto n =
      static_cast<int64_t>(share.gres == "mps" ? std::llround(units) : std::ceil(units - 1e-9));
  n = std::clamp<int64_t>(n, 1, std::max<int64_t>(1, share.units_per_gpu));
  return share.gres + ":" + std::to_string(n);
}

SlurmJobSpec slurm_spec(const JobRequest& r, int64_t id, const std::string& comment,
                        const SlurmConfig& slurm, const std::string& output_stem) {
  SlurmJobSpec s;
  s.name = r.name;
  s.comment = comment;
  s.partition = r.partition.empty() ? slurm.partition : r.partition;
  s.workdir = slurm.workdir;
  s.nodes = r.nodes;
  s.tasks = r.tasks;
  s.cpus_per_task = r.cpus_per_task;
  s.memory_mb = r.memory_mb;
  s.gpus = r.gpus;
  s.gpu_type = r.gpu_model;
  if (r.gpu_share > 0 && slurm.share.enabled) s.gres = share_gres(r.gpu_share, slurm.share);
  s.time_limit_min = (r.walltime_s + 59) / 60;
  // The site's variables, then the request's. The container goes on the script's srun line,
  // not into the job's environment as BERTH_CONTAINER_*: the plugin reads those in the batch
  // step too and would run the script itself in the image, where there is no srun
  // (docs/slurm.md, "sbatch").
  s.environment = slurm.environment;
  for (const auto& [k, v] : r.env) s.environment[k] = v;
  s.environment["BERTHD_JOB_ID"] = std::to_string(id);
  if (!s.gres.empty()) {
    // The site's MPS daemons' directories: `berth run` binds both (when the node has them) and
    // sets the variables inside, so the container's CUDA reaches the node's MPS server. Slurm
    // sets CUDA_VISIBLE_DEVICES (shard, mps) and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (mps).
    s.environment["CUDA_MPS_PIPE_DIRECTORY"] = slurm.share.pipe_dir;
    s.environment["CUDA_MPS_LOG_DIRECTORY"] = slurm.share.log_dir;
  }
  std::string cmd = "exec srun --container-image=" + shell_quote(r.image);
  if (!r.workdir.empty()) cmd += " --container-workdir=" + shell_quote(r.workdir);
  if (!r.mounts.empty()) {
    std::string m;
    for (const std::string& x : r.mounts) m += (m.empty() ? "" : ",") + x;
    cmd += " --container-mounts=" + shell_quote(m);
  }
  if (!r.command.empty()) {
    cmd += " --";
    for (const std::string& a : r.command) cmd += " " + shell_quote(a);
  }
  std::string watch;
  if (!slurm.output_dir.empty() && !output_stem.empty()) {
    // The container's output where berthd can read it (gateway/output.h); srun's own errors
    // (an image that does not pull) land in the .err file too. Appended to: the idle-GPU
    // sampler adds berthd's notice to .err while the job writes.
    std::string stem = slurm.output_dir + "/" + output_stem;
    cmd += " >>" + shell_quote(stem + ".out") + " 2>>" + shell_quote(stem + ".err");
    if (slurm.reclaim && r.gpus > 0)
      watch = reclaim_watch_script(slurm.reclaim_berth, stem + ".gpu", stem + ".notice",
                                   stem + ".err", slurm.reclaim_policy, r.nodes);
    // The batch script's own output goes nowhere: a file Slurm names is visible to every user
    // in the job's record while it is pending, and a file of the same name planted by another
    // user before the job starts would receive the job's writes. The names above live in the
    // script, which only the owner and Slurm's administrators can read.
    s.standard_output = s.standard_error = "/dev/null";
  }
  s.script = "#!/bin/sh\n" + watch + cmd + "\n";
  return s;
}

namespace {

/// The reason a job's answer gives: Slurm's, except for a job Slurm ended at its time limit,
/// whose reason ("TimeLimit") becomes the limit that cut it.
std::string shown_reason(const JobRecord& j) {
  if (j.state != JobState::kTimeout || j.time_limit_s <= 0) return j.reason;
  std::string limit = std::to_string(j.time_limit_s) + " s";
  if (j.time_limit_from == "request") return "cut at the walltime it asked for, " + limit;
  if (j.time_limit_from == "cloud_max_walltime_s")
    return "cut at the cloud walltime cap, " + limit + " (cloud_max_walltime_s)";
  if (!j.time_limit_from.empty())
    return "cut at the walltime cap, " + limit + " (" + j.time_limit_from + ")";
  return j.reason;
}

}  // namespace

void append_job_text(std::string& out, const JobRecord& j) {
  auto request = read_stored_request(j.request);
  const JobRequest* r = request.ok() ? &*request : nullptr;
  // The keys in byte order, as nlohmann::json (a std::map) writes them: the text is the one
  // berthd wrote when it built the answer as a JSON value first.
  char sep = '{';
  auto key = [&](std::string_view name) {
    out.push_back(sep);
    sep = ',';
    out.push_back('"');
    out.append(name);
    out.append("\":");
  };
  auto number_or_null = [&](std::string_view name, bool set, int64_t v) {
    key(name);
    if (set)
      append_json_number(out, v);
    else
      out.append("null");
  };
  key("class");
  append_json_string(out, r != nullptr ? r->job_class : "batch");
  key("created_at");
  append_json_number(out, j.created_at);
  number_or_null("end_time", j.end_time > 0, j.end_time);
  number_or_null("exit_code", j.exit_code.has_value(), j.exit_code.value_or(0));
  if (r != nullptr && !r->gpu_model.empty()) {
    key("gpu_model");
    append_json_string(out, r->gpu_model);
  }
  // A GPU share: the fraction asked for, and the GRES it became in Slurm.
  bool share = r != nullptr && r->gpu_share > 0;
  if (share) {
    key("gpu_share");
    out += to_text(nlohmann::json(r->gpu_share));  // a double as nlohmann writes one
  }
  key("gpus_allocated");
  append_json_number(out, j.gpus);
  if (share) {
    key("gres");
    append_json_string(out, j.gres);
  }
  key("gres_detail");
  out.push_back('[');
  for (size_t i = 0; i < j.gres_detail.size(); ++i) {
    if (i > 0) out.push_back(',');
    append_json_string(out, j.gres_detail[i]);
  }
  out.push_back(']');
  if (!j.vo.empty()) {
    key("group");
    append_json_string(out, j.vo);
  }
  key("id");
  out.push_back('"');
  append_json_number(out, j.id);
  out.push_back('"');
  if (r != nullptr) {
    key("image");
    append_json_string(out, r->image);
    key("name");
    append_json_string(out, r->name);
  }
  key("nodes");
  append_json_string(out, j.nodes);
  key("owner");
  append_json_string(out, j.owner);
  if (r != nullptr && !r->partition.empty()) {
    key("partition");
    append_json_string(out, r->partition);
  }
  key("reason");
  append_json_string(out, shown_reason(j));
  key("slurm_job_id");
  append_json_number(out, j.slurm_job_id);
  number_or_null("start_time", j.start_time > 0, j.start_time);
  key("state");
  append_json_string(out, job_state_name(j.state));
  key("updated_at");
  append_json_number(out, j.updated_at);
  key("walltime_s");
  append_json_number(out, j.time_limit_s);
  out.push_back('}');
}

nlohmann::json job_json(const JobRecord& j) {
  std::string text;
  append_job_text(text, j);
  return parse_json_or_discarded(text);
}

}  // namespace berth::gateway

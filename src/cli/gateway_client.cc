// berth sites, submit, jobs, job show|cancel|logs: a client of a berthd gateway or broker
// (docs/api.md, docs/gateway.md "The berth client"). Requests go through the registry client's
// libcurl wrapper (image/http.h), loaded on first use as for a pull: the commands add no library
// to berth's start. The token comes from $BERTH_TOKEN or oidc-agent's `oidc-token ACCOUNT`.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <optional>

#include "cli/context.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/strings.h"
#include "image/http.h"

extern char** environ;

namespace berth::cli {
namespace {

/// The options every client command takes.
struct ClientOptions {
  std::string gateway;       ///< --gateway, else $BERTH_GATEWAY
  std::string oidc_account;  ///< --oidc-agent-account, else $OIDC_AGENT_ACCOUNT
  bool json = false;         ///< print the server's JSON as it is
};

void add_client_options(CLI::App& app, ClientOptions& o) {
  app.add_option("--gateway", o.gateway,
                 "The berthd (gateway or broker) to ask, http(s)://HOST[:PORT] (default "
                 "$BERTH_GATEWAY)");
  app.add_option("--oidc-agent-account", o.oidc_account,
                 "Get the token from oidc-agent: `oidc-token ACCOUNT` (default $BERTH_TOKEN, "
                 "else $OIDC_AGENT_ACCOUNT)");
  app.add_flag("--json", o.json, "Print berthd's JSON answer as it is");
}

const char* env_value(const char* name) {
  const char* v = ::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

/// The access token oidc-agent's `oidc-token ACCOUNT` prints (Debian's oidc-agent-cli).
Result<std::string> oidc_token(const std::string& account) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe", "oidc-token");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  std::string prog = "oidc-token";
  char* argv[] = {prog.data(), const_cast<char*>(account.c_str()), nullptr};  // NOLINT: argv
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, prog.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    Error e = sys_error("exec:", "\"oidc-token\"", rc);
    if (rc == ENOENT)
      return std::move(e).with_hint(
          "install oidc-agent (Debian's oidc-agent-cli), or give the token in $BERTH_TOKEN");
    return e;
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < (1 << 20)) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return make_error("authenticate", "oidc-token " + account,
                      WIFEXITED(status)
                          ? "exited with status " + std::to_string(WEXITSTATUS(status))
                          : "ended by signal " + std::to_string(WTERMSIG(status)));
  std::string token(trim(out));
  if (token.empty() || token.find_first_of(" \t\r\n") != std::string::npos)
    return make_error("authenticate", "oidc-token " + account, "printed no access token");
  return token;
}

/// A berthd to ask: its base URL and the caller's token.
struct Gateway {
  std::string base;  ///< without a trailing '/'
  std::string token;
};

Result<Gateway> connect(const ClientOptions& o) {
  Gateway gw;
  gw.base = o.gateway;
  if (gw.base.empty()) {
    const char* v = env_value("BERTH_GATEWAY");
    if (v == nullptr)
      return make_error("read environment", "BERTH_GATEWAY", "not set, and no --gateway given",
                        ErrorCode::kInvalidInput)
          .with_hint("name the berthd to ask: --gateway https://HOST[:PORT] or $BERTH_GATEWAY");
    gw.base = v;
  }
  if (!gw.base.starts_with("https://") && !gw.base.starts_with("http://"))
    return make_error("parse", gw.base, "the gateway is not an http:// or https:// URL",
                      ErrorCode::kInvalidInput);
  while (gw.base.ends_with("/")) gw.base.pop_back();
  std::string account = o.oidc_account;
  if (account.empty()) {
    if (const char* t = env_value("BERTH_TOKEN")) {
      gw.token = std::string(trim(t));
      return gw;
    }
    if (const char* a = env_value("OIDC_AGENT_ACCOUNT")) account = a;
  }
  if (account.empty())
    return make_error("read environment", "BERTH_TOKEN", "not set, and no oidc-agent account given",
                      ErrorCode::kInvalidInput)
        .with_hint(
            "export BERTH_TOKEN=..., or name an oidc-agent account: --oidc-agent-account NAME "
            "or $OIDC_AGENT_ACCOUNT");
  gw.token = BERTH_TRY(oidc_token(account));
  return gw;
}

/// One answer of berthd: its status, its body as sent and as JSON.
struct Answer {
  long status = 0;
  std::string text;
  nlohmann::json body;
};

/// One request; an answer outside 2xx (and `also`) is an error carrying berthd's own message
/// ({"error": {"message"}}, docs/api.md).
Result<Answer> call(const Gateway& gw, Op method, const std::string& path,
                    const nlohmann::json* body = nullptr,
                    const std::vector<std::string>& headers = {}, long also = 0) {
  HttpRequest req;
  req.method = method;
  req.url = gw.base + path;
  req.headers = headers;
  req.headers.push_back("Authorization: Bearer " + gw.token);
  req.headers.push_back("Accept: application/json");
  if (body != nullptr) {
    req.headers.push_back("Content-Type: application/json");
    req.post_body = to_text(*body);
  }
  req.max_body = size_t{16} << 20;  // a job's output: 1 MiB of each stream, escaped
  req.connect_timeout_s = 30;
  req.low_speed_time_s = 0;  // berthd may wait on slurmrestd before its first byte
  req.timeout_ms = 300000;
  HttpResponse r = BERTH_TRY(http_perform(req));
  Answer a{r.status, std::move(r.body), nullptr};
  a.body = parse_json_or_discarded(a.text);
  if ((a.status >= 200 && a.status < 300) || (also != 0 && a.status == also)) {
    if (a.body.is_discarded())
      return http_error(method, req.url, static_cast<int>(a.status), "the answer is not JSON");
    return a;
  }
  std::string message;
  if (a.body.is_object() && a.body.contains("error") && a.body["error"].is_object())
    message = string_field(a.body["error"], "message");
  if (message.empty()) message = "berthd refused the request";
  // One line, berthd's own words ("the token has expired"): no hint of berth's beside them.
  return http_error(method, req.url, static_cast<int>(a.status), message);
}

/// A broker's route: a 404 is a berthd that is not one.
Result<Answer> broker_only(Result<Answer> r) {
  if (!r.ok() && r.error().http_status == 404)
    return std::move(r).error().with_hint(
        "only a berthd broker (one with [broker], docs/broker.md) knows sites");
  return r;
}

/// Prints berthd's answer as it came.
void print_raw(const Answer& a) {
  std::fwrite(a.text.data(), 1, a.text.size(), stdout);
  if (a.text.empty() || a.text.back() != '\n') std::fputc('\n', stdout);
}

/// A JSON value as one table cell: strings as they are, null and "" as "-".
std::string cell(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>().empty() ? "-" : v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_array()) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ",") + cell(x);
    return out.empty() ? "-" : out;
  }
  return to_text(v);
}

std::string field(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) ? cell(j[key]) : "-";
}

/// "5 minutes ago" for a Unix time, "-" for none.
std::string ago(const nlohmann::json& v, int64_t now) {
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) return "-";
  return human_duration(now - v.get<int64_t>()) + " ago";
}

// --- What a job asks for -------------------------------------------------------------------

/// The requirement options of submit and sites.
struct Requirement {
  std::string gpus, partition, time, mem;
  int64_t nodes = 0, cpus = 0;
};

void add_requirement_options(CLI::App& app, Requirement& r) {
  app.add_option("--gpus", r.gpus,
                 "GPUs of the whole job: a count, or a spec such as H100:2, A100:80GB:4 or "
                 "24GB..48GB:1 (docs/broker.md)");
  app.add_option("--partition", r.partition, "The Slurm partition");
  app.add_option("--time", r.time,
                 "Walltime, as sbatch --time: MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
                 "D-HH:MM:SS");
  app.add_option("--nodes", r.nodes, "Nodes")->check(CLI::Range(1, 100000));
  app.add_option("--cpus", r.cpus, "CPUs per task")->check(CLI::Range(1, 100000));
  app.add_option("--mem", r.mem, "Memory per node, as sbatch --mem: MB, or with K, M, G or T");
}

std::optional<int64_t> whole(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0 || v > (1LL << 40))
    return std::nullopt;
  return v;
}

/// Seconds of a Slurm time limit (sbatch(1) --time): "M", "M:S", "H:M:S", "D-H", "D-H:M",
/// "D-H:M:S".
std::optional<int64_t> slurm_seconds(const std::string& t) {
  int64_t days = 0;
  std::string_view rest = t;
  bool has_days = false;
  if (size_t dash = t.find('-'); dash != std::string::npos) {
    auto d = whole(rest.substr(0, dash));
    if (!d) return std::nullopt;
    days = *d;
    rest = rest.substr(dash + 1);
    has_days = true;
  }
  std::vector<int64_t> parts;
  for (std::string_view p : split(rest, ':')) {
    auto v = whole(p);
    if (!v) return std::nullopt;
    parts.push_back(*v);
  }
  if (parts.empty() || parts.size() > 3) return std::nullopt;
  int64_t h = 0, m = 0, s = 0;
  if (has_days) {
    h = parts[0];
    if (parts.size() > 1) m = parts[1];
    if (parts.size() > 2) s = parts[2];
  } else if (parts.size() == 1) {
    m = parts[0];
  } else if (parts.size() == 2) {
    m = parts[0];
    s = parts[1];
  } else {
    h = parts[0];
    m = parts[1];
    s = parts[2];
  }
  return ((days * 24 + h) * 60 + m) * 60 + s;
}

/// Megabytes of an sbatch --mem value: "32000", "500M", "32G", "1T", "512K" (rounded up).
std::optional<int64_t> megabytes(const std::string& m) {
  if (m.empty()) return std::nullopt;
  int64_t scale_kb = 1024;  // MB by default
  std::string digits = m;
  switch (std::toupper(static_cast<unsigned char>(m.back()))) {
    case 'K':
      scale_kb = 1;
      digits.pop_back();
      break;
    case 'M':
      digits.pop_back();
      break;
    case 'G':
      scale_kb = int64_t{1024} * 1024;
      digits.pop_back();
      break;
    case 'T':
      scale_kb = int64_t{1024} * 1024 * 1024;
      digits.pop_back();
      break;
    default:
      break;
  }
  auto v = whole(digits);
  if (!v || *v == 0) return std::nullopt;
  return (*v * scale_kb + 1023) / 1024;
}

/// berthd's job body (docs/api.md, POST /v1/jobs; docs/broker.md for the GPU spec string).
Result<nlohmann::json> job_body(const Requirement& r, const std::string& image,
                                const std::vector<std::string>& command, const std::string& name) {
  nlohmann::json body = {{"image", image}};
  if (!name.empty()) body["name"] = name;
  if (!command.empty()) body["command"] = command;
  nlohmann::json res = nlohmann::json::object();
  if (!r.gpus.empty()) {
    // A plain count stays a number, which every berthd takes; a spec string is the broker's.
    if (auto n = whole(r.gpus)) {
      res["gpus"] = *n;
    } else {
      res["gpus"] = r.gpus;
    }
  }
  if (!r.partition.empty()) res["partition"] = r.partition;
  if (r.nodes > 0) res["nodes"] = r.nodes;
  if (r.cpus > 0) res["cpus_per_task"] = r.cpus;
  if (!r.mem.empty()) {
    auto mb = megabytes(r.mem);
    if (!mb)
      return make_error("parse", "--mem " + r.mem, "not a size (MB, or a number with K, M, G or T)",
                        ErrorCode::kInvalidInput);
    res["memory_mb"] = *mb;
  }
  if (!r.time.empty()) {
    auto s = slurm_seconds(r.time);
    if (!s || *s == 0)
      return make_error("parse", "--time " + r.time,
                        "not a time limit (MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS)",
                        ErrorCode::kInvalidInput);
    res["walltime_s"] = *s;
  }
  if (!res.empty()) body["resources"] = std::move(res);
  return body;
}

/// One line of a placements answer's rejections, for a job no site takes.
std::string rejections_line(const nlohmann::json& answer) {
  std::string out;
  if (!answer.is_object() || !answer.contains("candidates") || !answer["candidates"].is_array())
    return out;
  for (const auto& c : answer["candidates"]) {
    std::string where = field(c, "site");
    if (c.contains("class") && c["class"].is_string()) where += "/" + cell(c["class"]);
    std::string why;
    for (const auto& r : c.value("reasons", nlohmann::json::array()))
      why += (why.empty() ? "" : ", ") + string_field(r, "message");
    if (!out.empty()) out += "; ";
    out += where;
    out += ": ";
    out += why;
  }
  return out;
}

/// The candidates of a placements answer as a table.
void print_placements(const nlohmann::json& answer) {
  std::vector<std::vector<std::string>> rows = {
      {"SITE", "PARTITION", "CLASS", "VERDICT", "SCORE", "WHY NOT"}};
  const nlohmann::json& chosen = answer.value("chosen", nlohmann::json());
  for (const auto& c : answer.value("candidates", nlohmann::json::array())) {
    std::string why;
    for (const auto& r : c.value("reasons", nlohmann::json::array()))
      why +=
          (why.empty() ? "" : "; ") + string_field(r, "code") + ": " + string_field(r, "message");
    std::string verdict = field(c, "verdict");
    if (chosen.is_object() && chosen.value("site", "") == c.value("site", "") &&
        chosen.value("partition", nlohmann::json()) == c.value("partition", nlohmann::json()) &&
        chosen.value("class", nlohmann::json()) == c.value("class", nlohmann::json()))
      verdict = "chosen";
    rows.push_back({field(c, "site"), field(c, "partition"), field(c, "class"), verdict,
                    field(c, "score"), why.empty() ? "-" : why});
  }
  print_table(rows);
}

/// "4 (2 free)" per GPU model of a site.
std::string gpus_cell(const nlohmann::json& gpus) {
  std::string out;
  if (!gpus.is_object()) return "-";
  for (const auto& [model, n] : gpus.items())
    out += (out.empty() ? "" : ", ") + model + ": " + field(n, "total") + " (" + field(n, "free") +
           " free)";
  return out.empty() ? "-" : out;
}

void print_jobs(const nlohmann::json& jobs) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  bool sites = false;
  for (const auto& j : jobs) sites = sites || (j.is_object() && j.contains("site"));
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"JOB ID", "NAME", "IMAGE", "STATE", "EXIT", "SLURM ID", "NODES", "CREATED"});
  if (sites) rows.front().push_back("SITE");
  for (const auto& j : jobs) {
    rows.push_back({field(j, "id"), field(j, "name"), field(j, "image"), field(j, "state"),
                    field(j, "exit_code"), field(j, "slurm_job_id"), field(j, "nodes"),
                    ago(j.value("created_at", nlohmann::json()), now)});
    if (sites) rows.back().push_back(field(j, "site"));
  }
  print_table(rows);
}

/// A job as "FIELD   VALUE" lines, its times in RFC 3339.
void print_job(const nlohmann::json& job) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, v] : job.items()) {
    std::string value = cell(v);
    if ((key.ends_with("_at") || key.ends_with("_time")) && v.is_number_integer())
      value = v.get<int64_t>() > 0 ? rfc3339(v.get<int64_t>()) : "-";
    rows.push_back({key, value});
  }
  print_table(rows);
}

std::string job_path(const std::string& id) {
  return "/v1/jobs/" + url_escape(id);
}

// --- The commands -----------------------------------------------------------------------------

Action setup_job_show(CLI::App& app) {
  struct Opts {
    ClientOptions client;
    std::string id;
  };
  auto o = std::make_shared<Opts>();
  add_client_options(app, o->client);
  app.add_option("ID", o->id, "The job's ID (berthd's)")->required();
  return [o]() -> Status {
    Gateway gw = BERTH_TRY(connect(o->client));
    Answer a = BERTH_TRY(call(gw, "GET", job_path(o->id)));
    if (o->client.json) {
      print_raw(a);
    } else {
      print_job(a.body);
    }
    return {};
  };
}

Action setup_job_cancel(CLI::App& app) {
  struct Opts {
    ClientOptions client;
    std::string id;
  };
  auto o = std::make_shared<Opts>();
  add_client_options(app, o->client);
  app.add_option("ID", o->id, "The job's ID (berthd's)")->required();
  return [o]() -> Status {
    Gateway gw = BERTH_TRY(connect(o->client));
    Answer a = BERTH_TRY(call(gw, "DELETE", job_path(o->id)));
    if (o->client.json) {
      print_raw(a);
    } else {
      std::printf("%s\n", o->id.c_str());
    }
    return {};
  };
}

Action setup_job_logs(CLI::App& app) {
  struct Opts {
    ClientOptions client;
    std::string id;
    int tail = 0;
  };
  auto o = std::make_shared<Opts>();
  add_client_options(app, o->client);
  app.add_option("-n,--tail", o->tail, "The last N lines of each stream (berthd's default 100)")
      ->check(CLI::Range(1, 10000));
  app.add_option("ID", o->id, "The job's ID (berthd's)")->required();
  return [o]() -> Status {
    Gateway gw = BERTH_TRY(connect(o->client));
    std::string path = job_path(o->id) + "/output";
    if (o->tail > 0) path += "?tail=" + std::to_string(o->tail);
    Answer a = BERTH_TRY(call(gw, "GET", path));
    if (o->client.json) {
      print_raw(a);
      return {};
    }
    // The container's two streams where `berth logs` puts them.
    const std::string out = string_field(a.body, "stdout"), err = string_field(a.body, "stderr");
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    std::fwrite(err.data(), 1, err.size(), stderr);
    return {};
  };
}

}  // namespace

Action setup_jobs(CLI::App& app, const GlobalOptions& /*g*/) {
  struct Opts {
    ClientOptions client;
    std::string state;
  };
  auto o = std::make_shared<Opts>();
  add_client_options(app, o->client);
  app.add_option("--state", o->state, "Only jobs in this state (RUNNING, PENDING, ...)");
  return [o]() -> Status {
    Gateway gw = BERTH_TRY(connect(o->client));
    std::string path = "/v1/jobs";
    if (!o->state.empty()) path += "?state=" + url_escape(o->state);
    Answer a = BERTH_TRY(call(gw, "GET", path));
    if (o->client.json) {
      print_raw(a);
    } else {
      print_jobs(a.body.value("jobs", nlohmann::json::array()));
    }
    return {};
  };
}

Action setup_job(CLI::App& app, const GlobalOptions& /*g*/) {
  app.require_subcommand(1);
  Action show = setup_job_show(*app.add_subcommand("show", "Show a job"));
  Action cancel = setup_job_cancel(*app.add_subcommand("cancel", "Cancel a job"));
  Action logs =
      setup_job_logs(*app.add_subcommand("logs", "Show the last lines of a job's output"));
  return [&app, show, cancel, logs]() -> Status {
    if (app.got_subcommand("cancel")) return cancel();
    if (app.got_subcommand("logs")) return logs();
    return show();
  };
}

Action setup_submit(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    ClientOptions client;
    Requirement req;
    std::string name, idempotency_key;
  };
  auto o = std::make_shared<Opts>();
  add_client_options(app, o->client);
  add_requirement_options(app, o->req);
  app.add_option("--name", o->name, "The job's name");
  app.add_option("--idempotency-key", o->idempotency_key,
                 "Submit at most once: a retry with the same key returns the first job");
  // Everything from the image on is positional: IMAGE [COMMAND [ARG...]].
  app.prefix_command();
  return [o, &g, &app]() -> Status {
    std::vector<std::string> rest = prefix_operands(app, g);
    if (!rest.empty() && rest.front().starts_with("-"))
      return make_error("parse", "submit " + rest.front(), "unknown flag", ErrorCode::kInvalidInput)
          .with_hint("see 'berth submit --help'");
    if (rest.empty())
      return make_error("parse", "submit", "an image is required", ErrorCode::kInvalidInput)
          .with_hint("berth submit [OPTIONS] IMAGE [COMMAND [ARG...]]");
    std::vector<std::string> command(rest.begin() + 1, rest.end());
    if (!command.empty() && command.front() == "--") command.erase(command.begin());
    nlohmann::json body = BERTH_TRY(job_body(o->req, rest.front(), command, o->name));
    Gateway gw = BERTH_TRY(connect(o->client));
    std::vector<std::string> headers;
    if (!o->idempotency_key.empty()) headers.push_back("Idempotency-Key: " + o->idempotency_key);
    // A broker answers 422 with its placements when no site can take the job.
    Answer a = BERTH_TRY(call(gw, "POST", "/v1/jobs", &body, headers, 422));
    if (a.status == 422) {
      const bool placements = a.body.is_object() && a.body.contains("candidates");
      std::string message = placements ? "no site can take the job: " + rejections_line(a.body)
                            : a.body.is_object() && a.body.contains("error")
                                ? string_field(a.body["error"], "message")
                                : "berthd refused the request";
      return http_error("POST", gw.base + "/v1/jobs", 422, message);
    }
    if (o->client.json) {
      print_raw(a);
    } else {
      std::printf("%s\n", string_field(a.body, "id").c_str());
    }
    if (string_field(a.body, "state") == "SUBMIT_FAILED")
      return make_error("POST", gw.base + "/v1/jobs",
                        "job " + string_field(a.body, "id") +
                            " was not submitted: " + string_field(a.body, "reason"));
    return {};
  };
}

Action setup_sites(CLI::App& app, const GlobalOptions& /*g*/) {
  struct Opts {
    ClientOptions client;
    Requirement req;
  };
  auto o = std::make_shared<Opts>();
  add_client_options(app, o->client);
  add_requirement_options(app, o->req);
  return [o, &app]() -> Status {
    Gateway gw = BERTH_TRY(connect(o->client));
    bool asks = false;
    for (const char* opt : {"--gpus", "--partition", "--time", "--nodes", "--cpus", "--mem"})
      asks = asks || app.count(opt) > 0;
    if (!asks) {
      Answer a = BERTH_TRY(broker_only(call(gw, "GET", "/v1/sites")));
      if (o->client.json) {
        print_raw(a);
        return {};
      }
      std::vector<std::vector<std::string>> rows = {
          {"SITE", "KIND", "UP", "FRESH", "READ", "CLASSES", "GPUS", "ERROR"}};
      for (const auto& s : a.body.value("sites", nlohmann::json::array())) {
        const nlohmann::json age = s.value("age_s", nlohmann::json());
        rows.push_back({field(s, "name"), field(s, "kind"), field(s, "up"), field(s, "fresh"),
                        age.is_number_integer() ? human_duration(age.get<int64_t>()) + " ago" : "-",
                        field(s, "classes"), gpus_cell(s.value("gpus", nlohmann::json())),
                        field(s, "error")});
      }
      print_table(rows);
      return {};
    }
    // Where a job of these needs would go, and why not elsewhere: the broker's dry run. The
    // image is no part of the fit.
    nlohmann::json body = BERTH_TRY(job_body(o->req, "berth-sites", {}, ""));
    Answer a = BERTH_TRY(broker_only(call(gw, "POST", "/v1/placements", &body, {}, 422)));
    if (o->client.json) {
      print_raw(a);
    } else {
      print_placements(a.body);
    }
    return {};
  };
}

}  // namespace berth::cli

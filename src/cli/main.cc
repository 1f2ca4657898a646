// berth: parses the command line through the command table, runs the chosen
// command, and is the one place an error is printed.
#include <unistd.h>

#include <cstdio>

#include "cli/command.h"
#include "cli/udocker.h"
#include "core/json.h"
#include "core/log.h"
#include "core/safe_text.h"

namespace berth::cli {

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = {
      {"pull", "Pull an image from a registry", setup_pull},
      {"images", "List images in the store", setup_images},
      {"rmi", "Remove images and the blobs only they use", setup_rmi},
      {"inspect", "Show a container or an image as JSON, or a squashfs file", setup_inspect},
      {"verify", "Re-check the digest of every blob of an image", setup_verify},
      {"unpack", "Unpack an image's layers into a directory", setup_unpack},
      {"tag", "Give an image another name", setup_tag},
      {"import", "Make an image from a root filesystem tarball", setup_import},
      {"load", "Load images from a docker save or OCI layout archive", setup_load},
      {"save", "Save images to an OCI layout archive (docker load takes it too)", setup_save},
      {"search", "Search a registry for repositories", setup_search},
      {"manifest", "Show an image's manifest from its registry (manifest inspect)", setup_manifest},
      {"create", "Create a container from an image", setup_create},
      {"run", "Run a command in a new or existing container", setup_run},
      {"ps", "List containers", setup_ps},
      {"rm", "Remove containers", setup_rm},
      {"logs", "Print the output of a container run with -d", setup_logs},
      {"stop", "Stop running containers: SIGTERM, then SIGKILL after a grace period", setup_stop},
      {"start", "Run containers' last command again, detached", setup_start},
      {"restart", "Stop running containers, then start them again", setup_restart},
      {"wait", "Wait for containers to stop; print their exit codes", setup_wait},
      {"top", "Show the processes of a running container", setup_top},
      {"cp", "Copy files between a container and the host", setup_cp},
      {"exec", "Run a command in a running container (userns engine)", setup_exec},
      {"kill", "Send a signal to running containers (default KILL)", setup_kill},
      {"name", "Give a container a name", setup_name},
      {"rmname", "Remove a container name", setup_rmname},
      {"setup", "Show or set a container's engine (setup --engine=NAME)", setup_setup},
      {"rename", "Rename a container (its names are replaced)", setup_rename},
      {"clone", "Copy a container under a new ID", setup_clone},
      {"export", "Write a container's root filesystem as a tar archive", setup_export},
      {"image", "Manage images: image prune removes those nothing needs", setup_image},
      {"system", "Show the store's disk usage (system df)", setup_system},
      {"gc",
       "Remove what killed or refused commands left: unused blobs, staging, half-made containers",
       setup_gc},
      {"squash", "Write an image or a container as one squashfs file", setup_squash},
      {"protect", "Protect an image or container from rmi and rm", setup_protect},
      {"unprotect", "Remove the protection of an image or container", setup_unprotect},
      {"login", "Log in to a registry", setup_login},
      {"logout", "Log out from a registry", setup_logout},
      {"gpu", "Show the host's GPUs and driver (gpu info), their use (gpu stats)", setup_gpu},
      {"ib", "Show the host's InfiniBand/RDMA HCAs (ib info)", setup_ib},
      {"cdi", "Write a CDI spec for the host's GPUs (cdi generate)", setup_cdi},
      {"sites", "Show a berthd broker's sites, and where a job's needs fit", setup_sites},
      {"submit", "Submit a job to a berthd gateway or broker", setup_submit},
      {"jobs", "List your jobs at a berthd gateway or broker", setup_jobs},
      {"job", "Show, cancel or read the output of a berthd job (job show|cancel|logs ID)",
       setup_job},
      {"info", "Show the store, the kernel and the engines found", setup_info},
      {"version", "Show the version and build", setup_version},
  };
  return table;
}

MentionedOptions::MentionedOptions(int argc, char** argv) : all_(false) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;  // operands from here on, whatever they look like
    if (a == "--help") all_ = true;
    if (a.size() < 2 || a[0] != '-') continue;
    if (a[1] == '-') {
      names_.emplace_back(a.substr(0, a.find('=')));
    } else {
      for (char c : a.substr(1)) names_.push_back(std::string{'-', c});
    }
  }
}

bool MentionedOptions::any(std::string_view names) const {
  if (all_) return true;
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    std::string_view n =
        names.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (!n.empty() && n.front() == '!') n.remove_prefix(1);
    for (const std::string& m : names_)
      if (m == n) return true;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return false;
}

std::vector<std::string> prefix_operands(const CLI::App& app, const GlobalOptions& g) {
  std::vector<std::string> rest = app.remaining();
  if (!g.after_dashes) return rest;
  if (!rest.empty()) rest.emplace_back("--");  // after the image: the workload's own
  rest.insert(rest.end(), g.after_dashes->begin(), g.after_dashes->end());
  return rest;
}

size_t given_count(const CLI::App& app, const std::string& name) {
  const CLI::Option* o = app.get_option_no_throw(name);
  return o == nullptr ? 0 : o->count();
}

namespace {

/// Exit statuses, as Docker's CLI uses them.
constexpr int kExitFailed = 1;

// Set at most once per process, by the action that runs; read by run() below.
int g_exit_status = -1;
constexpr int kExitUsage = 125;

/// Each ErrorCode's name, in the enum's order, as scripts read it: the "code" of the JSON error
/// object --error-format=json prints (docs/slurm.md). Here, beside the one printer of errors.
constexpr std::string_view kErrorCodeNames[] = {
    "other",         "not_found", "exists",  "permission", "busy",      "unsupported",
    "invalid_input", "integrity", "network", "http",       "cancelled",
};
static_assert(std::size(kErrorCodeNames) == static_cast<size_t>(ErrorCode::kCancelled) + 1,
              "one name per ErrorCode");

/// --error-format=json: errors as one JSON object on stderr, for programs that run berth (the
/// Slurm plugin) and act on the error's code; read from the command line before it is parsed,
/// so that an error in the rest of the line is printed that way too.
bool g_json_errors = false;

/// The error in one line (and its hint in another), whatever bytes a registry put in it; with
/// --error-format=json, one line {"error": {"message", "code", "hint"}} (docs/slurm.md).
void print_error_line(const std::string& message, const std::string& hint, ErrorCode code) {
  if (g_json_errors) {
    nlohmann::ordered_json e = {{"message", message},
                                {"code", kErrorCodeNames[static_cast<size_t>(code)]}};
    if (!hint.empty()) e["hint"] = hint;
    std::fprintf(stderr, "%s\n", to_text(nlohmann::ordered_json{{"error", e}}).c_str());
    return;
  }
  std::fprintf(stderr, "berth: error: %s\n", safe_text(message).c_str());
  if (!hint.empty()) std::fprintf(stderr, "berth: hint: %s\n", safe_text(hint).c_str());
}

void print_error(const Error& e) {
  print_error_line(e.message(), e.hint, e.code);
}

/// Where the first word that is not a global option or its value is: the command the user
/// meant (argc when there is none).
int command_index(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--home" || a == "--insecure-registry" || a == "--error-format") {
      ++i;  // skip the option's value
    } else if (a.empty() || a[0] != '-') {
      return i;
    }
  }
  return argc;
}

std::string command_word(int argc, char** argv) {
  int i = command_index(argc, argv);
  return i < argc ? argv[i] : "";
}

/// Whether `argv` asks for --error-format=json before the command word.
bool json_errors_requested(int argc, char** argv) {
  int end = command_index(argc, argv);
  for (int i = 1; i < end; ++i) {
    std::string_view a = argv[i];
    if (a == "--error-format=json" ||
        (a == "--error-format" && i + 1 < argc && std::string_view(argv[i + 1]) == "json"))
      return true;
  }
  return false;
}

bool is_command(const std::string& word) {
  for (const Command& c : command_table())
    if (word == c.name) return true;
  return false;
}

/// The first word of the command line CLI11 left over that is an option ("--tail", "-n"),
/// in the order typed; "" when none is.
std::string unknown_option(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> left = app.remaining(true);
  for (int i = command_index(argc, argv) + 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') continue;
    std::string_view name = a.substr(0, a.find('='));
    for (const std::string& l : left) {
      if (l == a || l == name) return std::string(name);
      // A cluster of short flags, -qa: CLI11 leaves the one it does not know, -a.
      if (a[1] != '-' && l.size() == 2 && l[0] == '-' && name.find(l[1], 1) != name.npos) return l;
    }
  }
  return "";
}

int run(int argc, char** argv) {
  CLI::App app{"berth: run container images rootless on HPC systems, with their GPUs", "berth"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "berth " BERTH_VERSION);
  GlobalOptions g;
  g.mentioned = MentionedOptions(argc, argv);
  const MentionedOptions& m = g.mentioned;
  if (m.any("--home"))
    app.add_option("--home", g.home, "Store root (default $BERTH_HOME or ~/.local/share/berth)");
  if (m.any("--insecure-registry"))
    app.add_option("--insecure-registry", g.insecure,
                   "Allow plain HTTP to this registry (host[:port]); repeatable");
  if (m.any("-v,--verbose")) app.add_flag("-v,--verbose", g.verbose, "Say more about what happens");
  if (m.any("-q,--quiet")) app.add_flag("-q,--quiet", g.quiet, "Print only errors");
  g_json_errors = json_errors_requested(argc, argv);
  std::string error_format = g_json_errors ? "json" : "text";
  if (m.any("--error-format"))
    app.add_option("--error-format", error_format,
                   "How an error is printed: text (berth: error: ...) or json (one line "
                   "{\"error\": {\"message\", \"code\", \"hint\"}}, for programs)")
        ->check(CLI::IsMember({"text", "json"}));

  Action action;
  // Only the command named is declared when there is one: declaring all thirty (each option a
  // few allocations and a std::function) took a quarter of a millisecond of every container
  // start. Help and unknown words get them all.
  std::string word = command_word(argc, argv);
  bool named = is_command(word);
  for (const Command& c : command_table()) {
    if (named && word != c.name) continue;
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    // Options are declared now; the action reads them once parsing is done.
    Action a = c.setup(*sub, g);
    sub->final_callback([&action, a] { action = a; });
  }
  // run and exec take their operands as they are: a "--" in their line is not CLI11's (which
  // would end the subcommand), and what follows it is kept for prefix_operands().
  int parsed = argc;
  if (CLI::App* sub = named ? app.get_subcommand(word) : nullptr;
      sub && sub->get_prefix_command()) {
    for (int i = command_index(argc, argv) + 1; i < argc; ++i) {
      if (std::string_view(argv[i]) != "--") continue;
      g.after_dashes = std::vector<std::string>(argv + i + 1, argv + argc);
      parsed = i;
      break;
    }
  }
  try {
    app.parse(parsed, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports an unknown command as "A subcommand is required"; name it, as Docker does.
    if (!word.empty() && !is_command(word)) {
      print_error_line("'" + word + "' is not a berth command", "see 'berth --help'",
                       ErrorCode::kInvalidInput);
      return kExitUsage;
    }
    // And an unknown option as "arguments were not expected: CONTAINER --tail", operands
    // first: name the option, as run's own parser and Docker do.
    if (std::string flag = unknown_option(app, parsed, argv); !flag.empty()) {
      print_error_line(word + " " + flag + ": unknown flag", "see 'berth " + word + " --help'",
                       ErrorCode::kInvalidInput);
      return kExitUsage;
    }
    if (const auto* extras = dynamic_cast<const CLI::ExtrasError*>(&e);
        extras != nullptr && !word.empty()) {
      std::vector<std::string> left = app.remaining(true);
      if (!left.empty()) {
        print_error_line(word + " " + left.front() + ": unexpected argument",
                         "see 'berth " + word + " --help'", ErrorCode::kInvalidInput);
        return kExitUsage;
      }
    }
    print_error_line(e.what(),
                     word.empty() ? "see 'berth --help'" : "see 'berth " + word + " --help'",
                     ErrorCode::kInvalidInput);
    return kExitUsage;
  }
  return run_action(g, action);
}

}  // namespace

int run_action(GlobalOptions& g, const Action& action) {
  log::set_level(g.quiet ? log::Level::kError : g.verbose ? log::Level::kDebug : log::Level::kWarn);
  g.site = load_config();
  if (g.site.ok())
    for (const std::string& line : g.site->ignored) log::warn("{} (ignored)", line);
  g_exit_status = -1;  // the udocker line may run several actions, one after another
  Status st = action();
  if (!st.ok()) {
    print_error(st.error());
    return g_exit_status >= 0 ? g_exit_status : kExitFailed;
  }
  return g_exit_status >= 0 ? g_exit_status : 0;
}

namespace {

/// Docker's management commands as aliases of Berth's own: `image ls` is `images`, `container
/// rm` is `rm`, `image inspect` is `inspect --type=image` (docker image --help, docker
/// container --help). Each row: group, word, then what replaces the two.
struct Alias {
  const char* group;
  const char* word;
  std::vector<const char*> as;
};

const std::vector<Alias>& docker_aliases() {
  static const std::vector<Alias> table = {
      {"image", "ls", {"images"}},
      {"image", "list", {"images"}},
      {"image", "rm", {"rmi"}},
      {"image", "remove", {"rmi"}},
      {"image", "inspect", {"inspect", "--type=image"}},
      {"image", "pull", {"pull"}},
      {"image", "tag", {"tag"}},
      {"image", "save", {"save"}},
      {"image", "load", {"load"}},
      {"image", "import", {"import"}},
      {"container", "ls", {"ps"}},
      {"container", "list", {"ps"}},
      {"container", "ps", {"ps"}},
      {"container", "rm", {"rm"}},
      {"container", "remove", {"rm"}},
      {"container", "inspect", {"inspect", "--type=container"}},
      {"container", "create", {"create"}},
      {"container", "run", {"run"}},
      {"container", "start", {"start"}},
      {"container", "stop", {"stop"}},
      {"container", "restart", {"restart"}},
      {"container", "top", {"top"}},
      {"container", "cp", {"cp"}},
      {"container", "kill", {"kill"}},
      {"container", "wait", {"wait"}},
      {"container", "logs", {"logs"}},
      {"container", "exec", {"exec"}},
      {"container", "export", {"export"}},
      {"container", "rename", {"rename"}},
  };
  return table;
}

}  // namespace

int berth_main(int argc, char** argv) {
  int i = command_index(argc, argv);
  if (i + 1 < argc) {
    for (const Alias& a : docker_aliases()) {
      if (std::string_view(argv[i]) != a.group || std::string_view(argv[i + 1]) != a.word) continue;
      std::vector<char*> line(argv, argv + i);
      for (const char* w : a.as) line.push_back(const_cast<char*>(w));  // NOLINT: argv's type
      line.insert(line.end(), argv + i + 2, argv + argc);
      line.push_back(nullptr);
      return run(static_cast<int>(line.size()) - 1, line.data());
    }
  }
  if (i < argc && std::string_view(argv[i]) == "container" && !is_command("container")) {
    print_error_line(i + 1 < argc ? "container " + std::string(argv[i + 1]) +
                                        ": not a container command Berth has"
                                  : "container: a command is required (ls, rm, run, ...)",
                     "see 'berth --help': Docker's container commands are Berth's own words",
                     ErrorCode::kInvalidInput);
    return kExitUsage;
  }
  return run(argc, argv);
}

void set_exit_status(int status) {
  g_exit_status = status;
}

}  // namespace berth::cli

int main(int argc, char** argv) {
  // A link named udocker takes udocker's command line (cli/udocker.h).
  if (berth::cli::invoked_as_udocker(argv[0])) return berth::cli::udocker_main(argc, argv);
  return berth::cli::berth_main(argc, argv);
}

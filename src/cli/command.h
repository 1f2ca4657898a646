// The command table: each subcommand declares its options on a CLI11 app
// and returns the action to run once the command line is parsed.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "site/config.h"

namespace berth::cli {

/// The option names a command line mentions anywhere in it: every "--name" (up to its "="),
/// and every "-x" of a "-xyz" cluster, up to a "--" (what follows it is operands). Declaring a
/// CLI11 option costs microseconds (its std::function and strings, and a check of its names against
/// every option declared before it), which every container start paid for all of run's options; run
/// declares only those the line mentions. The parse is the same: an option the line does not name
/// cannot change it. A superset is harmless (the container's own "-c" declares nothing or one
/// option more);
/// --help, or no command line at all, declares everything.
class MentionedOptions {
 public:
  MentionedOptions() = default;
  MentionedOptions(int argc, char** argv);
  /// Whether a CLI11 name list ("-e,--env", "--bind-home,!--no-bind-home") names an option
  /// the line mentions.
  bool any(std::string_view names) const;

 private:
  bool all_ = true;
  std::vector<std::string> names_;
};

/// Options given before the command name.
struct GlobalOptions {
  std::string home;                   ///< --home, else $BERTH_HOME, else ~/.local/share/berth
  std::vector<std::string> insecure;  ///< --insecure-registry
  bool verbose = false;
  bool quiet = false;
  /// The configuration file (site/config.h), read once before the command runs; an error in
  /// it is reported by the commands that use it.
  Result<SiteConfig> site = SiteConfig{};
  /// What the command line mentions, for commands that declare only those options.
  MentionedOptions mentioned;
  /// For a command whose operands are taken as they are (run, exec): what followed a "--" in
  /// its line, which the parser never sees, so that an operand may start with '-'.
  std::optional<std::vector<std::string>> after_dashes;
};

/// The operands of a command that takes everything from its first operand on as it is (run,
/// exec: CLI11's prefix_command): what the parser left, then what followed a "--". A "--"
/// before the first operand ends the command's options (as Docker's and every getopt's does);
/// one after it is the workload's own, kept.
std::vector<std::string> prefix_operands(const CLI::App& app, const GlobalOptions& g);

/// How often an option was given; 0 when it was not declared (MentionedOptions).
size_t given_count(const CLI::App& app, const std::string& name);

using Action = std::function<Status()>;

struct Command {
  const char* name;
  const char* summary;
  /// Declares the command's options on `app`; returns what to run.
  Action (*setup)(CLI::App& app, const GlobalOptions& global);
};

/// Sets the status main returns: when the action succeeds (run: the container's status), or
/// instead of 1 when it fails (run and create: 125, Docker's "Berth itself failed").
void set_exit_status(int status);

/// Parses a berth command line (argv[0] included) and runs it; the process's exit status.
int berth_main(int argc, char** argv);
/// Runs `action` as main runs a parsed command: log level from `g`, the configuration read into
/// g.site, an error printed once; returns the exit status.
int run_action(GlobalOptions& g, const Action& action);

/// Every subcommand, in the order `berth --help` lists them.
const std::vector<Command>& command_table();

Action setup_pull(CLI::App& app, const GlobalOptions& g);
Action setup_images(CLI::App& app, const GlobalOptions& g);
Action setup_rmi(CLI::App& app, const GlobalOptions& g);
Action setup_inspect(CLI::App& app, const GlobalOptions& g);
Action setup_verify(CLI::App& app, const GlobalOptions& g);
Action setup_unpack(CLI::App& app, const GlobalOptions& g);
Action setup_login(CLI::App& app, const GlobalOptions& g);
Action setup_logout(CLI::App& app, const GlobalOptions& g);
Action setup_create(CLI::App& app, const GlobalOptions& g);
Action setup_run(CLI::App& app, const GlobalOptions& g);
Action setup_ps(CLI::App& app, const GlobalOptions& g);
Action setup_rm(CLI::App& app, const GlobalOptions& g);
Action setup_logs(CLI::App& app, const GlobalOptions& g);
Action setup_stop(CLI::App& app, const GlobalOptions& g);
Action setup_start(CLI::App& app, const GlobalOptions& g);
Action setup_restart(CLI::App& app, const GlobalOptions& g);
Action setup_top(CLI::App& app, const GlobalOptions& g);
Action setup_cp(CLI::App& app, const GlobalOptions& g);
Action setup_wait(CLI::App& app, const GlobalOptions& g);
Action setup_kill(CLI::App& app, const GlobalOptions& g);
Action setup_exec(CLI::App& app, const GlobalOptions& g);
Action setup_name(CLI::App& app, const GlobalOptions& g);
Action setup_rmname(CLI::App& app, const GlobalOptions& g);
Action setup_setup(CLI::App& app, const GlobalOptions& g);
Action setup_gpu(CLI::App& app, const GlobalOptions& g);
Action setup_cdi(CLI::App& app, const GlobalOptions& g);
Action setup_ib(CLI::App& app, const GlobalOptions& g);
Action setup_import(CLI::App& app, const GlobalOptions& g);
Action setup_load(CLI::App& app, const GlobalOptions& g);
Action setup_save(CLI::App& app, const GlobalOptions& g);
Action setup_export(CLI::App& app, const GlobalOptions& g);
Action setup_squash(CLI::App& app, const GlobalOptions& g);
Action setup_tag(CLI::App& app, const GlobalOptions& g);
Action setup_clone(CLI::App& app, const GlobalOptions& g);
Action setup_rename(CLI::App& app, const GlobalOptions& g);
Action setup_protect(CLI::App& app, const GlobalOptions& g);
Action setup_unprotect(CLI::App& app, const GlobalOptions& g);
Action setup_search(CLI::App& app, const GlobalOptions& g);
Action setup_manifest(CLI::App& app, const GlobalOptions& g);
Action setup_version(CLI::App& app, const GlobalOptions& g);
Action setup_info(CLI::App& app, const GlobalOptions& g);
Action setup_gc(CLI::App& app, const GlobalOptions& g);
Action setup_image(CLI::App& app, const GlobalOptions& g);
Action setup_system(CLI::App& app, const GlobalOptions& g);
// A client of a berthd gateway or broker (cli/gateway_client.cc).
Action setup_sites(CLI::App& app, const GlobalOptions& g);
Action setup_submit(CLI::App& app, const GlobalOptions& g);
Action setup_jobs(CLI::App& app, const GlobalOptions& g);
Action setup_job(CLI::App& app, const GlobalOptions& g);

}  // namespace berth::cli

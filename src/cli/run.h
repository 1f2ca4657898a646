// The run itself, shared by `berth run` and `berth start` (which runs a container's recorded
// command again, detached).
#pragma once

#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/policy.h"
#include "runtime/container_config.h"

namespace berth::cli {

/// How `do_run` runs: in the foreground, or detached printing the container ID (`run -d`) or
/// not (`start`).
enum class Detach { kNo, kYes, kQuietly };

/// What `run` takes beyond the run options.
struct RunExtras {
  std::string pull = "missing";  ///< --pull: always | missing | never (container_target.h)
};

/// Declares the run options the command line mentions (MentionedOptions), for run and create.
void add_run_options(CLI::App& app, RunOptions& o, std::string& name, const MentionedOptions& m);

/// Resolves what typed run options depend on at the moment they are typed, for `run` and
/// `create` alike: relative volume sources made absolute against the working directory (as
/// Docker takes `-v ./data:/data`), and opts.env_files read into opts.file_env (env_files
/// emptied).
Status resolve_typed_options(RunOptions& opts, const std::vector<std::string>& host_env);

/// Which of the run options the site policy defaults (--bind-home, --read-only) the command
/// line gave; `app` as add_run_options() declared it.
GivenOptions given_run_options(const CLI::App& app);

/// A run's options as `berth start` repeats them (container.json's "run_options"): as typed,
/// with what depends on the moment resolved (-e KEY's host value; --env-file read, relative
/// volumes made absolute by the caller); -i, -t, --name and --rm left out.
nlohmann::json options_record(const RunOptions& o, const GivenOptions& given,
                              const std::vector<std::string>& host_env);
/// The options `options_record` wrote, and which of the policy-defaulted ones were given.
RunOptions options_from_record(const nlohmann::json& j, GivenOptions* given);

/// Runs `rest` (IMAGE|CONTAINER|DIR [COMMAND...]) with `opts`; detached: under a monitor, the
/// caller returning at once (runtime/monitor.h), and the monitor returning once the run ended,
/// with `*monitor` set.
Status do_run(const GlobalOptions& g, RunOptions opts, const GivenOptions& given,
              const std::string& name, bool remove, bool writable, const std::string& engine,
              std::vector<std::string> rest, Detach detach, bool* monitor = nullptr,
              const RunExtras& extras = {});

}  // namespace berth::cli

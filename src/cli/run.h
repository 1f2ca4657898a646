// The run itself, shared by `berth run` and `berth start` (which runs a container's recorded
// command again, detached).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/policy.h"
#include "runtime/container_config.h"
#include "runtime/engines.h"

namespace berth::cli {

/// How `do_run` runs: in the foreground, or detached printing the container ID (`run -d`) or
/// not (`start`).
enum class Detach { kNo, kYes, kQuietly };

/// One `do_run`: what to run, with which options, and how.
struct RunRequest {
  RunOptions opts;
  GivenOptions given;                  ///< which policy-defaulted options the line gave
  std::string name;                    ///< --name: a new container's
  bool remove = false;                 ///< --rm
  bool writable = false;               ///< --writable: a squashfs image's root
  std::optional<EngineChoice> engine;  ///< --engine; nullopt: the container's or the site's
  /// IMAGE|CONTAINER|DIR [COMMAND [ARG...]], as typed.
  std::vector<std::string> rest;
  Detach detach = Detach::kNo;
  std::string pull = "missing";  ///< --pull: always | missing | never (container_target.h)
  std::string platform;          ///< --platform os/arch[/variant] of the image; "" the host's
};

/// Declares the run options the command line mentions (MentionedOptions), for run and create.
void add_run_options(CLI::App& app, RunOptions& o, std::string& name, const MentionedOptions& m);

/// Resolves what typed run options depend on at the moment they are typed, for `run` and
/// `create` alike: relative volume sources made absolute against the working directory (as
/// Docker takes `-v ./data:/data`), opts.env_files read into opts.file_env (env_files
/// emptied), and opts.root_emulation_word parsed into opts.root_emulation (the word emptied;
/// "run --root-emulation WORD: expected auto, subids, seccomp or none" for another).
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

/// Runs `request.rest` (IMAGE|CONTAINER|DIR [COMMAND...]) with its options; detached: under a
/// monitor, the caller returning at once (runtime/monitor.h), and the monitor returning once
/// the run ended, with `*monitor` set.
Status do_run(const GlobalOptions& g, RunRequest request, bool* monitor = nullptr);

}  // namespace berth::cli

// The udocker drop-in's insides, shared by cli/udocker.cc (the global options, the command
// table), cli/udocker_line.cc (the line's grammar, these helpers), cli/udocker_run.cc (run and
// create) and cli/udocker_store.cc (what it does itself on Berth's stores, in udocker's
// formats). Not an interface: cli/udocker.h is.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "image/reference.h"
#include "runtime/containers.h"

namespace berth::cli::udocker {

/// A command option as udocker's parser takes it: its names ("-v,--volume") and whether it
/// takes a value.
struct OptionSpec {
  std::string_view names;
  bool value = false;
};

/// A command's words, parsed: options by their last (long) name, in order, then the operands.
struct Parsed {
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<std::string> operands;

  bool has(std::string_view name) const {
    for (const auto& [n, v] : options)
      if (n == name) return true;
    return false;
  }
  std::string get(std::string_view name) const {
    std::string last;
    for (const auto& [n, v] : options)
      if (n == name) last = v;
    return last;
  }
  std::vector<std::string> all(std::string_view name) const {
    std::vector<std::string> values;
    for (const auto& [n, v] : options)
      if (n == name) values.push_back(v);
    return values;
  }
};

/// What one udocker line runs with: the berth global options it maps to, and the options a
/// command run here needs.
struct Context {
  std::vector<std::string> global;  ///< --home DIR, -v, -q
  GlobalOptions g;
  bool insecure = false;

  /// Runs `berth GLOBAL ARGS...`; its exit status.
  int berth(const std::vector<std::string>& args) const {
    std::vector<std::string> line = {"berth"};
    line.insert(line.end(), global.begin(), global.end());
    line.insert(line.end(), args.begin(), args.end());
    std::vector<char*> argv;
    argv.reserve(line.size() + 1);
    for (std::string& a : line) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    return berth_main(static_cast<int>(line.size()), argv.data());
  }
  /// Runs `action` here, as berth runs a command (g.site read first: the action reads the
  /// site's policy from ctx.g); its exit status.
  int local(const Action& action) { return run_action(g, action); }
  /// With --insecure: the registry of `ref` (host[:port]) may be reached over plain HTTP.
  void allow_insecure(const std::string& ref) {
    if (!insecure) return;
    auto r = parse_reference(ref);
    if (r.ok()) global.insert(global.begin(), {"--insecure-registry", r->registry});
  }
};

/// udocker's execution modes and the Berth engine each runs with.
struct ModeRow {
  const char* mode;
  const char* engine;
  const char* difference;  ///< "" where the engine does what the mode does
};

inline constexpr ModeRow kModes[] = {
    {"P1", "proot", ""},
    {"P2", "proot", "P2 runs as P1: Berth's proot engine leaves seccomp acceleration to proot"},
    {"F1", "fakechroot", ""},
    {"F2", "fakechroot", "F2 runs as F1: no protected environment or patched ld.so"},
    {"F3", "fakechroot", "F3 runs as F1: Berth patches no ELF headers"},
    {"F4", "fakechroot", "F4 runs as F1: Berth patches no ELF headers"},
    {"R1", "oci", ""},
    {"R2", "oci", "R2 runs as R1: no proot root emulation on top of runc"},
    {"R3", "oci", "R3 runs as R1: no proot root emulation on top of runc"},
    {"S1", "apptainer", ""},
};

inline constexpr int64_t kMiB = int64_t{1024} * 1024;

/// A command's words parsed against its options (`specs`): options, then the operands from
/// the first word that is not one; an unknown option, or a value missing or given where none
/// is taken, is a one-line error naming `command` and the word.
Result<Parsed> parse_command(const std::string& command, const std::vector<OptionSpec>& specs,
                             const std::vector<std::string>& words);

/// "A" + SEP + "B", built in place.
std::string cat3(std::string_view a, std::string_view sep, std::string_view b);
/// One line on stderr for a udocker option Berth takes differently; never silent.
void note(const std::string& what);
/// The registry host of a --registry=URL value ("https://quay.io" -> "quay.io").
std::string registry_host(std::string url);
/// --httpproxy=URL: libcurl takes it from the environment, socks schemes included.
void use_proxy(const Parsed& p);
/// IMAGE with --registry=URL's host in front, when it names none of its own.
std::string with_registry(const Parsed& p, const std::string& image);
/// A usage error naming `command` when `p` has fewer than `at_least` operands.
Status need_operands(const std::string& command, const Parsed& p, size_t at_least,
                     const std::string& usage);
/// Prints Status's error the way berth's main does, for checks made before any action runs;
/// the exit status.
int fail(const Status& st);
/// The mode `udocker ps -m` and `setup` show: the one set, else the engine's closest; "NS" for
/// Berth's own user-namespace engine, which udocker lacks.
std::string mode_of(const ContainerRecord& c);
/// Runs `fn` with stdout sent to /dev/null (a step whose output udocker does not print).
int quietly(const std::function<int()>& fn);
/// Runs `fn` with stdout captured into `*out` (a step whose output the drop-in reads).
int captured(const std::function<int()>& fn, std::string* out);

// run and create, as berth run and berth create lines (cli/udocker_run.cc).
int do_run(Context& ctx, const Parsed& p);
int do_create(Context& ctx, const Parsed& p);

// The commands run here, on Berth's stores (cli/udocker_store.cc).
void print_help();
int do_version();
int do_showconf(Context& ctx);
int do_mkrepo(Context& ctx, const Parsed& p);
int do_install(const Parsed& p);
int do_ps(Context& ctx, const Parsed& p);
int do_images(Context& ctx, const Parsed& p);
int do_setup(Context& ctx, const Parsed& p);
int do_search(Context& ctx, const std::string& term, bool no_trunc);
int do_import(Context& ctx, const Parsed& p);
Status export_clone(const GlobalOptions& g, const std::string& file, const std::string& name);
int do_logout(Context& ctx, const Parsed& p);
int do_inspect(Context& ctx, const Parsed& p);

}  // namespace berth::cli::udocker

// berth logs, stop, start, wait, kill: Docker's commands for containers run in the
// background (`run -d`), without a daemon: each reads what the run left in the container's
// folder (runtime/monitor.h) and signals the berth process holding its run lock.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "cli/context.h"
#include "cli/run.h"
#include "core/clock.h"
#include "core/strings.h"
#include "runtime/monitor.h"

namespace berth::cli {
namespace {

std::string subject_of(const ContainerRecord& c) {
  return c.names.empty() ? c.id : c.names.front();
}

/// A signal by name (KILL, SIGKILL, kill) or number, as `docker kill -s` takes it.
Result<int> parse_signal(const std::string& s) {
  static constexpr struct {
    const char* name;
    int number;
  } kSignals[] = {{"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
                  {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
                  {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
                  {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
                  {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
                  {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
                  {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
                  {"PWR", SIGPWR},       {"SYS", SIGSYS}};
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) {
    int n = std::atoi(s.c_str());
    if (n > 0 && n < NSIG) return n;
  }
  std::string up;
  for (char ch : s) up += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (up.starts_with("SIG")) up = up.substr(3);
  for (const auto& sig : kSignals)
    if (up == sig.name) return sig.number;
  return make_error("kill", s, "unknown signal", ErrorCode::kInvalidInput)
      .with_hint("a name such as TERM, KILL, HUP, USR1, or a number");
}

/// What `logs --since` takes, for its refusals.
constexpr const char* kSinceForms =
    "expected a Unix time (1700000000.5), an RFC 3339 time or a duration (42m)";

/// `docker logs --since`'s time as Unix ns: a Unix time in seconds with an optional fraction
/// ("1700000000.25", to the nanosecond), an RFC 3339 time (to the nanosecond: a time `logs -t`
/// printed), or a Go duration before now ("42m", to the second as Docker's).
Result<int64_t> parse_since(const std::string& text) {
  size_t dot = text.find('.');
  std::string whole = text.substr(0, dot);
  std::string fraction = dot == std::string::npos ? "" : text.substr(dot + 1);
  auto digits = [](const std::string& s, size_t most) {
    return s.size() <= most && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!whole.empty() && digits(whole, 12) && digits(fraction, 9)) {
    fraction.resize(9, '0');
    return std::stoll(whole) * 1000000000 + std::stoll(fraction);
  }
  if (std::optional<int64_t> ns = parse_rfc3339_ns(text)) return *ns;
  if (std::optional<int64_t> ago = parse_go_duration(text)) {
    auto now = std::chrono::system_clock::now().time_since_epoch();
    return (std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() - *ago) / 1000000000 *
           1000000000;
  }
  return make_error("logs", "--since " + text, kSinceForms, ErrorCode::kInvalidInput);
}

/// Prints a log's records: stdout's to stdout, stderr's to stderr, as `docker logs` does; with
/// `timestamps`, each line after the time it was read (RFC 3339, nanoseconds, UTC); with
/// `since_ns`, only the records read from then on.
class LogPrinter {
 public:
  /// `tail`: print only the last this many lines of what is read before flush_tail(); -1 all.
  LogPrinter(bool timestamps, int64_t since_ns, int64_t tail = -1)
      : timestamps_(timestamps), since_ns_(since_ns), tail_(tail) {}

  void operator()(int stream, int64_t time_ns, std::string_view data) {
    if (since_ns_ > 0 && time_ns < since_ns_) return;
    if (tail_ >= 0) return keep(stream, time_ns, data);
    print(stream, time_ns, data);
  }

  /// Prints the lines --tail kept; what comes after is printed as it comes (logs -f).
  void flush_tail() {
    tail_ = -1;
    for (const Piece& p : kept_) print(p.stream, p.time_ns, p.text);
    kept_.clear();
    std::fflush(stdout);
    std::fflush(stderr);
  }

 private:
  struct Piece {
    int stream;
    int64_t time_ns;
    std::string text;  ///< one line, or the start of one (no '\n' at its end)
  };

  /// Keeps the last tail_ lines, a line being what a write held up to its '\n' (the two
  /// streams' lines interleave as they were written, as in Docker's log).
  void keep(int stream, int64_t time_ns, std::string_view data) {
    while (!data.empty()) {
      size_t nl = data.find('\n');
      size_t n = nl == std::string_view::npos ? data.size() : nl + 1;
      kept_.push_back({stream, time_ns, std::string(data.substr(0, n))});
      data.remove_prefix(n);
    }
    while (static_cast<int64_t>(kept_.size()) > tail_) kept_.pop_front();
  }

  void print(int stream, int64_t time_ns, std::string_view data) {
    FILE* out = stream == 2 ? stderr : stdout;
    bool& at_line_start = line_start_[stream == 2 ? 1 : 0];
    while (!data.empty()) {
      if (timestamps_ && at_line_start) std::fprintf(out, "%s ", rfc3339_nano(time_ns).c_str());
      size_t nl = data.find('\n');
      size_t n = nl == std::string_view::npos ? data.size() : nl + 1;
      std::fwrite(data.data(), 1, n, out);
      at_line_start = nl != std::string_view::npos;
      data.remove_prefix(n);
    }
  }

  bool timestamps_;
  int64_t since_ns_;
  int64_t tail_;
  std::deque<Piece> kept_;
  bool line_start_[2] = {true, true};
};

/// docker logs --tail: "all" or a number of lines.
Result<int64_t> parse_tail(const std::string& text) {
  if (text == "all") return int64_t{-1};
  int64_t n = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 0)
    return make_error("logs", "--tail " + text, "expected a number of lines or all",
                      ErrorCode::kInvalidInput);
  return n;
}

/// Prints what `fd` holds from `*offset` on; `whole`: nothing more will come.
void print_log(int fd, off_t* offset, bool whole, LogReader& reader, LogPrinter& printer) {
  char buf[65536];
  LogSink sink = std::ref(printer);
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, *offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reader.feed(std::string_view(buf, static_cast<size_t>(n)), false, sink);
    *offset += n;
  }
  if (whole) reader.feed({}, true, sink);
  std::fflush(stdout);
  std::fflush(stderr);
}

}  // namespace

Action setup_logs(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::string name;
    bool follow = false;
    bool timestamps = false;
    std::string since;
    std::string tail = "all";
  };
  auto o = std::make_shared<Opts>();
  app.add_flag("-f,--follow", o->follow, "Keep printing until the container stops");
  app.add_option("-n,--tail", o->tail,
                 "Only the last N lines of the log so far (default all), as docker logs --tail")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return parse_tail(v).ok() ? "" : "expected a number of lines or all, not " + v;
          },
          "N|all"));
  app.add_flag("-t,--timestamps", o->timestamps, "Show when each line was written");
  app.add_option("--since", o->since,
                 "Only what was written from this time on: a Unix time (seconds, with a "
                 "fraction), an RFC 3339 time or a duration before now (42m), as docker logs "
                 "--since")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return parse_since(v).ok() ? "" : std::string(kSinceForms) + ", not " + v;
          },
          "TIME"));
  app.add_option("CONTAINER", o->name, "Container name or ID")->required();
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    ContainerRecord c = BERTH_TRY(cs.find(o->name));
    std::string path = log_path(cs, c);
    // Only detached runs have a log (a foreground run's output went to its terminal).
    auto fd = open_file(path, O_RDONLY);
    if (!fd.ok() && fd.error().code != ErrorCode::kNotFound) return std::move(fd).error();
    off_t offset = 0;
    LogReader reader;
    int64_t since_ns = 0;
    if (!o->since.empty()) since_ns = BERTH_TRY(parse_since(o->since));
    int64_t tail = BERTH_TRY(parse_tail(o->tail));  // checked by the parser already
    LogPrinter printer(o->timestamps, since_ns, tail);
    for (;;) {
      bool running = runner_pid(cs, c) != 0;
      bool was_running = o->follow && running;
      if (!fd.ok()) fd = open_file(path, O_RDONLY);
      if (fd.ok()) print_log(fd->get(), &offset, !running, reader, printer);
      printer.flush_tail();     // the tail of what was there; later lines print as they come
      if (!was_running) break;  // read once more after it stopped: nothing is lost
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return {};
  };
}

namespace {

/// What stop and restart take: containers, and the grace period after SIGTERM.
struct StopOptions {
  std::vector<std::string> names;
  int time = 10;
};

std::shared_ptr<StopOptions> add_stop_options(CLI::App& app) {
  auto o = std::make_shared<StopOptions>();
  app.add_option("-t,--time", o->time, "Seconds to wait after SIGTERM before SIGKILL (default 10)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("CONTAINER", o->names, "Container names or IDs")->required();
  return o;
}

}  // namespace

Action setup_stop(CLI::App& app, const GlobalOptions& g) {
  auto o = add_stop_options(app);
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    for (const std::string& n : o->names) {
      ContainerRecord c = BERTH_TRY(cs.find(n));
      BERTH_CHECK(cs.stop(c, o->time));
      std::printf("%s\n", n.c_str());
    }
    return {};
  };
}

namespace {

/// Runs the stopped container `c` again, detached, as `docker start` does: the options of its
/// last run (or of create) and its command as it was (entrypoint included), else the image's.
/// `*monitor` is set in the detached run's monitor once that run has ended: the status is
/// then the run's, and the caller returns it at once.
Status start_again(const GlobalOptions& g, const ContainerRecord& c, bool* monitor) {
  RunRequest req;
  req.opts = options_from_record(c.run_options, &req.given);
  req.rest = {c.id};
  if (!c.last_command.empty()) {
    req.opts.entrypoint_set = true;
    req.opts.entrypoint.clear();
    req.rest.insert(req.rest.end(), c.last_command.begin(), c.last_command.end());
  }
  req.detach = Detach::kQuietly;
  return do_run(g, std::move(req), monitor);
}

}  // namespace

Action setup_start(CLI::App& app, const GlobalOptions& g) {
  auto names = std::make_shared<std::vector<std::string>>();
  app.add_option("CONTAINER", *names, "Container names or IDs")->required();
  return [names, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    for (const std::string& n : *names) {
      ContainerRecord c = BERTH_TRY(cs.find(n));
      if (!c.running) {
        bool monitor = false;
        Status st = start_again(g, c, &monitor);
        if (monitor) return st;  // the monitor, its run ended: its status is the run's
        BERTH_CHECK(std::move(st));
      }
      std::printf("%s\n", n.c_str());
    }
    return {};
  };
}

Action setup_restart(CLI::App& app, const GlobalOptions& g) {
  auto o = add_stop_options(app);
  return [o, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    for (const std::string& n : o->names) {
      // `docker restart`: stop (SIGTERM, SIGKILL after -t) when running, then start detached.
      ContainerRecord c = BERTH_TRY(cs.find(n));
      if (c.running) {
        BERTH_CHECK(cs.stop(c, o->time));
        c = BERTH_TRY(cs.find(n));  // its last run's record, as the stop left it
      }
      bool monitor = false;
      Status st = start_again(g, c, &monitor);
      if (monitor) return st;
      BERTH_CHECK(std::move(st));
      std::printf("%s\n", n.c_str());
    }
    return {};
  };
}

Action setup_wait(CLI::App& app, const GlobalOptions& g) {
  auto names = std::make_shared<std::vector<std::string>>();
  app.add_option("CONTAINER", *names, "Container names or IDs")->required();
  return [names, &g]() -> Status {
    ContainerStore cs = BERTH_TRY(open_containers(g));
    for (const std::string& n : *names) {
      ContainerRecord c = BERTH_TRY(cs.find(n));
      wait_stopped(cs, c, -1);
      c = BERTH_TRY(cs.find(c.id));  // as its run left it
      std::optional<int> code = run_times(cs, c).exit_code;
      if (!code)
        return make_error("wait", n, "container " + c.short_id() + " has not run yet")
            .with_hint("start it with 'berth start " + n + "'");
      std::printf("%d\n", *code);
    }
    return {};
  };
}

Action setup_kill(CLI::App& app, const GlobalOptions& g) {
  struct Opts {
    std::vector<std::string> names;
    std::string signal = "KILL";
  };
  auto o = std::make_shared<Opts>();
  app.add_option("-s,--signal", o->signal, "Signal to send (default KILL)");
  app.add_option("CONTAINER", o->names, "Container names or IDs")->required();
  return [o, &g]() -> Status {
    int sig = BERTH_TRY(parse_signal(o->signal));
    ContainerStore cs = BERTH_TRY(open_containers(g));
    for (const std::string& n : o->names) {
      ContainerRecord c = BERTH_TRY(cs.find(n));
      pid_t runner = runner_pid(cs, c);
      // The workload itself (or its PID namespace's init, which passes it on); the berth
      // process running it records how it ended.
      pid_t target = workload_pid(runner);
      if (runner == 0 || target == 0)
        return make_error("kill", n, "container " + c.short_id() + " is not running");
      if (::kill(target, sig) != 0) return sys_error("kill", subject_of(c));
      std::printf("%s\n", n.c_str());
    }
    return {};
  };
}

}  // namespace berth::cli

// The udocker line's grammar (a command's options, then its operands: parse_command()) and the
// helpers the drop-in's commands share (cli/udocker_line.h).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/udocker_line.h"
#include "runtime/engines.h"

namespace berth::cli::udocker {

/// "A" + SEP + "B", built in place.
std::string cat3(std::string_view a, std::string_view sep, std::string_view b) {
  std::string s;
  s.reserve(a.size() + sep.size() + b.size());
  return s.append(a).append(sep).append(b);
}

namespace {

/// The spec's last name: the one Parsed keys the option by.
std::string_view canonical(std::string_view names) {
  size_t comma = names.rfind(',');
  return comma == std::string_view::npos ? names : names.substr(comma + 1);
}

bool names_match(std::string_view names, std::string_view word) {
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    std::string_view n =
        names.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (n == word) return true;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return false;
}

}  // namespace

Result<Parsed> parse_command(const std::string& command, const std::vector<OptionSpec>& specs,
                             const std::vector<std::string>& words) {
  Parsed p;
  size_t i = 0;
  for (; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.size() < 2 || w[0] != '-') break;  // the first operand ("-" is one: stdin)
    std::string_view name = w;
    std::string value;
    bool inline_value = false;
    if (size_t eq = w.find('='); eq != std::string::npos) {
      name = std::string_view(w).substr(0, eq);
      value = w.substr(eq + 1);
      inline_value = true;
    }
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& s : specs)
      if (names_match(s.names, name)) spec = &s;
    if (spec == nullptr)
      return make_error("udocker", cat3(command, " ", w), "not an option of udocker " + command)
          .with_hint("see 'udocker help' and docs/udocker.md");
    if (spec->value && !inline_value) {
      if (i + 1 >= words.size() || words[i + 1].starts_with("-"))
        return make_error("udocker", cat3(command, " ", w), cat3("needs a value (", w, "=VALUE)"));
      value = words[++i];
    } else if (!spec->value && inline_value) {
      return make_error("udocker", cat3(command, " ", w), "takes no value");
    }
    p.options.emplace_back(std::string(canonical(spec->names)), value);
  }
  p.operands.assign(words.begin() + static_cast<std::ptrdiff_t>(i), words.end());
  return p;
}

/// One line on stderr for a udocker option Berth takes differently; never silent.
void note(const std::string& what) {
  std::fprintf(stderr, "udocker: %s\n", what.c_str());
}

/// The registry host of a --registry=URL value ("https://quay.io" -> "quay.io").
std::string registry_host(std::string url) {
  if (size_t scheme = url.find("://"); scheme != std::string::npos) url = url.substr(scheme + 3);
  while (url.ends_with("/")) url.pop_back();
  return url;
}

/// --httpproxy=URL: libcurl takes it from the environment, socks schemes included.
void use_proxy(const Parsed& p) {
  if (p.has("--httpproxy")) ::setenv("ALL_PROXY", p.get("--httpproxy").c_str(), 1);
}

/// IMAGE with --registry=URL's host in front, when it names none of its own.
std::string with_registry(const Parsed& p, const std::string& image) {
  if (!p.has("--registry")) return image;
  std::string first = image.substr(0, image.find('/'));
  bool has_host = image.find('/') != std::string::npos &&
                  (first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
                   first == "localhost");
  return has_host ? image : registry_host(p.get("--registry")) + "/" + image;
}

Status need_operands(const std::string& command, const Parsed& p, size_t at_least,
                     const std::string& usage) {
  if (p.operands.size() >= at_least) return {};
  return make_error("udocker", command, "missing operand").with_hint("udocker " + usage);
}

/// Prints Status's error the way berth's main does, for checks made before any action runs.
int fail(const Status& st) {
  return Context{}.local([&st]() -> Status { return st; });
}

/// The mode `udocker ps -m` and `setup` show: the one set, else the engine's closest;
/// "NS" for Berth's own user-namespace engine, which udocker lacks.
std::string mode_of(const ContainerRecord& c) {
  if (!c.udocker_mode.empty()) return c.udocker_mode;
  for (const ModeRow& m : kModes)
    if (c.engine && c.engine->row == find_engine(m.engine) && m.difference[0] == '\0')
      return m.mode;
  return "NS";
}

/// Runs `fn` with stdout sent to /dev/null (a step whose output udocker does not print).
int quietly(const std::function<int()>& fn) {
  std::fflush(stdout);
  int saved = ::dup(STDOUT_FILENO);
  int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved >= 0 && null >= 0) ::dup2(null, STDOUT_FILENO);
  int rc = fn();
  std::fflush(stdout);
  if (saved >= 0) {
    ::dup2(saved, STDOUT_FILENO);
    ::close(saved);
  }
  if (null >= 0) ::close(null);
  return rc;
}

/// Runs `fn` with stdout captured into `*out` (a step whose output the drop-in reads).
int captured(const std::function<int()>& fn, std::string* out) {
  std::fflush(stdout);
  std::FILE* tmp = std::tmpfile();
  int saved = ::dup(STDOUT_FILENO);
  if (tmp == nullptr || saved < 0) {
    if (tmp != nullptr) std::fclose(tmp);
    if (saved >= 0) ::close(saved);
    return fn();  // nothing to capture into: the output goes where it would have
  }
  ::dup2(::fileno(tmp), STDOUT_FILENO);
  int rc = fn();
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::rewind(tmp);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, tmp)) > 0;) out->append(buf, n);
  std::fclose(tmp);
  return rc;
}

}  // namespace berth::cli::udocker

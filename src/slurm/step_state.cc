#include "slurm/step_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

namespace berth::slurm {
namespace {

using Json = nlohmann::ordered_json;

/// The records' format version: a reader refuses any other.
constexpr int kVersion = 1;
/// The largest record read back (a record is a few hundred bytes).
constexpr size_t kMaxRecordBytes = size_t{64} << 10;

/// The phases as the file spells them.
constexpr std::array<std::pair<StepPhase, const char*>, 3> kPhaseWords = {{
    {StepPhase::kStarting, "starting"},
    {StepPhase::kUp, "up"},
    {StepPhase::kFailed, "failed"},
}};

const char* phase_word(StepPhase p) {
  for (const auto& [phase, word] : kPhaseWords)
    if (phase == p) return word;
  return "starting";
}

/// Reads the keys of one JSON object strictly: each key asked for must be there with its
/// type, and finish() refuses any key nobody asked for. The first problem found is kept.
class StrictObject {
 public:
  explicit StrictObject(const Json& j) : j_(j) {
    if (!j_.is_object()) problem_ = "not a JSON object";
  }

  void integer(const char* key, long* out) {
    if (const Json* v = find(key, "an integer"); v != nullptr) {
      if (v->is_number_integer()) {
        *out = v->get<long>();
      } else {
        wrong_type(key, "an integer");
      }
    }
  }
  void boolean(const char* key, bool* out) {
    if (const Json* v = find(key, "a boolean"); v != nullptr) {
      if (v->is_boolean()) {
        *out = v->get<bool>();
      } else {
        wrong_type(key, "a boolean");
      }
    }
  }
  void string(const char* key, std::string* out) {
    if (const Json* v = find(key, "a string"); v != nullptr) {
      if (v->is_string()) {
        *out = v->get<std::string>();
      } else {
        wrong_type(key, "a string");
      }
    }
  }
  void strings(const char* key, std::vector<std::string>* out) {
    const Json* v = find(key, "an array of strings");
    if (v == nullptr) return;
    if (!v->is_array()) return wrong_type(key, "an array of strings");
    out->clear();
    for (const Json& item : *v) {
      if (!item.is_string()) return wrong_type(key, "an array of strings");
      out->push_back(item.get<std::string>());
    }
  }
  /// The version key, which must be kVersion.
  void version() {
    long v = 0;
    integer("version", &v);
    if (problem_.empty() && v != kVersion)
      problem_ = "version " + std::to_string(v) + " (this plugin reads version " +
                 std::to_string(kVersion) + ")";
  }

  Problem finish() {
    if (!problem_.empty()) return problem_;
    for (const auto& item : j_.items()) {
      bool known = false;
      for (const std::string& k : asked_) known = known || k == item.key();
      if (!known) return "unknown key '" + item.key() + "'";
    }
    return {};
  }

 private:
  const Json* find(const char* key, const char* type) {
    asked_.emplace_back(key);
    if (!problem_.empty()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end()) {
      problem_ = std::string("key '") + key + "' (" + type + ") is missing";
      return nullptr;
    }
    return &*it;
  }
  void wrong_type(const char* key, const char* type) {
    if (problem_.empty()) problem_ = std::string("key '") + key + "' is not " + type;
  }

  const Json& j_;
  std::vector<std::string> asked_;
  Problem problem_;
};

/// `text` parsed, without exceptions (a discarded value when it is not JSON).
Json parse(std::string_view text) {
  return Json::parse(text.begin(), text.end(), nullptr, false);
}

/// `j` as one line, or a Problem when a string in it is not UTF-8 (JSON cannot carry such
/// bytes, and a record must read back exactly as written).
Problem dump(const Json& j, std::string* out) {
  try {
    *out = j.dump() + "\n";
  } catch (const std::exception&) {  // nlohmann's type_error 316: a string is not UTF-8
    return "a value is not valid UTF-8";
  }
  return {};
}

Json to_json(const StepRecord& r) {
  return {{"version", kVersion}, {"phase", phase_word(r.phase)},
          {"holder", r.holder},  {"container", r.container},
          {"owned", r.owned},    {"runner", r.runner},
          {"stepd", r.stepd},    {"save", r.save},
          {"error", r.error}};
}

Json to_json(const JobRecord& r) {
  return {{"version", kVersion}, {"store_env", r.store_env}};
}

std::string errno_text(int err) {
  return std::strerror(err);
}

Problem write_text(const std::string& path, const std::string& what, const Json& j) {
  auto failed = [&what](const std::string& at, const std::string& why) {
    return "write " + what + " " + at + ": " + why;
  };
  std::string text;
  if (Problem p = dump(j, &text); !p.empty()) return failed(path, p);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), flags, 0600);
  if (fd < 0 && errno == EEXIST) {
    // Left by a killed writer whose pid this process has now: nobody else writes that name.
    (void)::unlink(tmp.c_str());
    fd = ::open(tmp.c_str(), flags, 0600);
  }
  if (fd < 0) return failed(tmp, errno_text(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      (void)::unlink(tmp.c_str());
      return failed(tmp, errno_text(err));
    }
    done += static_cast<size_t>(n);
  }
  // No fsync: the records describe processes of this boot, in runtime_path (a tmpfs, /run).
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    (void)::unlink(tmp.c_str());
    return failed(path, "rename: " + errno_text(err));
  }
  return {};
}

/// The file's text, `*found` false when there is none; a Problem without the file's name.
Problem read_text(const std::string& path, std::string* text, bool* found) {
  *found = false;
  // O_NONBLOCK: a FIFO put in a record's place must not keep root waiting on open.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    if (errno == ELOOP) return "a symbolic link, not a record";
    return errno_text(errno);
  }
  struct stat st;
  Problem p;
  if (::fstat(fd, &st) != 0) {
    p = errno_text(errno);
  } else if (!S_ISREG(st.st_mode)) {
    p = "not a regular file";
  } else if (static_cast<size_t>(st.st_size) > kMaxRecordBytes) {
    p = "larger than 64 KiB";
  }
  char buf[4096];
  while (p.empty()) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) p = errno_text(errno);
    if (n <= 0) break;
    text->append(buf, static_cast<size_t>(n));
    if (text->size() > kMaxRecordBytes) p = "larger than 64 KiB";
  }
  ::close(fd);
  *found = p.empty();
  return p;
}

template <typename Record>
Problem read_any(const std::string& path, const char* what, std::optional<Record>* out) {
  out->reset();
  std::string text;
  bool found = false;
  Problem p = read_text(path, &text, &found);
  Record r;
  if (p.empty() && found) p = decode(text, &r);
  if (!p.empty()) return std::string(what) + " " + path + ": " + p;
  if (found) *out = std::move(r);
  return {};
}

}  // namespace

std::string encode(const StepRecord& r) {
  std::string text;
  (void)dump(to_json(r), &text);  // "" for a record that is not UTF-8: write_record says so
  return text;
}

std::string encode(const JobRecord& r) {
  std::string text;
  (void)dump(to_json(r), &text);  // as above
  return text;
}

Problem decode(std::string_view text, StepRecord* out) {
  Json j = parse(text);
  if (j.is_discarded()) return "not JSON";
  StrictObject o(j);
  StepRecord r;
  std::string phase;
  o.version();
  o.string("phase", &phase);
  o.integer("holder", &r.holder);
  o.string("container", &r.container);
  o.boolean("owned", &r.owned);
  o.integer("runner", &r.runner);
  o.integer("stepd", &r.stepd);
  o.string("save", &r.save);
  o.string("error", &r.error);
  if (Problem p = o.finish(); !p.empty()) return p;
  bool known = false;
  for (const auto& [value, word] : kPhaseWords) {
    if (phase != word) continue;
    r.phase = value;
    known = true;
  }
  if (!known) return "unknown phase '" + phase + "' (starting, up, failed)";
  if (r.holder < 0 || r.runner < 0 || r.stepd < 0) return "a negative pid";
  *out = std::move(r);
  return {};
}

Problem decode(std::string_view text, JobRecord* out) {
  Json j = parse(text);
  if (j.is_discarded()) return "not JSON";
  StrictObject o(j);
  JobRecord r;
  o.version();
  o.strings("store_env", &r.store_env);
  if (Problem p = o.finish(); !p.empty()) return p;
  *out = std::move(r);
  return {};
}

Problem write_record(const std::string& path, const StepRecord& r) {
  return write_text(path, "step record", to_json(r));
}

Problem write_record(const std::string& path, const JobRecord& r) {
  return write_text(path, "job record", to_json(r));
}

Problem read_record(const std::string& path, std::optional<StepRecord>* out) {
  return read_any(path, "step record", out);
}

Problem read_record(const std::string& path, std::optional<JobRecord>* out) {
  return read_any(path, "job record", out);
}

JobRecord job_record(const std::vector<std::string>& env) {
  JobRecord r;
  for (const std::string& e : env)
    if (e.starts_with("HOME=") || e.starts_with("BERTH_HOME=") || e.starts_with("XDG_DATA_HOME="))
      r.store_env.push_back(e);
  return r;
}

std::string step_file_name(const StepIds& ids) {
  std::string step = ids.step == kBatchStep ? "batch" : std::to_string(ids.step);
  return std::to_string(ids.job) + "." + step + "." + ids.node + ".step";
}

bool is_step_file(std::string_view entry, unsigned job, std::string_view node,
                  std::string* job_step) {
  std::string prefix = std::to_string(job) + ".";
  std::string suffix = node.empty() ? ".step" : "." + std::string(node) + ".step";
  if (!entry.starts_with(prefix) || !entry.ends_with(suffix) ||
      entry.size() <= prefix.size() + suffix.size())
    return false;
  if (job_step != nullptr) *job_step = std::string(entry.substr(0, entry.size() - suffix.size()));
  return true;
}

std::string job_file_name(unsigned job) {
  return std::to_string(job) + ".job";
}

}  // namespace berth::slurm

#include "devices/nvml.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>

#include "core/json.h"
#include "core/strings.h"
#include "core/write_fully.h"

namespace berth {
namespace {

using nlohmann::json;

// NVML's C interface as nvml.h documents it (a stable ABI), declared here for dlsym: Berth
// builds without NVIDIA's headers. Return codes are nvmlReturn_t, an int-sized enum.
using NvmlDevice = void*;  // nvmlDevice_t, an opaque pointer
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlInsufficientSize = 7;
constexpr unsigned kNvmlTemperatureGpu = 0;                   // NVML_TEMPERATURE_GPU
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned kNvmlUuidSize = 80;                        // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kNvmlNameSize = 96;                        // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kNvmlDriverVersionSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

struct NvmlUtilization {  // nvmlUtilization_t
  unsigned gpu, memory;
};
struct NvmlMemory {  // nvmlMemory_t, bytes
  unsigned long long total, free, used;
};
struct NvmlMemoryV2 {  // nvmlMemory_v2_t (driver 510 and later), bytes; `used` excludes the
                       // memory the driver reserves, as nvidia-smi reports it
  unsigned version;
  unsigned long long total, reserved, free, used;
};
constexpr unsigned kNvmlMemoryV2Version = sizeof(NvmlMemoryV2) | (2U << 24);  // nvmlMemory_v2
struct NvmlPciInfo {  // nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v2 and _v3 fill it
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct NvmlProcessInfo {  // nvmlProcessInfo_t of _v2 and _v3 (driver 510 and later)
  unsigned pid;
  unsigned long long used_gpu_memory;  // bytes
  unsigned gpu_instance_id, compute_instance_id;
};
struct NvmlProcessInfoV1 {  // nvmlProcessInfo_v1_t, of nvmlDeviceGetComputeRunningProcesses
  unsigned pid;
  unsigned long long used_gpu_memory;
};
static_assert(sizeof(NvmlPciInfo) == 68 && sizeof(NvmlProcessInfo) == 24 &&
              sizeof(NvmlMemoryV2) == 40 && sizeof(NvmlProcessInfoV1) == 16 &&
              sizeof(NvmlMemory) == 24);

/// NVML's functions, each the newest version the library has; null when it has none.
struct NvmlApi {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  int (*count)(unsigned*) = nullptr;
  int (*handle)(unsigned, NvmlDevice*) = nullptr;
  int (*uuid)(NvmlDevice, char*, unsigned) = nullptr;
  int (*name)(NvmlDevice, char*, unsigned) = nullptr;
  int (*pci)(NvmlDevice, NvmlPciInfo*) = nullptr;
  int (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  int (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  int (*memory_v2)(NvmlDevice, NvmlMemoryV2*) = nullptr;
  int (*temperature)(NvmlDevice, unsigned, unsigned*) = nullptr;
  int (*power)(NvmlDevice, unsigned*) = nullptr;
  int (*compute_capability)(NvmlDevice, int*, int*) = nullptr;
  int (*processes)(NvmlDevice, unsigned*, NvmlProcessInfo*) = nullptr;
  int (*processes_v1)(NvmlDevice, unsigned*, NvmlProcessInfoV1*) = nullptr;

  std::string error(int rc) const {
    const char* s = error_string ? error_string(rc) : nullptr;
    return s ? std::string(s) : "NVML error " + std::to_string(rc);
  }
};

/// The first of `names` the library exports, as `fn`'s type.
template <class Fn>
void bind(void* lib, Fn*& fn, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (void* p = dlsym(lib, n)) {
      fn = reinterpret_cast<Fn*>(p);
      return;
    }
}

NvmlApi bind_api(void* lib) {
  NvmlApi a;
  bind(lib, a.init, {"nvmlInit_v2", "nvmlInit"});
  bind(lib, a.shutdown, {"nvmlShutdown"});
  bind(lib, a.error_string, {"nvmlErrorString"});
  bind(lib, a.driver_version, {"nvmlSystemGetDriverVersion"});
  bind(lib, a.count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  bind(lib, a.handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  bind(lib, a.uuid, {"nvmlDeviceGetUUID"});
  bind(lib, a.name, {"nvmlDeviceGetName"});
  bind(lib, a.pci, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"});
  bind(lib, a.utilization, {"nvmlDeviceGetUtilizationRates"});
  bind(lib, a.memory, {"nvmlDeviceGetMemoryInfo"});
  bind(lib, a.memory_v2, {"nvmlDeviceGetMemoryInfo_v2"});
  bind(lib, a.temperature, {"nvmlDeviceGetTemperature"});
  bind(lib, a.power, {"nvmlDeviceGetPowerUsage"});
  bind(lib, a.compute_capability, {"nvmlDeviceGetCudaComputeCapability"});
  bind(lib, a.processes,
       {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  if (!a.processes) bind(lib, a.processes_v1, {"nvmlDeviceGetComputeRunningProcesses"});
  return a;
}

uint64_t mib(unsigned long long bytes) {
  return bytes >> 20;
}

/// A C string NVML wrote into `buf` (terminated within it, or cut at its end).
std::string text_of(const char* buf, size_t size) {
  return std::string(buf, strnlen(buf, size));
}

/// The compute processes, with NVML's sizing protocol: a buffer too small gets
/// NVML_ERROR_INSUFFICIENT_SIZE and the count it needs (processes may start meanwhile: retried).
template <class Info>
std::optional<std::vector<NvmlProcess>> list_processes(int (*fn)(NvmlDevice, unsigned*, Info*),
                                                       NvmlDevice d) {
  // NVML is told of half the buffer, so that a driver whose nvmlProcessInfo_t is larger than
  // the layout declared here (nvml.h has grown it before) still writes inside it.
  std::vector<Info> buf(16);
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned n = static_cast<unsigned>(buf.size() / 2);
    int rc = fn(d, &n, buf.data());
    if (rc == kNvmlInsufficientSize && n >= buf.size() / 2) {
      buf.resize(2 * (n + 8));
      continue;
    }
    if (rc != kNvmlSuccess) return std::nullopt;
    std::vector<NvmlProcess> out;
    for (unsigned i = 0; i < n && i < buf.size() / 2; ++i) {
      NvmlProcess p;
      p.pid = buf[i].pid;
      if (buf[i].used_gpu_memory != kNvmlValueNotAvailable)
        p.used_memory_mib = mib(buf[i].used_gpu_memory);
      out.push_back(p);
    }
    return out;
  }
  return std::nullopt;
}

/// A GPU the child reads: what does not change between samples, read once.
struct Target {
  NvmlDevice device = nullptr;
  NvmlGpuReading fixed;  // index, uuid, name, bus id, or error
};

void read_dynamic(const NvmlApi& a, NvmlDevice d, NvmlGpuReading* r) {
  if (NvmlUtilization u{}; a.utilization && a.utilization(d, &u) == kNvmlSuccess) {
    r->utilization_gpu = u.gpu;
    r->utilization_memory = u.memory;
  }
  // The v2 answer first: v1's `used` counts the driver's reservation too (on an H200 about
  // 600 MiB more than nvidia-smi shows, seen 2026-11-26).
  if (NvmlMemoryV2 m{kNvmlMemoryV2Version, 0, 0, 0, 0};
      a.memory_v2 && a.memory_v2(d, &m) == kNvmlSuccess) {
    r->memory_total_mib = mib(m.total);
    r->memory_used_mib = mib(m.used);
  } else if (NvmlMemory m{}; a.memory && a.memory(d, &m) == kNvmlSuccess) {
    r->memory_total_mib = mib(m.total);
    r->memory_used_mib = mib(m.used);
  }
  if (unsigned t = 0; a.temperature && a.temperature(d, kNvmlTemperatureGpu, &t) == kNvmlSuccess)
    r->temperature_c = t;
  if (unsigned mw = 0; a.power && a.power(d, &mw) == kNvmlSuccess) r->power_w = mw / 1000.0;
  if (a.processes)
    r->processes = list_processes(a.processes, d);
  else if (a.processes_v1)
    r->processes = list_processes(a.processes_v1, d);
}

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json();
}
template <class T>
void get_opt(const json& j, const char* key, std::optional<T>* out) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) *out = it->get<T>();
}

/// The pipe's form of a reading, one JSON object (read back by reading_from_json).
json reading_json(const NvmlGpuReading& r) {
  json procs;
  if (r.processes) {
    procs = json::array();
    for (const auto& p : *r.processes)
      procs.push_back({{"pid", p.pid}, {"mib", opt(p.used_memory_mib)}});
  }
  return {{"index", r.index},
          {"uuid", r.uuid},
          {"name", r.name},
          {"bus_id", r.bus_id},
          {"cc", r.compute_capability},
          {"ug", opt(r.utilization_gpu)},
          {"um", opt(r.utilization_memory)},
          {"mt", opt(r.memory_total_mib)},
          {"mu", opt(r.memory_used_mib)},
          {"t", opt(r.temperature_c)},
          {"p", opt(r.power_w)},
          {"procs", procs},
          {"error", r.error}};
}

/// Throws nlohmann's exceptions on a malformed line (caught by the parent's reader).
NvmlGpuReading reading_from_json(const json& j) {
  NvmlGpuReading r;
  r.index = j.at("index").get<int>();
  r.uuid = j.at("uuid").get<std::string>();
  r.name = j.at("name").get<std::string>();
  r.bus_id = j.at("bus_id").get<std::string>();
  r.error = j.at("error").get<std::string>();
  r.compute_capability = j.value("cc", "");
  get_opt(j, "ug", &r.utilization_gpu);
  get_opt(j, "um", &r.utilization_memory);
  get_opt(j, "mt", &r.memory_total_mib);
  get_opt(j, "mu", &r.memory_used_mib);
  get_opt(j, "t", &r.temperature_c);
  get_opt(j, "p", &r.power_w);
  if (const json& procs = j.at("procs"); procs.is_array()) {
    r.processes.emplace();
    for (const auto& p : procs) {
      NvmlProcess np;
      np.pid = p.at("pid").get<unsigned>();
      get_opt(p, "mib", &np.used_memory_mib);
      r.processes->push_back(np);
    }
  }
  return r;
}

int64_t unix_ms_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

int64_t monotonic_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

/// Sleeps until CLOCK_MONOTONIC reads `ms`.
void sleep_until_ms(int64_t ms) {
  timespec at{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
}

bool wanted(const NvmlOptions& o, const std::string& uuid) {
  if (!o.uuids) return true;
  const std::string u = lower(uuid);
  return std::any_of(o.uuids->begin(), o.uuids->end(),
                     [&u](const std::string& w) { return lower(w) == u; });
}

/// The child: loads NVML, sends {"driver_version"} or {"error"}, then one {"sample"} line per
/// sample. Never returns. Berth is single-threaded here, so dlopen after fork is safe.
[[noreturn]] void child_main(int fd, const std::string& library, const NvmlOptions& o) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Nothing the library prints may mix with Berth's own output.
  if (int null = open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) dup2(null, STDOUT_FILENO);
  auto send = [fd](const json& j) {
    std::string line = to_text(j) + "\n";
    if (!write_fully(fd, line.data(), line.size())) _exit(1);
  };
  auto fail = [&send](const std::string& what) {
    send({{"error", what}});
    _exit(0);
  };
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    fail("cannot load it: " + std::string(e ? e : "dlopen failed"));
  }
  const NvmlApi a = bind_api(lib);
  if (!a.init || !a.count || !a.handle)
    fail("it lacks nvmlInit_v2, nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2: not NVML");
  if (int rc = a.init(); rc != kNvmlSuccess) fail("nvmlInit_v2: " + a.error(rc));
  char version[kNvmlDriverVersionSize] = {};
  if (!a.driver_version || a.driver_version(version, sizeof version) != kNvmlSuccess)
    version[0] = '\0';
  send({{"driver_version", text_of(version, sizeof version)}});

  unsigned count = 0;
  if (int rc = a.count(&count); rc != kNvmlSuccess) fail("nvmlDeviceGetCount_v2: " + a.error(rc));
  std::vector<Target> targets;
  for (unsigned i = 0; i < count; ++i) {
    Target t;
    t.fixed.index = static_cast<int>(i);
    if (int rc = a.handle(i, &t.device); rc != kNvmlSuccess) {
      t.fixed.error = "nvmlDeviceGetHandleByIndex_v2: " + a.error(rc);
      // Without a handle its UUID is unknown: it cannot be one a selection names.
      if (!o.uuids) targets.push_back(std::move(t));
      continue;
    }
    char buf[kNvmlNameSize] = {};
    static_assert(sizeof buf >= kNvmlUuidSize);
    if (a.uuid && a.uuid(t.device, buf, kNvmlUuidSize) == kNvmlSuccess)
      t.fixed.uuid = text_of(buf, sizeof buf);
    if (!wanted(o, t.fixed.uuid)) continue;
    std::memset(buf, 0, sizeof buf);
    if (a.name && a.name(t.device, buf, sizeof buf) == kNvmlSuccess)
      t.fixed.name = text_of(buf, sizeof buf);
    if (NvmlPciInfo pci{}; a.pci && a.pci(t.device, &pci) == kNvmlSuccess)
      t.fixed.bus_id = normalize_bus_id(text_of(pci.bus_id, sizeof pci.bus_id));
    if (int major = 0, minor = 0;
        a.compute_capability && a.compute_capability(t.device, &major, &minor) == kNvmlSuccess)
      t.fixed.compute_capability = std::to_string(major) + "." + std::to_string(minor);
    targets.push_back(std::move(t));
  }

  const int64_t start = monotonic_ms();
  for (int s = 0; s < o.samples; ++s) {
    if (s > 0) sleep_until_ms(start + int64_t{s} * o.interval_ms);
    json gpus = json::array();
    int64_t at = unix_ms_now();
    for (const auto& t : targets) {
      NvmlGpuReading r = t.fixed;
      if (r.error.empty()) read_dynamic(a, t.device, &r);
      gpus.push_back(reading_json(r));
    }
    send({{"sample", {{"unix_ms", at}, {"gpus", gpus}}}});
  }
  if (a.shutdown) a.shutdown();
  _exit(0);
}

/// Lines from the child's end of the pipe, each awaited until a deadline.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  enum class Got { kLine, kEof, kTimeout, kError };
  /// The next line into `line`, waiting until CLOCK_MONOTONIC reads `deadline_ms`.
  Got next(std::string* line, int64_t deadline_ms) {
    for (;;) {
      if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
        *line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return Got::kLine;
      }
      int64_t left = deadline_ms - monotonic_ms();
      if (left <= 0) return Got::kTimeout;
      pollfd p{fd_, POLLIN, 0};
      int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 60000)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Got::kError;
      if (r == 0) continue;
      char chunk[65536];
      ssize_t n = read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Got::kError;
      if (n == 0) return Got::kEof;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  std::string buf_;
};

/// Waits for the child; with `kill_first`, kills it before. A process stuck inside the kernel
/// driver cannot die until the driver lets it go: after a second it is left to init (it has
/// PR_SET_PDEATHSIG), rather than hanging Berth too. "" when it exited 0, else how it ended.
std::string reap(pid_t pid, bool kill_first) {
  if (kill_first) kill(pid, SIGKILL);
  int status = 0;
  for (int tries = 0;; ++tries) {
    pid_t r = waitpid(pid, &status, kill_first ? WNOHANG : 0);
    if (r == pid) break;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || tries >= 100) return "still in the driver";
    usleep(10000);  // a killed process is usually gone within milliseconds
  }
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WEXITSTATUS(status) != 0) return "exit status " + std::to_string(WEXITSTATUS(status));
  return "";
}

}  // namespace

std::string normalize_bus_id(std::string_view id) {
  std::string s = lower(trim(id));
  size_t colon = s.find(':');
  // An NVML domain has 8 hex digits, of which the kernel's form keeps the low 4.
  if (colon == 8 && s.compare(0, 4, "0000") == 0) s.erase(0, 4);
  return s;
}

std::string nvml_library(const NvidiaDriver& driver) {
  for (const auto& l : driver.libraries)
    if (!l.lib32 && basename_of(l.path).rfind("libnvidia-ml.so.", 0) == 0) return l.host_path;
  return "";
}

Result<NvmlReadings> read_nvml(const std::string& library, const NvmlOptions& o) {
  if (o.samples < 1 || o.interval_ms < 0 || o.timeout_s < 1)
    return make_error("read NVML", library, "samples and the time limit must be at least 1",
                      ErrorCode::kInvalidInput);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe", library);
  pid_t pid = fork();
  if (pid < 0) {
    Error e = sys_error("fork", library);
    close(fds[0]);
    close(fds[1]);
    return e;
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(fds[1], library, o);
  }
  close(fds[1]);
  LineReader in(fds[0]);
  NvmlReadings out;
  auto failed = [&](const std::string& detail, bool kill_child) -> Error {
    close(fds[0]);
    reap(pid, kill_child);  // how it ended adds nothing to `detail`
    return make_error("read NVML", library, detail);
  };
  auto broken = [&](LineReader::Got got) -> Error {
    if (got == LineReader::Got::kTimeout)
      return failed("NVML gave no answer within " + std::to_string(o.timeout_s) +
                        " s (is the driver hung?); its process was killed",
                    true);
    close(fds[0]);
    std::string end = reap(pid, false);
    return make_error("read NVML", library,
                      "the process reading NVML stopped without an answer" +
                          (end.empty() ? std::string() : " (" + end + ")"));
  };

  const int64_t limit_ms = int64_t{o.timeout_s} * 1000;
  std::string line;
  try {
    LineReader::Got got = in.next(&line, monotonic_ms() + limit_ms);
    if (got != LineReader::Got::kLine) return broken(got);
    json hello = json::parse(line);
    if (hello.contains("error")) return failed(hello.at("error").get<std::string>(), false);
    out.driver_version = hello.at("driver_version").get<std::string>();
    while (static_cast<int>(out.samples.size()) < o.samples) {
      got = in.next(&line, monotonic_ms() + limit_ms + o.interval_ms);
      if (got != LineReader::Got::kLine) return broken(got);
      json j = json::parse(line);
      if (j.contains("error")) return failed(j.at("error").get<std::string>(), false);
      NvmlSample s;
      s.unix_ms = j.at("sample").at("unix_ms").get<int64_t>();
      for (const auto& g : j.at("sample").at("gpus")) s.gpus.push_back(reading_from_json(g));
      out.samples.push_back(std::move(s));
    }
  } catch (const std::exception& e) {
    return failed("garbled answer from the process reading NVML: " + json_error_text(e), true);
  }
  // The readings are complete; nvmlShutdown gets the same time limit, then the child is killed.
  LineReader::Got got = in.next(&line, monotonic_ms() + limit_ms);
  close(fds[0]);
  reap(pid, got != LineReader::Got::kEof);
  return out;
}

}  // namespace berth

#include "devices/nvidia_discover.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "core/dir.h"
#include "core/elf.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "devices/ld_cache.h"
#include "devices/nvidia_probe.h"

namespace berth {
namespace {

/// Where libraries are looked for besides ld.so.cache (host namespace).
const char* const kLibraryDirs[] = {
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu/nvidia/current",
    "/usr/lib/x86_64-linux-gnu/vdpau",
    "/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/lib64",
    "/usr/lib64/vdpau",
    "/usr/lib",
    "/lib",
    "/usr/lib/vdpau",
    "/usr/lib/i386-linux-gnu",
    "/usr/lib/i386-linux-gnu/vdpau",
    "/usr/lib32",
    // Where GKE and NVIDIA's GPU operator put a containerised driver (its users find it through
    // LD_LIBRARY_PATH, not ld.so.cache): lib64 native, lib 32-bit.
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
};

struct BinaryRule {
  const char* name;
  CapabilitySet caps;
};
const BinaryRule kBinaries[] = {
    {"nvidia-smi", kCapUtility},
    {"nvidia-debugdump", kCapUtility},
    {"nvidia-persistenced", kCapUtility},
    {"nvidia-cuda-mps-control", kCapCompute},
    {"nvidia-cuda-mps-server", kCapCompute},
};
const char* const kBinaryDirs[] = {"/usr/bin", "/usr/sbin",      "/bin",
                                   "/sbin",    "/usr/local/bin", "/usr/local/nvidia/bin"};

/// ICD and loader configuration files, by capability.
const BinaryRule kConfigFiles[] = {
    {"/etc/vulkan/icd.d/nvidia_icd.json", kCapGraphics},
    {"/usr/share/vulkan/icd.d/nvidia_icd.json", kCapGraphics},
    {"/etc/vulkan/implicit_layer.d/nvidia_layers.json", kCapGraphics},
    {"/usr/share/vulkan/implicit_layer.d/nvidia_layers.json", kCapGraphics},
    {"/usr/share/glvnd/egl_vendor.d/10_nvidia.json", kCapGraphics},
    {"/etc/glvnd/egl_vendor.d/10_nvidia.json", kCapGraphics},
    {"/usr/share/egl/egl_external_platform.d/10_nvidia_wayland.json", kCapGraphics},
    {"/usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json", kCapGraphics},
    {"/usr/share/nvidia/nvoptix.bin", kCapGraphics},
    {"/etc/OpenCL/vendors/nvidia.icd", kCapCompute},
};

/// Control device nodes and who needs them (0: always, with the driver).
const BinaryRule kControlNodes[] = {
    {"/dev/nvidiactl", 0},
    {"/dev/nvidia-uvm", kCapCompute},
    {"/dev/nvidia-uvm-tools", kCapCompute},
    {"/dev/nvidia-modeset", kCapGraphics | kCapDisplay},
};

/// Follows symlinks of `path` (host namespace) inside `root`, re-rooting
/// absolute link targets, so a link never leads out of the driver root.
/// Returns the final path in the host namespace, or empty when it does not resolve.
std::string resolve_in_root(const std::string& root, const std::string& path) {
  std::vector<std::string> done;
  std::vector<std::string> todo;  // reversed: back() is next
  auto push_parts = [&todo](std::string_view p) {
    std::vector<std::string_view> parts = split(p, '/');
    for (auto it = parts.rbegin(); it != parts.rend(); ++it)
      if (!it->empty()) todo.emplace_back(*it);
  };
  push_parts(path);
  int hops = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      if (!done.empty()) done.pop_back();
      continue;
    }
    done.push_back(part);
    std::string cur;
    for (const auto& d : done) cur += "/" + d;
    std::string full = under_root(root, cur);
    struct stat st;
    if (lstat(full.c_str(), &st) != 0) return "";
    if (!S_ISLNK(st.st_mode)) continue;
    if (++hops > 40) return "";
    char buf[4096];
    ssize_t n = readlink(full.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return "";
    std::string target(buf, static_cast<size_t>(n));
    done.pop_back();
    if (target[0] == '/') done.clear();
    push_parts(target);
  }
  std::string out;
  for (const auto& d : done) out += "/" + d;
  return out.empty() ? "/" : out;
}

}  // namespace

namespace {

std::vector<DeviceNode> nodes_in(const std::string& dev_root, const std::string& dir) {
  std::vector<DeviceNode> out;
  for (const auto& name : list_dir(under_root(dev_root, dir))) {
    DeviceNode n;
    if (find_node(dev_root, path_join(dir, name), &n)) out.push_back(std::move(n));
  }
  return out;
}

/// "Key:   value" lines of a /proc information file.
std::map<std::string, std::string> parse_info(std::string_view text) {
  std::map<std::string, std::string> kv;
  for (std::string_view line : split_lines(text)) {
    size_t c = line.find(':');
    if (c != std::string_view::npos)
      kv[std::string(trim(line.substr(0, c)))] = trim(line.substr(c + 1));
  }
  return kv;
}

void discover_gpus(const DiscoveryOptions& o, NvidiaDriver* d) {
  const std::string gpus_dir = "/proc/driver/nvidia/gpus";
  for (const auto& bus : list_dir(under_root(o.driver_root, gpus_dir))) {
    NvidiaGpu g;
    g.proc_dir = path_join(gpus_dir, bus);
    g.proc_host_path = under_root(o.driver_root, g.proc_dir);
    auto text = read_file(g.proc_host_path + "/information");
    if (!text.ok()) {
      d->warnings.push_back("cannot read " + g.proc_host_path +
                            "/information: " + text.error().message());
      continue;
    }
    auto kv = parse_info(*text);
    g.model = kv["Model"];
    g.uuid = kv["GPU UUID"];
    g.bus_id = kv["Bus Location"].empty() ? bus : kv["Bus Location"];
    const std::string& minor = kv["Device Minor"];
    // The driver numbers minors 0..254 (255 is nvidiactl); anything else leaves the GPU
    // without a node, with a warning, rather than reaching std::stoi's exceptions.
    int m = -1;
    auto [end, ec] = std::from_chars(minor.data(), minor.data() + minor.size(), m);
    if (!minor.empty() && ec == std::errc() && end == minor.data() + minor.size() && m >= 0 &&
        m < 255)
      g.minor = m;
    else if (!minor.empty())
      d->warnings.push_back(g.proc_host_path + "/information: Device Minor \"" + minor +
                            "\" is not a GPU minor number");
    if (g.minor >= 0)
      g.has_node =
          find_node(o.effective_dev_root(), "/dev/nvidia" + std::to_string(g.minor), &g.node);
    d->gpus.push_back(std::move(g));
  }
  // nvidia-smi numbers GPUs in PCI bus order.
  std::sort(d->gpus.begin(), d->gpus.end(),
            [](const NvidiaGpu& a, const NvidiaGpu& b) { return a.bus_id < b.bus_id; });
  for (size_t i = 0; i < d->gpus.size(); ++i) d->gpus[i].index = static_cast<int>(i);
}

std::vector<std::string> library_candidates(const DiscoveryOptions& o, NvidiaDriver* d) {
  std::vector<std::string> out;
  std::string cache_path = under_root(o.driver_root, "/etc/ld.so.cache");
  if (path_exists(cache_path)) {
    auto data = read_file(cache_path);
    auto entries = data.ok() ? parse_ld_cache(*data, cache_path)
                             : Result<std::vector<LdCacheEntry>>(data.error());
    if (entries.ok()) {
      for (const auto& e : *entries)
        if (e.path.size() > 1 && e.path[0] == '/') out.push_back(e.path);
    } else {
      // Not fatal: the standard directories below still find a packaged driver.
      d->warnings.push_back(entries.error().message());
    }
  }
  for (const char* dir : kLibraryDirs)
    for (const auto& name : list_dir(under_root(o.driver_root, dir)))
      if (name.find(".so") != std::string::npos) out.push_back(std::string(dir) + "/" + name);
  return out;
}

/// The version suffix of the library a soname link ("libcuda.so.1") resolves to.
Version library_version_of(const DiscoveryOptions& o, const std::vector<std::string>& candidates,
                           std::string_view soname_link, std::string_view base) {
  for (const auto& c : candidates) {
    if (basename_of(c) != soname_link) continue;
    std::string real = resolve_in_root(o.driver_root, c);
    std::string b, v;
    if (real.empty() || !split_library_name(basename_of(real), &b, &v) || b != base) continue;
    auto ver = parse_version(v);
    if (!ver) continue;
    auto elf = read_elf_info(under_root(o.driver_root, real));
    if (elf.ok() && elf->machine == host_elf_machine()) return *ver;
  }
  return {};
}

void discover_libraries(const DiscoveryOptions& o, const std::vector<std::string>& candidates,
                        NvidiaDriver* d) {
  const std::string want = d->version.str();
  std::set<std::string> seen;
  for (const auto& c : candidates) {
    std::string real = resolve_in_root(o.driver_root, c);
    if (real.empty() || !seen.insert(real).second) continue;
    std::string base, ver;
    if (!split_library_name(basename_of(real), &base, &ver)) continue;
    CapabilitySet caps = library_capabilities(base);
    if (caps == 0) continue;
    if (ver != want) {
      log::debug("gpu: ignoring {}: version {} is not the driver's {}", real, ver, want);
      continue;
    }
    DriverFile f;
    f.path = real;
    f.host_path = under_root(o.driver_root, real);
    f.caps = caps;
    auto elf = read_elf_info(f.host_path);
    if (!elf.ok()) {
      d->warnings.push_back("ignoring " + f.host_path + ": " + elf.error().message());
      continue;
    }
    const bool native = elf->machine == host_elf_machine();
    const bool x86_32 = host_elf_machine() == 62 /*EM_X86_64*/ && elf->machine == 3 /*EM_386*/;
    if (!native && !x86_32) {
      log::debug("gpu: ignoring {}: built for another machine ({})", real, elf->machine);
      continue;
    }
    f.lib32 = !native;
    f.soname = elf->soname;
    d->libraries.push_back(std::move(f));
  }
  std::stable_sort(d->libraries.begin(), d->libraries.end(), [](const auto& a, const auto& b) {
    return a.lib32 != b.lib32 ? !a.lib32 : a.path < b.path;
  });
}

void discover_files(const DiscoveryOptions& o, NvidiaDriver* d) {
  auto add = [&o](std::vector<DriverFile>& to, const std::string& path, CapabilitySet caps) {
    std::string host = under_root(o.driver_root, path);
    struct stat st;
    if (stat(host.c_str(), &st) != 0) return false;
    DriverFile f;
    f.path = path;
    f.host_path = host;
    f.caps = caps;
    f.is_dir = S_ISDIR(st.st_mode);
    to.push_back(std::move(f));
    return true;
  };
  // The first program of each name, preferring a real one (ELF) to a script: a host may wrap
  // the driver's tool (/usr/bin/nvidia-smi setting LD_LIBRARY_PATH, then exec-ing
  // /usr/local/nvidia/bin/nvidia-smi), and the wrapper means nothing inside a container.
  for (const auto& b : kBinaries) {
    std::string script;
    bool found = false;
    for (const char* dir : kBinaryDirs) {
      std::string path = std::string(dir) + "/" + b.name;
      if (!path_exists(under_root(o.driver_root, path))) continue;
      if (!read_elf_info(under_root(o.driver_root, path)).ok()) {
        if (script.empty()) script = path;
        continue;
      }
      found = add(d->binaries, path, b.caps);
      break;
    }
    if (!found && !script.empty()) add(d->binaries, script, b.caps);
  }
  for (const auto& c : kConfigFiles) add(d->config_files, c.name, c.caps);
  for (const char* fw : {"/lib/firmware/nvidia/", "/usr/lib/firmware/nvidia/"}) {
    std::string dir = fw + d->version.str();
    for (const auto& name : list_dir(under_root(o.driver_root, dir)))
      add(d->firmware, path_join(dir, name), 0);
    if (!d->firmware.empty()) break;
  }
  add(d->ipc, "/run/nvidia-persistenced/socket", kCapUtility | kCapCompute);
  // The MPS daemon's directories, when the node runs one: clients reach the server through
  // the pipe directory, and the log directory goes with it (a client-started daemon writes
  // there). Missing ones are left out.
  add(d->ipc, o.mps_pipe_dir, kCapCompute);
  if (o.mps_log_dir != o.mps_pipe_dir) add(d->ipc, o.mps_log_dir, kCapCompute);
}

}  // namespace

std::optional<Version> parse_nvrm_version(std::string_view text) {
  size_t at = text.find("NVRM version:");
  if (at == std::string_view::npos) return std::nullopt;
  size_t end = text.find('\n', at);
  std::string_view line = text.substr(at, end == std::string_view::npos ? end : end - at);
  size_t mod = line.find("Module");
  if (mod == std::string_view::npos) return std::nullopt;
  // The version is the first dotted number after "Kernel Module" (or "Open Kernel Module for
  // x86_64").
  size_t i = mod;
  while (i < line.size()) {
    size_t b = line.find_first_not_of(" \t", i);
    if (b == std::string_view::npos) break;
    size_t e = line.find_first_of(" \t", b);
    std::string_view tok = line.substr(b, e == std::string_view::npos ? e : e - b);
    if (tok.find('.') != std::string_view::npos)
      if (auto v = parse_version(tok)) return v;
    if (e == std::string_view::npos) break;
    i = e;
  }
  return std::nullopt;
}

bool split_library_name(std::string_view name, std::string* base, std::string* version) {
  size_t at = name.find(".so.");
  if (at == std::string_view::npos) return false;
  *base = std::string(name.substr(0, at));
  *version = std::string(name.substr(at + 4));
  return true;
}

Result<NvidiaDriver> discover_nvidia(const DiscoveryOptions& o) {
  NvidiaDriver d;
  d.options = o;
  std::string vfile = under_root(o.driver_root, "/proc/driver/nvidia/version");
  if (path_exists(vfile)) {
    std::string text = BERTH_TRY(read_file(vfile));
    if (auto v = parse_nvrm_version(text))
      d.kernel_version = *v;
    else
      d.warnings.push_back("cannot find the NVRM version in " + vfile);
  }
  std::vector<std::string> candidates = library_candidates(o, &d);
  d.library_version = library_version_of(o, candidates, "libcuda.so.1", "libcuda");
  if (!d.library_version.known())
    d.library_version = library_version_of(o, candidates, "libnvidia-ml.so.1", "libnvidia-ml");
  if (!d.library_version.known()) {
    // No soname link: take the suffix of a versioned libcuda / libnvidia-ml itself.
    for (const auto& c : candidates) {
      std::string b, v;
      if (split_library_name(basename_of(c), &b, &v) && (b == "libcuda" || b == "libnvidia-ml") &&
          v.find('.') != std::string::npos)
        if (auto ver = parse_version(v)) {
          d.library_version = *ver;
          break;
        }
    }
  }
  d.version = d.kernel_version.known() ? d.kernel_version : d.library_version;
  if (d.kernel_version.known() && d.library_version.known() &&
      compare_versions(d.kernel_version, d.library_version) != 0)
    d.warnings.push_back("driver libraries " + d.library_version.str() +
                         " do not match the kernel module " + d.kernel_version.str() +
                         "; using the libraries of " + d.kernel_version.str());
  d.found = d.version.known();
  if (!d.found) return d;

  discover_gpus(o, &d);
  for (const auto& c : kControlNodes) {
    DeviceNode n;
    if (find_node(o.effective_dev_root(), c.name, &n)) d.control_nodes.push_back(std::move(n));
  }
  d.cap_nodes = nodes_in(o.effective_dev_root(), "/dev/nvidia-caps");
  d.imex_nodes = nodes_in(o.effective_dev_root(), "/dev/nvidia-caps-imex-channels");
  discover_libraries(o, candidates, &d);
  discover_files(o, &d);
  std::string params = under_root(o.driver_root, "/proc/driver/nvidia/params");
  if (path_exists(params)) {
    auto text = read_file(params);
    if (text.ok())
      d.proc_params = *text;
    else
      d.warnings.push_back(text.error().message());
  }

  const DriverFile* libcuda = nullptr;
  for (const auto& l : d.libraries)
    if (!l.lib32 && basename_of(l.path).rfind("libcuda.so.", 0) == 0) libcuda = &l;
  // Under any driver root: that libcuda is the one containers will load, and the probe runs
  // it in a forked child with a time limit.
  if (!libcuda)
    d.cuda_version_note = "no libcuda for driver " + d.version.str();
  else if (o.cuda_probe == CudaProbe::kNever)
    d.cuda_version_note = "not probed (BERTH_CUDA_PROBE=never)";
  else
    d.cuda_version = probe_cuda_driver_version(libcuda->host_path, &d.cuda_version_note);
  if (!d.cuda_version.known() && d.found) {
    // Not asked or no answer: the driver branch says which CUDA it supports.
    if (Version v = cuda_version_for_driver(d.version); v.known()) {
      d.cuda_version = v;
      d.cuda_version_derived = true;
      d.cuda_version_note = "derived from driver branch " + std::to_string(d.version.parts[0]) +
                            "; " + d.cuda_version_note;
    }
  }
  return d;
}

}  // namespace berth

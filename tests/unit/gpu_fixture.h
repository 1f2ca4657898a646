// A fabricated host root for GPU discovery tests: real ELF libraries built by
// tests/CMakeLists.txt (BERTH_FAKE_GPU_LIBS), an ld.so.cache written here,
// /proc/driver/nvidia files and stand-in device nodes (fifos) under a
// separate device root.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "test_util.h"

namespace berth::testing {

namespace fs = std::filesystem;
using berth::write_text;  // test_util.h

/// Serialises ld.so.cache entries ({name, path, flags}) in glibc's formats.
struct CacheEntry {
  std::string name, path;
  int32_t flags = 0x0303;  // ELF libc6, x86-64
};

inline void put32(std::string& s, uint32_t v) {
  s.append(reinterpret_cast<const char*>(&v), 4);
}

/// The "glibc-ld.so.cache1.1" format: string offsets count from the header start.
inline std::string new_format_cache(const std::vector<CacheEntry>& es) {
  std::string strings;
  std::vector<std::pair<uint32_t, uint32_t>> offs;
  const uint32_t base = 48 + 24 * static_cast<uint32_t>(es.size());
  for (const auto& e : es) {
    uint32_t k = base + static_cast<uint32_t>(strings.size());
    strings += e.name + '\0';
    uint32_t v = base + static_cast<uint32_t>(strings.size());
    strings += e.path + '\0';
    offs.emplace_back(k, v);
  }
  std::string out = "glibc-ld.so.cache1.1";
  put32(out, static_cast<uint32_t>(es.size()));
  put32(out, static_cast<uint32_t>(strings.size()));
  out += std::string("\x02\0\0\0", 4);  // little-endian flag, padding
  out += std::string(16, '\0');         // extension offset, unused
  for (size_t i = 0; i < es.size(); ++i) {
    put32(out, static_cast<uint32_t>(es[i].flags));
    put32(out, offs[i].first);
    put32(out, offs[i].second);
    put32(out, 0);                // osversion
    out += std::string(8, '\0');  // hwcap
  }
  return out + strings;
}

/// The old "ld.so-1.7.0" format: offsets count from the end of the entry table.
/// With `then_new`, a new-format table follows (as ldconfig's compat format wrote).
inline std::string old_format_cache(const std::vector<CacheEntry>& es, bool then_new) {
  std::string strings;
  std::string out = std::string("ld.so-1.7.0") + '\0';
  put32(out, static_cast<uint32_t>(es.size()));
  for (const auto& e : es) {
    put32(out, static_cast<uint32_t>(e.flags));
    put32(out, static_cast<uint32_t>(strings.size()));
    strings += e.name + '\0';
    put32(out, static_cast<uint32_t>(strings.size()));
    strings += e.path + '\0';
  }
  if (!then_new) return out + strings;
  while (out.size() % 8) out += '\0';
  return out + new_format_cache(es);
}

inline void copy_lib(const std::string& name, const std::string& to) {
  fs::create_directories(fs::path(to).parent_path());
  fs::copy_file(std::string(BERTH_FAKE_GPU_LIBS) + "/" + name, to,
                fs::copy_options::overwrite_existing);
}

inline void fifo(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  ::mkfifo(path.c_str(), 0666);
}

inline std::string gpu_information(const std::string& model, const std::string& uuid,
                                   const std::string& bus, int minor) {
  return "Model: \t\t " + model + "\nIRQ:   \t\t 0\nGPU UUID: \t " + uuid +
         "\nVideo BIOS: \t 92.00.19.00.01\nBus Type: \t PCIe\nDMA Size: \t 47 bits\n"
         "DMA Mask: \t 0x7fffffffffff\nBus Location: \t " +
         bus + "\nDevice Minor: \t " + std::to_string(minor) + "\nGPU Excluded:\t No\n";
}

inline constexpr const char* kUuid0 = "GPU-11111111-2222-3333-4444-555555555555";
inline constexpr const char* kUuid1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

/// driver root <tmp>/root and device root <tmp>/dev-root, removed on destruction.
class FakeHost {
 public:
  FakeHost() {
    root = dir_.path + "/root";
    dev = dir_.path + "/dev-root";
    const std::string lib = root + "/usr/lib/x86_64-linux-gnu";
    write_text(
        root + "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n");
    write_text(root + "/proc/driver/nvidia/params",
               "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n");
    // Listed out of bus order on purpose: indexes follow the bus id.
    write_text(root + "/proc/driver/nvidia/gpus/0000:85:00.0/information",
               gpu_information("NVIDIA H100 80GB HBM3", kUuid1, "0000:85:00.0", 1));
    write_text(root + "/proc/driver/nvidia/gpus/0000:07:00.0/information",
               gpu_information("NVIDIA A100-SXM4-40GB", kUuid0, "0000:07:00.0", 0));
    copy_lib("libcuda.so.550.54.15", lib + "/libcuda.so.550.54.15");
    fs::create_symlink("libcuda.so.550.54.15", lib + "/libcuda.so.1");
    copy_lib("libnvidia-ml.so.550.54.15", lib + "/libnvidia-ml.so.550.54.15");
    // An absolute link target must be followed inside the driver root.
    fs::create_symlink("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15",
                       lib + "/libnvidia-ml.so.1");
    copy_lib("libnvidia-ptxjitcompiler.so.550.54.15",
             lib + "/libnvidia-ptxjitcompiler.so.550.54.15");
    copy_lib("libGLX_nvidia.so.550.54.15", lib + "/libGLX_nvidia.so.550.54.15");
    // Only ld.so.cache knows this directory.
    copy_lib("libnvidia-encode.so.550.54.15",
             root + "/opt/nvidia/lib/libnvidia-encode.so.550.54.15");
    // Ignored: another driver version, a file that is not ELF, a non-driver library.
    copy_lib("libcuda.so.535.104.05", lib + "/libcuda.so.535.104.05");
    write_text(lib + "/libnvidia-cfg.so.550.54.15", "not an ELF file\n");
    copy_lib("libnvidia-ml.so.550.54.15", lib + "/libfoo.so.550.54.15");
    // 32-bit (compat32).
    copy_lib("libcuda32.so", root + "/usr/lib/i386-linux-gnu/libcuda.so.550.54.15");
    write_text(root + "/etc/ld.so.cache",
               new_format_cache(
                   {{"libnvidia-encode.so.1", "/opt/nvidia/lib/libnvidia-encode.so.550.54.15"},
                    {"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
                    {"libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.550.54.15", 0x0003}}));
    write_text(root + "/usr/bin/nvidia-smi", "#!/bin/sh\n");
    write_text(root + "/usr/bin/nvidia-cuda-mps-control", "#!/bin/sh\n");
    write_text(root + "/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin", "fw");
    write_text(root + "/lib/firmware/nvidia/535.104.05/gsp_ga10x.bin", "old fw");
    write_text(root + "/etc/vulkan/icd.d/nvidia_icd.json", "{}");
    write_text(root + "/etc/OpenCL/vendors/nvidia.icd", "libnvidia-opencl.so.1\n");
    write_text(root + "/run/nvidia-persistenced/socket", "");
    for (const char* n :
         {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1",
          "nvidia-caps/nvidia-cap1", "nvidia-caps/nvidia-cap2", "kfd", "dri/renderD128"})
      fifo(dev + "/dev/" + n);
  }
  std::string root, dev;

 private:
  TempDir dir_{"gpu"};
};

inline bool have_32bit_fake() {
  std::ifstream f(std::string(BERTH_FAKE_GPU_LIBS) + "/libcuda32.so", std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::memcmp(magic,
                                         "\x7f"
                                         "ELF",
                                         4) == 0;
}

}  // namespace berth::testing

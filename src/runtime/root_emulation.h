// Root emulation for the userns engine: a seccomp filter that makes the calls package managers
// make as root, and which a user namespace with one mapped ID refuses, succeed without effect.
//
// With one ID mapped (the user as root inside), `apt-get update` fails on setgroups (EPERM:
// /proc/self/setgroups is "deny"), on seteuid(_apt) (EINVAL: no such ID in the namespace) and
// on chown to _apt (EINVAL); dpkg, useradd and build scripts fail the same way. The filter
// answers these calls with success and changes nothing, as Charliecloud's `--seccomp` and
// enroot's remap-root filter do:
//   - the set*id family: setuid, setgid, setreuid, setregid, setresuid, setresgid, setfsuid,
//     setfsgid, setgroups (a process keeps its IDs: getuid() still says 0);
//   - the chown family: chown, fchown, lchown, fchownat (files keep the user's ownership);
//   - mknod and mknodat of a character or block device (nothing is created; FIFOs, sockets and
//     regular files are made as usual).
// Every other call runs as before. The filter is classic BPF built at compile time: installing
// it is one seccomp(2) call, and the kernel's seccomp cache lets the calls it always allows
// skip it.
//
// apt checks that its downloads really run as _apt ("Could not switch group"), which no
// filter can make true: with the filter on, a container whose root has /etc/apt/apt.conf.d
// gets kAptDropIn there, which turns apt's sandbox user off (Charliecloud passes the same
// setting to apt's command lines in its seccomp mode).
//
// It matches the host's native architecture and, on x86-64, the i386 one (32-bit binaries);
// calls of other architectures (x32 included) are not emulated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "core/vocabulary.h"

namespace berth {

/// Which root emulation a run of the userns engine uses.
enum class RootEmulation {
  kNone,     ///< the one mapped ID only: set*id and chown to other IDs fail as the kernel says
  kSeccomp,  ///< the filter above
  /// The user's subordinate IDs mapped (runtime/subids.h): the calls are real, no filter.
  kSubids,
  /// The default: kSubids where the user has ranges and newuidmap (and the container user is
  /// root), else kSeccomp. The engine decides at each run.
  kAuto,
};

/// The words --root-emulation, the policy's root_emulation and a container's recorded run
/// options spell the modes with, in the order messages list them.
inline constexpr Word<RootEmulation> kRootEmulationWords[] = {
    {RootEmulation::kAuto, "auto"},
    {RootEmulation::kSubids, "subids"},
    {RootEmulation::kSeccomp, "seccomp"},
    {RootEmulation::kNone, "none"},
};

/// "none", "seccomp", "subids" or "auto".
constexpr std::string_view root_emulation_name(RootEmulation mode) {
  return word_of(kRootEmulationWords, mode);
}

/// The mode named `name` ("none", "seccomp", "subids", "auto"); nullopt for any other word.
constexpr std::optional<RootEmulation> parse_root_emulation(std::string_view name) {
  return parse_word(kRootEmulationWords, name);
}

/// Whether this build has a filter for the host's architecture.
bool root_emulation_supported();

/// The number of instructions of the filter (0 when unsupported), for tests.
size_t root_emulation_filter_length();

/// The file written into a container's /etc/apt/apt.conf.d, and what it says.
inline constexpr const char* kAptDropIn = "/etc/apt/apt.conf.d/00berth-root-emulation";
inline constexpr std::string_view kAptDropInText =
    "// Written by Berth's root emulation (seccomp): apt cannot switch to _apt in a user\n"
    "// namespace with one mapped ID, so its downloads run as root (berth run\n"
    "// --root-emulation=none leaves this file alone; removing it is harmless).\n"
    "APT::Sandbox::User \"root\";\n";

/// Whether the root at `root_fd` has /etc/apt/apt.conf.d and no kAptDropIn (resolved inside
/// the root): a squashfs image's overlay gets the file from the run's child.
bool needs_apt_drop_in(int root_fd);

/// Writes kAptDropIn beneath the root at `root_fd` when the root has /etc/apt/apt.conf.d and
/// the file is missing (resolved inside the root); nothing otherwise, nor where the user may not
/// write (EACCES, EPERM, EROFS).
Status prepare_root_emulation(int root_fd);

/// Removes kAptDropIn beneath the root at `root_fd` when it holds exactly kAptDropInText (an
/// earlier seccomp run wrote it): in the subordinate-ID mode apt's switch to _apt is real.
/// Best effort, nothing reported.
void retire_root_emulation(int root_fd);

/// What the filter answers a call with: the kernel runs it, or it succeeds without effect.
enum class RootEmulationVerdict { kAllow, kFake };

/// The filter's answer for call `nr` of architecture `audit_arch` (an AUDIT_ARCH_* value) with
/// `args`, found by running the installed program in a small classic-BPF interpreter: what the
/// tests check every call number against.
RootEmulationVerdict root_emulation_verdict(uint32_t audit_arch, uint32_t nr,
                                            const uint64_t (&args)[6]);

/// Installs the filter on the calling thread, inherited by its children and kept across exec.
/// Needs CAP_SYS_ADMIN in the caller's user namespace or no_new_privs. Allocates nothing (it
/// runs between clone and exec); -1 with errno on failure (ENOSYS when unsupported).
int install_root_emulation();

}  // namespace berth

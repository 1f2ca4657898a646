// The root-emulation seccomp filter, built at compile time.
#include "runtime/root_emulation.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <array>
#include <cerrno>
#include <cstdint>

#include "core/fs.h"
#include "core/root_path.h"

namespace berth {
namespace {

/// One architecture the filter knows: its AUDIT_ARCH value, the calls answered with success,
/// mknod's and mknodat's numbers (-1: no such call there), and the first number of calls of
/// another ABI sharing the AUDIT_ARCH value (x32 on x86-64), passed through; 0 when none.
struct ArchCalls {
  uint32_t audit_arch;
  std::array<int, 32> fake;  // -1 ends the list
  int mknod;
  int mknodat;
  uint32_t other_abi_from;
};

constexpr int kEnd = -1;

// One architecture per row group, as the kernel's tables read.
// clang-format off
#if defined(__x86_64__)
constexpr bool kSupported = true;
// Numbers from the kernel's syscall tables (arch/x86/entry/syscalls/syscall_{64,32}.tbl).
constexpr std::array<ArchCalls, 2> kArchs = {{
    {AUDIT_ARCH_X86_64,
     {SYS_chown, SYS_fchown, SYS_lchown, SYS_fchownat, SYS_setuid, SYS_setgid, SYS_setreuid,
      SYS_setregid, SYS_setresuid, SYS_setresgid, SYS_setfsuid, SYS_setfsgid, SYS_setgroups, kEnd},
     SYS_mknod, SYS_mknodat, 0x40000000U},
    // i386: the 16-bit-ID calls and their 32-bit-ID twins.
    {AUDIT_ARCH_I386,
     {182, 95, 16, 298, 23, 46, 70, 71, 164, 170, 138, 139, 81,          // chown .. setgroups
      212, 207, 198, 213, 214, 203, 204, 208, 210, 215, 216, 206, kEnd},  // chown32 .. setgroups32
     14, 297, 0},
}};
#elif defined(__aarch64__)
constexpr bool kSupported = true;
// The generic table: no chown, lchown or mknod (glibc uses fchownat and mknodat).
constexpr std::array<ArchCalls, 1> kArchs = {{
    {AUDIT_ARCH_AARCH64,
     {SYS_fchown, SYS_fchownat, SYS_setuid, SYS_setgid, SYS_setreuid, SYS_setregid, SYS_setresuid,
      SYS_setresgid, SYS_setfsuid, SYS_setfsgid, SYS_setgroups, kEnd},
     -1, SYS_mknodat, 0},
}};
#else
constexpr bool kSupported = false;
constexpr std::array<ArchCalls, 0> kArchs = {};
#endif
// clang-format on

// A 64-bit argument's low word (the mode of mknod) is at its offset on a little-endian host.
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
constexpr uint32_t kLowWord = 4;
#else
constexpr uint32_t kLowWord = 0;
#endif

constexpr size_t kMaxLength = 128;

struct Program {
  std::array<sock_filter, kMaxLength> code{};
  size_t length = 0;
};

constexpr sock_filter stmt(uint16_t code, uint32_t k) {
  return {code, 0, 0, k};
}
constexpr sock_filter jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
  return {code, jt, jf, k};
}

constexpr size_t fake_count(const ArchCalls& a) {
  size_t n = 0;
  while (n < a.fake.size() && a.fake[n] != kEnd) ++n;
  return n;
}

/// The program, laid out as:
///   per architecture: load arch; not this one -> next; load nr; [other ABI -> allow];
///                     each faked nr -> fake; mknod -> mknod; mknodat -> mknodat; -> allow
///   allow:   return ALLOW
///   fake:    return ERRNO 0 (success, nothing done)
///   mknod:   load mode (args[1]); -> check
///   mknodat: load mode (args[2])
///   check:   mode & S_IFMT is S_IFCHR or S_IFBLK -> (return ERRNO 0); return ALLOW
/// Jumps go forward only, 8 bits relative: the program stays far below 256 instructions.
constexpr Program build() {
  Program p;
  size_t blocks = 0;
  for (const ArchCalls& a : kArchs) blocks += 3 + (a.other_abi_from != 0) + fake_count(a) + 3;
  const size_t allow = blocks, fake = blocks + 1, mknod = blocks + 2, mknodat = blocks + 4;
  // An instruction's operands are computed before it is appended: `to` is relative to it.
  auto emit = [&](sock_filter f) { p.code[p.length++] = f; };
  auto to = [&](size_t target) { return static_cast<uint8_t>(target - p.length - 1); };
  constexpr uint16_t kJeq = BPF_JMP | BPF_JEQ | BPF_K;
  constexpr uint16_t kLoad = BPF_LD | BPF_W | BPF_ABS;
  for (const ArchCalls& a : kArchs) {
    size_t next = p.length + 3 + (a.other_abi_from != 0) + fake_count(a) + 3;
    emit(stmt(kLoad, offsetof(seccomp_data, arch)));
    emit(jump(kJeq, a.audit_arch, 0, to(next)));
    emit(stmt(kLoad, offsetof(seccomp_data, nr)));
    if (a.other_abi_from != 0)
      emit(jump(BPF_JMP | BPF_JGE | BPF_K, a.other_abi_from, to(allow), 0));
    for (size_t i = 0; i < fake_count(a); ++i)
      emit(jump(kJeq, static_cast<uint32_t>(a.fake[i]), to(fake), 0));
    // A missing mknod (-1) compares against a number no call has.
    emit(jump(kJeq, static_cast<uint32_t>(a.mknod), to(mknod), 0));
    emit(jump(kJeq, static_cast<uint32_t>(a.mknodat), to(mknodat), 0));
    emit(stmt(BPF_JMP | BPF_JA, static_cast<uint32_t>(allow - p.length - 1)));
  }
  emit(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  emit(stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0U));
  emit(stmt(kLoad, offsetof(seccomp_data, args[1]) + kLowWord));
  emit(stmt(BPF_JMP | BPF_JA, 1));
  emit(stmt(kLoad, offsetof(seccomp_data, args[2]) + kLowWord));
  emit(stmt(BPF_ALU | BPF_AND | BPF_K, S_IFMT));
  emit(jump(kJeq, S_IFCHR, 2, 0));
  emit(jump(kJeq, S_IFBLK, 1, 0));
  emit(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  emit(stmt(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0U));
  return p;
}

constexpr Program kProgram = build();
static_assert(kProgram.length < 200, "8-bit relative jumps must reach the returns");

}  // namespace

std::string_view root_emulation_name(RootEmulation mode) {
  return mode == RootEmulation::kSeccomp ? "seccomp" : "none";
}

std::optional<RootEmulation> parse_root_emulation(std::string_view name) {
  if (name == "seccomp") return RootEmulation::kSeccomp;
  if (name == "none") return RootEmulation::kNone;
  return std::nullopt;
}

bool root_emulation_supported() {
  return kSupported;
}

size_t root_emulation_filter_length() {
  return kSupported ? kProgram.length : 0;
}

Status prepare_root_emulation(int root_fd) {
  UniqueFd dir(open_in_root(root_fd, "/etc/apt/apt.conf.d", O_PATH | O_DIRECTORY));
  if (!dir.valid()) return {};  // no apt here (or no such directory): nothing to do
  UniqueFd file(open_in_root(root_fd, kAptDropIn, O_WRONLY | O_CREAT | O_EXCL, 0644));
  if (!file.valid()) {
    if (errno == EEXIST) return {};  // written by an earlier run
    return sys_error("create", kAptDropIn);
  }
  return write_all(file.get(), kAptDropInText, kAptDropIn);
}

int install_root_emulation() {
  if (!kSupported) {
    errno = ENOSYS;
    return -1;
  }
  // The kernel copies the program; it takes a non-const pointer.
  sock_fprog prog = {static_cast<unsigned short>(kProgram.length),
                     const_cast<sock_filter*>(kProgram.code.data())};
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

}  // namespace berth

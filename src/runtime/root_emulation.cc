// The root-emulation seccomp filter, built at compile time.
#include "runtime/root_emulation.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace berth {
namespace {

/// One architecture the filter knows: its AUDIT_ARCH value, the calls answered with success,
/// and mknod's and mknodat's numbers (-1: no such call there). Calls of another ABI sharing the
/// AUDIT_ARCH value (x32 on x86-64: numbers from 0x40000000) match none and pass.
struct ArchCalls {
  uint32_t audit_arch;
  std::array<int, 32> fake;  // -1 ends the list
  int mknod;
  int mknodat;
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
     SYS_mknod, SYS_mknodat},
    // i386: the 16-bit-ID calls and their 32-bit-ID twins.
    {AUDIT_ARCH_I386,
     {182, 95, 16, 298, 23, 46, 70, 71, 164, 170, 138, 139, 81,          // chown .. setgroups
      212, 207, 198, 213, 214, 203, 204, 208, 210, 215, 216, 206, kEnd},  // chown32 .. setgroups32
     14, 297},
}};
#elif defined(__aarch64__)
constexpr bool kSupported = true;
// The generic table: no chown, lchown or mknod (glibc uses fchownat and mknodat).
constexpr std::array<ArchCalls, 1> kArchs = {{
    {AUDIT_ARCH_AARCH64,
     {SYS_fchown, SYS_fchownat, SYS_setuid, SYS_setgid, SYS_setreuid, SYS_setregid, SYS_setresuid,
      SYS_setresgid, SYS_setfsuid, SYS_setfsgid, SYS_setgroups, kEnd},
     -1, SYS_mknodat},
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

/// Where a matched call goes.
enum class Target : uint8_t { kFake, kMknod, kMknodat };

/// A call number and where it goes; an architecture's are sorted by number.
struct Entry {
  uint32_t nr = 0;
  Target target = Target::kFake;
};

struct Entries {
  std::array<Entry, 40> e{};
  size_t n = 0;
};

constexpr Entries sorted_entries(const ArchCalls& a) {
  Entries out;
  for (size_t i = 0; i < a.fake.size() && a.fake[i] != kEnd; ++i)
    out.e[out.n++] = {static_cast<uint32_t>(a.fake[i]), Target::kFake};
  if (a.mknod != kEnd) out.e[out.n++] = {static_cast<uint32_t>(a.mknod), Target::kMknod};
  if (a.mknodat != kEnd) out.e[out.n++] = {static_cast<uint32_t>(a.mknodat), Target::kMknodat};
  std::sort(out.e.begin(), out.e.begin() + static_cast<std::ptrdiff_t>(out.n),
            [](const Entry& x, const Entry& y) { return x.nr < y.nr; });
  return out;
}

/// Up to this many numbers are compared one by one; more are split in two by one compare.
constexpr size_t kLeaf = 3;

/// Instructions of the search over entries [lo, hi).
constexpr size_t tree_size(size_t lo, size_t hi) {
  size_t n = hi - lo;
  if (n <= kLeaf) return n + 1;  // a compare each, then "allow"
  size_t mid = lo + n / 2;
  return 1 + tree_size(lo, mid) + tree_size(mid, hi);
}

/// The program, laid out as:
///   per architecture: load arch; not this one -> next; load nr; above the highest or below
///                     the lowest faked number -> allow; a binary search over the sorted numbers:
///                     each leaf compares up to kLeaf numbers (-> fake, -> mknod or -> mknodat),
///                     else -> allow
///   allow:   return ALLOW
///   fake:    return ERRNO 0 (success, nothing done)
///   mknod:   load mode (args[1]); -> check
///   mknodat: load mode (args[2])
///   check:   mode & S_IFMT is S_IFCHR or S_IFBLK -> (return ERRNO 0); return ALLOW
/// The search keeps the path short: installing a filter makes the kernel run it for every call
/// number of both architectures (to precompute its seccomp cache), about 7 ns per instruction
/// on the path, some 900 numbers in all. Measured on the development VM: installing costs about
/// 57 us with this layout, 81 us with one compare per number in a row, 25 us for a filter of
/// one instruction.
///
/// The blocks after the first (the host's own architecture's) begin with a load of the
/// instruction pointer, which the kernel's precomputation cannot know: it gives up on every
/// number of the compat architecture there, after three instructions, instead of walking that
/// block's search for each (17 us less per install, measured). Its calls are then filtered as
/// they come, a few nanoseconds each, and they are rare: 32-bit programs in a 64-bit container.
/// Jumps go forward only, 8 bits relative: the program stays far below 256 instructions.
constexpr Program build() {
  Program p;
  size_t blocks = 0;
  for (const ArchCalls& a : kArchs) blocks += 5 + tree_size(0, sorted_entries(a).n);
  blocks += kArchs.size() - 1;  // the instruction-pointer loads
  const size_t allow = blocks, fake = blocks + 1, mknod = blocks + 2, mknodat = blocks + 4;
  // An instruction's operands are computed before it is appended: `to` is relative to it.
  auto emit = [&](sock_filter f) { p.code[p.length++] = f; };
  auto to = [&](size_t target) { return static_cast<uint8_t>(target - p.length - 1); };
  constexpr uint16_t kJeq = BPF_JMP | BPF_JEQ | BPF_K;
  constexpr uint16_t kLoad = BPF_LD | BPF_W | BPF_ABS;
  auto target_of = [&](Target t) {
    return t == Target::kFake ? fake : t == Target::kMknod ? mknod : mknodat;
  };
  // The search over [lo, hi), depth first: the lower half follows its compare, the upper half
  // after it.
  auto search = [&](const Entries& es, size_t lo, size_t hi, auto& self) -> void {
    size_t n = hi - lo;
    if (n <= kLeaf) {
      for (size_t i = lo; i < hi; ++i)
        emit(jump(kJeq, es.e[i].nr, to(target_of(es.e[i].target)), 0));
      emit(stmt(BPF_JMP | BPF_JA, static_cast<uint32_t>(allow - p.length - 1)));
      return;
    }
    size_t mid = lo + n / 2;
    emit(
        jump(BPF_JMP | BPF_JGE | BPF_K, es.e[mid].nr, static_cast<uint8_t>(tree_size(lo, mid)), 0));
    self(es, lo, mid, self);
    self(es, mid, hi, self);
  };
  for (const ArchCalls& a : kArchs) {
    Entries es = sorted_entries(a);
    if (&a != &kArchs[0]) emit(stmt(kLoad, offsetof(seccomp_data, instruction_pointer)));
    size_t next = p.length + 5 + tree_size(0, es.n);
    emit(stmt(kLoad, offsetof(seccomp_data, arch)));
    emit(jump(kJeq, a.audit_arch, 0, to(next)));
    emit(stmt(kLoad, offsetof(seccomp_data, nr)));
    // Most numbers lie outside the faked ones' range: two compares let them pass.
    emit(jump(BPF_JMP | BPF_JGT | BPF_K, es.e[es.n - 1].nr, to(allow), 0));
    emit(jump(BPF_JMP | BPF_JGE | BPF_K, es.e[0].nr, 0, to(allow)));
    search(es, 0, es.n, search);
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

bool root_emulation_supported() {
  return kSupported;
}

size_t root_emulation_filter_length() {
  return kSupported ? kProgram.length : 0;
}

RootEmulationVerdict root_emulation_verdict(uint32_t audit_arch, uint32_t nr,
                                            const uint64_t (&args)[6]) {
  seccomp_data data{};
  data.nr = static_cast<int>(nr);
  data.arch = audit_arch;
  for (size_t i = 0; i < 6; ++i) data.args[i] = args[i];
  uint32_t acc = 0;
  for (size_t pc = 0; pc < kProgram.length; ++pc) {
    const sock_filter& f = kProgram.code[pc];
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_ABS: {
        uint32_t word = 0;
        std::memcpy(&word, reinterpret_cast<const char*>(&data) + f.k, sizeof word);
        acc = word;
        break;
      }
      case BPF_ALU | BPF_AND | BPF_K:
        acc &= f.k;
        break;
      case BPF_JMP | BPF_JA:
        pc += f.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        pc += acc == f.k ? f.jt : f.jf;
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
        pc += acc >= f.k ? f.jt : f.jf;
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
        pc += acc > f.k ? f.jt : f.jf;
        break;
      case BPF_RET | BPF_K:
        return f.k == SECCOMP_RET_ALLOW ? RootEmulationVerdict::kAllow
                                        : RootEmulationVerdict::kFake;
      default:
        std::abort();  // an instruction build() does not emit
    }
  }
  std::abort();  // build() ends every path in a return
}

int install_root_emulation() {
  if (!kSupported) {
    errno = ENOSYS;
    return -1;
  }
  // The kernel copies the program; it takes a non-const pointer.
  sock_fprog prog = {static_cast<unsigned short>(kProgram.length),
                     const_cast<sock_filter*>(kProgram.code.data())};
  // SPEC_ALLOW: kernels before 5.16 (spec_store_bypass_disable=seccomp, their default, as on
  // RHEL 8) otherwise turn on the Speculative Store Bypass mitigation for every filtered task,
  // slowing the workload's own computing; this filter emulates, it guards nothing. Kernels
  // before 4.17 know no such flag (EINVAL) and seccomp(2) came in 3.17 (ENOSYS): prctl then.
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, &prog) == 0)
    return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

}  // namespace berth

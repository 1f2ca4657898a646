#include "core/elf.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "core/fs.h"

namespace berth {
namespace {

constexpr uint64_t kMaxInterpreter = 4096;

/// Reads exactly n bytes at off; false when the file is shorter.
bool read_at(int fd, void* buf, size_t n, uint64_t off, uint64_t file_size) {
  if (off > file_size || n > file_size - off) return false;
  return pread(fd, buf, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
}

struct Segment {
  uint64_t vaddr, offset, filesz;
};

/// One ELF object being read: its fd and size, and how failures are named.
struct Reader {
  int fd;
  uint64_t size;
  Op op;
  const std::string& what;

  Error fail(std::string detail) const { return make_error(op, what, std::move(detail)); }
};

/// The class-independent part of the walk, instantiated for Elf32 and Elf64 types.
template <class Ehdr, class Phdr, class Dyn>
Result<ElfInfo> read_object(const Reader& r, int elf_class) {
  Ehdr eh;
  if (!read_at(r.fd, &eh, sizeof eh, 0, r.size)) return r.fail("truncated ELF header");
  ElfInfo info;
  info.elf_class = elf_class;
  info.machine = eh.e_machine;
  if (eh.e_phentsize != sizeof(Phdr)) return info;  // no program headers of this class
  info.program_headers = true;
  if (eh.e_phnum == 0) return info;
  std::vector<Segment> loads;
  Segment dyn{0, 0, 0};
  bool have_dyn = false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Phdr ph;
    if (!read_at(r.fd, &ph, sizeof ph, eh.e_phoff + uint64_t{i} * sizeof ph, r.size))
      return r.fail("truncated program header table");
    if (ph.p_type == PT_LOAD) loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
    if (ph.p_type == PT_DYNAMIC) {
      dyn = {ph.p_vaddr, ph.p_offset, ph.p_filesz};
      have_dyn = true;
    }
    if (ph.p_type == PT_INTERP && info.interpreter.empty()) {
      if (ph.p_filesz == 0 || ph.p_filesz > kMaxInterpreter) return r.fail("bad PT_INTERP");
      std::string interp(ph.p_filesz, '\0');
      if (!read_at(r.fd, interp.data(), interp.size(), ph.p_offset, r.size))
        return r.fail("truncated PT_INTERP");
      interp.resize(std::strlen(interp.c_str()));
      info.interpreter = std::move(interp);
    }
  }
  if (!have_dyn) return info;
  uint64_t strtab = 0, soname = 0;
  bool have_strtab = false, have_soname = false;
  for (uint64_t off = 0; off + sizeof(Dyn) <= dyn.filesz; off += sizeof(Dyn)) {
    Dyn d;
    if (!read_at(r.fd, &d, sizeof d, dyn.offset + off, r.size)) break;
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr, have_strtab = true;
    if (d.d_tag == DT_SONAME) soname = d.d_un.d_val, have_soname = true;
  }
  if (!have_strtab || !have_soname) return info;
  // DT_STRTAB is a virtual address: map it to a file offset through PT_LOAD.
  for (const Segment& s : loads) {
    if (strtab < s.vaddr || strtab - s.vaddr >= s.filesz) continue;
    uint64_t at = strtab - s.vaddr + s.offset + soname;
    char buf[256];
    uint64_t n = at < r.size ? std::min<uint64_t>(sizeof buf, r.size - at) : 0;
    if (n == 0 || pread(r.fd, buf, n, static_cast<off_t>(at)) != static_cast<ssize_t>(n))
      return r.fail("DT_SONAME points outside the file");
    size_t len = strnlen(buf, n);
    if (len == n) return r.fail("DT_SONAME is not terminated");
    info.soname.assign(buf, len);
    return info;
  }
  return r.fail("DT_STRTAB is not inside a loaded segment");
}

/// Whether the object at r.fd starts with the ELF magic; its e_ident in `ident`.
bool is_elf(const Reader& r, unsigned char (&ident)[EI_NIDENT]) {
  return read_at(r.fd, ident, sizeof ident, 0, r.size) && std::memcmp(ident, ELFMAG, SELFMAG) == 0;
}

/// Reads a little-endian object of either class; `not_elf` is the detail for anything else.
Result<ElfInfo> read_elf(const Reader& r, const char* not_elf) {
  unsigned char ident[EI_NIDENT];
  if (!is_elf(r, ident)) return r.fail(not_elf);
  if (ident[EI_DATA] != ELFDATA2LSB) return r.fail("big-endian ELF objects are not supported");
  if (ident[EI_CLASS] == ELFCLASS64) return read_object<Elf64_Ehdr, Elf64_Phdr, Elf64_Dyn>(r, 64);
  if (ident[EI_CLASS] == ELFCLASS32) return read_object<Elf32_Ehdr, Elf32_Phdr, Elf32_Dyn>(r, 32);
  return r.fail("unknown ELF class");
}

}  // namespace

int host_elf_machine() {
#if defined(__x86_64__)
  return EM_X86_64;
#elif defined(__aarch64__)
  return EM_AARCH64;
#elif defined(__powerpc64__)
  return EM_PPC64;
#elif defined(__i386__)
  return EM_386;
#else
  return EM_NONE;
#endif
}

Result<ElfInfo> read_elf_info(const std::string& path) {
  UniqueFd fd = BERTH_TRY(open_file(path, O_RDONLY));
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return sys_error("stat", path);
  Reader r{fd.get(), static_cast<uint64_t>(st.st_size), "read ELF", path};
  if (!S_ISREG(st.st_mode)) return r.fail("not an ELF file");
  return read_elf(r, "not an ELF file");
}

Result<std::string> elf_interpreter(int fd, const std::string& what) {
  struct stat st;
  if (fstat(fd, &st) != 0) return sys_error("stat", what);
  Reader r{fd, S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0, "exec", what};
  unsigned char ident[EI_NIDENT];
  if (!is_elf(r, ident)) return r.fail("not an ELF executable");
  if (ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB)
    return r.fail("not a 64-bit executable for this machine");
  ElfInfo info = BERTH_TRY(read_elf(r, "not an ELF executable"));
  if (info.machine != host_elf_machine()) return r.fail("not a 64-bit executable for this machine");
  if (!info.program_headers) return r.fail("bad ELF header");
  return info.interpreter;
}

}  // namespace berth

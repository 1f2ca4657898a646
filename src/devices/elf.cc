#include "devices/elf.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "core/fs.h"

namespace berth {
namespace {

/// Reads exactly n bytes at off; false when the file is shorter.
bool read_at(int fd, void* buf, size_t n, uint64_t off, uint64_t file_size) {
  if (off > file_size || n > file_size - off) return false;
  return pread(fd, buf, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
}

struct Segment {
  uint64_t vaddr, offset, filesz;
};

/// The class-independent part of the walk, instantiated for Elf32 and Elf64 types.
template <class Ehdr, class Phdr, class Dyn>
Result<ElfInfo> read_dynamic(int fd, uint64_t size, const std::string& path, int elf_class) {
  Ehdr eh;
  if (!read_at(fd, &eh, sizeof eh, 0, size))
    return make_error("read ELF", path, "truncated ELF header");
  ElfInfo info;
  info.elf_class = elf_class;
  info.machine = eh.e_machine;
  if (eh.e_phentsize != sizeof(Phdr) || eh.e_phnum == 0) return info;  // no program headers
  std::vector<Segment> loads;
  Segment dyn{0, 0, 0};
  bool have_dyn = false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Phdr ph;
    if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + uint64_t{i} * sizeof ph, size))
      return make_error("read ELF", path, "truncated program header table");
    if (ph.p_type == PT_LOAD) loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
    if (ph.p_type == PT_DYNAMIC) {
      dyn = {ph.p_vaddr, ph.p_offset, ph.p_filesz};
      have_dyn = true;
    }
  }
  if (!have_dyn) return info;
  uint64_t strtab = 0, soname = 0;
  bool have_strtab = false, have_soname = false;
  for (uint64_t off = 0; off + sizeof(Dyn) <= dyn.filesz; off += sizeof(Dyn)) {
    Dyn d;
    if (!read_at(fd, &d, sizeof d, dyn.offset + off, size)) break;
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
    uint64_t n = at < size ? std::min<uint64_t>(sizeof buf, size - at) : 0;
    if (n == 0 || pread(fd, buf, n, static_cast<off_t>(at)) != static_cast<ssize_t>(n))
      return make_error("read ELF", path, "DT_SONAME points outside the file");
    size_t len = strnlen(buf, n);
    if (len == n) return make_error("read ELF", path, "DT_SONAME is not terminated");
    info.soname.assign(buf, len);
    return info;
  }
  return make_error("read ELF", path, "DT_STRTAB is not inside a loaded segment");
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
  unsigned char ident[EI_NIDENT];
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || !read_at(fd.get(), ident, sizeof ident, 0, size) ||
      std::memcmp(ident, ELFMAG, SELFMAG) != 0)
    return make_error("read ELF", path, "not an ELF file");
  if (ident[EI_DATA] != ELFDATA2LSB)
    return make_error("read ELF", path, "big-endian ELF objects are not supported");
  if (ident[EI_CLASS] == ELFCLASS64)
    return read_dynamic<Elf64_Ehdr, Elf64_Phdr, Elf64_Dyn>(fd.get(), size, path, 64);
  if (ident[EI_CLASS] == ELFCLASS32)
    return read_dynamic<Elf32_Ehdr, Elf32_Phdr, Elf32_Dyn>(fd.get(), size, path, 32);
  return make_error("read ELF", path, "unknown ELF class");
}

}  // namespace berth

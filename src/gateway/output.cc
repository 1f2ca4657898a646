// Jobs' output files (gateway/output.h).
#include "gateway/output.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/sha256.h"

namespace berth::gateway {
namespace {

// The kernel's ACL xattr form (linux/posix_acl_xattr.h): a 4-byte version (2), then 8-byte
// entries {u16 tag, u16 perm, u32 id}, little-endian.
constexpr uint32_t kAclVersion = 2;
constexpr uint16_t kUserObj = 0x01, kUser = 0x02, kGroupObj = 0x04, kGroup = 0x08, kMask = 0x10,
                   kOther = 0x20;
constexpr uint16_t kRead = 4;

uint32_t le(std::string_view s, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

/// Closes a descriptor at the end of its scope.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string output_stem(const std::string& secret, const std::string& instance, int64_t id) {
  std::string mac = hmac_sha256(secret, instance + ":" + std::to_string(id));
  std::string hex;
  for (size_t i = 0; i < 16 && i < mac.size(); ++i)
    hex += fmt::format("{:02x}", static_cast<unsigned char>(mac[i]));
  return "berthd-" + std::to_string(id) + "-" + hex;
}

Result<std::string> read_tail(const std::string& path, uid_t owner, int lines, size_t max_bytes,
                              bool* truncated) {
  *truncated = false;
  // O_NOFOLLOW and O_NONBLOCK: a link or a FIFO planted under the name is refused, not
  // followed or waited on.
  Fd f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) {
    if (errno == ENOENT) return std::string();
    return sys_error("open", path);
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return sys_error("stat", path);
  if (!S_ISREG(st.st_mode))
    return make_error("read", path, "not a regular file", ErrorCode::kInvalidInput);
  if (st.st_uid != owner)
    return make_error("read", path,
                      "the file is not the job owner's (uid " + std::to_string(st.st_uid) + ")",
                      ErrorCode::kInvalidInput);
  // Backwards from the end in blocks until `lines` line ends before the last byte, or the cap.
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t cap = std::min(size, max_bytes);
  constexpr size_t kBlock = 16384;
  std::string tail;  // the bytes read so far, the file's last ones
  int newlines = 0;
  size_t start = size;  // the offset of tail's first byte in the file
  while (start > size - cap) {
    size_t n = std::min(kBlock, start - (size - cap));
    std::string block(n, '\0');
    ssize_t got = ::pread(f.fd, block.data(), n, static_cast<off_t>(start - n));
    if (got < 0) return sys_error("read", path);
    if (static_cast<size_t>(got) != n) break;  // the file shrank: what was read stands
    start -= n;
    // Count line ends in the new block, from its end; a line end that is the file's last byte
    // ends the last line rather than starting a new one.
    for (size_t i = n; i-- > 0;) {
      if (block[i] != '\n' || start + i == size - 1) continue;
      if (++newlines == lines) {
        tail.insert(0, block, i + 1, std::string::npos);
        *truncated = true;
        return tail;
      }
    }
    tail.insert(0, block);
  }
  *truncated = start > 0;
  return tail;
}

bool default_acl_reads(std::string_view x, uid_t uid) {
  if (x.size() < 4 || (x.size() - 4) % 8 != 0 || le(x, 0, 4) != kAclVersion) return false;
  bool user = false, mask = true, others = false;
  for (size_t at = 4; at < x.size(); at += 8) {
    uint32_t tag = le(x, at, 2), perm = le(x, at + 2, 2), id = le(x, at + 4, 4);
    if (tag == kUser && id == uid && (perm & kRead) != 0) user = true;
    if (tag == kMask) mask = (perm & kRead) != 0;
    if ((tag == kGroupObj || tag == kOther || (tag == kUser && id != uid) || tag == kGroup) &&
        (perm & kRead) != 0)
      others = true;
    if (tag != kUserObj && tag != kUser && tag != kGroupObj && tag != kGroup && tag != kMask &&
        tag != kOther)
      return false;
  }
  return user && mask && !others;
}

Status check_output_dir(const std::string& dir, uid_t self) {
  auto bad = [&](const std::string& why) {
    return make_error("read config", dir, "[slurm] output_dir " + why, ErrorCode::kInvalidInput)
        .with_hint("see docs/gateway.md, \"Job output\", for how to make it");
  };
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return sys_error("stat", dir);
  if (!S_ISDIR(st.st_mode)) return bad("is not a folder");
  if (st.st_uid != self)
    return bad("is owned by uid " + std::to_string(st.st_uid) + ", not berthd's (" +
               std::to_string(self) + ")");
  if ((st.st_mode & S_ISVTX) == 0 || (st.st_mode & 0003) != 0003)
    return bad("is not sticky and writable by all (mode 1733)");
  if ((st.st_mode & 0004) != 0) return bad("is readable by all: jobs' file names would show");
  char buf[512];
  ssize_t n = ::getxattr(dir.c_str(), "system.posix_acl_default", buf, sizeof buf);
  if (n < 0 && errno != ENODATA && errno != ENOTSUP) return sys_error("stat", dir);
  if (n < 0 || !default_acl_reads(std::string_view(buf, static_cast<size_t>(n)), self))
    return bad("has no default ACL that lets berthd, and no one else, read the jobs' files");
  return {};
}

}  // namespace berth::gateway

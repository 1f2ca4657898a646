#include "runtime/launcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace berth {

std::vector<std::string> launcher_env(const std::vector<std::string>& caller_env) {
  std::vector<std::string> out;
  for (const std::string& kv : caller_env) {
    if (kv.find('=') == std::string::npos) continue;
    for (std::string_view prefix : kLauncherEnvPrefixes) {
      if (kv.starts_with(prefix)) {
        out.push_back(kv);
        break;
      }
    }
  }
  return out;
}

Result<std::vector<int>> kept_fds(int preserve_fds, const std::vector<std::string>& container_env) {
  if (preserve_fds < 0)
    return make_error("run", "--preserve-fds " + std::to_string(preserve_fds),
                      "the count of descriptors to keep cannot be negative",
                      ErrorCode::kInvalidInput);
  constexpr int kMaxKept = 1 << 16;
  if (preserve_fds > kMaxKept)
    return make_error("run", "--preserve-fds " + std::to_string(preserve_fds),
                      "more descriptors than a process can have", ErrorCode::kInvalidInput);
  std::vector<int> fds;
  fds.reserve(static_cast<size_t>(preserve_fds) + 1);
  for (int i = 0; i < preserve_fds; ++i) fds.push_back(3 + i);
  for (const std::string& kv : container_env) {
    if (!kv.starts_with("PMI_FD=")) continue;
    std::string_view text = std::string_view(kv).substr(7);
    int fd = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), fd);
    if (ec != std::errc() || end != text.data() + text.size() || fd < 0)
      return make_error("run", kv, "PMI_FD must name a descriptor by its number",
                        ErrorCode::kInvalidInput);
    // 0-2 are the workload's already.
    if (fd > 2 && std::find(fds.begin(), fds.end(), fd) == fds.end()) fds.push_back(fd);
  }
  std::sort(fds.begin(), fds.end());
  return fds;
}

Status check_fds_open(const std::vector<int>& fds) {
  for (int fd : fds) {
    if (::fcntl(fd, F_GETFD) < 0)
      return sys_error("run", "descriptor " + std::to_string(fd))
          .with_hint(
              "a launcher's descriptor (PMI_FD, --preserve-fds) must be open in the "
              "process that runs berth");
  }
  return {};
}

void keep_across_exec(const std::vector<int>& fds) {
  for (int fd : fds) {
    int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) (void)::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);  // checked before clone
  }
}

void fill_kept_gaps(const std::vector<int>& fds) {
  if (fds.empty()) return;
  size_t next = 0;
  for (int fd = 3; fd < fds.back(); ++fd) {
    if (next < fds.size() && fds[next] == fd) {
      ++next;
      continue;
    }
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0) return;  // the gap keeps what it had: runc sees an open descriptor anyway
    if (null == fd) {
      (void)::fcntl(fd, F_SETFD, 0);
    } else {
      (void)::dup2(null, fd);  // clears close-on-exec on `fd`
      ::close(null);
    }
  }
}

}  // namespace berth

#include "runtime/identity.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <vector>

#include "core/fs.h"
#include "runtime/root_path.h"

namespace berth {
namespace {

/// The fields of one colon-separated line.
std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  for (;;) {
    size_t j = line.find(':', i);
    if (j == std::string_view::npos) {
      out.push_back(line.substr(i));
      return out;
    }
    out.push_back(line.substr(i, j - i));
    i = j + 1;
  }
}

/// Whether some line of a passwd/group file has `name` in field 0 or id `id`
/// in field `id_field`; sets the matching flags.
void scan(std::string_view text, size_t id_field, unsigned long id, std::string_view name,
          bool& id_found, bool& name_found) {
  id_found = name_found = false;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    if (j == std::string_view::npos) j = text.size();
    std::string_view line = text.substr(i, j - i);
    i = j + 1;
    if (line.empty() || line.front() == '#') continue;
    auto f = split_fields(line);
    if (!name.empty() && f[0] == name) name_found = true;
    if (f.size() > id_field) {
      unsigned long v = 0;
      auto s = f[id_field];
      auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      if (r.ec == std::errc() && r.ptr == s.data() + s.size() && v == id) id_found = true;
    }
  }
}

std::string appended(std::string_view text, const std::string& line) {
  std::string out(text);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += line;
  out += '\n';
  return out;
}

/// Appends what `updated` adds to `old` to file `path` in the root (created when missing).
Status append_in_root(int root_fd, const char* path, std::string_view old,
                      const std::string& updated) {
  if (updated.size() == old.size()) return {};
  if (make_path_in_root(root_fd, path, true) != 0) return sys_error("create", path);
  UniqueFd fd(open_in_root(root_fd, path, O_WRONLY | O_APPEND));
  if (!fd.valid()) return sys_error("open", path);
  return write_all(fd.get(), std::string_view(updated).substr(old.size()), path);
}

/// Reads file `path` in the root; empty when it does not exist.
Result<std::string> read_in_root(int root_fd, const char* path) {
  UniqueFd fd(open_in_root(root_fd, path, O_RDONLY));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::string();
    return sys_error("open", path);
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error("read", path);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

std::string passwd_with_user(std::string_view passwd, uid_t uid, gid_t gid,
                             std::string_view name, std::string_view home) {
  bool id_found, name_found;
  scan(passwd, 2, uid, name, id_found, name_found);
  if (id_found) return std::string(passwd);
  std::string n = name.empty() || name_found ? "user" + std::to_string(uid) : std::string(name);
  std::string h = home.empty() ? (uid == 0 ? "/root" : "/") : std::string(home);
  return appended(passwd, n + ":x:" + std::to_string(uid) + ":" + std::to_string(gid) + ":" + n +
                              ":" + h + ":/bin/sh");
}

std::string group_with_group(std::string_view group, gid_t gid, std::string_view name) {
  bool id_found, name_found;
  scan(group, 2, gid, name, id_found, name_found);
  if (id_found) return std::string(group);
  std::string n = name.empty() || name_found ? "group" + std::to_string(gid) : std::string(name);
  return appended(group, n + ":x:" + std::to_string(gid) + ":");
}

Status ensure_identity(int root_fd, const ContainerSpec& spec) {
  std::string name = spec.user_name.empty() && spec.uid == 0 ? "root" : spec.user_name;
  std::string passwd = BERTH_TRY(read_in_root(root_fd, "/etc/passwd"));
  BERTH_CHECK(append_in_root(root_fd, "/etc/passwd", passwd,
                             passwd_with_user(passwd, spec.uid, spec.gid, name, spec.home)));
  std::string group = BERTH_TRY(read_in_root(root_fd, "/etc/group"));
  return append_in_root(root_fd, "/etc/group", group, group_with_group(group, spec.gid, name));
}

}  // namespace berth

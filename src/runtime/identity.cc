#include "runtime/identity.h"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <vector>

#include "core/fs.h"
#include "core/root_path.h"
#include "core/strings.h"

namespace berth {
namespace {

/// Whether an entry has `name` in field 0, and whether one has id `id` in field `id_field`.
void scan(std::string_view text, size_t id_field, unsigned long id, std::string_view name,
          bool& id_found, bool& name_found) {
  name_found = !name.empty() && find_account(text, 0, name).has_value();
  id_found = find_account(text, id_field, std::to_string(id)).has_value();
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

}  // namespace

std::optional<std::vector<std::string_view>> find_account(std::string_view text, size_t key_field,
                                                          std::string_view key) {
  for (std::string_view line : split_lines(text)) {
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string_view> f = split(line, ':');
    if (f.size() > key_field && f[key_field] == key) return f;
  }
  return std::nullopt;
}

std::string passwd_with_user(std::string_view passwd, uid_t uid, gid_t gid, std::string_view name,
                             std::string_view home) {
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

namespace {

/// The spec's copy of a file the caller read already, else the file.
Result<std::string> account_file(int root_fd, const std::optional<std::string>& given,
                                 const char* path) {
  if (given) return *given;
  return read_file_in_root(root_fd, path);
}

}  // namespace

Result<IdentityAdditions> identity_additions(int root_fd, const ContainerSpec& spec) {
  std::string name = spec.user_name.empty() && spec.uid == 0 ? "root" : spec.user_name;
  std::string passwd = BERTH_TRY(account_file(root_fd, spec.passwd, "/etc/passwd"));
  std::string group = BERTH_TRY(account_file(root_fd, spec.group, "/etc/group"));
  IdentityAdditions add;
  add.passwd = passwd_with_user(passwd, spec.uid, spec.gid, name, spec.home).substr(passwd.size());
  add.group = group_with_group(group, spec.gid, name).substr(group.size());
  return add;
}

Status ensure_identity(int root_fd, const ContainerSpec& spec) {
  std::string name = spec.user_name.empty() && spec.uid == 0 ? "root" : spec.user_name;
  std::string passwd = BERTH_TRY(account_file(root_fd, spec.passwd, "/etc/passwd"));
  BERTH_CHECK(append_in_root(root_fd, "/etc/passwd", passwd,
                             passwd_with_user(passwd, spec.uid, spec.gid, name, spec.home)));
  std::string group = BERTH_TRY(account_file(root_fd, spec.group, "/etc/group"));
  return append_in_root(root_fd, "/etc/group", group, group_with_group(group, spec.gid, name));
}

}  // namespace berth

// The container user's entries in the rootfs's /etc/passwd and /etc/group.
//
// Programs look the current uid up by name (whoami, ssh, Python's getpass),
// so before a run the rootfs (a private writable copy) gains an entry for
// spec.uid and spec.gid when the image has none. The text edits are pure;
// ensure_identity() reads and writes the files beneath the rootfs fd.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "runtime/container_spec.h"

namespace berth {

/// The fields of the first entry of an /etc/passwd- or /etc/group-style text whose field
/// `key_field` equals `key` (blank lines and '#' comments skipped).
std::optional<std::vector<std::string_view>> find_account(std::string_view text, size_t key_field,
                                                          std::string_view key);

/// `passwd` with a line for `uid` appended when none has that uid; the name
/// is `name`, or "user<uid>" when empty or taken by another uid. Unchanged
/// text when an entry exists.
std::string passwd_with_user(std::string_view passwd, uid_t uid, gid_t gid, std::string_view name,
                             std::string_view home);

/// `group` with a line for `gid` appended when none has that gid; the name
/// is `name`, or "group<gid>" when empty or taken by another gid.
std::string group_with_group(std::string_view group, gid_t gid, std::string_view name);

/// Adds the passwd/group entries for spec.uid/gid to the rootfs at
/// `root_fd` (creating /etc and the files when missing); files are resolved
/// inside the root, so a symlinked /etc/passwd cannot lead out of it.
Status ensure_identity(int root_fd, const ContainerSpec& spec);

/// What ensure_identity() would append to the root's /etc/passwd and /etc/group ("" for
/// nothing), for a root that cannot be written before the run (a squashfs image: the child
/// appends them in its overlay).
struct IdentityAdditions {
  std::string passwd;
  std::string group;
};
Result<IdentityAdditions> identity_additions(int root_fd, const ContainerSpec& spec);

}  // namespace berth

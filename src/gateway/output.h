// Jobs' stdout and stderr for GET /v1/jobs/{id}/output. berthd runs as its own account and a
// job as its owner's, so the output goes where both can reach it: the batch script sends the
// container's stdout and stderr into `[slurm] output_dir`, a folder shared with the compute
// nodes that every user may write into but not list (mode 1733, owned by berthd's account),
// whose default ACL gives berthd's account read access to every file made in it and nobody
// else any (docs/gateway.md, "Job output"). The file names carry a keyed hash of the job id, so
// no other user can guess one and plant a file under it before the job runs; berthd reads a
// file only if the job's owner owns it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace berth::gateway {

/// Lines GET /v1/jobs/{id}/output returns without `tail`, and at most.
inline constexpr int kDefaultTailLines = 100;
inline constexpr int kMaxTailLines = 10000;
/// Bytes returned of each stream at most, whatever `tail` asks.
inline constexpr size_t kMaxTailBytes = size_t{1} << 20;

/// The file name stem of job `id`'s output: "berthd-ID-HASH", HASH 32 hex digits of
/// HMAC-SHA256(secret, instance ":" id).
std::string output_stem(const std::string& secret, const std::string& instance, int64_t id);

/// The last `lines` lines (at most `max_bytes` bytes) of the file at `path`, which must be a
/// regular file owned by `owner`; "" when it does not exist (yet). `truncated` tells whether
/// anything was left out.
Result<std::string> read_tail(const std::string& path, uid_t owner, int lines, size_t max_bytes,
                              bool* truncated);

/// Whether a "system.posix_acl_default" value (the kernel's binary ACL form) lets files made in
/// the folder be read by `uid` (a named-user entry with read, and a mask with read) and by no
/// one else but their owner (group and other entries without read).
bool default_acl_reads(std::string_view xattr, uid_t uid);

/// Checks `[slurm] output_dir` at start: a folder owned by `self`, sticky, writable by all,
/// not readable by others, with a default ACL that lets `self` read what jobs write there.
Status check_output_dir(const std::string& dir, uid_t self);

}  // namespace berth::gateway

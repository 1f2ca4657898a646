// The site's central store (central_store in /etc/berth/berth.conf): a store administrators
// pre-populate with squashed images (`BERTH_HOME=DIR berth pull --squash REF`, as root), which
// every user's `run`, `images` and `inspect` read when their own store lacks the image, without
// pulling or copying it and without writing there: no lock, no file is made in it.
//
// What is read is checked first. The folder, every folder above it and every file used must be
// owned by root (or by the folder's owner) and writable by nobody else (Store::open_shared());
// the index is read as the user's is, the manifest and config are digest-checked when read, and
// the squashfs file's content digest is checked against the record before it is mounted.
// Hashing a file of gigabytes on every start would cost more than the start itself, so the
// verdict is kept in the user's own store, one small file per file version:
//
//   <user store>/central-verified/<squashfs_key()>   the digest the file was found to have
//
// squashfs_key() hashes the file's device, inode, size, modification and change times, so a
// file rewritten or replaced in place gets a new key and is hashed again; `berth gc` removes
// the verdicts whose file version is gone. An image of the
// central store kept as layers is refused: a container would need its layers unpacked into the
// user's store, which the central store is there to avoid.
#pragma once

#include <optional>
#include <string>

#include "core/error.h"
#include "image/gc.h"
#include "image/store.h"
#include "site/config.h"
#include "site/squashfs.h"

namespace berth {

/// The central store `site` names, opened for reading (Store::open_shared()); nullopt when
/// the site names none.
Result<std::optional<Store>> open_central_store(const SiteConfig& site);

/// The squashfs file of `image` (a squashed record of `central`), opened for mounting once
/// its owner and mode, the record's manifest and config, and the file's content digest are
/// checked; the content digest is hashed once per file version and the verdict cached under
/// `user_store`'s central-verified/. A file that does not hash to the record's digest is a
/// kIntegrity error naming it.
Result<SquashfsFile> open_central_squash(const Store& central, const ImageRecord& image,
                                         const Store& user_store);

/// Where open_central_squash() keeps its verdicts in `user_store`.
std::string central_verdict_dir(const Store& user_store);

/// The verdicts of `user_store` that can no longer be used (`berth gc`): the site names no
/// central store any more, the file they vouch for is gone from it, or it was rewritten (its
/// key changed). Removed unless `dry_run`. A verdict removed by mistake costs one hash.
Result<std::vector<Leftover>> sweep_central_verdicts(const SiteConfig& site,
                                                     const Store& user_store, bool dry_run);

}  // namespace berth

// The form of a container rootfs's absolute symlinks. An image's links name container paths
// ("/lib/x"); the fakechroot engine leaves symlink resolution to the host kernel, so while it owns
// a container they must name host paths ("<rootfs>/lib/x"). Runtime owns that form: a run puts
// the links in the form its engine needs (Engine::host_path_links), the form is recorded in
// container.json (link_prefix) and a marker file stands while a rewrite is under way, and
// whatever else reads the rootfs (export, clone, another engine) gets the image's form first,
// also after a killed run or rewrite. The host form stays between fakechroot runs: a long link
// takes a data block, so converting every run would cost seconds for an ordinary image.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/fs.h"
#include "runtime/containers.h"
#include "runtime/engines.h"

namespace berth {

/// A symlink target rewritten between an image's absolute form ("/x") and the host-absolute
/// form fakechroot needs and writes ("<prefix>/x"): with `from` empty, absolute targets gain
/// `to` in front; otherwise a target equal to `from` or under it has `from` replaced by `to`.
/// Nothing (nullopt) when the target is left alone.
std::optional<std::string> rewrite_link_target(std::string_view target, std::string_view from,
                                               std::string_view to);

/// Rewrites every symlink beneath `rootfs` (not following any) with rewrite_link_target(),
/// each atomically (a new link renamed over the old). Returns how many changed.
Result<size_t> rewrite_symlinks(const std::string& rootfs, std::string_view from,
                                std::string_view to);

/// With container `c`'s run lock held: its links in the image's form again when an engine
/// left them otherwise (as recorded), recorded so. Nothing to do otherwise.
Status canonical_links(ContainerStore& cs, const ContainerRecord& c);

/// Runs `run` (its spec, engine, work folder and name filled) for container `c`, whose run
/// lock the caller holds, with the links in the form the engine needs (rewritten only when they
/// are not in it, or a rewrite was cut short). An error here means the workload never started.
Result<RunOutcome> run_with_link_form(ContainerStore& cs, const ContainerRecord& c,
                                      const EngineRun& run);

/// For a reader of container `c`'s whole rootfs (export): the links in the image's form while
/// the returned lock is held. A running container is read as it is (not held), unless its
/// run needs host-path links: then an error says to wait for the run's end.
Result<FileLock> lock_canonical(ContainerStore& cs, const ContainerRecord& c, Op op);

}  // namespace berth

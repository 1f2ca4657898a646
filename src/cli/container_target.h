// What `run` and `create` share: finding the container a command names, or creating one from
// an image (pulled first when it is not here), and Docker's "Berth itself failed" status.
#pragma once

#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "runtime/containers.h"

namespace berth::cli {

/// Docker's status for "Berth itself failed" (bad flag, missing image, mount failure).
inline constexpr int kExitBerthFailed = 125;

/// prefix_command() hands an unknown option over as if it were the image: say what it is. A
/// Docker flag Berth cannot honour rootless (-p, --privileged, --memory, ...) gets a line
/// saying why and what to do instead.
Error unknown_flag(Op command, const std::string& flag);

/// Checks --pull's value: always, missing (the default) or never, as Docker takes it.
Status check_pull_policy(Op command, const std::string& pull);

/// The container `what` names, or a new one made from the image `what` names.
struct Target {
  ContainerRecord container;
  bool created = false;
};

/// Finds container `what` (when `allow_existing`), else creates one from image `what`, pulling
/// the image first as `pull` says: "missing" when it is not in the store, "always" even when
/// it is (the registry's newer image then), "never" not at all.
Result<Target> find_or_create(const GlobalOptions& g, ContainerStore& cs, const std::string& what,
                              const std::string& name, bool allow_existing,
                              const std::vector<std::string>& command = {},
                              const std::string& pull = "missing",
                              ContainerStore::Detail detail = ContainerStore::Detail::kFull);

}  // namespace berth::cli

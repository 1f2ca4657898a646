#include "cli/container_target.h"

#include <limits.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "cli/context.h"
#include "site/policy.h"

namespace berth::cli {

namespace {

/// Docker flags a rootless Berth cannot honour: why, and what to do instead.
constexpr struct {
  const char* flags[3];
  const char* why;
  const char* instead;
} kUnhonoured[] = {
    {{"-p", "--publish", nullptr},
     "ports cannot be published: rootless Berth makes no virtual network, the container uses the "
     "host's",
     "a server in the container listens on the host's own ports: pick a free one"},
    {{"-P", "--publish-all", nullptr},
     "ports cannot be published: rootless Berth makes no virtual network, the container uses the "
     "host's",
     "a server in the container listens on the host's own ports: pick a free one"},
    {{"--privileged", nullptr, nullptr},
     "a rootless container cannot have more privilege than your own user",
     "root inside (the default) holds every capability in the container's own namespaces; "
     "devices come with --device or --gpus"},
    {{"--cap-add", nullptr, nullptr},
     "capabilities outside the container's user namespace cannot be granted rootless",
     "root inside (the default) holds every capability in the container's own namespaces"},
    {{"--cap-drop", nullptr, nullptr},
     "capabilities are not managed one by one",
     "run as a user other than root with --user: it has none"},
    {{"-m", "--memory", nullptr},
     "resource limits are the batch system's, not the container's, on a shared cluster",
     "ask Slurm (srun --mem=...), or systemd-run --user -p MemoryMax=... berth run ..."},
    {{"--cpus", "--cpu-shares", "--cpuset-cpus"},
     "resource limits are the batch system's, not the container's, on a shared cluster",
     "ask Slurm (srun --cpus-per-task=N), or taskset -c LIST berth run ..."},
};

}  // namespace

Error unknown_flag(Op command, const std::string& flag) {
  std::string name = flag.substr(0, flag.find('='));
  for (const auto& u : kUnhonoured)
    for (const char* f : u.flags)
      if (f != nullptr && name == f)
        return make_error(command, name, u.why, ErrorCode::kUnsupported).with_hint(u.instead);
  return make_error(command, flag, "unknown flag", ErrorCode::kInvalidInput)
      .with_hint("see 'berth " + std::string(command.word()) + " --help'");
}

Status check_pull_policy(Op command, const std::string& pull) {
  if (pull == "always" || pull == "missing" || pull == "never") return {};
  return make_error(command, "--pull " + pull, "expected always, missing or never",
                    ErrorCode::kInvalidInput);
}

bool is_squashfs_file_argument(const std::string& what) {
  if (!what.starts_with("/") && !what.starts_with("./") && !what.starts_with("../")) return false;
  struct stat st;
  if (::stat(what.c_str(), &st) == 0) return !S_ISDIR(st.st_mode);
  return what.ends_with(".sqsh") || what.ends_with(".squashfs") || what.ends_with(".sqfs") ||
         what.ends_with(".sif");
}

Result<ContainerRecord> create_from_image(const GlobalOptions& g, ContainerStore& cs,
                                          const std::string& what, const std::string& name, Op op,
                                          const std::vector<std::string>& command,
                                          const std::string& pull, const std::string& platform) {
  std::optional<Platform> want;
  if (!platform.empty())
    want = BERTH_TRY(parse_platform(platform).with_context(std::string(op.word())));
  if (is_squashfs_file_argument(what)) {
    if (want)
      return make_error(op, "--platform " + platform,
                        "a squashfs file holds one tree: there is no platform to choose");
    // A single-file image: extracted into the container (nothing to pull, no store image).
    char real[PATH_MAX];
    if (::realpath(what.c_str(), real) == nullptr) return sys_error("open", what);
    const SiteConfig& site = BERTH_TRY(g.site);
    return cs.create_from_squashfs(real, name, command,
                                   static_cast<uint64_t>(site.extract_limit_mb) << 20);
  }
  Store store = BERTH_TRY(open_store(g));
  auto image = store.find_image(what);
  if (!image.ok() && image.error().code != ErrorCode::kNotFound) return std::move(image).error();
  // --platform: a stored image of another platform is not the one asked for.
  const bool other_platform = image.ok() && want && !platform_matches(*want, image->platform);
  if (other_platform && pull == "never")
    return make_error("find image", what,
                      "the stored image is for " + image->platform.str() + ", not " + want->str() +
                          ", and --pull never",
                      ErrorCode::kNotFound)
        .with_hint("berth pull --platform " + want->str() + " " + what);
  if (!image.ok() && pull == "never")
    return make_error("find image", what, "not in the store, and --pull never",
                      ErrorCode::kNotFound)
        .with_hint("berth pull " + what);
  if (image.ok() && (pull == "always" || other_platform)) {
    PullResult pulled = BERTH_TRY(pull_reference(g, what, platform, !g.quiet, false));
    image = std::move(pulled.record);
  } else if (!image.ok()) {
    // As Docker does: an image that is not here is pulled first (progress and this line go to
    // stderr; stdout belongs to the container).
    std::fprintf(stderr, "Unable to find image '%s' locally\n", what.c_str());
    std::fflush(stderr);
    // A container needs layers, whatever store_format says (a squashed image runs as it is,
    // without a container: cli/run.cc).
    PullResult pulled = BERTH_TRY(pull_reference(g, what, platform, !g.quiet, false));
    image = std::move(pulled.record);
  } else {
    // Stored before the policy changed, maybe: a registry it no longer allows is refused.
    const SiteConfig& site = BERTH_TRY(g.site);
    BERTH_CHECK(
        check_stored_image_allowed(site, *image).with_context(std::string(op.word()) + " " + what));
  }
  if (want && !platform_matches(host_platform(), image->platform))
    // Docker's warning: the kernel may still run it (binfmt_misc and an emulator).
    std::fprintf(stderr,
                 "WARNING: The requested image's platform (%s) does not match the detected host "
                 "platform (%s)\n",
                 image->platform.str().c_str(), host_platform().str().c_str());
  // Its layers are gone; unpacking the squashfs file instead would keep two copies.
  if (image->squashed()) return squashed_image_error("create", *image);
  return cs.create(store, *image, name, command);
}

}  // namespace berth::cli

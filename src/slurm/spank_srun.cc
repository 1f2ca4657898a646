#include "slurm/spank_srun.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "slurm/spank_plugin.h"

namespace berth::slurm {
namespace {

std::optional<std::string> local_getenv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::nullopt : std::optional<std::string>(v);
}

}  // namespace

int srun_post_opt(spank_t) {
  Problem p = apply_environment(&g_state.opts, local_getenv);
  if (p.empty()) return 0;
  report(p, false);
  return -1;
}

}  // namespace berth::slurm

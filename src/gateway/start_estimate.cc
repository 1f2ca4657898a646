// `sbatch --test-only` as the site's start estimate (gateway/start_estimate.h).
#include "gateway/start_estimate.h"

#include <charconv>
#include <map>

#include "gateway/sacct.h"

namespace berth::gateway {

std::vector<std::string> test_only_args(const std::string& sbatch, const SlurmJobSpec& s) {
  std::vector<std::string> a = {sbatch,
                                "--test-only",
                                "--job-name=" + (s.name.empty() ? std::string("berthd") : s.name),
                                "--nodes=" + std::to_string(s.nodes),
                                "--ntasks=" + std::to_string(s.tasks),
                                "--cpus-per-task=" + std::to_string(s.cpus_per_task)};
  if (!s.partition.empty()) a.push_back("--partition=" + s.partition);
  if (s.memory_mb > 0) a.push_back("--mem=" + std::to_string(s.memory_mb));
  if (s.gpus > 0)
    a.push_back("--gpus=" + (s.gpu_type.empty() ? "" : s.gpu_type + ":") + std::to_string(s.gpus));
  if (!s.gres.empty()) a.push_back("--gres=" + s.gres);
  if (s.time_limit_min > 0) a.push_back("--time=" + std::to_string(s.time_limit_min));
  // The script is never run: a will-run only reads the job's description.
  a.emplace_back("--wrap=true");
  return a;
}

Result<int64_t> read_test_only(std::string_view text) {
  static constexpr std::string_view kMark = " to start at ";
  const size_t at = text.find(kMark);
  int64_t t = 0;
  if (at != std::string_view::npos) {
    const char* begin = text.data() + at + kMark.size();
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(begin, end, t);
    if (ec == std::errc() && ptr != begin && (ptr == end || *ptr == ' ' || *ptr == '\n') && t > 0)
      return t;
  }
  std::string_view line = text.substr(0, text.find('\n'));
  if (line.size() > 300) line = line.substr(0, 300);
  return make_error("estimate start", "sbatch --test-only",
                    "it names no start time: \"" + std::string(line) + "\"",
                    ErrorCode::kInvalidInput);
}

Result<int64_t> estimate_start(const StartEstimateConfig& config, const std::string& slurm_token,
                               const SlurmJobSpec& s) {
  // %s: the time as Unix seconds, whatever the zone of berthd or of the controller.
  std::map<std::string, std::string> env = {{"SLURM_JWT", slurm_token},
                                            {"SLURM_TIME_FORMAT", "%s"}};
  if (!config.slurm_conf.empty()) env["SLURM_CONF"] = config.slurm_conf;
  std::string said;
  BERTH_TRY(run_program(test_only_args(config.sbatch, s), env, config.timeout_s, size_t{1} << 16,
                        {"estimate start", "[slurm] estimate_timeout_s", &said}));
  return read_test_only(said);
}

}  // namespace berth::gateway

// Slurm's own accounting as berthd's usage source ([accounting] in berthd's configuration,
// docs/gateway.md "Accounting"): `sacct --json` run as a child process (no shell) with a
// timeout, its answer read by usage_from_sacct_json() (gateway/accounting.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "gateway/accounting.h"

namespace berth::gateway {

/// The [accounting] section.
struct AccountingConfig {
  /// Where GET /v1/accounting and the quota check read usage: "database" (berthd's jobs),
  /// "sacct" (Slurm's accounting, an error when it cannot be read) or "auto" (sacct, else the
  /// database).
  std::string source = "database";
  std::string sacct = "sacct";  ///< the program: a path, or a name looked up in PATH
  std::string slurm_conf;       ///< SLURM_CONF for sacct; "" for berthd's own environment's
  int64_t timeout_s = 30;       ///< sacct is killed after this long
  /// The Slurm account berthd submits jobs with: the caller's primary group ("primary_group",
  /// so that Slurm's accounting groups jobs as quotas do), or Slurm's default ("default").
  std::string slurm_account = "primary_group";
  /// What usage and GPU-hour quotas group jobs by: "token" (the job's VO, a token group,
  /// JobRecord::vo) or "unix" (the owner's Unix primary group, or sacct's Slurm account).
  std::string group_by = "token";
};

/// sacct's arguments for the jobs that ran in [since, until): one line per allocation (-X),
/// every user's, times given in UTC (the child's TZ is UTC).
std::vector<std::string> sacct_args(const AccountingConfig& config, int64_t since, int64_t until);

/// How run_program() words its errors, and where it puts what the program wrote to stderr.
struct ProgramUse {
  Op op = "read accounting";                                ///< the errors' operation
  std::string_view timeout_key = "[accounting] timeout_s";  ///< the setting a timeout names
  std::string* stderr_text = nullptr;  ///< given: the first 64 KiB of stderr, on success too
};

/// Runs `argv` (argv[0] looked up in PATH when it has no slash) with `env` added to berthd's
/// environment, stdin from /dev/null; its stdout, or an error naming the program and the first
/// line of what it wrote to stderr (or its exit status). Killed after `timeout_s` seconds; the
/// output is cut at `max_bytes`, an error too.
Result<std::string> run_program(const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env, int64_t timeout_s,
                                size_t max_bytes, const ProgramUse& use = {});

/// The usage records of the jobs that ran in [since, until), from sacct.
/// `share`: how the site splits GPUs, for the share jobs' GPU-hours.
Result<std::vector<UsageRecord>> sacct_usage(const AccountingConfig& config, int64_t since,
                                             int64_t until, const ShareUnits& share = {});

}  // namespace berth::gateway

// The Slurm plugin's options, with pyxis's names and syntax (--container-image, -mounts, -name,
// ...), their PYXIS_CONTAINER_* / BERTH_CONTAINER_* environment forms, the plugstack arguments,
// and the `berth run` command line they turn into. Pure: no Slurm header, no Berth library, so
// that the plugin (a shared object loaded into srun and slurmstepd) compiles it in with -fPIC
// and the unit tests check it without a cluster. Errors are one line, Berth's shape, for the
// user's stderr.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth::slurm {

/// An error message (one line, without "berth: error: "), or empty for success.
using Problem = std::string;

/// What a --container-name flag asks for (pyxis's NAME:FLAG).
enum class NameMode { kAuto, kCreate, kExec, kNoExec };

/// The plugstack.conf arguments (pyxis's, plus Berth's own `berth=`).
struct PluginArgs {
  std::string berth = "/usr/local/bin/berth";  ///< berth= : the berth binary the tasks run
  std::string runtime_path = "/run/berth";     ///< runtime_path= : per-user step state
  bool execute_entrypoint = false;             ///< default of --[no-]container-entrypoint
  bool job_scope = false;                      ///< container_scope=job (else global)
  bool sbatch_support = true;                  ///< options registered for sbatch/salloc
  /// container_mpi= : the site's default for --container-mpi, for steps launched with an MPI
  /// plugin (srun --mpi=pmi2|pmix): "" none, "*" the site policy's mpi_default, else a TYPE.
  std::string container_mpi;
  std::string site_conf;  ///< site_conf= : the site policy berth runs under (BERTH_SITE_CONF)
  /// root_emulation= : the containers' root emulation, `berth run --root-emulation`; "policy"
  /// passes none (the site policy's root_emulation, auto by default, decides).
  std::string root_emulation = "seccomp";
};

/// Parses plugstack arguments ("key=value"); an unknown key or a bad value is a Problem.
Problem parse_plugin_args(const std::vector<std::string>& args, PluginArgs* out);

/// The options of one step, as given (on the command line or in the environment).
struct Options {
  std::string image;                ///< as typed
  std::vector<std::string> mounts;  ///< SRC[:DST[:FLAGS]] items, duplicates dropped
  std::string workdir;
  std::string name;  ///< without its flag
  NameMode name_mode = NameMode::kAuto;
  std::string save;  ///< --container-save, as typed
  std::optional<bool> mount_home, remap_root, entrypoint, writable;
  bool entrypoint_log = false;
  std::vector<std::string> env_names;  ///< --container-env
  std::vector<std::string> unshare;    ///< --container-unshare items
  std::optional<bool> mpi;             ///< --[no-]container-mpi (unset: the site's default)
  std::string mpi_type;                ///< --container-mpi=TYPE ("": the site's mpi_default)

  /// Whether the plugin does anything for this step (pyxis: an image or a name).
  bool active() const { return !image.empty() || !name.empty(); }
};

/// The options the plugin registers, in the order `srun --help` lists them.
struct OptionSpec {
  const char* name;  ///< without "--"
  const char* arg;   ///< argument's metavar, nullptr for a flag
  const char* usage;
  const char* env;            ///< suffix after PYXIS_/BERTH_ (nullptr: no environment form)
  bool optional_arg = false;  ///< `arg` may be left out (--container-mpi[=TYPE])
};
/// The option table; index = the value Slurm passes back to the callback.
const std::vector<OptionSpec>& option_table();

/// Applies option `index` of option_table() with `arg` (nullptr for a flag) to `o`. Slurm calls
/// an option's callback up to three times with the same value (srun, then slurmstepd twice):
/// the same value again is accepted, a different one is a Problem.
Problem apply_option(size_t index, const char* arg, Options* o);

/// For each option not given, its environment form: BERTH_CONTAINER_X, else PYXIS_CONTAINER_X,
/// read through `getenv` (getenv in srun/sbatch, spank_getenv in slurmstepd).
Problem apply_environment(Options* o, std::optional<std::string> (*getenv)(const char* name));

/// The image as `berth run` takes it: a squashfs path (starting with '/' or '.') made absolute
/// against `cwd`; pyxis's [USER@][REGISTRY#]IMAGE[:TAG] turned into Docker's REGISTRY/IMAGE,
/// and its USER (whose stored login pulls it) into `*user` when given ("" for none).
Problem berth_image(const std::string& image, const std::string& cwd, std::string* out,
                    std::string* user = nullptr);

/// The USER of the step's [USER@]IMAGE, or "": the plugin runs berth with BERTH_CREDS_USER set
/// to it, so that `berth run`'s pull takes that user's login (`berth login -u USER`).
std::string image_user(const Options& o);

/// Where the step runs, for container names and ids.
struct StepIds {
  unsigned job = 0;
  unsigned step = 0;  ///< kBatchStep for the batch script
  std::string node;   ///< SLURMD_NODENAME
  unsigned uid = 0, gid = 0;
  bool gpus = false;  ///< Slurm gave the step GPUs (SLURM_STEP_GPUS or SLURM_JOB_GPUS is set)
  /// The job's own NVIDIA_VISIBLE_DEVICES, if set: narrows the step's GPUs (within its GRES).
  std::optional<std::string> visible_devices;
  bool mpi_step = false;  ///< launched with an MPI plugin (SLURM_MPI_TYPE set, not "none")
  std::string hostname;   ///< the node's host name (--container-unshare=uts keeps it)
  std::string home;       ///< the job's HOME: the home --container-mount-home binds
};
inline constexpr unsigned kBatchStep = 0xfffffffbU;  // SLURM_BATCH_SCRIPT

/// The Berth container's name, node-unique (the nodes of a job may share one store through a
/// shared home, and several slurmd may share a host): NAME.NODE (container_scope=job:
/// JOB_NAME.NODE) when named, else slurm-JOB.STEP.NODE, which a NAME of the form JOB.STEP
/// names too (pyxis's name for a step's unnamed container). Characters a container name cannot
/// hold become '-'.
std::string container_name(const Options& o, const PluginArgs& a, const StepIds& ids);

/// The `--mpi[=TYPE]` argument of `berth run` for this step, or "" for none: the option when
/// given, else the site's container_mpi= for a step launched with an MPI plugin.
std::string mpi_argument(const Options& o, const PluginArgs& a, const StepIds& ids);

/// Whether `image` (as typed) names a squashfs file rather than a registry image.
inline bool is_squashfs_path(const std::string& image) {
  return image.starts_with("/") || image.starts_with(".");
}

/// Whether a squashfs image needs a container of its own (extracted from the file) rather
/// than a run on its shared mount: the step names it (to keep it) or saves it.
inline bool needs_container(const Options& o) {
  return !o.name.empty() || !o.save.empty();
}

/// The line the holder prints on stdout and on stderr before it stops itself, when the step
/// asked for --container-entrypoint-log: the end of the entrypoint's output in the log.
inline constexpr const char* kHolderUpLine = "berth: the holder is up";

/// The GPU argument of `berth run` for this step: `--gpus=...`, the step's GRES (the job's
/// CUDA_VISIBLE_DEVICES) narrowed by the job's own NVIDIA_VISIBLE_DEVICES (an index counts
/// within the GRES, as CUDA in the job numbers them); without GRES, no GPU whatever the image
/// says (`--env=NVIDIA_VISIBLE_DEVICES=void`).
std::string gpu_argument(const StepIds& ids);

/// The `berth run` arguments (after the binary) that make the step's container: a holder
/// process (/bin/sh stopping itself) that the tasks join and the plugin ends at step end.
/// `berth run -d --name` for a registry image, and for a squashfs file when needs_container()
/// (a container record, reusable by name, that `berth squash` can save); a plain `berth run`
/// for a squashfs file otherwise, which Berth runs without a record (the plugin keeps that run
/// in the background).
Problem run_arguments(const Options& o, const PluginArgs& a, const StepIds& ids,
                      const std::string& cwd, std::vector<std::string>* out);

/// The MASTER_PORT of job `job`'s PyTorch steps, as enroot's PyTorch hook derives it: one
/// port per job, 61000 to 65535 (above Linux's ephemeral range's default start, 32768..60999).
constexpr unsigned master_port(unsigned job) {
  return 61000 + job % 4536;
}

/// Whether `text` is a pyxis boolean: 1|true|yes|y or 0|false|no|n (case-sensitive).
std::optional<bool> parse_bool(std::string_view text);

}  // namespace berth::slurm

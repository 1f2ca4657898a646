#include "slurm/options.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <map>

namespace berth::slurm {
namespace {

size_t index_of(const std::string& name) {
  const auto& t = option_table();
  for (size_t i = 0; i < t.size(); ++i)
    if (name == t[i].name) return i;
  ADD_FAILURE() << "no option " << name;
  return 0;
}

Problem apply(Options* o, const std::string& name, const char* arg = nullptr) {
  return apply_option(index_of(name), arg, o);
}

std::map<std::string, std::string> g_env;
std::optional<std::string> fake_getenv(const char* name) {
  auto it = g_env.find(name);
  if (it == g_env.end()) return std::nullopt;
  return it->second;
}

TEST(SlurmOptions, SameValueTwiceIsFineADifferentOneIsNot) {
  // Slurm calls each callback in srun, then twice in slurmstepd.
  Options o;
  EXPECT_EQ(apply(&o, "container-image", "ubuntu:22.04"), "");
  EXPECT_EQ(apply(&o, "container-image", "ubuntu:22.04"), "");
  EXPECT_EQ(apply(&o, "container-image", "ubuntu:24.04"),
            "--container-image: given twice with different values ('ubuntu:22.04', "
            "'ubuntu:24.04')");
}

TEST(SlurmOptions, NameFlags) {
  Options o;
  EXPECT_EQ(apply(&o, "container-name", "work:exec"), "");
  EXPECT_EQ(o.name, "work");
  EXPECT_EQ(o.name_mode, NameMode::kExec);
  Options p;
  EXPECT_EQ(apply(&p, "container-name", "work"), "");
  EXPECT_EQ(p.name_mode, NameMode::kAuto);
  EXPECT_EQ(apply(&p, "container-name", "work:sometimes"),
            "--container-name: unknown flag 'sometimes' (auto, create, exec or no_exec)");
  EXPECT_EQ(apply(&p, "container-name", ":create"), "--container-name: the name is empty");
  EXPECT_EQ(apply(&p, "container-name", "a/b"), "--container-name: 'a/b' is not a valid name");
}

TEST(SlurmOptions, MountsAreCheckedAndDeduplicated) {
  Options o;
  EXPECT_EQ(apply(&o, "container-mounts", "/data:/data:ro+rbind,/scratch"), "");
  EXPECT_EQ(apply(&o, "container-mounts", "/data:/data:ro+rbind,/scratch"), "");
  EXPECT_EQ(o.mounts, (std::vector<std::string>{"/data:/data:ro+rbind", "/scratch"}));
  EXPECT_EQ(apply(&o, "container-mounts", "/a:rel"),
            "--container-mounts: '/a:rel': the destination must be an absolute path");
  EXPECT_EQ(apply(&o, "container-mounts", "/a:/b:x-create=sometimes"),
            "--container-mounts: mount flag 'x-create=sometimes' is not supported (ro, rw, rbind, "
            "bind, [r]private, [r]slave, [r]unbindable, nosuid, nodev, noexec, "
            "x-create=dir|file|auto)");
  EXPECT_EQ(apply(&o, "container-mounts", "/a,,/b"), "--container-mounts: empty item");
  EXPECT_EQ(apply(&o, "container-mounts", "umount:t"),
            "--container-mounts: 'umount:t': expected umount:DST, DST an absolute path");
  EXPECT_EQ(apply(&o, "container-mounts", "tmpfs"),
            "--container-mounts: 'tmpfs': expected tmpfs:DST[:FLAGS]");
  EXPECT_EQ(apply(&o, "container-mounts", "tmpfs:/t:size=1m+uid=0"),
            "--container-mounts: 'tmpfs:/t:size=1m+uid=0': tmpfs flag 'uid=0' is not supported "
            "(ro, rw, [no]suid, [no]dev, [no]exec, size=, mode=, nr_inodes=, huge=)");
  // pyxis's tmpfs:DST[:FLAGS] is berth run's --tmpfs DST[:OPTIONS].
  Options t;
  t.image = "busybox";
  EXPECT_EQ(apply(&t, "container-mounts", "tmpfs:/t:size=1m+noexec,tmpfs:/u,/d:/t/d"), "");
  std::vector<std::string> args;
  EXPECT_EQ(run_arguments(t, PluginArgs{}, StepIds{1, 0, "n1", 5, 6}, "/w", &args), "");
  std::vector<std::string> mounts(args.begin() + 8, args.begin() + 14);
  EXPECT_EQ(mounts, (std::vector<std::string>{"--tmpfs", "/t:size=1m,noexec", "--tmpfs", "/u", "-v",
                                              "/d:/t/d"}));
}

TEST(SlurmOptions, FlagPairsConflict) {
  Options o;
  EXPECT_EQ(apply(&o, "container-mount-home"), "");
  EXPECT_EQ(apply(&o, "container-mount-home"), "");
  EXPECT_EQ(apply(&o, "no-container-mount-home"),
            "--container-mount-home: both --container-mount-home and its opposite were given");
  Options p;
  EXPECT_EQ(apply(&p, "container-readonly"), "");
  EXPECT_EQ(p.writable, false);
}

TEST(SlurmOptions, EnvList) {
  Options o;
  EXPECT_EQ(apply(&o, "container-env", "A,B"), "");
  EXPECT_EQ(o.env_names, (std::vector<std::string>{"A", "B"}));
  Options p;
  EXPECT_EQ(apply(&p, "container-env", "A,"), "--container-env: empty item in 'A,'");
}

TEST(SlurmOptions, EnvironmentFormsFillOnlyWhatWasNotGiven) {
  g_env = {{"PYXIS_CONTAINER_IMAGE", "pyxis:1"},
           {"BERTH_CONTAINER_WORKDIR", "/w"},
           {"PYXIS_CONTAINER_WORKDIR", "/p"},
           {"PYXIS_CONTAINER_REMAP_ROOT", "y"},
           {"PYXIS_CONTAINER_MOUNTS", "/x"}};
  Options o;
  EXPECT_EQ(apply(&o, "container-mounts", "/given"), "");
  EXPECT_EQ(apply_environment(&o, fake_getenv), "");
  EXPECT_EQ(o.image, "pyxis:1");
  EXPECT_EQ(o.workdir, "/w");  // BERTH_ before PYXIS_
  EXPECT_EQ(o.remap_root, true);
  EXPECT_EQ(o.mounts, (std::vector<std::string>{"/given"}));

  g_env = {{"BERTH_CONTAINER_MOUNT_HOME", "maybe"}};
  Options p;
  EXPECT_EQ(apply_environment(&p, fake_getenv),
            "BERTH_CONTAINER_MOUNT_HOME=maybe: expected 1, true, yes, y, 0, false, no or n");
  g_env = {{"PYXIS_CONTAINER_NAME", "x:bad"}};
  Options q;
  EXPECT_EQ(apply_environment(&q, fake_getenv),
            "PYXIS_CONTAINER_NAME: --container-name: unknown flag 'bad' (auto, create, exec or "
            "no_exec)");
  g_env.clear();
}

TEST(SlurmOptions, PluginArguments) {
  PluginArgs a;
  EXPECT_EQ(parse_plugin_args({"runtime_path=/run/x", "container_scope=job",
                               "execute_entrypoint=true", "use_squashfuse=1"},
                              &a),
            "");
  EXPECT_EQ(a.runtime_path, "/run/x");
  EXPECT_TRUE(a.job_scope);
  EXPECT_TRUE(a.execute_entrypoint);
  EXPECT_EQ(parse_plugin_args({"colour=blue"}, &a),
            "unknown plugstack argument 'colour=blue' (berth, runtime_path, execute_entrypoint, "
            "container_scope, sbatch_support, use_enroot_load, use_squashfuse, container_mpi, "
            "site_conf, root_emulation)");
  EXPECT_EQ(a.root_emulation, "seccomp");  // pyxis's remap-root: enroot's filter
  EXPECT_EQ(parse_plugin_args({"root_emulation=policy"}, &a), "");
  EXPECT_EQ(a.root_emulation, "policy");
  EXPECT_EQ(parse_plugin_args({"root_emulation=maybe"}, &a),
            "plugstack argument root_emulation=maybe: expected seccomp, subids, auto, none or "
            "policy");
  EXPECT_EQ(parse_plugin_args({"container_scope=node"}, &a),
            "plugstack argument container_scope=node: expected job or global");
  EXPECT_EQ(parse_plugin_args({"berth=relative"}, &a),
            "plugstack argument berth=relative: expected an absolute path");
}

TEST(SlurmOptions, ContainerMpiOptionSiteDefaultAndEnvironment) {
  StepIds mpi_step{12, 3, "n1", 1000, 100};
  mpi_step.mpi_step = true;
  StepIds plain = mpi_step;
  plain.mpi_step = false;
  PluginArgs none, site, typed;
  EXPECT_EQ(parse_plugin_args({"container_mpi=true", "site_conf=/etc/berth/slurm.conf"}, &site),
            "");
  EXPECT_EQ(site.site_conf, "/etc/berth/slurm.conf");
  EXPECT_EQ(parse_plugin_args({"container_mpi=cray-mpich"}, &typed), "");
  EXPECT_EQ(parse_plugin_args({"container_mpi=a b"}, &typed),
            "plugstack argument container_mpi=a b: expected true, false or an MPI type");
  EXPECT_EQ(parse_plugin_args({"site_conf=x.conf"}, &typed),
            "plugstack argument site_conf=x.conf: expected an absolute path");

  // Not asked for, no site default: nothing; the site's default only for MPI steps.
  Options o;
  EXPECT_EQ(mpi_argument(o, none, mpi_step), "");
  EXPECT_EQ(mpi_argument(o, site, mpi_step), "--mpi");
  EXPECT_EQ(mpi_argument(o, site, plain), "");
  EXPECT_EQ(mpi_argument(o, typed, mpi_step), "--mpi=cray-mpich");
  // The option, with or without TYPE, in any step; --no-container-mpi over the site's default.
  EXPECT_EQ(apply(&o, "container-mpi", nullptr), "");
  EXPECT_EQ(apply(&o, "container-mpi", ""), "");  // slurmstepd's repeat of an empty argument
  EXPECT_EQ(mpi_argument(o, none, plain), "--mpi");
  EXPECT_EQ(mpi_argument(o, typed, plain), "--mpi");  // the user's plain one: mpi_default
  Options t;
  EXPECT_EQ(apply(&t, "container-mpi", "mpich"), "");
  EXPECT_EQ(mpi_argument(t, none, plain), "--mpi=mpich");
  EXPECT_EQ(apply(&t, "container-mpi", "openmpi"),
            "--container-mpi: given twice with different values ('mpich', 'openmpi')");
  EXPECT_EQ(apply(&t, "no-container-mpi"),
            "--container-mpi: both --container-mpi and its opposite were given");
  Options off;
  EXPECT_EQ(apply(&off, "no-container-mpi"), "");
  EXPECT_EQ(mpi_argument(off, site, mpi_step), "");
  EXPECT_EQ(apply(&off, "container-mpi", "../x"),
            "--container-mpi: '../x' is not an MPI type name");

  std::vector<std::string> args;
  o.image = "img";
  EXPECT_EQ(run_arguments(o, none, plain, "/", &args), "");
  EXPECT_NE(std::find(args.begin(), args.end(), "--mpi"), args.end());

  // BERTH_CONTAINER_MPI: a boolean or the TYPE, only when the option was not given.
  for (auto [value, want] : std::vector<std::pair<std::string, std::string>>{
           {"1", "--mpi"}, {"mpich", "--mpi=mpich"}, {"false", ""}}) {
    g_env = {{"BERTH_CONTAINER_MPI", value}};
    Options e;
    EXPECT_EQ(apply_environment(&e, fake_getenv), "");
    EXPECT_EQ(mpi_argument(e, site, mpi_step), want) << value;
  }
  g_env = {{"BERTH_CONTAINER_MPI", "mpich"}};
  EXPECT_EQ(apply_environment(&off, fake_getenv), "");
  EXPECT_EQ(mpi_argument(off, site, mpi_step), "");
  g_env.clear();
}

TEST(SlurmOptions, ImagesAsBerthTakesThem) {
  std::string out;
  EXPECT_EQ(berth_image("nvcr.io#nvidia/pytorch:24.01", "/home/u", &out), "");
  EXPECT_EQ(out, "nvcr.io/nvidia/pytorch:24.01");
  EXPECT_EQ(berth_image("docker://ubuntu:22.04", "/home/u", &out), "");
  EXPECT_EQ(out, "ubuntu:22.04");
  EXPECT_EQ(berth_image("ubuntu@sha256:abcd", "/home/u", &out), "");
  EXPECT_EQ(out, "ubuntu@sha256:abcd");
  EXPECT_EQ(berth_image("./img.sqsh", "/home/u", &out), "");
  EXPECT_EQ(out, "/home/u/./img.sqsh");
  EXPECT_EQ(berth_image("/sq/img.sqsh", "/home/u", &out), "");
  EXPECT_EQ(out, "/sq/img.sqsh");
  EXPECT_NE(berth_image("dockerd://ubuntu", "/", &out), "");
  // pyxis's USER@: the login that pulls it; the reference without it.
  std::string user = "stale";
  EXPECT_EQ(berth_image("alice@nvcr.io#nvidia/pytorch", "/", &out, &user), "");
  EXPECT_EQ(out, "nvcr.io/nvidia/pytorch");
  EXPECT_EQ(user, "alice");
  EXPECT_EQ(berth_image("bob@ubuntu:22.04", "/", &out, &user), "");
  EXPECT_EQ(out, "ubuntu:22.04");
  EXPECT_EQ(user, "bob");
  EXPECT_EQ(berth_image("bob@reg:5000#app@sha256:abcd", "/", &out, &user), "");
  EXPECT_EQ(out, "reg:5000/app@sha256:abcd");
  EXPECT_EQ(user, "bob");
  EXPECT_EQ(berth_image("ubuntu@sha256:abcd", "/", &out, &user), "");
  EXPECT_EQ(user, "");  // a digest, not a user
  EXPECT_EQ(berth_image("@ubuntu", "/", &out, &user),
            "--container-image: '@ubuntu': '' is not a user name");
  EXPECT_EQ(berth_image("a/b@ubuntu", "/", &out, &user),
            "--container-image: 'a/b@ubuntu': 'a/b' is not a user name");
  Options o;
  o.image = "carol@reg#x:1";
  EXPECT_EQ(image_user(o), "carol");
  o.image = "./carol@x.sqsh";  // a file's name, not a user
  EXPECT_EQ(image_user(o), "");
}

TEST(SlurmOptions, RunArguments) {
  Options o;
  o.image = "reg:5000/e2e/busybox:1.0";
  o.mounts = {"/data:/in:ro", "rel"};
  o.workdir = "/in";
  o.env_names = {"A"};
  PluginArgs a;
  StepIds ids{12, 3, "n1", 1000, 100};
  std::vector<std::string> args;
  EXPECT_EQ(run_arguments(o, a, ids, "/home/u", &args), "");
  EXPECT_EQ(args, (std::vector<std::string>{"run",
                                            "-d",
                                            "--name",
                                            "slurm-12.3.n1",
                                            "-u",
                                            "1000:100",
                                            "--root-emulation=seccomp",
                                            "--no-bind-home",
                                            "-v",
                                            "/data:/in:ro",
                                            "-v",
                                            "/home/u/rel:/home/u/rel",
                                            "--env=A",
                                            "--env=NVIDIA_VISIBLE_DEVICES=void",
                                            "--entrypoint",
                                            "/bin/sh",
                                            "--",
                                            "reg:5000/e2e/busybox:1.0",
                                            "-c",
                                            "kill -STOP $$; exit 0"}));
  o.remap_root = true;
  o.entrypoint = true;
  o.mounts.clear();
  o.workdir.clear();
  o.env_names.clear();
  o.name = "keep";
  a.job_scope = true;
  EXPECT_EQ(run_arguments(o, a, ids, "/home/u", &args), "");
  EXPECT_EQ(args, (std::vector<std::string>{
                      "run", "-d", "--name", "12_keep.n1", "-u", "0:0", "--root-emulation=seccomp",
                      "--no-bind-home", "--env=NVIDIA_VISIBLE_DEVICES=void", "--",
                      "reg:5000/e2e/busybox:1.0", "/bin/sh", "-c", "kill -STOP $$; exit 0"}));
  EXPECT_EQ(container_name(Options{}, PluginArgs{}, StepIds{7, kBatchStep, "n2", 0, 0}),
            "slurm-7.batch.n2");
  // Node-unique also when named (nodes sharing a home share a store); a node name's odd
  // characters do not make an invalid container name.
  Options named;
  named.name = "train";
  EXPECT_EQ(container_name(named, PluginArgs{}, StepIds{7, 1, "gpu[3]", 0, 0}), "train.gpu-3-");
  // pyxis's JOB.STEP names a step's unnamed container, whatever the scope.
  named.name = "7.0";
  PluginArgs job_scope;
  job_scope.job_scope = true;
  EXPECT_EQ(container_name(named, job_scope, StepIds{7, 1, "n1", 0, 0}), "slurm-7.0.n1");
  named.name = "7.batch";
  EXPECT_EQ(container_name(named, PluginArgs{}, StepIds{7, 1, "n1", 0, 0}), "slurm-7.batch.n1");
  for (const char* other : {"7.", ".0", "7.0.1", "7a.0", "v1.2"}) {
    named.name = other;
    EXPECT_EQ(container_name(named, PluginArgs{}, StepIds{7, 1, "n1", 0, 0}),
              std::string(other) + ".n1");
  }
}

}  // namespace
}  // namespace berth::slurm

namespace berth::slurm {
namespace {

TEST(SlurmOptions, AnImageOrANameIsNeverAnOptionOfBerths) {
  // --container-image=--help reached `berth run` as its --help (and berth printed its help
  // instead of running anything): images and names starting with '-' are refused, and every
  // argument of berth run's that comes from the user is one word or follows a "--".
  Options o;
  EXPECT_EQ(apply(&o, "container-image", "--help"),
            "--container-image: '--help' is not an image (it starts with '-')");
  EXPECT_EQ(apply(&o, "container-name", "-x:create"),
            "--container-name: '-x' is not a valid name (it starts with '-')");
  g_env = {{"PYXIS_CONTAINER_IMAGE", "--privileged"}};
  EXPECT_EQ(apply_environment(&o, fake_getenv),
            "PYXIS_CONTAINER_IMAGE: --container-image: '--privileged' is not an image (it starts "
            "with '-')");
  g_env.clear();
  std::string out;
  EXPECT_EQ(berth_image("docker://-x", "/", &out),
            "--container-image: 'docker://-x': the image '-x' starts with '-'");
  EXPECT_EQ(berth_image("alice@--help", "/", &out),
            "--container-image: 'alice@--help': the image '--help' starts with '-'");
  Options e;
  e.image = "busybox";
  EXPECT_EQ(apply(&e, "container-env", "--help"), "");
  std::vector<std::string> args;
  EXPECT_EQ(run_arguments(e, PluginArgs{}, StepIds{1, 0, "n1", 5, 6}, "/w", &args), "");
  EXPECT_NE(std::find(args.begin(), args.end(), "--env=--help"), args.end());
  auto dashes = std::find(args.begin(), args.end(), "--");
  ASSERT_NE(dashes, args.end());
  EXPECT_EQ(*(dashes + 1), "busybox");
}

TEST(SlurmOptions, AHomeRemappedToRootIsBoundAtRoot) {
  Options o;
  o.image = "busybox";
  o.mount_home = true;
  StepIds ids{1, 0, "n1", 5, 6};
  ids.home = "/home/u";
  std::vector<std::string> args;
  EXPECT_EQ(run_arguments(o, PluginArgs{}, ids, "/w", &args), "");
  EXPECT_EQ(std::count(args.begin(), args.end(), "--bind-home"), 1);
  EXPECT_EQ(std::count(args.begin(), args.end(), "--env=HOME=/home/u"), 0);  // --bind-home's
  o.mount_home = false;  // HOME stays the job's, as in enroot's containers
  EXPECT_EQ(run_arguments(o, PluginArgs{}, ids, "/w", &args), "");
  EXPECT_EQ(std::count(args.begin(), args.end(), "--env=HOME=/home/u"), 1);
  o.mount_home = true;
  o.remap_root = true;  // enroot's: the remapped user's home, /root
  EXPECT_EQ(run_arguments(o, PluginArgs{}, ids, "/w", &args), "");
  EXPECT_EQ(std::count(args.begin(), args.end(), "--bind-home"), 0);
  auto v = std::find(args.begin(), args.end(), "-v");
  ASSERT_NE(v, args.end());
  EXPECT_EQ(*(v + 1), "/home/u:/root");
}

TEST(SlurmOptions, AWorkdirIsTheTasksOwnAndMayBeRelative) {
  // pyxis's: each task changes to it once inside (relative: against the root), and a missing
  // one fails; berth run -w would make it.
  Options o;
  EXPECT_EQ(apply(&o, "container-workdir", "../"), "");
  EXPECT_EQ(o.workdir, "../");
  EXPECT_EQ(apply(&o, "container-workdir", "../"), "");  // Slurm's repeat
  Options e;
  EXPECT_EQ(apply(&e, "container-workdir", ""), "--container-workdir: the path is empty");
  o.image = "busybox";
  std::vector<std::string> args;
  EXPECT_EQ(run_arguments(o, PluginArgs{}, StepIds{1, 0, "n1", 5, 6}, "/w", &args), "");
  EXPECT_EQ(std::count(args.begin(), args.end(), "-w"), 0);
}

TEST(SlurmOptions, WithTheEntrypointLogTheHolderSaysItIsUp) {
  Options o;
  o.image = "busybox";
  o.entrypoint_log = true;
  std::vector<std::string> args;
  EXPECT_EQ(run_arguments(o, PluginArgs{}, StepIds{1, 0, "n1", 5, 6}, "/w", &args), "");
  EXPECT_EQ(args.back(),
            "echo 'berth: the holder is up'; echo 'berth: the holder is up' >&2; kill -STOP $$; "
            "exit 0");
}

TEST(SlurmOptions, MasterPortIsEnrootsOnePerJob) {
  EXPECT_EQ(master_port(0), 61000u);
  EXPECT_EQ(master_port(4535), 65535u);
  EXPECT_EQ(master_port(4536), 61000u);
  EXPECT_EQ(master_port(10738754), 61000u + 10738754u % 4536u);
}

TEST(SlurmOptions, NotYetIsAnErrorNeverIgnored) {
  Options o;
  EXPECT_EQ(apply(&o, "container-save", "./out.sqsh"), "");
  EXPECT_EQ(apply(&o, "container-save", "./out.sqsh"), "");  // Slurm's repeat
  EXPECT_EQ(o.save, "./out.sqsh");
  EXPECT_EQ(apply(&o, "container-save", "/other.sqsh"),
            "--container-save: given twice with different values ('./out.sqsh', '/other.sqsh')");
  Options dir;
  EXPECT_EQ(apply(&dir, "container-save", "/out/"), "--container-save: '/out/' is a directory");
  EXPECT_EQ(apply(&o, "container-unshare", "net,ipc,uts"), "");
  Options p;
  EXPECT_EQ(apply(&p, "container-unshare", "pid"),
            "--container-unshare: unknown namespace 'pid' (net, ipc, uts)");
  PluginArgs a;
  EXPECT_EQ(parse_plugin_args({"importer=/usr/bin/x"}, &a),
            "plugstack argument importer=: not supported: Berth imports images into its own "
            "store (a site shares them through the policy's central_store)");
}

TEST(SlurmOptions, RunArgumentsForSquashfsAndUnshare) {
  Options o;
  o.image = "./img.sqsh";
  o.unshare = {"net"};
  o.writable = true;
  std::vector<std::string> args;
  EXPECT_EQ(run_arguments(o, PluginArgs{}, StepIds{1, 0, "n1", 5, 6}, "/w", &args), "");
  EXPECT_EQ(args,
            (std::vector<std::string>{
                "run", "-u", "5:6", "--root-emulation=seccomp", "--no-bind-home", "--writable",
                "--env=NVIDIA_VISIBLE_DEVICES=void", "--network", "none", "--entrypoint", "/bin/sh",
                "--", "/w/./img.sqsh", "-c", "kill -STOP $$; exit 0"}));
  StepIds gpu_step{1, 0, "n1", 5, 6};
  gpu_step.gpus = true;
  EXPECT_EQ(run_arguments(o, PluginArgs{}, gpu_step, "/w", &args), "");
  EXPECT_EQ(std::count(args.begin(), args.end(), "--gpus=all"), 1);
  // Saved or named: a container extracted from the file (berth run -d --name), which is
  // writable anyway (no --writable: that is for runs on the shared mount).
  o.save = "out.sqsh";
  o.unshare.clear();
  EXPECT_EQ(run_arguments(o, PluginArgs{}, StepIds{1, 2, "n1", 5, 6}, "/w", &args), "");
  EXPECT_EQ(args,
            (std::vector<std::string>{
                "run", "-d", "--name", "slurm-1.2.n1", "-u", "5:6", "--root-emulation=seccomp",
                "--no-bind-home", "--env=NVIDIA_VISIBLE_DEVICES=void", "--entrypoint", "/bin/sh",
                "--", "/w/./img.sqsh", "-c", "kill -STOP $$; exit 0"}));
  o.save.clear();
  o.name = "n";
  EXPECT_EQ(run_arguments(o, PluginArgs{}, StepIds{1, 2, "n1", 5, 6}, "/w", &args), "");
  EXPECT_EQ(std::vector<std::string>(args.begin(), args.begin() + 4),
            (std::vector<std::string>{"run", "-d", "--name", "n.n1"}));
  EXPECT_EQ(std::count(args.begin(), args.end(), "--writable"), 0);
  // ipc: a namespace of its own; uts: one that keeps the node's host name.
  Options u;
  u.image = "busybox";
  u.unshare = {"ipc", "uts"};
  StepIds host{1, 0, "n1", 5, 6};
  host.hostname = "node07";
  EXPECT_EQ(run_arguments(u, PluginArgs{}, host, "/w", &args), "");
  std::vector<std::string> tail(args.begin() + 9, args.end());
  EXPECT_EQ(tail,
            (std::vector<std::string>{"--ipc", "private", "--hostname", "node07", "--entrypoint",
                                      "/bin/sh", "--", "busybox", "-c", "kill -STOP $$; exit 0"}));
}

TEST(SlurmOptions, TheStepsGresAndNothingElse) {
  StepIds ids{1, 0, "n1", 5, 6};
  // No GRES: no GPU, whatever the image's NVIDIA_VISIBLE_DEVICES or the job's say.
  EXPECT_EQ(gpu_argument(ids), "--env=NVIDIA_VISIBLE_DEVICES=void");
  ids.visible_devices = "0";
  EXPECT_EQ(gpu_argument(ids), "--env=NVIDIA_VISIBLE_DEVICES=void");
  // GRES: all of the step's GPUs (berth's pool is CUDA_VISIBLE_DEVICES), or the job's own
  // NVIDIA_VISIBLE_DEVICES within them.
  ids.gpus = true;
  ids.visible_devices.reset();
  EXPECT_EQ(gpu_argument(ids), "--gpus=all");
  ids.visible_devices = "0";
  EXPECT_EQ(gpu_argument(ids), "--gpus=device=0");
  ids.visible_devices = " 1,GPU-abc ";
  EXPECT_EQ(gpu_argument(ids), "--gpus=device=1,GPU-abc");
  ids.visible_devices = "all";
  EXPECT_EQ(gpu_argument(ids), "--gpus=all");
  ids.visible_devices = "none";
  EXPECT_EQ(gpu_argument(ids), "--gpus=none");
  ids.visible_devices = "void";
  EXPECT_EQ(gpu_argument(ids), "--env=NVIDIA_VISIBLE_DEVICES=void");
  ids.visible_devices = "";
  EXPECT_EQ(gpu_argument(ids), "--env=NVIDIA_VISIBLE_DEVICES=void");
}

TEST(SlurmOptions, PyxisMountFlagsHaveTheirMeaning) {
  // enroot's flags that pyxis passes through: berth run -v's options ('+' becomes ',').
  Options o;
  o.image = "busybox";
  EXPECT_EQ(apply(&o, "container-mounts",
                  "/d:/in:ro+nosuid+nodev+noexec+rslave,/e:/e:x-create=dir+unbindable,"
                  "/f:/new/f:x-create=file+rbind,tmpfs:/t:huge=within_size+x-create=dir"),
            "");
  std::vector<std::string> args;
  EXPECT_EQ(run_arguments(o, PluginArgs{}, StepIds{1, 0, "n1", 5, 6}, "/w", &args), "");
  std::vector<std::string> mounts(args.begin() + 8, args.begin() + 16);
  EXPECT_EQ(mounts, (std::vector<std::string>{"-v", "/d:/in:ro,nosuid,nodev,noexec,rslave", "-v",
                                              "/e:/e:rw,unbindable", "-v", "/f:/new/f", "--tmpfs",
                                              "/t:huge=within_size"}));
}

TEST(SlurmOptions, UmountTakesAwayTheHomeTheStepBinds) {
  StepIds ids{1, 0, "n1", 5, 6};
  ids.home = "/home/u";
  Options o;
  o.image = "busybox";
  o.mount_home = true;
  EXPECT_EQ(apply(&o, "container-mounts", "umount:/home/u/"), "");
  std::vector<std::string> args;
  EXPECT_EQ(run_arguments(o, PluginArgs{}, ids, "/w", &args), "");
  EXPECT_EQ(std::count(args.begin(), args.end(), "--bind-home"), 0);
  EXPECT_EQ(std::count(args.begin(), args.end(), "--no-bind-home"), 1);
  // Remapped root's home is at /root.
  o.remap_root = true;
  o.mounts = {"umount:/root"};
  EXPECT_EQ(run_arguments(o, PluginArgs{}, ids, "/w", &args), "");
  EXPECT_EQ(std::count(args.begin(), args.end(), "/home/u:/root"), 0);
  o.mounts = {"umount:/home/u"};
  EXPECT_EQ(run_arguments(o, PluginArgs{}, ids, "/w", &args),
            "--container-mounts: 'umount:/home/u': the step makes no mount at /home/u to take "
            "away (its only one is the home, at /root; Berth mounts no site fstab)");
  o.mount_home = false;
  EXPECT_EQ(run_arguments(o, PluginArgs{}, ids, "/w", &args),
            "--container-mounts: 'umount:/home/u': the step makes no mount at /home/u to take "
            "away (its only one would be the home, with --container-mount-home; Berth mounts no "
            "site fstab)");
}

}  // namespace
}  // namespace berth::slurm

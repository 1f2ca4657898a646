"""The Slurm plugin (spank_berth.so), end to end: srun and sbatch as the unprivileged user on a
one-host cluster (tests/e2e/slurm.py), pyxis's options, images from the local registry."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest

import imagelib
from test_gpu import UUID0, UUID1, fake_host_env
from test_squashfs_run import fuse_procs, make_tree, mksquashfs, mounts, wait_for


@pytest.fixture(scope="module")
def sqsh_image(scratch, usable_fuse) -> str:
    """A squashfs image (busybox, /etc/motd "motd from the image"), made as test_squashfs_run
    makes its plain one, in a folder of this module's own."""
    for tool in ("mksquashfs", "squashfuse_ll", "fusermount3"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    d = os.path.join(scratch, "slurm-sqsh")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    tree = os.path.join(d, "tree")
    if not os.path.isdir(tree):
        make_tree(tree, None)
    return mksquashfs(tree, os.path.join(d, "plain.sqsh"))


class Slurm:
    """Runs Slurm's clients as the test user, in the test's folder, with its berth store."""

    def __init__(self, berth, cluster):
        self.berth, self.cluster = berth, cluster

    def env(self, extra: dict | None = None) -> dict:
        env = dict(self.berth.env)
        env.update(self.cluster.env())
        env.update(extra or {})
        return env

    def command(self, tool: str, *args) -> list[str]:
        """`tool ARGS` as the test user, on the cluster's node (its release's own clients)."""
        return self.cluster.command(self.berth.identity.prefix + [tool, *map(str, args)],
                                    self.berth.workdir)

    def __call__(self, tool: str, *args, env: dict | None = None, timeout: float = 120):
        """Runs `tool ARGS`; returns (rc, stdout, stderr)."""
        r = subprocess.run(self.command(tool, *args), env=self.env(env), cwd=self.berth.workdir,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def srun(self, *args, **kw):
        return self("srun", "-N1", "-w", "n1", *args, **kw)

    def ok(self, *args, **kw) -> str:
        rc, out, err = self.srun(*args, **kw)
        assert rc == 0, f"srun {' '.join(map(str, args))} exited {rc}\nstdout:\n{out}\nstderr:\n{err}"
        return out

    def popen(self, tool: str, *args) -> subprocess.Popen:
        return subprocess.Popen(self.command(tool, *args), env=self.env(), cwd=self.berth.workdir,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


@pytest.fixture
def sl(berth, cluster) -> Slurm:
    return Slurm(berth, cluster)


def cmdline(pid) -> str:
    """PID and its command line, for a message ("" when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f"{pid} " + f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def real_uid(pid) -> int | None:
    """PID's real user ID (a process that changed its IDs has a /proc folder of root's)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    except (OSError, StopIteration):
        return None


def kill_stepd(step: str) -> None:
    """SIGKILLs the slurmstepd of STEP ("JOB.STEP"), as a node-side crash would."""
    stepd = subprocess.run(["pgrep", "-f", rf"^slurmstepd: \[{step}\]"],
                           capture_output=True, text=True).stdout.split()
    assert stepd, f"no slurmstepd for step {step}"
    for pid in stepd:
        os.kill(int(pid), 9)


def step_processes(berth) -> list[str]:
    """The test user's processes that belong to this test: its berth commands (its BERTH_HOME),
    its job's tasks and the plugin's holders (other tests share the user)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != berth.identity.uid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if (f"BERTH_HOME={berth.berth_home}".encode() in env or "kill -STOP" in args
                or b"SLURM_JOB_NAME=tocancel" in env):
            found.append(f"{pid} {args}")
    return found


def task_runs(berth, command: str) -> bool:
    """Whether a process of this test runs COMMAND ("busybox sleep 300", argv[0] found on the
    PATH): the task's own, not the srun whose line names it (which runs before the step's
    container is up)."""
    want = command.split()
    for line in step_processes(berth):
        argv = line.split()[1:]
        if argv and [os.path.basename(argv[0])] + argv[1:] == want:
            return True
    return False


def test_srun_runs_the_tasks_in_the_image(sl, pushed_busybox):
    out = sl.ok("-n2", f"--container-image={pushed_busybox}", "cat", "/etc/motd")
    assert out == "hello from berth e2e\n" * 2
    # Both tasks share the step's one container: the same mount namespace.
    out = sl.ok("-n2", f"--container-image={pushed_busybox}", "busybox", "readlink", "/proc/self/ns/mnt")
    lines = out.split()
    assert len(lines) == 2 and lines[0] == lines[1]
    # As the user, with Slurm's variables passed through.
    out = sl.ok(f"--container-image={pushed_busybox}", "sh", "-c", "busybox id -u; echo $SLURM_JOB_ID")
    uid, job = out.split()
    assert uid == str(sl.berth.identity.uid) and job.isdigit()


def test_without_an_image_the_plugin_does_nothing(sl):
    assert sl.ok("cat", "/etc/debian_version")  # the host's file


def test_mounts_workdir_and_env(sl, pushed_busybox):
    data = sl.berth.make_dir("data")
    sl.berth.write_file("data/f", "from the host\n")
    out = sl.ok(f"--container-image={pushed_busybox}", f"--container-mounts={data}:/in:ro",
                "--container-workdir=/in", "--container-env=PICK", "sh", "-c",
                "pwd; cat f; echo $PICK; busybox touch g 2>/dev/null || echo read-only",
                env={"PICK": "chosen"})
    assert out == "/in\nfrom the host\nchosen\nread-only\n"


def test_a_relative_workdir_is_the_roots_and_a_missing_one_fails(sl, pushed_busybox):
    # pyxis's: a relative --container-workdir is taken inside the root (".." stays in it), and
    # a directory that is not there fails the step rather than being made.
    image = f"--container-image={pushed_busybox}"
    assert sl.ok(image, "--container-workdir=../", "sh", "-c", "pwd") == "/\n"
    assert sl.ok(image, "--container-workdir=etc", "sh", "-c", "pwd") == "/etc\n"
    rc, _, err = sl.srun(image, "--container-workdir=/nonexistent", "true")
    assert rc == 1
    assert ("berth: error: chdir to working directory: /nonexistent: No such file or "
            "directory") in err


def test_environment_forms(sl, pushed_busybox):
    # PYXIS_CONTAINER_IMAGE without the option; BERTH_CONTAINER_WORKDIR wins over PYXIS_'s.
    out = sl.ok("sh", "-c", "pwd", env={"PYXIS_CONTAINER_IMAGE": pushed_busybox,
                            "PYXIS_CONTAINER_WORKDIR": "/etc",
                            "BERTH_CONTAINER_WORKDIR": "/bin"})
    assert out == "/bin\n"
    out = sl.ok("cat", "/etc/motd", env={"BERTH_CONTAINER_IMAGE": pushed_busybox})
    assert out == "hello from berth e2e\n"
    # Only in the job's environment, not srun's: slurmstepd reads it (spank_getenv), the path
    # jobs submitted through slurmrestd take.
    out = sl.ok(f"--export=ALL,BERTH_CONTAINER_IMAGE={pushed_busybox}", "cat", "/etc/motd")
    assert out == "hello from berth e2e\n"


def test_named_container_is_reused_across_steps(sl, pushed_busybox):
    sl.ok(f"--container-image={pushed_busybox}", "--container-name=keep", "sh", "-c",
          "echo kept > /mark")
    out = sl.ok("--container-name=keep", "cat", "/mark")
    assert out == "kept\n"
    rc, _, err = sl.srun("--container-name=keep:create", f"--container-image={pushed_busybox}",
                         "true")
    assert rc != 0
    assert "berth: error: container 'keep' already exists (--container-name=keep:create)" in err
    rc, _, err = sl.srun("--container-name=nothere", "true")
    assert rc != 0
    assert ("berth: error: a container with name 'nothere' does not exist, and "
            "--container-image is not set") in err


def test_errors_reach_the_exit_status(sl, registry):
    # A bad option: srun itself refuses it.
    rc, _, err = sl.srun("--container-image=x", "--container-name=a:sometimes", "true")
    assert rc != 0
    assert "--container-name: unknown flag 'sometimes' (auto, create, exec or no_exec)" in err
    # A failure on the node (no such image): the task fails with Berth's one line.
    rc, _, err = sl.srun(f"--container-image={registry.host}/e2e/absent:1", "true")
    assert rc == 1
    assert "berth: error: " in err and "absent" in err


def test_a_failed_start_says_why_once_per_task_and_leaves_no_container(sl, pushed_busybox):
    rc, _, err = sl.srun("-n2", f"--container-image={pushed_busybox}",
                         "--container-mounts=/nonexistent:/x", "true")
    assert rc == 1
    lines = [line for line in err.splitlines() if line.startswith("berth: error:")]
    assert sorted(lines) == [
        "berth: error: mount volume /nonexistent:/x: bind source path does not exist",
        "berth: error: the container was not started successfully by another task: mount "
        "volume /nonexistent:/x: bind source path does not exist"]
    assert "slurm-" not in sl.berth("ps", "-a", "--format", "{{.Names}}")[1]


def test_sbatch_runs_the_script_in_the_image(sl, pushed_busybox):
    script = sl.berth.write_file("job.sh", "#!/bin/sh\ncat /etc/motd\n", 0o755)
    out_file = sl.berth.path("job.out")
    rc, out, err = sl("sbatch", "--wait", "-w", "n1", f"--container-image={pushed_busybox}",
                      "-o", out_file, script)
    with open(out_file) as f:
        text = f.read()
    assert rc == 0, out + err + text
    assert text == "hello from berth e2e\n"


@pytest.mark.parametrize("kind", ["registry", "squashfs"])
def test_scancel_leaves_nothing_behind(sl, pushed_busybox, kind, request):
    image = pushed_busybox
    runtime = sl.berth.make_dir("runtime")
    sl.berth.env["BERTH_RUNTIME_DIR"] = runtime
    if kind == "squashfs":
        image = request.getfixturevalue("sqsh_image")
    before = set(step_processes(sl.berth))
    p = sl.popen("srun", "-N1", "-w", "n1", "-J", "tocancel", f"--container-image={image}",
                 "busybox", "sleep", "300")
    try:
        deadline = time.monotonic() + 60
        job = ""
        while time.monotonic() < deadline:
            _, out, _ = sl("squeue", "-h", "-n", "tocancel", "-t", "R", "-o", "%i")
            job = out.strip()
            if job and any("sleep 300" in line for line in step_processes(sl.berth)):
                break
            time.sleep(0.2)
        assert job, "the step did not start"
        sl("scancel", job)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = set(step_processes(sl.berth)) - before
        _, ps, _ = sl.berth("ps", "-a", "--format", "{{.Names}}", check=False)
        if not left and "slurm-" not in ps:
            break
        time.sleep(0.2)
    assert not left, left
    assert "slurm-" not in ps
    table = sl.cluster.node.mountinfo()  # the node's mounts (the host's, or its root's)
    with open(table) as f:
        assert sl.berth.berth_home not in f.read()
    assert wait_for(lambda: not mounts(runtime, table) and not fuse_procs(runtime)), (
        mounts(runtime, table), fuse_procs(runtime))


def test_two_nodes_each_have_their_container(sl, pushed_busybox):
    out = sl("srun", "-N2", "-n2", f"--container-image={pushed_busybox}", "sh", "-c",
             "cat /etc/motd; echo $SLURMD_NODENAME")
    assert out[0] == 0, out
    lines = sorted(out[1].splitlines())
    assert lines == ["hello from berth e2e", "hello from berth e2e", "n1", "n2"]


def test_remap_root_and_readonly(sl, pushed_busybox):
    assert sl.ok(f"--container-image={pushed_busybox}", "--container-remap-root",
                 "busybox", "id", "-u") == "0\n"
    assert sl.ok(f"--container-image={pushed_busybox}", "--no-container-remap-root",
                 "busybox", "id", "-u") == f"{sl.berth.identity.uid}\n"
    out = sl.ok(f"--container-image={pushed_busybox}", "--container-readonly", "sh", "-c",
                "echo x > /x 2>/dev/null || echo read-only")
    assert out == "read-only\n"


def test_squashfs_image(sl, sqsh_image):
    runtime = sl.berth.make_dir("runtime")
    sl.berth.env["BERTH_RUNTIME_DIR"] = runtime
    out = sl.ok("-n2", f"--container-image={sqsh_image}", "cat", "/etc/motd")
    assert out == "motd from the image\n" * 2
    table = sl.cluster.node.mountinfo()
    assert wait_for(lambda: not mounts(runtime, table) and not fuse_procs(runtime)), (
        mounts(runtime, table), fuse_procs(runtime))


def test_a_named_container_from_a_squashfs_file_keeps_files_across_a_jobs_steps(sl, sqsh_image):
    # enroot's create: the file (mksquashfs's, without Berth's image config) is extracted into
    # a container of the store under the step's name, which the job's next step joins again.
    steps = (f"srun --container-image={sqsh_image} --container-name=sq sh -c "
             "'echo kept > /mark' && srun --container-name=sq cat /mark /etc/motd")
    rc, out, err = sl("salloc", "-N1", "-w", "n1", "sh", "-c", steps)
    assert rc == 0, err
    assert out == "kept\nmotd from the image\n"
    names = sl.berth("ps", "-a", "--format", "{{.Names}} {{.Image}}")[1].splitlines()
    assert f"sq.n1 {sqsh_image}" in names
    # Extracted as a rootless unpack lays files out: root's 0600 file is the user's own.
    rootfs = sl.berth("inspect", "--format", "{{.rootfs}}", "sq.n1")[1].strip()
    st = os.stat(os.path.join(rootfs, "root", "secret"))
    assert (st.st_uid, st.st_mode & 0o777) == (sl.berth.identity.uid, 0o600)
    # :create refuses the name now, as for a registry image's container.
    rc, _, err = sl.srun(f"--container-image={sqsh_image}", "--container-name=sq:create", "true")
    assert rc != 0
    assert "berth: error: container 'sq' already exists (--container-name=sq:create)" in err


def test_user_at_picks_the_stored_login_of_that_user(sl, acl_registry):
    # pyxis's [USER@][REGISTRY#]IMAGE: alice and bob both logged in to the registry (bob last,
    # so his login is the default); only alice may pull. The step's pull takes USER's login.
    from conftest import BOB_PASSWORD, USERS
    img = imagelib.make_image([imagelib.busybox_layer(),
                               imagelib.Layer([imagelib.File("etc/owner", b"alice's\n")])])
    acl_registry.pusher("pusher", USERS["pusher"]).push_image("private/owned", "1", img)
    host = acl_registry.host
    for user, password in (("alice", USERS["alice"]), ("bob", BOB_PASSWORD)):
        sl.berth("login", "-u", user, "--password-stdin", host, input=password + "\n")
    rc, _, err = sl.srun(f"--container-image=bob@{host}#private/owned:1", "true")
    assert rc != 0
    assert "berth: error: pull" in err and "(HTTP 401)" in err, err
    rc, _, err = sl.srun(f"--container-image=carol@{host}#private/owned:1", "true")
    assert rc != 0
    assert f"no stored login of user 'carol' for {host}" in err, err
    out = sl.ok(f"--container-image=alice@{host}#private/owned:1", "cat", "/etc/owner")
    assert out == "alice's\n"


def test_an_unknown_plugstack_argument_fails_loudly(sl, cluster):
    cluster.write_plugstack("colour=blue")
    try:
        rc, _, err = sl.srun("true")
    finally:
        cluster.write_plugstack()
        cluster.recover()  # the job's epilog may have failed on it and drained its node
    assert rc != 0
    assert "berth: unknown plugstack argument 'colour=blue'" in err


def test_the_steps_gpus_and_only_those_are_injected(sl, pushed_busybox, cluster, scratch):
    # Slurm hands out the fake GRES (tty devices); berth injects the fabricated GPU host's
    # GPUs that CUDA_VISIBLE_DEVICES names, renumbered from 0 inside.
    if not cluster.gpus:
        pytest.skip("no /dev/tty0 and /dev/tty1 to stand in for GPUs")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the fake driver libraries")
    env = fake_host_env(os.path.join(scratch, "slurm-gpu-host"))
    show = ["sh", "-c", "echo $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES; ls /dev"]
    out = sl.ok("--gres=gpu:1", f"--container-image={pushed_busybox}", *show, env=env)
    first, devices = out.split("\n", 1)
    assert first == f"0 {UUID0}"
    assert "nvidia0" in devices.split() and "nvidia1" not in devices.split()
    # On two nodes, each task has its node's GPU as GPU 0.
    rc, out, err = sl("srun", "-N2", "-n2", "--gres=gpu:1", f"--container-image={pushed_busybox}",
                      "sh", "-c", "echo $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES", env=env)
    assert rc == 0, err
    assert out.splitlines() == [f"0 {UUID0}"] * 2
    # Without GPUs from Slurm, none are injected.
    out = sl.ok(f"--container-image={pushed_busybox}", *show, env=env)
    assert "nvidia0" not in out.split()


def test_a_step_gets_its_gres_narrowed_by_the_jobs_own_visible_devices(sl, registry, cluster,
                                                                        scratch):
    # A CUDA image says NVIDIA_VISIBLE_DEVICES=all: that never widens what Slurm gave the
    # step, and the job's own NVIDIA_VISIBLE_DEVICES picks within the step's GPUs.
    if not cluster.gpus:
        pytest.skip("no /dev/tty0 and /dev/tty1 to stand in for GPUs")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the fake driver libraries")
    img = imagelib.make_image([imagelib.busybox_layer()], config={"Env": [
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "NVIDIA_VISIBLE_DEVICES=all"]})
    registry.pusher().push_image("e2e/cuda-like", "1", img)
    image = f"--container-image={registry.host}/e2e/cuda-like:1"
    env = fake_host_env(os.path.join(scratch, "slurm-gpu-host"))
    show = ["sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES; ls /dev"]
    # No GRES: no GPU, whatever the image says.
    first, devices = sl.ok(image, *show, env=env).split("\n", 1)
    assert first == "void"
    assert "nvidia0" not in devices.split() and "nvidia1" not in devices.split()
    # Two GPUs from Slurm, the job's NVIDIA_VISIBLE_DEVICES=1: the second of them only.
    first, devices = sl.ok("--gres=gpu:2", image, *show,
                           env={**env, "NVIDIA_VISIBLE_DEVICES": "1"}).split("\n", 1)
    assert first == UUID1
    assert "nvidia1" in devices.split() and "nvidia0" not in devices.split()
    # One GPU from Slurm: the job cannot name one outside it.
    rc, _, err = sl.srun("--gres=gpu:1", image, "true",
                         env={**env, "NVIDIA_VISIBLE_DEVICES": "1"})
    assert rc != 0
    assert "berth: error:" in err, err


def test_remapped_root_keeps_cap_sys_admin_in_its_namespace(sl, pushed_busybox):
    # enroot's remapped root may mount and, in a UTS namespace of its own, set the host name.
    out = sl.ok("--container-remap-root", "--container-unshare=uts",
                f"--container-image={pushed_busybox}", "sh", "-c",
                "hostname berth-test && hostname && mkdir -p /tmp/m && "
                "mount -t tmpfs none /tmp/m && touch /tmp/m/f && echo mounted")
    assert out == "berth-test\nmounted\n"


def test_job_scope_names_are_removed_at_the_job_end(sl, cluster, pushed_busybox):
    cluster.write_plugstack("container_scope=job")
    try:
        rc, _, err = sl.srun(f"--container-image={pushed_busybox}", "--container-name=scoped",
                             "true")
        assert rc == 0, err
        # The job's epilog runs on the node after srun returned.
        names = ""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            names = sl.berth("ps", "-a", "--format", "{{.Names}}")[1]
            if "_scoped" not in names:
                break
            time.sleep(0.2)
        assert "_scoped" not in names
    finally:
        cluster.write_plugstack()
    # Global scope (the default): the name stays for later jobs (node-unique: NAME.NODE).
    sl.ok(f"--container-image={pushed_busybox}", "--container-name=kept", "true")
    time.sleep(1)
    assert "kept.n1" in sl.berth("ps", "-a", "--format", "{{.Names}}")[1].split()


@pytest.fixture(scope="module")
def entry_image(registry) -> str:
    """busybox with Env FROM_IMAGE/SHARED and an entrypoint that marks the environment and
    execs its arguments, as images' entrypoints do."""
    entry = imagelib.File("entry.sh", b'#!/bin/sh\nexport ENTRYPOINT_RAN=yes\nexec "$@"\n', 0o755)
    img = imagelib.make_image(
        [imagelib.busybox_layer(), imagelib.Layer([entry])],
        config={"Env": ["PATH=/bin", "FROM_IMAGE=image", "SHARED=image"],
                "Entrypoint": ["/entry.sh"], "WorkingDir": "/etc"})
    registry.pusher().push_image("e2e/entry", "1", img)
    return f"{registry.host}/e2e/entry:1"


def test_environment_precedence_and_entrypoint(sl, entry_image):
    show = ["sh", "-c", 'pwd; echo "$FROM_IMAGE $SHARED $HOST_ONLY ${ENTRYPOINT_RAN:-no}"']
    env = {"SHARED": "host", "HOST_ONLY": "host"}
    # The image wins for what it defines; host-only variables pass; WorkingDir is the cwd.
    out = sl.ok(f"--container-image={entry_image}", *show, env=env)
    assert out == "/etc\nimage image host no\n"
    # --container-env: the host's value wins for the names it lists.
    out = sl.ok(f"--container-image={entry_image}", "--container-env=SHARED", *show, env=env)
    assert out == "/etc\nimage host host no\n"
    # --container-entrypoint: the entrypoint runs before the tasks join (its exports reach them).
    out = sl.ok(f"--container-image={entry_image}", "--container-entrypoint", *show, env=env)
    assert out == "/etc\nimage image host yes\n"


def test_entrypoint_log_shows_the_entrypoints_output(sl, registry):
    # pyxis's --container-entrypoint-log prints enroot's log, the entrypoint's output in it;
    # Berth printed only its own stderr. Now the start's part of the container's log, once
    # (a named container restarted shows this start's output, not the last one's).
    entry = imagelib.File("talk.sh", b'#!/bin/sh\necho "entrypoint out $$"\n'
                          b'echo "entrypoint err" >&2\nexec "$@"\n', 0o755)
    img = imagelib.make_image([imagelib.busybox_layer(), imagelib.Layer([entry])],
                              config={"Env": ["PATH=/bin"], "Entrypoint": ["/talk.sh"]})
    registry.pusher().push_image("e2e/talk", "1", img)
    image = f"--container-image={registry.host}/e2e/talk:1"
    _, _, err = sl.srun(image, "--container-entrypoint", "true")
    assert "entrypoint out" not in err and "entrypoint err" not in err  # not asked for
    rc, out, err = sl.srun(image, "--container-entrypoint", "--container-entrypoint-log",
                           "--container-name=talker", "true")
    assert (rc, out) == (0, ""), err
    assert "berth: the holder is up" not in err
    first = [line for line in err.splitlines() if line.startswith("entrypoint")]
    assert sorted(line.split()[1] for line in first) == ["err", "out"]
    rc, _, err = sl.srun(image, "--container-entrypoint", "--container-entrypoint-log",
                         "--container-name=talker", "true")
    assert rc == 0, err
    again = [line for line in err.splitlines() if line.startswith("entrypoint")]
    assert sorted(line.split()[1] for line in again) == ["err", "out"]
    assert again != first  # this start's own (another shell's pid), the last one's left out
    sl.berth("rm", "-f", "talker.n1")


def test_salloc_then_srun(sl, pushed_busybox):
    rc, out, err = sl("salloc", "-N1", "-w", "n1", "srun", f"--container-image={pushed_busybox}",
                      "cat", "/etc/motd")
    assert rc == 0, err
    assert out == "hello from berth e2e\n"


def test_exec_attaches_to_a_running_named_container(sl, pushed_busybox):
    # A first job keeps the container 'live' running; a second joins it (NAME:exec), sees
    # what the first wrote, and ignores its mounts as pyxis does.
    first = sl.popen("srun", "-N1", "-w", "n1", "-J", "liveholder",
                     f"--container-image={pushed_busybox}",
                     "--container-name=live", "sh", "-c",
                     "echo from-first > /marker; busybox sleep 30")
    try:
        deadline = time.monotonic() + 60
        out = ""
        while time.monotonic() < deadline:
            rc, out, err = sl.srun("--container-name=live:exec", "--container-mounts=/tmp",
                                   "cat", "/marker")
            if rc == 0 and out:  # joined, and the first job's task has written the marker
                break
            time.sleep(0.3)
        assert out == "from-first\n", err
        assert "ignoring --container-mounts when attaching to a running container" in err
    finally:
        sl("scancel", "-n", "liveholder")
        try:
            first.wait(timeout=60)
        except subprocess.TimeoutExpired:
            first.kill()
            first.wait()


def allocation(sl, name: str) -> str:
    """The id of a job named NAME (a batch job that sleeps on n1), once it runs (60 s at most):
    an allocation for steps started with --jobid."""
    rc, out, err = sl("sbatch", "--parsable", "-N1", "-w", "n1", "-J", name, "--wrap",
                      "sleep 300")
    assert rc == 0, err
    job = out.strip().split(";")[0]
    wait_for(lambda: sl("squeue", "-h", "-j", job, "-t", "R", "-o", "%i")[1].strip(), timeout=60)
    return job


def test_job_step_names_a_running_unnamed_steps_container(sl, pushed_busybox):
    # pyxis's exec.bats: --container-name=JOB.STEP joins the running container of the job's
    # step STEP, which is unnamed (Berth's slurm-JOB.STEP.NODE).
    job = allocation(sl, "attachjob")
    first = None
    try:
        first = sl.popen("srun", f"--jobid={job}", "--overlap", "-w", "n1",
                         f"--container-image={pushed_busybox}", "sh", "-c",
                         "echo from-step-0 > /marker; busybox sleep 300")
        assert wait_for(lambda: task_runs(sl.berth, "busybox sleep 300"), timeout=60)
        rc, out, err = sl("srun", f"--jobid={job}", "--overlap", "-w", "n1",
                          f"--container-name={job}.0", "cat", "/marker")
        assert (rc, out) == (0, "from-step-0\n"), err
    finally:
        sl("scancel", job)
        if first is not None:
            first.wait(timeout=60)


def test_mount_home(sl, pushed_busybox):
    sl.berth.write_file("home/note", "in the home\n")
    note = os.path.join(sl.berth.home, "note")
    show = ["sh", "-c", f"cat {note} 2>/dev/null || echo absent"]
    assert sl.ok(f"--container-image={pushed_busybox}", *show) == "absent\n"  # pyxis's default
    assert sl.ok(f"--container-image={pushed_busybox}", "--container-mount-home",
                 *show) == "in the home\n"
    # Remapped to root, the home is root's, as enroot binds it: at /root.
    out = sl.ok(f"--container-image={pushed_busybox}", "--container-mount-home",
                "--container-remap-root", "sh", "-c", "echo $HOME; cat /root/note; busybox id -u")
    assert out == "/root\nin the home\n0\n"


def test_a_container_running_outside_slurm_is_not_joined(sl, pushed_busybox):
    # The plugin's name for --container-name=outside on node n1.
    sl.berth("run", "-d", "--name", "outside.n1", pushed_busybox, "busybox", "sleep", "60")
    try:
        rc, _, err = sl.srun("--container-name=outside", "true")
        assert rc == 1
        assert ("berth: error: container 'outside.n1' is running, but not as a Slurm step's "
                "container (started outside Slurm)") in err
    finally:
        sl.berth("rm", "-f", "-t", "0", "outside.n1", check=False)


def test_pmi2_socket_reaches_the_tasks(sl, pushed_busybox):
    # srun --mpi=pmi2: each task's PMI socket (PMI_FD) and rank variables, inside.
    out = sl.ok("-n2", "--mpi=pmi2", f"--container-image={pushed_busybox}", "sh", "-c",
                "echo $PMI_RANK $PMI_SIZE; ls -l /proc/self/fd/$PMI_FD")
    assert sorted(line for line in out.splitlines() if "->" not in line) == ["0 2", "1 2"]
    assert out.count("socket:[") == 2


def test_pytorch_variables(sl, pushed_busybox):
    # For PyTorch images (PYTORCH_VERSION set; here from the host, which passes through).
    rc, out, err = sl("srun", "-N2", "-n2", f"--container-image={pushed_busybox}", "sh", "-c",
                      "echo $RANK $LOCAL_RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT $SLURM_JOB_ID",
                      env={"PYTORCH_VERSION": "2.3.0"})
    assert rc == 0, err
    job = int(out.split()[-1])
    port = 61000 + job % 4536  # enroot's PyTorch hook's MASTER_PORT: one per job
    assert sorted(out.splitlines()) == [f"0 0 2 n1 {port} {job}", f"1 0 2 n1 {port} {job}"]
    # Not for other images.
    out = sl.ok(f"--container-image={pushed_busybox}", "sh", "-c", "echo ${RANK:-none}")
    assert out == "none\n"


def test_a_killed_slurmstepd_leaves_no_holder(sl, pushed_busybox):
    # The node-side kill: slurmstepd dies before its clean-up; the job's epilog stops the
    # holder it left, even a named container's. Only this job's holder counts: the test user's
    # other holders (another test's container, a parallel session's) are not its business.
    def holder_pids() -> set[str]:
        return {line.split()[0] for line in step_processes(sl.berth) if "kill -STOP" in line}

    before = holder_pids()
    p = sl.popen("srun", "-N1", "-w", "n1", "-J", "stepkill", f"--container-image={pushed_busybox}",
                 "--container-name=orphan", "busybox", "sleep", "300")
    try:
        deadline = time.monotonic() + 60
        job = ""
        while time.monotonic() < deadline and not job:
            _, out, _ = sl("squeue", "-h", "-n", "stepkill", "-t", "R", "-o", "%i")
            if out.strip() and task_runs(sl.berth, "busybox sleep 300"):
                job = out.strip()
            time.sleep(0.2)
        assert job, "the step did not start"
        kill_stepd(f"{job}.0")
        sl("scancel", job)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    holders = set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        holders = holder_pids() - before
        if not holders:
            break
        time.sleep(0.2)
    assert not holders, [cmdline(pid) for pid in holders]


@pytest.fixture(scope="module")
def slow_entry_image(registry) -> str:
    """busybox whose entrypoint takes its time (/slow.sh: sleep 617) before it execs its
    arguments."""
    entry = imagelib.File("slow.sh", b'#!/bin/sh\nsleep 617\nexec "$@"\n', 0o755)
    img = imagelib.make_image([imagelib.busybox_layer(), imagelib.Layer([entry])],
                              config={"Env": ["PATH=/bin"], "Entrypoint": ["/slow.sh"]})
    registry.pusher().push_image("e2e/slow-entry", "1", img)
    return f"{registry.host}/e2e/slow-entry:1"


@pytest.mark.parametrize("kind", ["unnamed", "named", "squashfs"])
def test_a_task_killed_during_its_containers_start_leaves_nothing(sl, slow_entry_image, kind):
    # The step's task dies (SIGKILL: proctrack/cgroup's scancel, an OOM kill) while its
    # container is starting (the image's entrypoint still runs, the holder is not up yet):
    # slurm_spank_exit finds the step's record still saying "starting" and ends the start, and
    # no container is left running with a holder that stops itself later, for good.
    # (proctrack/linuxproc, this cluster's, signals no process still named slurmstepd: there a
    # scancel leaves the task to its own 60 s limit on the holder.)
    image = slow_entry_image
    if kind == "squashfs":
        sl.berth("pull", slow_entry_image)
        image = sl.berth.path("slow-entry.sqsh")
        sl.berth("squash", slow_entry_image, "-o", image)
    job_name = f"slowstart-{kind}"
    extra = ["--container-name=slowstart"] if kind == "named" else []
    p = sl.popen("srun", "-N1", "-w", "n1", "-J", job_name, f"--container-image={image}",
                 "--container-entrypoint", *extra, "true")

    def processes(marker: bytes, where: str) -> list[str]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.stat(f"/proc/{pid}").st_uid != sl.berth.identity.uid:
                    continue
                with open(f"/proc/{pid}/{where}", "rb") as f:
                    if marker in f.read():
                        found.append(pid)
            except OSError:
                continue
        return found

    def entrypoints():  # the entrypoint's shell, which becomes the holder
        return processes(b"/slow.sh\x00", "cmdline")

    def alive(pid: str) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    try:
        started = wait_for(entrypoints, timeout=60)
        if not started:
            p.kill()
            raise AssertionError(f"the entrypoint did not start: {p.communicate()[1]}")
        job = sl("squeue", "-h", "-n", job_name, "-o", "%i")[1].strip()
        task = [pid for pid in filter(str.isdigit, os.listdir("/proc"))
                if cmdline(pid).split(" ", 1)[-1].startswith(f"slurmstepd: [{job}.0]")
                and real_uid(pid) == sl.berth.identity.uid]  # slurmstepd's is root
        assert len(task) == 1, task
        os.kill(int(task[0]), signal.SIGKILL)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    # Gone: the entrypoint (or the holder it became) and every berth process of this test's
    # store (the run, its monitor); other tests' holders may run beside it.
    def left() -> list[str]:
        pids = [pid for pid in started if alive(pid)]
        pids += processes(f"BERTH_HOME={sl.berth.berth_home}\0".encode(), "environ")
        return [cmdline(pid) for pid in pids if alive(pid)]

    wait_for(lambda: not left(), timeout=20)  # not the task's 60 s limit
    assert left() == []
    running = sl.berth("ps", "--format", "{{.Names}}")[1].split()
    assert [n for n in running if n.startswith(("slurm-", "slowstart"))] == []
    if kind == "unnamed":  # an unnamed step container goes, as after any step
        assert wait_for(lambda: "slurm-" not in sl.berth("ps", "-a", "--format", "{{.Names}}")[1])
    if kind == "named":
        sl.berth("rm", "-f", "slowstart.n1")


# --- issue 14: the options pyxis has that were missing, and robustness ----------------------


def test_container_save_round_trip(sl, pushed_busybox, sqsh_image):
    # pyxis's --container-save: after the step, the container as a squashfs file (a relative
    # path is the job's working directory's); a later step runs it and sees the change.
    sl.ok(f"--container-image={pushed_busybox}", "--container-save=./saved.sqsh", "sh", "-c",
          "echo changed > /etc/motd")
    assert os.path.getsize(sl.berth.path("saved.sqsh")) > 0
    runtime = sl.berth.make_dir("runtime")
    sl.berth.env["BERTH_RUNTIME_DIR"] = runtime
    assert sl.ok("--container-image=./saved.sqsh", "cat", "/etc/motd") == "changed\n"
    # Two nodes, one (shared) path: each node saves, under a temporary name then renamed, so
    # the file is always one node's whole container and nothing else is left beside it.
    rc, out, err = sl("srun", "-N2", "-n2", f"--container-image={pushed_busybox}",
                      "--container-save=both.sqsh", "sh", "-c", "echo $SLURMD_NODENAME > /node")
    assert rc == 0, err
    assert sl.ok("--container-image=./both.sqsh", "cat", "/node") in ("n1\n", "n2\n")
    assert [f for f in os.listdir(sl.berth.workdir) if "berth-tmp" in f] == []
    # A step of a squashfs image is saved too: the file is extracted into the step's own
    # container (enroot's create), whose changes the new file holds; it goes after the step.
    sl.ok("--container-image=./saved.sqsh", "--container-save=again.sqsh", "sh", "-c",
          "echo again >> /etc/motd")
    assert sl.ok("--container-image=./again.sqsh", "cat", "/etc/motd") == "changed\nagain\n"
    assert wait_for(lambda: "slurm-" not in sl.berth("ps", "-a", "--format", "{{.Names}}")[1])
    # A save that fails says why on srun's stderr. Slurm 22.05 ignores task_exit's result for
    # the exit status (as for pyxis's failed export), so the status stays the command's.
    _, _, err = sl.srun(f"--container-image={pushed_busybox}",
                        "--container-save=/proc/none.sqsh", "true")
    assert "error: berth: --container-save: squash slurm-" in err
    assert "create /proc/none.sqsh: Permission denied" in err


def wait_running(sl, name: str) -> str:
    """The id of the running job named `name` once one of its tasks runs (60 s at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        _, out, _ = sl("squeue", "-h", "-n", name, "-t", "R", "-o", "%i")
        if out.strip() and task_runs(sl.berth, "busybox sleep 300"):
            return out.strip()
        time.sleep(0.2)
    raise AssertionError(f"job {name} did not start")


def test_no_exec_starts_new_namespaces_on_the_running_containers_filesystem(sl, entry_image):
    # pyxis's NAME:no_exec: with the container running, do not join it; run the step in
    # namespaces of its own, on the same filesystem (and with the container's environment).
    first = sl.popen("srun", "-N1", "-w", "n1", "-J", "noexecfirst",
                     f"--container-image={entry_image}", "--container-name=shared",
                     "sh", "-c", "busybox readlink /proc/self/ns/mnt > /first-ns; "
                     "echo from-first > /marker; busybox sleep 300")
    try:
        wait_running(sl, "noexecfirst")
        data = sl.berth.make_dir("noexecdata")
        sl.berth.write_file("noexecdata/f", "this step's mount\n")
        out = sl.ok("--container-name=shared:no_exec", f"--container-mounts={data}:/in", "sh",
                    "-c", "cat /marker; cat /first-ns; busybox readlink /proc/self/ns/mnt; "
                    "echo $FROM_IMAGE; pwd; cat /in/f")
        marker, first_ns, own_ns, from_image, cwd, mounted = out.splitlines()
        assert marker == "from-first"
        assert first_ns != own_ns
        assert (from_image, cwd) == ("image", "/etc")  # the image's Env and WorkingDir
        assert mounted == "this step's mount"  # its own namespaces take its own mounts
        # Without no_exec, the same step joins it.
        out = sl.ok("--container-name=shared", "sh", "-c",
                    "cat /first-ns; busybox readlink /proc/self/ns/mnt")
        a, b = out.splitlines()
        assert a == b
    finally:
        sl("scancel", "-n", "noexecfirst")
        first.wait(timeout=60)


def test_unshare_ipc_and_uts(sl, pushed_busybox):
    show = ["sh", "-c", "busybox readlink /proc/self/ns/ipc; busybox readlink /proc/self/ns/uts; "
            "busybox hostname"]
    host = sl.ok("sh", "-c", "readlink /proc/self/ns/ipc /proc/self/ns/uts; hostname")
    h_ipc, h_uts, h_name = host.splitlines()
    shared = sl.ok(f"--container-image={pushed_busybox}", *show).splitlines()
    assert shared == [h_ipc, h_uts, h_name]
    own = sl.ok(f"--container-image={pushed_busybox}", "--container-unshare=ipc,uts",
                *show).splitlines()
    assert own[0] != h_ipc and own[1] != h_uts
    assert own[2] == h_name  # a UTS namespace of its own keeps the node's name, as enroot's
    # Both tasks of the step share the step's one namespace.
    out = sl.ok("-n2", f"--container-image={pushed_busybox}", "--container-unshare=ipc",
                "busybox", "readlink", "/proc/self/ns/ipc").split()
    assert len(out) == 2 and out[0] == out[1] != h_ipc


def test_unshare_fails_on_a_running_container_without_that_namespace(sl, pushed_busybox):
    # pyxis's: a step asking for a namespace of its own cannot join a running container that
    # shares the node's; it fails rather than run in the node's namespace.
    first = sl.popen("srun", "-N1", "-w", "n1", "-J", "unsharefirst",
                     f"--container-image={pushed_busybox}", "--container-name=shareless",
                     "busybox", "sleep", "300")
    try:
        wait_running(sl, "unsharefirst")
        rc, _, err = sl.srun("--container-name=shareless", "--container-unshare=net", "true")
        assert rc == 1
        assert ("berth: error: --container-unshare=net requested but the container is not in a "
                "separate network namespace") in err
    finally:
        sl("scancel", "-n", "unsharefirst")
        first.wait(timeout=60)
        sl.berth("rm", "-f", "shareless.n1", check=False)


def test_named_containers_are_node_unique(sl, pushed_busybox):
    # Both nodes share the test user's home, hence one Berth store: each node keeps its own
    # container for one --container-name (NAME.NODE), and finds it again in the next step.
    rc, _, err = sl("srun", "-N2", "-n2", f"--container-image={pushed_busybox}",
                    "--container-name=pernode", "sh", "-c", "echo $SLURMD_NODENAME > /mine")
    assert rc == 0, err
    rc, out, err = sl("srun", "-N2", "-n2", "--container-name=pernode", "sh", "-c",
                      "echo $SLURMD_NODENAME $(cat /mine)")
    assert rc == 0, err
    assert sorted(out.splitlines()) == ["n1 n1", "n2 n2"]
    names = sl.berth("ps", "-a", "--format", "{{.Names}}")[1].split()
    assert "pernode.n1" in names and "pernode.n2" in names


def test_a_mount_cannot_leave_the_root_through_a_symlink(sl, registry, scratch):
    # An image whose /esc is a symlink to a host folder: a mount on /esc/in resolves inside the
    # container's root, never on the host's folder; a DST climbing out with .. is refused.
    outside = os.path.join(scratch, "slurm-escape")
    os.makedirs(outside, exist_ok=True)
    os.chmod(outside, 0o777)
    img = imagelib.make_image([imagelib.busybox_layer(),
                               imagelib.Layer([imagelib.Symlink("esc", outside)])])
    registry.pusher().push_image("e2e/escape", "1", img)
    image = f"{registry.host}/e2e/escape:1"
    data = sl.berth.make_dir("escdata")
    sl.berth.write_file("escdata/f", "bound\n")
    out = sl.ok(f"--container-image={image}", f"--container-mounts={data}:/esc/in",
                "cat", f"{outside}/in/f")
    assert out == "bound\n"
    assert not os.path.exists(os.path.join(outside, "in"))
    rc, _, err = sl.srun(f"--container-image={image}", f"--container-mounts={data}:/../../x",
                         "true")
    assert rc == 1 and "berth: error: mount volume" in err


def test_tmpfs_mounts_and_umount(sl, pushed_busybox):
    # pyxis's tmpfs:DST[:FLAGS] (FLAGS joined with +): an empty tmpfs; a bind may go inside.
    data = sl.berth.make_dir("tmpfsdata")
    sl.berth.write_file("tmpfsdata/f", "bound\n")
    out = sl.ok(f"--container-image={pushed_busybox}",
                f"--container-mounts=tmpfs:/scratch:size=1m+noexec,{data}:/scratch/in:ro", "sh",
                "-c", "grep ' /scratch ' /proc/mounts; echo x > /scratch/y && cat /scratch/y "
                "/scratch/in/f")
    mount, rest = out.split("\n", 1)
    assert mount.startswith("tmpfs /scratch tmpfs rw,nosuid,nodev,noexec")
    assert "size=1024k" in mount
    assert rest == "x\nbound\n"
    # umount: of a mount the step does not make: refused.
    rc, _, err = sl.srun(f"--container-image={pushed_busybox}", "--container-mounts=umount:/tmp",
                         "true")
    assert rc != 0
    assert ("--container-mounts: 'umount:/tmp': the step makes no mount at /tmp to take away "
            "(its only one would be the home, with --container-mount-home; Berth mounts no site "
            "fstab)") in err
    # umount: of the home the step binds takes it away.
    sl.berth.write_file("home/note", "in the home\n")
    note = os.path.join(sl.berth.home, "note")
    out = sl.ok(f"--container-image={pushed_busybox}", "--container-mount-home",
                f"--container-mounts=umount:{sl.berth.home}", "sh", "-c",
                f"cat {note} 2>/dev/null || echo absent")
    assert out == "absent\n"


def test_pyxis_mount_flags_have_their_meaning(sl, pushed_busybox):
    # enroot's flags that pyxis passes through: nosuid, nodev, noexec and unbindable on the
    # bind, x-create=dir making the target, tmpfs's huge=.
    data = sl.berth.make_dir("flagdata")
    sl.berth.write_file("flagdata/f", "bound\n")
    out = sl.ok(f"--container-image={pushed_busybox}",
                f"--container-mounts={data}:/in:ro+nosuid+nodev+noexec+unbindable,"
                f"{data}:/made/here:x-create=dir,tmpfs:/t:huge=within_size", "sh", "-c",
                "grep ' /in ' /proc/self/mountinfo; cat /made/here/f; "
                "grep ' /t ' /proc/mounts")
    info, made, tmpfs = out.splitlines()
    fields = info.split(" - ")[0].split()
    assert fields[5].split(",")[:4] == ["ro", "nosuid", "nodev", "noexec"], info
    assert "unbindable" in fields[6:], info
    assert made == "bound"
    assert "huge=within_size" in tmpfs, tmpfs


def test_an_rslave_mount_follows_the_hosts(sl, pushed_busybox, scratch):
    # rslave: the bind stays a slave of a shared host mount, so that what the host mounts
    # beneath it later shows inside (a private bind would not be anyone's slave).
    if os.geteuid() != 0:
        pytest.skip("making a shared mount on the host needs root")
    if sl.cluster.node.release != "22.05":
        # The Debian 13 root's node (debian_root.py) runs in a mount namespace of its own,
        # made before this test's shared mount, whose events it does not receive.
        pytest.skip("the host's shared mount does not reach the 24.11 root's mount namespace")
    src = sl.berth.make_dir("rslavedata")
    subprocess.run(["mount", "--bind", src, src], check=True)
    try:
        subprocess.run(["mount", "--make-shared", src], check=True)
        out = sl.ok(f"--container-image={pushed_busybox}",
                    f"--container-mounts={src}:/in:rslave,{src}:/private", "sh", "-c",
                    "grep -e ' /in ' -e ' /private ' /proc/self/mountinfo")
        by_target = {line.split()[4]: line.split(" - ")[0].split()[6:] for line in
                     out.splitlines()}
        assert any(f.startswith("master:") for f in by_target["/in"]), out
        assert by_target["/private"] == [], out
    finally:
        subprocess.run(["umount", "-l", src], check=False)


def test_tasks_have_the_containers_root_emulation(sl, pushed_busybox):
    # As pyxis installs enroot's filter in every task: chown and set*id succeed without effect
    # (with and without --container-remap-root), as in `berth run`'s own workload.
    show = ["sh", "-c", "busybox touch /tmp/f && busybox chown 1234:1234 /tmp/f && "
            "busybox stat -c '%u' /tmp/f && busybox grep Seccomp: /proc/self/status"]
    uid = sl.berth.identity.uid
    out = sl.ok(f"--container-image={pushed_busybox}", "--container-remap-root", *show)
    assert out.split() == ["0", "Seccomp:", "2"]
    out = sl.ok(f"--container-image={pushed_busybox}", *show)
    assert out.split() == [str(uid), "Seccomp:", "2"]


def holder_processes(berth) -> set:
    """The plugin's holders among step_processes (not the berth commands that name them)."""
    return {line for line in step_processes(berth)
            if line.split(" ", 1)[1].startswith("/bin/sh -c kill -STOP")}


def test_a_dead_steps_holder_goes_at_the_jobs_next_step(sl, pushed_busybox):
    # A step whose slurmstepd is SIGKILLed runs no clean-up, and its job (an allocation that
    # lives on) runs no epilog yet: the job's next step on the node stops the holder it left
    # and removes its container.
    job = allocation(sl, "reapjob")
    step = None
    try:
        before = holder_processes(sl.berth)
        step = sl.popen("srun", f"--jobid={job}", "--overlap", "-w", "n1",
                        f"--container-image={pushed_busybox}", "busybox", "sleep", "301")
        holders: set = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not holders:
            if any("sleep 301" in line for line in step_processes(sl.berth)):
                holders = holder_processes(sl.berth) - before
            time.sleep(0.2)
        assert holders, "the step did not start"
        kill_stepd(f"{job}.0")
        step.kill()
        step.wait(timeout=30)
        # Nothing removed the step's container yet (Slurm itself may have signalled the
        # holder's processes on the step's end, but never runs berth rm).
        name = f"slurm-{job}.0.n1"
        assert name in sl.berth("ps", "-a", "--format", "{{.Names}}")[1].split()
        rc, _, err = sl("srun", f"--jobid={job}", "--overlap", "-w", "n1",
                        f"--container-image={pushed_busybox}", "true")
        assert rc == 0, err
        alive = holder_processes(sl.berth)
        assert not holders & alive
        assert name not in sl.berth("ps", "-a", "--format", "{{.Names}}")[1].split()
    finally:
        sl("scancel", job)
        if step is not None and step.poll() is None:
            step.kill()
        for line in step_processes(sl.berth):  # the dead step's task, which nobody reaps
            if "sleep 301" in line:
                try:
                    os.kill(int(line.split()[0]), 9)
                except ProcessLookupError:
                    pass


def test_fifty_concurrent_steps_share_one_named_container(sl, pushed_busybox):
    # 50 steps of one job at once, all on one named container: the name's lock holds, none
    # fails, all see what the first step wrote; the last one out stops the holder.
    sl.ok(f"--container-image={pushed_busybox}", "--container-name=many", "sh", "-c",
          "echo shared > /mark")
    sl.berth.make_dir("many")
    script = sl.berth.write_file("many.sh", """#!/bin/sh
cd many
for i in $(seq 50); do
  (srun --overlap -n1 --container-name=many cat /mark > out.$i 2>&1; echo $? > rc.$i) &
done
wait
""", 0o755)
    start = time.monotonic()
    rc, out, err = sl("sbatch", "--wait", "-w", "n1", "-o", sl.berth.path("many.log"), script,
                      timeout=300)
    took = time.monotonic() - start
    assert rc == 0, out + err
    outs, rcs = [], []
    for i in range(1, 51):
        with open(sl.berth.path(f"many/out.{i}")) as f:
            outs.append(f.read())
        with open(sl.berth.path(f"many/rc.{i}")) as f:
            rcs.append(f.read().strip())
    assert rcs == ["0"] * 50, [o for o in outs if o != "shared\n"][:3]
    assert outs == ["shared\n"] * 50
    assert sl.berth("inspect", "--format", "{{.State.Status}}", "many.n1")[1].strip() == "exited"
    print(f"50 concurrent steps on one named container: {took:.1f} s")


def test_a_device_node_can_be_mounted(sl, pushed_busybox):
    # pyxis's --container-mounts takes device nodes as well as files: /dev/zero bound elsewhere
    # is still the character device (1, 5), readable inside.
    out = sl.ok(f"--container-image={pushed_busybox}", "--container-mounts=/dev/zero:/mnt/zero",
                "sh", "-c", "[ -c /mnt/zero ] && busybox stat -c '%t,%T' /mnt/zero && "
                "busybox head -c 3 /mnt/zero | busybox od -An -tx1")
    assert out.split() == ["1,5", "00", "00", "00"]


def test_remap_root_shows_in_the_uid_map(sl, pushed_busybox):
    # With --container-remap-root the user's uid is 0 inside; without, it is itself (one line
    # of /proc/self/uid_map either way: the plugin's containers run with seccomp root emulation).
    uid = sl.berth.identity.uid
    out = sl.ok(f"--container-image={pushed_busybox}", "--container-remap-root",
                "cat", "/proc/self/uid_map")
    assert out.split() == ["0", str(uid), "1"]
    out = sl.ok(f"--container-image={pushed_busybox}", "cat", "/proc/self/uid_map")
    assert out.split() == [str(uid), str(uid), "1"]


# --- issue 30: the plugin attacked -----------------------------------------------------------


def test_a_user_holding_a_names_lock_cannot_keep_the_steps_end_waiting(sl, cluster,
                                                                      pushed_busybox):
    # At the end of a --container-name step root's slurmstepd took a blocking flock on the
    # name's lock, a file in the user's own runtime folder: a process of the user's holding it
    # kept the step from ending (scancel could not help) until Slurm drained the node. The
    # step's end now tries for a bounded time, says so in the step's log, and goes on.
    lock = os.path.join(cluster.runtime, str(sl.berth.identity.uid), "heldlock.n1.name.lock")
    go = sl.berth.make_dir("heldgo")
    step = sl.popen("srun", "-N1", "-w", "n1", "-J", "heldlock",
                    f"--container-image={pushed_busybox}", "--container-name=heldlock",
                    f"--container-mounts={go}:/go", "sh", "-c",
                    "busybox touch /go/started; while [ ! -e /go/now ]; do busybox sleep 0.1; "
                    "done")
    holder = None

    def held() -> bool:  # root's look at the lock, without waiting for it
        return subprocess.run(["flock", "-n", lock, "true"]).returncode == 1

    try:
        assert wait_for(lambda: os.path.exists(os.path.join(go, "started")), timeout=60)
        # The task has let go of the name's lock; a process of the user's takes it and keeps it.
        # In a session of its own: flock runs sleep as its child, which killing flock alone
        # would leave for ten minutes (where another test counts the machine's sleeps).
        holder = subprocess.Popen(sl.berth.identity.prefix + ["flock", lock, "sleep", "600"],
                                  start_new_session=True)
        assert wait_for(held)
        sl.berth.write_file("heldgo/now", "")
        _, err = step.communicate(timeout=120)
        assert step.returncode == 0, err
        # The step ended (its slurmstepd did not wait on the lock for ever): the job is gone,
        # the node is up, and the step's log says why its end did not wait.
        assert wait_for(lambda: not sl("squeue", "-h", "-n", "heldlock")[1].strip(), timeout=90)
        assert held()  # still: the user's process was never waited for
        state = sl("sinfo", "-h", "-n", "n1", "-o", "%t")[1].strip()
        assert state in ("idle", "mix", "alloc"), state
        with open(os.path.join(cluster.root, "log", "slurmd-n1.log")) as f:
            log = f.read()
        assert (f"berth: container heldlock.n1: its lock {lock} is still held after 10 s (by a "
                "process of the user's): the step's end goes on without it") in log
    finally:
        if holder is not None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
        if step.poll() is None:
            step.kill()
            step.wait()
        cluster.recover()  # before the fix: the node drained ("Kill task failed")
        sl.berth("rm", "-f", "heldlock.n1", check=False)


def test_an_image_or_a_name_is_never_taken_for_an_option_of_berths(sl, pushed_busybox):
    # --container-image=--help reached `berth run` as its --help. Images and names starting
    # with '-' are refused, in srun before anything is submitted, and in slurmstepd for the
    # environment forms only the job's environment holds.
    rc, _, err = sl.srun("--container-image=--help", "true")
    assert rc != 0
    assert "berth: --container-image: '--help' is not an image (it starts with '-')" in err
    rc, _, err = sl.srun(f"--container-image={pushed_busybox}", "--container-name=-x", "true")
    assert rc != 0
    assert "berth: --container-name: '-x' is not a valid name (it starts with '-')" in err
    rc, _, err = sl.srun("--export=ALL,BERTH_CONTAINER_IMAGE=--privileged", "true")
    assert rc == 1
    assert ("berth: error: BERTH_CONTAINER_IMAGE: --container-image: '--privileged' is not an "
            "image (it starts with '-')") in err
    # A --container-env name that looks like an option is one word for berth run (--env=NAME).
    out = sl.ok(f"--container-image={pushed_busybox}", "--container-env=--help", "sh", "-c",
                "echo ran")
    assert out == "ran\n"

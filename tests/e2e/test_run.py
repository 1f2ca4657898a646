"""The runtime, end to end: `berth run/create/ps/rm/name/inspect` as an
unprivileged user, with a static probe inside the image reporting what the
container sees (identity, env, cwd, mounts, signals)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

import imagelib
from conftest import build_file

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def probe_bytes() -> bytes:
    path = build_file(os.path.join("tests", "berth_probe"), "BERTH_PROBE", "berth_probe")
    with open(path, "rb") as f:
        return f.read()


def userns_works(identity) -> bool:
    r = subprocess.run(identity.prefix + ["unshare", "-Ur", "true"], capture_output=True)
    return r.returncode == 0


def kv(text: str) -> dict:
    """The probe's key=value lines as a dict (the last value of a repeated key wins)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


@pytest.fixture(scope="module")
def run_image(registry, identity, berth_bin):
    """An image with busybox, the probe at /probe, a user `app` (1234:1234) in
    /etc/passwd, and config Env/WorkingDir; pushed once, referenced by name."""
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    passwd = b"root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:app:/home/app:/bin/sh\n"
    group = b"root:x:0:\napp:x:1234:\nstaff:x:50:app\n"
    extra = imagelib.Layer([
        imagelib.File("probe", probe_bytes(), 0o755),
        imagelib.File("etc/passwd", passwd),
        imagelib.File("etc/group", group),
        imagelib.File("etc/motd", b"motd from the image\n"),
        imagelib.File("not-executable", b"#!/bin/sh\necho hi\n", 0o644),
        imagelib.Dir("home"),
        imagelib.Dir("home/app"),
    ])
    img = imagelib.make_image(
        [imagelib.busybox_layer(), extra],
        cmd=["/probe", "id"],
        config={"Env": [f"PATH={PATH}", "FROM_IMAGE=image", "OVERRIDE=image"],
                "WorkingDir": "/srv/work"})
    registry.pusher().push_image("e2e/run", "1.0", img)
    user_img = imagelib.make_image([imagelib.busybox_layer(), extra],
                                   config={"User": "app", "Entrypoint": ["/probe"],
                                           "Cmd": ["id"]})
    registry.pusher().push_image("e2e/run", "user", user_img)
    return f"{registry.host}/e2e/run"


@pytest.fixture
def img(berth, run_image):
    berth("pull", f"{run_image}:1.0")
    return f"{run_image}:1.0"


# --- identity -----------------------------------------------------------------


def test_default_user_is_root_inside(berth, img):
    _, out, _ = berth("run", "--rm", img, "/probe", "id")
    assert kv(out)["uid"] == "0" and kv(out)["gid"] == "0"


def test_image_user_and_entrypoint_are_honoured(berth, run_image):
    berth("pull", f"{run_image}:user")
    _, out, _ = berth("run", "--rm", f"{run_image}:user")
    assert (kv(out)["uid"], kv(out)["gid"]) == ("1234", "1234")
    _, out, _ = berth("run", "--rm", f"{run_image}:user", "cwd")  # args replace Cmd
    assert kv(out)["cwd"] == "/"


def test_user_flag_keeps_host_identity(berth, img, identity):
    _, out, _ = berth("run", "--rm", "-u", f"{identity.uid}:{identity.gid}", img, "/probe", "id")
    assert (kv(out)["uid"], kv(out)["gid"]) == (str(identity.uid), str(identity.gid))


def test_user_by_name_and_passwd_entry_added(berth, img):
    _, out, _ = berth("run", "--rm", "-u", "app", img, "/probe", "id")
    assert (kv(out)["uid"], kv(out)["gid"]) == ("1234", "1234")
    _, out, _ = berth("run", "--rm", "-u", "4321:4321", img, "/probe", "cat", "/etc/passwd")
    assert any(line.split(":")[2:4] == ["4321", "4321"] for line in out.splitlines()), out


def test_unknown_user_is_an_error(berth, img):
    rc, out, err = berth("run", "--rm", "-u", "nobody-here", img, "/probe", "id", check=False)
    assert rc == 125
    assert "nobody-here" in err.splitlines()[0]


# --- environment, working directory, command ------------------------------------


def test_env_merging(berth, img):
    env_file = berth.write_file("vars.env", "# a comment\n\nFROM_FILE=file\nOVERRIDE=file\n")
    _, out, _ = berth("run", "--rm", "--env-file", env_file, "-e", "OVERRIDE=cli",
                      "-e", "FROM_HOST", img, "/probe", "env", env={"FROM_HOST": "host"})
    env = dict(line[len("env="):].split("=", 1) for line in out.splitlines()
               if line.startswith("env="))
    assert env["FROM_IMAGE"] == "image"
    assert env["FROM_FILE"] == "file"
    assert env["OVERRIDE"] == "cli"
    assert env["FROM_HOST"] == "host"
    assert env["PATH"] == PATH
    assert "BERTH_HOME" not in env  # the host environment stays out without --hostenv


def test_hostenv_passes_the_host_environment(berth, img):
    _, out, _ = berth("run", "--rm", "--hostenv", img, "/probe", "env",
                      env={"ONLY_ON_HOST": "yes"})
    assert "env=ONLY_ON_HOST=yes" in out.splitlines()


def test_working_dir_from_image_and_flag(berth, img):
    _, out, _ = berth("run", "--rm", img, "/probe", "cwd")
    assert kv(out)["cwd"] == "/srv/work"
    _, out, _ = berth("run", "--rm", "-w", "/tmp", img, "/probe", "cwd")
    assert kv(out)["cwd"] == "/tmp"


def test_image_cmd_runs_by_default_and_entrypoint_flag(berth, img):
    _, out, _ = berth("run", "--rm", img)
    assert kv(out)["uid"] == "0"
    _, out, _ = berth("run", "--rm", "--entrypoint", "/probe", img, "hostname")
    assert "hostname" in kv(out)


def test_hostname_flag(berth, img):
    _, out, _ = berth("run", "--rm", "--hostname", "box1", img, "/probe", "hostname")
    assert kv(out)["hostname"] == "box1"
    # -h is --hostname, as in docker run (before: -h printed the help); --help stays help.
    _, out, _ = berth("run", "--rm", "-h", "box2", img, "/probe", "hostname")
    assert kv(out)["hostname"] == "box2"
    _, out, _ = berth("run", "--help")
    assert "-h,--hostname" in out


def test_ipc_private_is_an_ipc_namespace_of_its_own(berth, img):
    # Docker's --ipc private: SysV IPC and POSIX message queues of the container's own; the
    # default (no --ipc) and --ipc host keep the host's IPC namespace (the caller's).
    mine = os.readlink("/proc/self/ns/ipc")
    ns = ["busybox", "readlink", "/proc/self/ns/ipc"]
    assert berth("run", "--rm", img, *ns)[1].strip() == mine
    assert berth("run", "--rm", "--ipc", "host", img, *ns)[1].strip() == mine
    own = berth("run", "--rm", "--ipc", "private", img, *ns)[1].strip()
    assert own.startswith("ipc:[") and own != mine
    # Kept in the container's record: `start` makes one again.
    berth("run", "-d", "--name", "ipcns", "--ipc", "private", img, *ns)
    berth("wait", "ipcns")
    berth("start", "ipcns")
    berth("wait", "ipcns")
    runs = berth("logs", "ipcns")[1].split()
    assert len(runs) == 2 and mine not in runs


def test_option_spellings(berth, img):
    """run declares only the options its command line mentions (a start-up saving): every way
    of spelling one must still reach it."""
    _, out, _ = berth("run", "--rm", "--env=LONG_EQ=1", "-eSHORT_GLUED=2", "-w/tmp",
                      "--hostname=box3", img, "/probe", "env")
    env = dict(line[len("env="):].split("=", 1) for line in out.splitlines()
               if line.startswith("env="))
    assert env["LONG_EQ"] == "1" and env["SHORT_GLUED"] == "2"
    _, out, _ = berth("run", "--rm", "-w/tmp", "--hostname=box3", img, "/probe", "cwd")
    assert kv(out)["cwd"] == "/tmp"
    _, out, _ = berth("run", "--rm", "--hostname=box3", img, "/probe", "hostname")
    assert kv(out)["hostname"] == "box3"
    # An option the image's command takes is the command's, as before: /probe gets "-v".
    code, out, err = berth("run", "--rm", img, "/probe", "env", "-v", check=False)
    assert code == 0, err
    # An unknown flag before the image is still named as one.
    code, _, err = berth("run", "--rm", "--no-such-flag", img, "/probe", "env", check=False)
    assert code == 125 and "--no-such-flag" in err


def test_stdin_passes_through_with_i(berth, img):
    _, out, _ = berth("run", "--rm", "-i", img, "/bin/cat", input="from stdin\n")
    assert out == "from stdin\n"


# --- mounts -----------------------------------------------------------------------


def test_default_mounts(berth, img):
    _, out, _ = berth("run", "--rm", img, "/probe", "mounts")
    mounts = {line.split()[4]: line for line in out.splitlines()}
    for target in ("/", "/proc", "/dev", "/sys", "/tmp", "/etc/resolv.conf", "/etc/hosts"):
        assert target in mounts, f"{target} not mounted:\n{out}"
    assert " ro," in mounts["/sys"] or " ro " in mounts["/sys"]
    _, out, _ = berth("run", "--rm", img, "/probe", "ls", "/dev")
    names = {line[len("name="):] for line in out.splitlines() if line.startswith("name=")}
    assert {"null", "zero", "full", "random", "urandom", "tty", "pts", "shm"} <= names


def test_volumes_in_and_over_dev(berth, img):
    """Entries directly inside Berth's fresh /dev tmpfs take a short path (no walk beneath the
    root); a volume over /dev itself must end that, or later entries land in the hidden tmpfs."""
    over = berth.make_dir("devover")
    inner = berth.make_dir("devinner")
    berth.write_file("devinner/mark.txt", "inner\n")
    _, out, _ = berth("run", "--rm", "-v", f"{inner}:/dev/first", img,
                      "/probe", "cat", "/dev/first/mark.txt")
    assert "inner" in out
    _, out, _ = berth("run", "--rm", "-v", f"{over}:/dev", "-v", f"{inner}:/dev/sub", img,
                      "/probe", "cat", "/dev/sub/mark.txt")
    assert "inner" in out
    assert os.path.isdir(os.path.join(over, "sub"))  # made in the volume, not in the tmpfs


def test_host_dev_binds_the_hosts_dev(berth, img):
    _, out, _ = berth("run", "--rm", "--host-dev", img, "/probe", "ls", "/dev")
    names = {line[len("name="):] for line in out.splitlines() if line.startswith("name=")}
    host = set(os.listdir("/dev"))
    assert names == host  # the host's /dev, not the minimal one


def test_volume_read_write_belongs_to_the_invoking_user(berth, img, identity):
    host_dir = berth.make_dir("vol")
    _, out, _ = berth("run", "--rm", "-v", f"{host_dir}:/data", img,
                      "/probe", "write", "/data/out.txt", "written inside")
    path = os.path.join(host_dir, "out.txt")
    with open(path) as f:
        assert f.read().startswith("written inside")
    st = os.stat(path)
    assert (st.st_uid, st.st_gid) == (identity.uid, identity.gid)


def test_volume_read_only(berth, img):
    host_dir = berth.make_dir("ro")
    berth.write_file("ro/given.txt", "from the host\n")
    _, out, _ = berth("run", "--rm", "-v", f"{host_dir}:/data:ro", img,
                      "/probe", "cat", "/data/given.txt")
    assert out == "from the host\n"
    rc, _, err = berth("run", "--rm", "-v", f"{host_dir}:/data:ro", img,
                       "/probe", "write", "/data/new.txt", "x", check=False)
    assert rc != 0 and "Read-only file system" in err
    assert not os.path.exists(os.path.join(host_dir, "new.txt"))


def test_volume_with_missing_host_path_is_an_error(berth, img):
    rc, out, err = berth("run", "--rm", "-v", "/no/such/dir:/data", img, "/probe", "true",
                         check=False)
    assert rc == 125
    assert "/no/such/dir" in err.splitlines()[0]


def test_tmpfs_mounts(berth, img):
    # Docker's --tmpfs: an empty tmpfs (nosuid, nodev, mode 1777 unless told), writable by the
    # container, gone with it; a volume may land inside one; ro makes it read-only.
    data = berth.make_dir("tmpfs-data")
    berth.write_file("tmpfs-data/f", "bound\n")
    _, out, _ = berth("run", "--rm", "--tmpfs", "/scratch:size=1m", "-v",
                      f"{data}:/scratch/in:ro", img, "/bin/sh", "-c",
                      "grep ' /scratch ' /proc/mounts; busybox stat -c %a /scratch; "
                      "echo x > /scratch/y && cat /scratch/y /scratch/in/f")
    mount, mode, rest = out.split("\n", 2)
    assert mount.startswith("tmpfs /scratch tmpfs rw,nosuid,nodev") and "size=1024k" in mount
    assert mode == "1777"
    assert rest == "x\nbound\n"
    assert not os.path.exists(os.path.join(data, "y"))
    _, out, _ = berth("run", "--rm", "--tmpfs", "/scratch:ro", img, "/bin/sh", "-c",
                      "echo x > /scratch/y 2>/dev/null || echo read-only")
    assert out == "read-only\n"
    rc, _, err = berth("run", "--rm", "--tmpfs", "/scratch:uid=0", img, "true", check=False)
    assert rc == 125
    assert err.splitlines()[0] == 'berth: error: volume tmpfs /scratch:uid=0: unknown option "uid=0"'


def test_volume_target_cannot_escape_through_a_symlink(berth, img):
    host_dir = berth.make_dir("esc")
    # /etc/../.. style targets are refused outright; a symlink in the image pointing outside
    # resolves inside the root, so nothing lands on the host's /etc.
    rc, _, err = berth("run", "--rm", "-v", f"{host_dir}:/../../x", img, "/probe", "true",
                       check=False)
    assert rc == 125 and err.startswith("berth: error:")


# --- exit status and errors ------------------------------------------------------


def test_exit_status_passes_through(berth, img):
    rc, _, _ = berth("run", "--rm", img, "/probe", "exit", "7", check=False)
    assert rc == 7


def test_command_not_found_is_127(berth, img):
    rc, _, err = berth("run", "--rm", img, "no-such-program", check=False)
    assert rc == 127
    assert len(err.splitlines()) >= 1 and "no-such-program" in err.splitlines()[0]


def test_not_executable_is_126(berth, img):
    rc, _, err = berth("run", "--rm", img, "/not-executable", check=False)
    assert rc == 126
    assert "/not-executable" in err.splitlines()[0]


def test_unknown_image_is_125(berth, registry, run_image):
    ref = f"{registry.host}/e2e/no-such-image:1"
    rc, out, err = berth("run", "--rm", ref, "/bin/true", check=False)
    assert rc == 125 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"Unable to find image '{ref}' locally"
    assert lines[1].startswith("berth: error: pull ") and "(HTTP 404)" in lines[1]
    assert berth.json("ps", "--json") == []


def test_missing_image_is_pulled_first(berth, run_image):
    rc, out, err = berth("run", "--rm", f"{run_image}:1.0", "/probe", "id")
    assert kv(out)["uid"] == "0"
    assert err.splitlines()[0] == f"Unable to find image '{run_image}:1.0' locally"
    assert [i["name"] for i in berth.json("images", "--json")] == [f"{run_image}:1.0"]


def assert_sigterm_forwarded(p: subprocess.Popen) -> None:
    """`p` runs `/probe signals N`: once it is ready, SIGTERM to berth must reach the probe."""
    try:
        assert p.stdout.readline().strip() == "ready"
        os.kill(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert "signal=15" in out, err
    assert p.returncode == 128 + signal.SIGTERM


@pytest.mark.parametrize("flags", [[], ["--pid-ns"]], ids=["direct", "through-init"])
def test_signal_is_forwarded_to_the_workload(berth, img, flags):
    assert_sigterm_forwarded(berth.popen("run", "--rm", *flags, img, "/probe", "signals", "20"))


def workload_pids(seconds: int) -> list[int]:
    """Processes whose command line ends in `signals SECONDS` (the probe, however launched)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")[:-1]
        except OSError:
            continue
        if args[-2:] == [b"signals", str(seconds).encode()]:
            pids.append(int(entry))
    return pids


def assert_killed_berth_takes_the_workload_along(p: subprocess.Popen, seconds: int) -> None:
    """`p` runs `/probe signals SECONDS`: once it is ready, SIGKILL to berth must end the
    workload too (nothing left running unsupervised)."""
    left = []
    try:
        assert p.stdout.readline().strip() == "ready"
        assert workload_pids(seconds), "the probe is not visible"
        p.kill()
        p.wait(timeout=20)  # not communicate(): a surviving workload holds the pipes open
        deadline = time.monotonic() + 10
        while workload_pids(seconds) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = workload_pids(seconds)
    finally:
        if p.poll() is None:
            p.kill()
        for pid in left or workload_pids(seconds):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.communicate(timeout=20)
    assert left == [], "the workload outlived berth"


@pytest.mark.parametrize("flags", [[], ["--pid-ns"]], ids=["direct", "through-init"])
def test_killed_berth_takes_the_workload_along(berth, img, flags):
    berth("create", "--name", "busy", img)
    seconds = 400 + len(flags)
    assert_killed_berth_takes_the_workload_along(
        berth.popen("run", *flags, "busy", "/probe", "signals", str(seconds)), seconds)
    assert berth.json("ps", "--json")[0]["status"] != "running"
    _, out, _ = berth("ps")
    assert "Running" not in out
    berth("rm", "busy")  # nothing runs in it any more


def test_killed_workload_reports_128_plus_signal(berth, img):
    rc, _, _ = berth("run", "--rm", img, "/bin/sh", "-c", "kill -9 $$", check=False)
    assert rc == 128 + 9


def test_two_containers_of_one_image_at_once(berth, img):
    procs = [berth.popen("run", "--rm", img, "/probe", "signals", "30") for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        # Both are running now; stop them.
        for p in procs:
            os.kill(p.pid, signal.SIGTERM)
        for p in procs:
            p.communicate(timeout=20)
            assert p.returncode == 128 + signal.SIGTERM
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


# --- containers: create, ps, name, inspect, rm --------------------------------------


def test_container_lifecycle(berth, img):
    _, out, _ = berth("create", "--name", "first", img)
    cid = out.strip()
    assert len(cid) == 64 and all(c in "0123456789abcdef" for c in cid)

    ps = berth.json("ps", "--json")
    assert [c["name"] for c in ps] == ["first"]
    _, out, _ = berth("ps", "-a")
    assert "first" in out and cid[:12] in out

    # A container keeps its changes between runs.
    berth("run", "first", "/probe", "write", "/kept.txt", "kept")
    _, out, _ = berth("run", "first", "/probe", "cat", "/kept.txt")
    assert out.startswith("kept")

    berth("name", cid[:12], "second")
    _, out, _ = berth("run", "second", "/probe", "cat", "/kept.txt")
    assert out.startswith("kept")
    berth("rmname", "second")

    info = berth.json("inspect", "first")
    info = info[0] if isinstance(info, list) else info
    assert cid in json.dumps(info)

    rc, _, err = berth("create", "--name", "first", img, check=False)
    assert rc != 0 and "first" in err.splitlines()[0]  # names are unique

    berth("rm", "first")
    assert berth.json("ps", "--json") == []
    rc, _, err = berth("rm", "first", check=False)
    assert rc != 0 and "first" in err.splitlines()[0]


def test_rm_flag_removes_the_container(berth, img):
    berth("run", "--rm", img, "/probe", "true")
    assert berth.json("ps", "--json") == []
    berth("run", img, "/probe", "true")
    assert len(berth.json("ps", "--json")) == 1


def test_rm_removes_the_container_however_the_run_ends(berth, img):
    # The spec cannot be made (an unknown user), the command cannot be found, the workload
    # fails: --rm removes the new container every time, and the run's status is kept.
    rc, _, err = berth("run", "--rm", "-u", "nobody-here", img, "/probe", "id", check=False)
    assert rc == 125 and "nobody-here" in err.splitlines()[0]
    assert berth.json("ps", "--json") == []
    rc, _, err = berth("run", "--rm", img, "/no-such-command", check=False)
    assert rc == 127 and err.splitlines()[0].startswith("berth: error: exec: \"/no-such-command\"")
    assert berth.json("ps", "--json") == []
    rc, _, _ = berth("run", "--rm", img, "/probe", "exit", "3", check=False)
    assert rc == 3
    assert berth.json("ps", "--json") == []


def test_running_container_cannot_be_removed(berth, img):
    berth("create", "--name", "busy", img)
    p = berth.popen("run", "busy", "/probe", "signals", "30")
    try:
        assert p.stdout.readline().strip() == "ready"
        rc, _, err = berth("rm", "busy", check=False)
        assert rc != 0 and "running" in err
        os.kill(p.pid, signal.SIGTERM)
        p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    berth("rm", "busy")


def test_rm_force_stops_a_running_container_first(berth, img):
    # SIGTERM reaches the workload through its berth run, which ends before the container goes.
    berth("create", "--name", "busy", img)
    p = berth.popen("run", "busy", "/probe", "signals", "30")
    try:
        assert p.stdout.readline().strip() == "ready"
        _, out, _ = berth("rm", "-f", "busy")
        assert out == "busy\n"
        assert p.poll() is not None, "rm -f returned while the container ran"
        out, _ = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert "signal=15" in out and p.returncode == 128 + signal.SIGTERM
    assert berth.json("ps", "--json") == []


def test_rm_force_kills_what_ignores_sigterm_after_the_grace_period(berth, img):
    berth("create", "--name", "stubborn", img)
    p = berth.popen("run", "--pid-ns", "stubborn", "/bin/sh", "-c",
                    "trap '' TERM; echo ready; while :; do sleep 1; done")
    try:
        assert p.stdout.readline().strip() == "ready"
        start = time.monotonic()
        berth("rm", "-f", "-t", "1", "stubborn")
        took = time.monotonic() - start
        assert p.poll() is not None, "rm -f returned while the container ran"
        p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert 1 <= took < 8, took
    # SIGKILL goes to the workload (its init here), so that berth run records how it ended.
    assert p.returncode == 128 + signal.SIGKILL
    assert berth.json("ps", "--json") == []


def test_rm_force_of_a_run_rm_container(berth, img):
    p = berth.popen("run", "--rm", "--name", "brief", img, "/probe", "signals", "30")
    try:
        assert p.stdout.readline().strip() == "ready"
        _, out, _ = berth("rm", "-f", "brief")
        assert out == "brief\n"
        p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM
    assert berth.json("ps", "--json") == []


# --- PID namespace, home, terminal ---------------------------------------------------


def test_pid_namespace_has_an_init_that_reaps(berth, img):
    _, out, _ = berth("run", "--rm", "--pid-ns", img, "/probe", "pid")
    assert kv(out)["ppid"] == "1"  # the minimal init is PID 1, the workload its child
    _, out, _ = berth("run", "--rm", "--pid-ns", img, "/probe", "zombies")
    assert kv(out)["zombies"] == "0"
    rc, _, _ = berth("run", "--rm", "--pid-ns", img, "/probe", "exit", "9", check=False)
    assert rc == 9
    # Docker's --init: the same init as PID 1.
    _, out, _ = berth("run", "--rm", "--init", img, "/probe", "pid")
    assert kv(out)["ppid"] == "1"


def test_bind_home(berth, img, identity):
    _, out, _ = berth("run", "--rm", "--bind-home", img, "/probe", "write",
                      os.path.join(berth.home, "from-container.txt"), "hi")
    path = os.path.join(berth.home, "from-container.txt")
    assert os.path.isfile(path)
    assert os.stat(path).st_uid == identity.uid
    _, out, _ = berth("run", "--rm", "--bind-home", img, "/probe", "env")
    assert f"env=HOME={berth.home}" in out.splitlines()


def test_stdin_is_empty_without_i(berth, img):
    _, out, _ = berth("run", "--rm", img, "/bin/cat", input="not for the container\n")
    assert out == ""


def test_bad_flag_is_a_usage_error(berth, img):
    rc, out, err = berth("run", "--no-such-flag", img, "/probe", "true", check=False)
    assert rc == 125 and out == ""
    assert err.startswith("berth: error:")


def test_run_a_root_filesystem_directory(berth, img):
    """`berth run DIR CMD` runs an unpacked tree in place, as ch-run and Apptainer sandboxes do."""
    root = berth.path("tree")
    berth("unpack", img, root)
    _, out, _ = berth("run", root, "/probe", "write", "/made-inside", "x")
    assert os.path.exists(os.path.join(root, "made-inside"))  # changes land in the directory
    _, out, _ = berth("run", "-w", "/etc", root, "/probe", "cwd")
    assert kv(out)["cwd"] == "/etc"
    rc, _, err = berth("run", root, check=False)
    assert rc == 125
    assert err.splitlines()[0] == (f"berth: error: run {root}: a directory has no image config: "
                                   "give the command to run")
    rc, _, err = berth("run", "--rm", root, "/probe", "true", check=False)
    assert rc == 125 and "--name and --rm apply to containers" in err


def test_a_directory_run_is_the_workload_itself(berth, img):
    """`berth run DIR CMD` leaves nothing to do after the workload: berth execs it in its own
    process, as ch-run does (no parent to wake, clone and reap at start-up: bench/start), so the
    workload's pid is the one the caller started, and its status and signals its own."""
    root = berth.path("tree")
    berth("unpack", img, root)
    p = berth.popen("run", root, "/probe", "pid")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert kv(out)["pid"] == str(p.pid)
    # A setup failure in place is still one line and Berth's status.
    rc, out, err = berth("run", root, "/no/such/command", check=False)
    assert rc == 127 and out == ""
    assert err.splitlines() == ['berth: error: exec: "/no/such/command": No such file or directory']
    # A container's run keeps its supervising parent (the run lock, the exit status for ps).
    berth("create", "--name", "kept", img)
    p = berth.popen("run", "kept", "/probe", "pid")
    out, _ = p.communicate(timeout=60)
    assert kv(out)["ppid"] == str(p.pid)


# --- terminal ------------------------------------------------------------------------


def on_terminal(berth, args) -> tuple[int, str]:
    """Runs berth ARGS on a new pseudo-terminal, as a user's shell would (script(1)); returns
    its status and output, newlines as written. script(1), its input being /dev/null, types one
    NUL byte at its end, which a container's pty echoes as ^@ wherever the output then is (at
    its start, or inside it on a loaded machine): those echoes are taken out."""
    import shlex
    cmd, env = berth.command(args)
    r = subprocess.run(["script", "-qec", shlex.join(cmd), "/dev/null"], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout.replace("\r\n", "\n").replace("^@", "")


def test_tty_gives_a_working_terminal(berth, img):
    """-t hands the caller's terminal to the workload, and `tty` inside finds it under
    /dev/pts (before: isatty was true but ttyname failed: "not a tty")."""
    rc, out = on_terminal(berth, ["run", "--rm", "-it", img, "/probe", "tty"])
    assert rc == 0, out
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert (lines["tty"], lines["foreground"]) == ("1", "1"), out
    assert lines["ttyname"].startswith("/dev/pts/"), out


def test_tty_of_a_directory_run_in_place(berth, img):
    """A directory run is berth's own process: it keeps the terminal the shell gave it, with
    no hand-over, and the workload is in the foreground."""
    root = berth.path("tree")
    berth("unpack", img, root)
    rc, out = on_terminal(berth, ["run", "-it", root, "/probe", "tty"])
    assert rc == 0, out
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert (lines["tty"], lines["foreground"]) == ("1", "1"), out
    assert lines["ttyname"].startswith("/dev/pts/"), out


def test_tty_without_interactive_still_gives_the_terminal(berth, img):
    """docker run -t IMG tty prints the terminal's name: -t alone gives the workload the
    terminal on stdin too (before: stdin was /dev/null without -i, "not a tty")."""
    rc, out = on_terminal(berth, ["run", "--rm", "-t", img, "/probe", "tty"])
    assert rc == 0, out
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert (lines["tty"], lines["foreground"]) == ("1", "1"), out
    assert lines["ttyname"].startswith("/dev/pts/"), out
    # Without -t, stdin stays /dev/null.
    rc, out = on_terminal(berth, ["run", "--rm", img, "/probe", "tty"])
    assert "tty=0" in out, out


def test_tty_without_a_terminal_is_refused(berth, img):
    rc, out, err = berth("run", "--rm", "-it", img, "/probe", "tty", check=False)
    assert (rc, out) == (1, "")  # as docker run exits for it
    assert err == ("berth: error: run -it: the input device is not a TTY\n"
                   "berth: hint: run from a terminal, or leave out -t\n")
    rc, out, err = berth("run", "--rm", "-t", img, "/probe", "tty", check=False)
    assert (rc, out) == (1, "")  # as docker run exits for it
    assert err == ("berth: error: run -t: no terminal to hand to the container\n"
                   "berth: hint: run from a terminal, or leave out -t\n")


# --- start-up ------------------------------------------------------------------------


def test_a_run_loads_no_library_but_libc(berth, img):
    """Each library the loader maps costs every container start (bench/start): libcurl,
    libarchive and libcrypto wait for their first use, the C++ runtime is linked in, and
    nothing of berth calls libm (before: loaded at every start, about 60 us)."""
    berth("create", "--name", "start-libs", img)
    _, out, err = berth("run", "start-libs", "/probe", "id", env={"LD_DEBUG": "files"})
    assert kv(out)["uid"] == "0"
    # The loader's lines for what berth itself needs or dlopens (not for setpriv, which
    # the test user's prefix may be).
    loaded = set(re.findall(r"file=(\S+) \[0\];  (?:needed|dynamically loaded) by " +
                            re.escape(berth.binary) + r" ", err))
    if any(name.startswith(("libasan", "libubsan", "libtsan")) for name in loaded):
        pytest.skip("a sanitizer build loads its runtimes")
    assert loaded == {"libc.so.6"}, err

"""What a parallel launcher hands a rank reaches the workload (runtime/launcher.h): the
descriptor PMI_FD names and --preserve-fds N, the launcher's PMI_*/PMIX_*/OMPI_* variables;
--ipc host shares the host's /dev/shm; ranks started with `berth exec` in one container share
its namespaces. Then a real MPICH job (Debian's mpich) when the host has one."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid

import pytest

import imagelib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def img(pulled_busybox):
    return pulled_busybox


def run_with_fds(berth, args, shell_redirects: str, env=None):
    """Runs berth ARGS from a shell that first opens `shell_redirects` (e.g. '3<FILE')."""
    cmd, full_env = berth.command(args, env)
    script = f"exec {shell_redirects}; exec \"$@\""
    r = subprocess.run(["sh", "-c", script, "sh", *cmd], env=full_env, capture_output=True,
                       text=True, timeout=120, cwd=berth.workdir)
    return r.returncode, r.stdout, r.stderr


def start_detached(berth, name, *args):
    """run -d NAME ... `sh -c 'echo ready; sleep 120'`, back once the workload runs."""
    berth("run", "-d", "--name", name, *args, "sh", "-c", "echo ready; exec sleep 120")
    deadline = time.monotonic() + 60
    while "ready" not in berth("logs", name)[1]:
        assert time.monotonic() < deadline, "timed out waiting for the workload to start"
        time.sleep(0.05)


def test_pmi_fd_and_variables_reach_the_workload(berth, img):
    note = berth.write_file("note", "from the launcher\n")
    rc, out, err = run_with_fds(
        berth, ["run", "--rm", img, "sh", "-c", 'read l <&$PMI_FD; echo "$l/$PMI_RANK/$PMIX_X"'],
        f"7<{note}", env={"PMI_FD": "7", "PMI_RANK": "3", "PMIX_X": "y", "NOT_PMI": "z"})
    assert rc == 0, err
    assert out == "from the launcher/3/y\n"


def test_other_descriptors_are_closed(berth, img):
    note = berth.write_file("note", "x\n")
    rc, out, err = run_with_fds(
        berth, ["run", "--rm", img, "sh", "-c",
                "for f in 3 4 7; do test -e /proc/self/fd/$f && echo $f; done; echo end"],
        f"3<{note} 4<{note} 7<{note}")
    assert rc == 0, err
    assert out == "end\n"


def test_preserve_fds_keeps_three_onwards(berth, img):
    note = berth.write_file("note", "x\n")
    rc, out, err = run_with_fds(
        berth, ["run", "--rm", "--preserve-fds", "2", img, "sh", "-c",
                "for f in 3 4 5; do test -e /proc/self/fd/$f && echo $f; done; echo end"],
        f"3<{note} 4<{note} 5<{note}")
    assert rc == 0, err
    assert out == "3\n4\nend\n"


def test_closed_pmi_fd_is_one_line(berth, img):
    rc, out, err = berth("run", "--rm", img, "true", check=False, env={"PMI_FD": "77"})
    assert rc == 125
    assert err.splitlines()[0] == "berth: error: run descriptor 77: Bad file descriptor"


def test_ipc_host_shares_dev_shm(berth, img):
    name = f"berth-e2e-{uuid.uuid4().hex[:8]}"
    try:
        berth("run", "--rm", "--ipc", "host", img, "sh", "-c", f"echo hi > /dev/shm/{name}")
        with open(f"/dev/shm/{name}") as f:
            assert f.read() == "hi\n"
        berth("run", "--rm", img, "sh", "-c", f"echo hi > /dev/shm/{name}.private")
        assert not os.path.exists(f"/dev/shm/{name}.private")
    finally:
        for n in (name, name + ".private"):
            if os.path.exists(f"/dev/shm/{n}"):
                os.unlink(f"/dev/shm/{n}")


def test_exec_carries_the_launchers_descriptor(berth, img):
    start_detached(berth, "job", img)
    try:
        note = berth.write_file("note", "to exec\n")
        rc, out, err = run_with_fds(
            berth, ["exec", "job", "sh", "-c", 'read l <&$PMI_FD; echo "$l/$PMI_RANK"'],
            f"9<{note}", env={"PMI_FD": "9", "PMI_RANK": "1"})
        assert rc == 0, err
        assert out == "to exec/1\n"
    finally:
        berth("rm", "-f", "job", check=False)


def test_mpich_ranks_in_one_container(berth, img, identity):
    """Debian's MPICH: two ranks started by mpiexec as `berth exec` in one container (one user
    namespace, one /dev/shm: what pyxis does per node) both initialise and ping-pong."""
    if not (shutil.which("mpiexec.mpich") and shutil.which("mpicc.mpich")):
        pytest.skip("Debian's mpich and libmpich-dev are not installed")
    binary = berth.path("pingpong")
    subprocess.run(["mpicc.mpich", "-O2", "-o", binary,
                    os.path.join(REPO, "bench", "mpi", "pingpong.c")], check=True)
    identity.chown(binary)
    # The host's /usr (MPICH and its dependencies) over the busybox image's.
    start_detached(berth, "mpijob", "-v", "/usr:/usr:ro", "-v", "/usr/lib:/lib:ro", "-v",
                   "/usr/lib64:/lib64:ro", "-v", f"{berth.workdir}:/w:ro", img)
    try:
        cmd, env = berth.command(["exec", "mpijob", "/w/pingpong", "8"])
        r = subprocess.run(["mpiexec.mpich", "-n", "2", *cmd], env=env, capture_output=True,
                           text=True, timeout=120, cwd=berth.workdir)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert sorted(l.split(":")[0] for l in lines if l.startswith("rank")) == [
            "rank 0 of 2", "rank 1 of 2"]
        assert any(l.startswith("size 8 latency_us") for l in lines)
    finally:
        berth("rm", "-f", "mpijob", check=False)


def test_detached_run_refuses_kept_descriptors(berth, img):
    note = berth.write_file("note", "x\n")
    rc, _, err = run_with_fds(berth, ["run", "-d", "--preserve-fds", "1", img, "true"],
                              f"3<{note}")
    assert rc == 125
    assert err.splitlines()[0] == ("berth: error: run descriptor 3: a detached run keeps no "
                                   "descriptors (PMI_FD, --preserve-fds)")


def test_oci_engine_passes_the_launchers_descriptor(berth, img):
    if not shutil.which("runc"):
        pytest.skip("runc is not installed")
    note = berth.write_file("note", "through runc\n")
    rc, out, err = run_with_fds(
        berth, ["run", "--rm", "--engine=oci", img, "sh", "-c",
                'read l <&$PMI_FD; echo "$l/$PMI_RANK"'],
        f"5<{note}", env={"PMI_FD": "5", "PMI_RANK": "2"})
    if rc != 0 and "runc" in err and "cgroup" in err:
        pytest.skip(f"runc cannot run rootless here: {err.strip()}")
    assert rc == 0, err
    assert out == "through runc/2\n"

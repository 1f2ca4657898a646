"""`sbatch --container-image`: the batch script runs in the image (as with pyxis), and Slurm's
own clients are there too: berth-slurm-client, bound at /usr/local/bin/srun (and sbatch,
scancel, squeue, sinfo, scontrol), runs the host's through the plugin's agent
(slurm/host_tools.h), so the script's srun steps start, and run in the same image."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from test_slurm import Slurm, sqsh_image  # noqa: F401  (a module fixture)


@pytest.fixture
def sl(berth, cluster) -> Slurm:
    return Slurm(berth, cluster)


def sbatch(sl, image: str, script: str, *opts) -> tuple[int, str]:
    path = sl.berth.write_file("job.sh", script, 0o755)
    out = sl.berth.path("job.out")
    rc, o, e = sl("sbatch", "--wait", "-w", "n1", f"--container-image={image}", "-o", out,
                  *opts, path)
    with open(out) as f:
        text = f.read()
    assert rc in (0, 1), o + e + text
    return rc, text


def test_srun_in_the_batch_script_runs_steps_in_the_same_image(sl, pushed_busybox, cluster):
    rc, text = sbatch(sl, pushed_busybox,
                      "#!/bin/sh\ncat /etc/motd\nsrun -n2 cat /etc/motd\necho inner=$?\n"
                      "srun -n1 sh -c 'exit 3'\necho inner=$?\n"
                      "scontrol show hostnames 'n[1-2]'\n", "-n2")
    assert rc == 0, text
    lines = [line for line in text.splitlines() if not line.startswith("srun: ")]
    # The script's own line, then the step's two tasks, each in the image.
    assert lines[:3] == ["hello from berth e2e"] * 3, text
    assert lines[3:] == ["inner=0", "inner=3", "n1", "n2"], text
    assert "srun: error: n1: task 0: Exited with exit code 3" in text
    # The agent went with the batch step (killed as the script's shell ends, maybe just after
    # sbatch --wait returned), and so did its folder.
    assert gone_soon(lambda: agents(sl.berth.identity.uid))
    assert gone_soon(lambda: [e for d, _, files in os.walk(cluster.runtime) for e in files + [d]
                              if e.endswith(".agent") or "/sock" in e])


def gone_soon(what, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def agents(uid: int) -> list[str]:
    """The test user's batch agents (host_agent.h's process name) still running."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "berth-slurm-agt":
                    found.append(pid)
        except OSError:
            continue
    return found


def test_srun_in_the_batch_script_finds_the_users_store_through_home(sl, pushed_busybox):
    # The batch container's HOME was Berth's default for a user the image does not know, "/":
    # the script's srun handed it to its steps, whose berth (finding the store through HOME,
    # as without BERTH_HOME) failed on "mkdir /.local". HOME stays the job's, as with enroot.
    path = sl.berth.write_file("home.sh", "#!/bin/sh\necho outer=$HOME\n"
                               "srun -n1 sh -c 'echo inner=$HOME'\n", 0o755)
    out = sl.berth.path("home.out")
    rc, o, e = sl("sbatch", "--wait", "-w", "n1", f"--container-image={pushed_busybox}",
                  "-o", out, path, env={"BERTH_HOME": ""})
    with open(out) as f:
        text = f.read()
    assert rc == 0, o + e + text
    assert text.splitlines() == [f"outer={sl.berth.home}", f"inner={sl.berth.home}"], text


def test_the_agent_runs_while_the_script_does(sl, pushed_busybox):
    # While the script runs, its agent is there (a process of the user's, named for ps).
    rc, text = sbatch(sl, pushed_busybox, "#!/bin/sh\nsrun true && echo agent-ok\n")
    assert (rc, text) == (0, "agent-ok\n")
    script = sl.berth.write_file("job2.sh", "#!/bin/sh\nsleep 30\n", 0o755)
    rc, out, err = sl("sbatch", "-w", "n1", "--parsable", f"--container-image={pushed_busybox}",
                      "-o", "/dev/null", script)
    assert rc == 0, err
    job = out.strip()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not agents(sl.berth.identity.uid):
            time.sleep(0.2)
        assert agents(sl.berth.identity.uid)
    finally:
        sl("scancel", job)
    assert gone_soon(lambda: agents(sl.berth.identity.uid), 60)


def test_srun_in_a_squashfs_batch_container(sl, sqsh_image):  # noqa: F811
    rc, text = sbatch(sl, sqsh_image, "#!/bin/sh\ncat /etc/motd\nsrun cat /etc/motd\n")
    assert rc == 0, text
    assert text == "motd from the image\n" * 2


def test_the_client_outside_a_batch_container_says_why(berth):
    client = os.path.join(os.path.dirname(berth.binary), "berth-slurm-client")
    if not os.path.exists(client):
        pytest.skip("berth-slurm-client is not built (needs libslurm-dev)")
    srun = berth.path("srun")
    os.symlink(client, srun)
    r = subprocess.run(berth.identity.prefix + [srun, "-n1", "true"],
                       env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert r.returncode == 127
    assert r.stderr == ('berth: error: exec: "srun": BERTH_SLURM_AGENT is not set (only the '
                        'batch script of sbatch --container-image reaches Slurm)\n')

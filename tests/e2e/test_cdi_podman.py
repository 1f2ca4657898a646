"""CDI edits as Podman applies them: one spec, one image, run by real Podman (rootless, as the
test user) and by Berth, and what the container sees compared. Podman reads specs from
/var/run/cdi only (4.3 has no per-user folder), so the test, as root, puts one there for its
run and removes it after."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile

import pytest

SPEC_NAME = "berth-e2e-podman-compare.json"
# What the container is asked about: the mount points the image lacks, their kind and mode, and
# a bound file's bytes (the fstype from /proc/mounts, so a link elsewhere would not pass).
PROBE = ("for p in /opt/cdi-src /scratch/cdi-tmp /scratch/cdi-ro; do "
         "echo \"$p $(stat -c '%A %F' $p) $(awk -v p=$p '$2 == p {print $3}' /proc/mounts)\"; "
         "done; cat /opt/cdi-src/f; touch /scratch/cdi-tmp/w && echo tmp-writable; "
         "touch /scratch/cdi-ro/w 2>/dev/null || echo ro-refused")


def podman_command(berth, runtime: str, *args) -> list[str]:
    # A runtime folder of the test's own: Podman's state and its rootless pause process's pid.
    return berth.identity.prefix + [
        "env", f"HOME={berth.home}", f"XDG_RUNTIME_DIR={berth.path('xdg')}",
        f"XDG_CONFIG_HOME={berth.home}/.config",
        "podman", "--storage-driver", "vfs", "--runtime", runtime, "--cgroup-manager", "cgroupfs",
        *args]


@pytest.fixture
def spec_and_image(berth):
    if os.geteuid() != 0:
        pytest.skip("the test writes Podman's spec into /var/run/cdi, which needs root")
    for tool in ("podman", "runc", "busybox"):
        if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    src = berth.make_dir("cdi-src")
    berth.write_file("cdi-src/f", "from the host\n")
    spec = {"cdiVersion": "0.5.0", "kind": "compare.example.com/dev",
            "devices": [{"name": "a", "containerEdits": {"mounts": [
                {"hostPath": src, "containerPath": "/opt/cdi-src", "options": ["ro", "bind"]},
                {"hostPath": "tmpfs", "containerPath": "/scratch/cdi-tmp", "type": "tmpfs",
                 "options": ["size=1m"]},
                {"hostPath": "tmpfs", "containerPath": "/scratch/cdi-ro", "type": "tmpfs",
                 "options": ["ro"]}]}}]}
    spec_dir = berth.make_dir("cdi")
    text = json.dumps(spec)
    berth.write_file("cdi/" + SPEC_NAME, text)
    os.makedirs("/var/run/cdi", exist_ok=True)
    system_spec = os.path.join("/var/run/cdi", SPEC_NAME)
    with open(system_spec, "w") as f:
        f.write(text)
    # The image: a static busybox and its applets, nothing else (no /opt, no /scratch).
    root = berth.make_dir("rootfs")
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy(shutil.which("busybox", path="/usr/bin:/bin"), os.path.join(root, "bin"))
    for applet in ("sh", "stat", "awk", "cat", "touch", "echo"):
        os.symlink("busybox", os.path.join(root, "bin", applet))
    image_tar = berth.path("image.tar")
    with tarfile.open(image_tar, "w") as t:
        t.add(root, arcname=".")
    os.chmod(image_tar, 0o644)
    os.chmod(berth.make_dir("xdg"), 0o700)
    yield spec_dir, image_tar
    os.unlink(system_spec)
    # Rootless Podman leaves a pause process holding its user namespace: it goes with the test.
    try:
        with open(berth.path("xdg", "libpod", "tmp", "pause.pid")) as f:
            os.kill(int(f.read().strip()), signal.SIGKILL)
    except (OSError, ValueError):
        pass  # none was started


def test_cdi_mounts_and_tmpfs_as_podman_makes_them(berth, spec_and_image):
    spec_dir, image_tar = spec_and_image
    runtime = shutil.which("runc", path="/usr/sbin:/usr/bin:/sbin:/bin")
    r = subprocess.run(podman_command(berth, runtime, "import", image_tar, "localhost/cdi:1"),
                       capture_output=True, text=True, timeout=120, cwd=berth.home)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(podman_command(berth, runtime, "run", "--rm", "--net", "none", "--device",
                                      "compare.example.com/dev=a", "localhost/cdi:1",
                                      "/bin/sh", "-c", PROBE),
                       capture_output=True, text=True, timeout=120, cwd=berth.home)
    if r.returncode != 0 and "compare.example.com" not in r.stderr:
        pytest.skip(f"rootless Podman cannot run here: {r.stderr.strip().splitlines()[-1:]}")
    assert r.returncode == 0, r.stderr
    podman = r.stdout
    berth("import", image_tar, "cdi:1")
    _, out, _ = berth("run", "--rm", "--device", "compare.example.com/dev=a", "cdi:1",
                      "/bin/sh", "-c", PROBE, env={"BERTH_CDI_SPEC_DIRS": spec_dir})
    assert out == podman
    # What the two agree on, spelled out: mount points at the containerPath (not links), the
    # tmpfs a sticky world-writable folder, ro honoured.
    lines = podman.splitlines()
    assert lines[0].startswith("/opt/cdi-src drwxr-xr-x directory "), podman
    assert lines[1:] == ["/scratch/cdi-tmp drwxrwxrwt directory tmpfs",
                         "/scratch/cdi-ro drwxrwxrwt directory tmpfs",
                         "from the host", "tmp-writable", "ro-refused"], podman

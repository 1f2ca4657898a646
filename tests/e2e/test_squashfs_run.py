"""`berth run FILE.sqsh`, end to end, as the unprivileged test user: Berth's own FUSE daemon
(berth-squashfs), real FUSE (fusermount3), real kernel overlayfs. Images are made here with mksquashfs (-all-root,
as enroot makes them), with and without Berth's /.berth/image.json.

Each test gets its own runtime directory (BERTH_RUNTIME_DIR), so that the mounts and daemons
it counts are its own."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import stat as stat_module
import subprocess
import tempfile
import time

import pytest

from test_run import userns_works

APPLETS = ("sh", "ls", "cat", "echo", "true", "touch", "rm", "id", "pwd", "sleep", "grep",
           "env", "stat", "mkdir", "wc")
CONFIG = {
    "architecture": "amd64",
    "os": "linux",
    "config": {
        "Entrypoint": ["/bin/sh", "-c"],
        "Cmd": ["echo config says $GREETING; pwd"],
        "Env": ["PATH=/bin", "GREETING=hello"],
        "WorkingDir": "/srv",
    },
    "rootfs": {"type": "layers", "diff_ids": []},
}


def fuse_procs(runtime: str) -> list[int]:
    """Live berth-squashfs processes mounting beneath `runtime` (zombies left to a pid 1 that
    does not reap hold nothing and do not count)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
        except OSError:
            continue
        state = stat.rsplit(")", 1)[1].split()[0]
        if state != "Z" and "berth-squashfs" in cmdline and runtime in cmdline:
            found.append(int(pid))
    return found


def mounts(runtime: str, table: str = "/proc/self/mountinfo") -> list[str]:
    """Mount points beneath `runtime` in this (the host's) mount namespace, or in the one whose
    mount table is `table` (a Slurm node's: slurm.Host or debian_root.Root's mountinfo())."""
    with open(table) as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(runtime)]


def berth_pids(uid: int, berth_home: str) -> list[int]:
    """Every berth process of the test user started for the store `berth_home` (runs, and the
    mounts' keepers, which keep their environment): not those of other tests running beside."""
    found = []
    mine = f"BERTH_HOME={berth_home}".encode() + b"\0"
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            st = os.stat(f"/proc/{pid}")
            if comm != "berth" or st.st_uid != uid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = b"\0" + f.read()
        except OSError:
            continue
        if b"\0" + mine in env:
            found.append(int(pid))
    return found


def wait_for(what, timeout: float = 10.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def make_tree(root: str, image_json: dict | None) -> None:
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy2("/bin/busybox", os.path.join(root, "bin", "busybox"))
    for a in APPLETS:
        os.symlink("busybox", os.path.join(root, "bin", a))
    for d in ("etc", "proc", "dev", "sys", "tmp", "srv", "root"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    os.chmod(os.path.join(root, "root"), 0o700)
    with open(os.path.join(root, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:app:/srv:/bin/sh\n")
    with open(os.path.join(root, "etc", "group"), "w") as f:
        f.write("root:x:0:\napp:x:1234:\n")
    with open(os.path.join(root, "etc", "motd"), "w") as f:
        f.write("motd from the image\n")
    with open(os.path.join(root, "root", "secret"), "w") as f:
        f.write("root only\n")
    os.chmod(os.path.join(root, "root", "secret"), 0o600)
    if image_json is not None:
        os.makedirs(os.path.join(root, ".berth"))
        with open(os.path.join(root, ".berth", "image.json"), "w") as f:
            json.dump(image_json, f)


# What `enroot import` writes for an image config of Env [PATH, GREETING], WorkingDir /srv,
# Cmd ["/bin/sh", "-c", "echo $GREETING; pwd"] and a label (enroot's docker::configure: the
# Env as lines of /etc/environment, the rest as the /etc/rc script enroot runs).
ENROOT_RC = """# org.example.label made by hand

mkdir -p "/srv" 2> /dev/null
cd "/srv" && unset OLDPWD || exit 1

if [ -s /etc/rc.local ]; then
    . /etc/rc.local
fi

if [ $# -gt 0 ]; then
    exec  "$@"
else
    exec  '/bin/sh' '-c' 'echo $GREETING; pwd'
fi
"""


def write_enroot_config(tree: str) -> None:
    with open(os.path.join(tree, "etc", "environment"), "w") as f:
        f.write("PATH=/bin\nGREETING=hello from enroot\n")
    with open(os.path.join(tree, "etc", "rc"), "w") as f:
        f.write(ENROOT_RC)
    with open(os.path.join(tree, "etc", "rc.local"), "w") as f:
        f.write("# This file is sourced by /etc/rc when the container starts.\n")


def mksquashfs(tree: str, out: str) -> str:
    subprocess.run(["mksquashfs", tree, out, "-all-root", "-comp", "lz4", "-noappend", "-quiet",
                    "-no-progress"], check=True, stdout=subprocess.DEVNULL)
    os.chmod(out, 0o644)
    return out


@pytest.fixture(scope="module")
def images(identity, scratch, usable_fuse):
    """`berth.sqsh` with Berth's image.json, `plain.sqsh` without (enroot's kind), and
    `complete.sqsh`, which also has every default mount target (/etc/hosts, resolv.conf)."""
    for tool in ("mksquashfs", "fusermount3"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    # A folder per module that uses the fixture (test_squashfs_formats imports it too).
    d = tempfile.mkdtemp(prefix="sqsh-images-", dir=scratch)
    os.chmod(d, 0o755)
    made = {}
    for name, meta in (("berth", {"schemaVersion": 1, "reference": "test/sqsh:1",
                                  "digest": "sha256:" + "0" * 64, "config": CONFIG}),
                       ("plain", None), ("complete", None), ("enroot", None)):
        tree = os.path.join(d, name + "-tree")
        make_tree(tree, meta)
        if name == "enroot":
            write_enroot_config(tree)
        if name == "complete":  # every default mount target: nothing for an overlay to take
            for f in ("hosts", "resolv.conf"):
                open(os.path.join(tree, "etc", f), "w").close()
        made[name] = mksquashfs(tree, os.path.join(d, name + ".sqsh"))
    return made


@pytest.fixture
def sq(berth, images):
    """berth with a runtime directory of this test's own."""
    runtime = berth.make_dir("runtime")
    berth.env["BERTH_RUNTIME_DIR"] = runtime
    berth.runtime = runtime
    yield berth
    # Whatever a test left running, the mounts must be gone soon after it.
    assert wait_for(lambda: not mounts(runtime) and not fuse_procs(runtime)), (
        mounts(runtime), fuse_procs(runtime))


def test_runs_image_config(sq, images):
    rc, out, err = sq("run", images["berth"])
    assert (rc, out, err) == (0, "config says hello\n/srv\n", "")
    # The command replaces Cmd; the entrypoint stays.
    assert sq("run", images["berth"], "cat /etc/motd")[1] == "motd from the image\n"


def test_an_image_enroot_made_runs_as_under_enroot(sq, images):
    """enroot keeps the image's Env in /etc/environment and its WorkingDir and command in
    /etc/rc, which it runs with the user's command as arguments: so does Berth, whether the
    file runs in place or becomes a container."""
    assert sq("run", images["enroot"]) == (0, "hello from enroot\n/srv\n", "")
    rc, out, err = sq("run", images["enroot"], "/bin/sh", "-c", "echo $GREETING in $PWD")
    assert (rc, out) == (0, "hello from enroot in /srv\n"), err
    rc, out, err = sq("create", "--name", "from-enroot", images["enroot"], check=False)
    assert rc == 0, err
    assert sq("run", "from-enroot") == (0, "hello from enroot\n/srv\n", "")
    doc = json.loads(sq("inspect", "--json", images["enroot"])[1])
    assert doc["enroot"] == {"Entrypoint": ["/bin/sh", "/etc/rc"],
                             "Env": ["PATH=/bin", "GREETING=hello from enroot"]}, doc
    assert "Image:       made by enroot" in sq("inspect", images["enroot"])[1]
    # --entrypoint replaces /etc/rc, as it replaces an image's entrypoint.
    rc, out, _ = sq("run", "--entrypoint", "/bin/pwd", images["enroot"])
    assert (rc, out) == (0, "/\n")


def test_plain_image_needs_a_command(sq, images):
    rc, out, err = sq("run", images["plain"], check=False)
    assert rc == 125
    assert err == (f"berth: error: run {images['plain']}: this squashfs image has no image "
                   f"config (neither Berth's nor enroot's): give the command to run\n"
                   f"berth: hint: berth run {images['plain']} /bin/sh\n")
    assert sq("run", images["plain"], "/bin/echo", "hi")[1] == "hi\n"


def test_root_owns_the_image_inside(sq, images):
    """mksquashfs -all-root files are root's inside (the daemon reports the mounting user as
    every file's owner), so a 0600 file of root's
    is readable by the container's root, as in a stored image."""
    _, out, _ = sq("run", images["plain"], "/bin/sh", "-c",
                   "stat -c '%u %g' /etc/motd /root/secret; cat /root/secret")
    assert out == "0 0\n0 0\nroot only\n"


def test_read_only_by_default(sq, images):
    rc, out, err = sq("run", images["plain"], "/bin/sh", "-c",
                      "echo x > /etc/motd; touch /new; echo status $?", check=False)
    assert "Read-only file system" in err
    assert out == "status 1\n"
    # Volumes and the scratch mounts stay writable.
    _, out, _ = sq("run", images["plain"], "/bin/sh", "-c", "echo t > /tmp/t && cat /tmp/t")
    assert out == "t\n"


def root_fs_type(sq, image: str, *args: str) -> str:
    _, out, _ = sq("run", *args, image, "/bin/sh", "-c", "cat /proc/self/mountinfo")
    for line in out.splitlines():
        fields = line.split()
        if fields[4] == "/":
            return fields[fields.index("-") + 1]
    raise AssertionError(out)


def test_read_only_run_without_overlay_when_nothing_needs_writing(sq, images):
    """A read-only run of an image that has every mount target, the user's passwd and group
    lines and the working directory binds the shared mount itself: no tmpfs, no overlay."""
    assert root_fs_type(sq, images["complete"]).startswith("fuse")
    rc, out, err = sq("run", images["complete"], "/bin/sh", "-c",
                      "touch /new; echo status $?; echo t > /tmp/t && cat /tmp/t", check=False)
    assert "Read-only file system" in err and out == "status 1\nt\n"
    # Anything to write keeps the overlay: a missing target, a user not in passwd, --writable.
    assert root_fs_type(sq, images["plain"]) == "overlay"
    assert root_fs_type(sq, images["complete"], "-u", "4321") == "overlay"
    assert root_fs_type(sq, images["complete"], "-v", f"{sq.make_dir('vol')}:/data") == "overlay"
    assert root_fs_type(sq, images["complete"], "--writable") == "overlay"


def test_writable_changes_are_discarded(sq, images):
    script = ("echo changed > /etc/motd && touch /new && rm /bin/ls && mkdir -p /opt/x && "
              "cat /etc/motd && id -u")
    rc, out, err = sq("run", "--writable", images["plain"], "/bin/sh", "-c", script)
    assert (rc, out, err) == (0, "changed\n0\n", "")
    _, out, _ = sq("run", images["plain"], "/bin/sh", "-c",
                   "cat /etc/motd; ls / | grep -c -x new; ls /bin/ls")
    assert out == "motd from the image\n0\n/bin/ls\n"


def test_writable_refused_for_other_targets(sq):
    d = sq.make_dir("rootfs")
    rc, _, err = sq("run", "--writable", d, "/bin/true", check=False)
    assert rc == 125
    assert err == (f"berth: error: run {d}: --writable applies to squashfs images only\n"
                   "berth: hint: a container's root filesystem is writable already\n")


def test_volume_env_workdir_user(sq, images):
    data = sq.make_dir("data")
    sq.write_file("data/in", "from the host\n")
    script = "cat in; echo $FOO; pwd; id -u; echo out > out; grep :4321: /etc/passwd | wc -l"
    _, out, _ = sq("run", "-v", f"{data}:/data", "-e", "FOO=bar", "-w", "/data", images["berth"],
                   script)
    assert out == "from the host\nbar\n/data\n0\n0\n"
    with open(os.path.join(data, "out")) as f:
        assert f.read() == "out\n"
    # A user the image lacks gets a passwd line in the overlay, read-only root or not; a
    # missing working directory is made.
    _, out, _ = sq("run", "-u", "4321", "-w", "/work/here", images["berth"],
                   "id -u; pwd; grep -c :4321: /etc/passwd")
    assert out == "4321\n/work/here\n1\n"
    _, out, _ = sq("run", "-u", "app", "--hostname", "sq-host", images["berth"],
                   "id -un; cat /proc/sys/kernel/hostname")
    assert out == "app\nsq-host\n"


def test_modes_inside_as_root_and_as_a_user(sq, scratch):
    """The kernel checks the image's mode bits (default_permissions) against every file's
    owner, the mounting user, who is root inside: container root reads any file (its
    CAP_DAC_OVERRIDE), but executes and finds executable only what has an x bit; a user of the
    image has no capabilities and is held to the mode bits: a 0000 file is not theirs to read
    (without default_permissions, which would make a walk about 1 ms faster, it would be)."""
    d = tempfile.mkdtemp(prefix="modes-", dir=scratch)
    os.chmod(d, 0o755)
    tree = os.path.join(d, "tree")
    make_tree(tree, None)
    for f in ("hosts", "resolv.conf"):  # every mount target: root reads the FUSE mount itself
        open(os.path.join(tree, "etc", f), "w").close()
    for name, text, mode in (("run.sh", "#!/bin/sh\necho ran\n", 0o755),
                             ("data", "data\n", 0o644), ("none", "none\n", 0o000)):
        path = os.path.join(tree, "srv", name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
    image = mksquashfs(tree, os.path.join(d, "modes.sqsh"))
    script = ("cd /srv; [ -x run.sh ] && echo x-run; [ -x data ] || echo no-x-data; "
              "[ -x . ] && echo x-dir; ./run.sh; cat none; ./data; echo rc=$?")
    assert root_fs_type(sq, image).startswith("fuse")
    rc, out, err = sq("run", image, "/bin/sh", "-c", script, check=False)
    assert out == "x-run\nno-x-data\nx-dir\nran\nnone\nrc=126\n", (out, err)
    assert "Permission denied" in err
    rc, out, err = sq("run", "-u", "app", image, "/bin/sh", "-c",
                      "cd /srv; [ -x run.sh ] && ./run.sh; cat data; cat none; echo rc=$?",
                      check=False)
    assert out == "ran\ndata\nrc=1\n", (out, err)
    assert "Permission denied" in err


def test_concurrent_runs_share_one_mount(sq, images, identity):
    out = sq.make_dir("out")
    runs = [sq.popen("run", "-v", f"{out}:/out", images["plain"], "/bin/sh", "-c",
                     f"touch /out/{i}; sleep 4") for i in range(8)]
    try:
        assert wait_for(lambda: len(os.listdir(out)) == 8, timeout=30), os.listdir(out)
        assert len(fuse_procs(sq.runtime)) == 1
        assert len(mounts(sq.runtime)) == 1
    finally:
        results = [(p.wait(timeout=60), p.stderr.read()) for p in runs]
    assert results == [(0, "")] * 8
    # The last one out takes the mount and the daemon along.
    assert wait_for(lambda: not mounts(sq.runtime) and not fuse_procs(sq.runtime))


def test_joining_a_mount_needs_no_daemon_lookup(sq, images):
    """Only a start that mounts looks for berth-squashfs: one that joins a mount does not (its
    PATH search is no part of every start), and a start that must mount still says what is
    missing."""
    bad = {"BERTH_SQUASHFS_DAEMON": "/nonexistent/berth-squashfs"}
    rc, _, err = sq("run", images["plain"], "/bin/true", env=bad, check=False)
    assert rc == 125 and "BERTH_SQUASHFS_DAEMON=/nonexistent/berth-squashfs" in err, err
    out = sq.make_dir("out")
    holder = sq.popen("run", "-v", f"{out}:/out", images["plain"], "/bin/sh", "-c",
                      "touch /out/up; sleep 4")
    try:
        assert wait_for(lambda: os.listdir(out) == ["up"], timeout=30), os.listdir(out)
        assert sq("run", images["plain"], "/bin/echo", "joined", env=bad)[1] == "joined\n"
    finally:
        assert holder.wait(timeout=60) == 0


def test_sigkill_of_every_berth_process_leaves_nothing(sq, images, identity):
    out = sq.make_dir("out")
    runs = [sq.popen("run", "-v", f"{out}:/out", images["plain"], "/bin/sh", "-c",
                     f"touch /out/{i}; exec sleep 600") for i in range(4)]
    assert wait_for(lambda: len(os.listdir(out)) == 4, timeout=30), os.listdir(out)
    assert len(mounts(sq.runtime)) == 1 and len(fuse_procs(sq.runtime)) == 1
    pids = berth_pids(identity.uid, sq.berth_home)
    assert len(pids) >= 5  # four runs and the mount's keeper
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for p in runs:
        assert p.wait(timeout=30) == -signal.SIGKILL
    assert wait_for(lambda: not mounts(sq.runtime) and not fuse_procs(sq.runtime)), (
        mounts(sq.runtime), fuse_procs(sq.runtime))
    # The workloads died with their runs.
    assert wait_for(lambda: not [p for p in os.listdir("/proc") if p.isdigit() and
                                 _cmdline(p) == "sleep\x00600\x00"])
    # And the image runs again.
    assert sq("run", images["plain"], "/bin/echo", "again")[1] == "again\n"


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _one_line_refusal(sq, path: str) -> str:
    rc, out, err = sq("run", path, "/bin/true", check=False)
    assert rc == 125 and out == ""
    assert len(err.splitlines()) == 1, err
    assert wait_for(lambda: not mounts(sq.runtime) and not fuse_procs(sq.runtime))
    return err


def bytes_writer(d: str):
    """A function (name, data) -> path that writes `data` as the file `name` in folder `d`."""
    def write(name: str, data: bytes) -> str:
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(data)
        return path
    return write


def test_bad_files_are_refused_in_one_line(sq, images):
    with open(images["plain"], "rb") as f:
        good = f.read()
    d = sq.make_dir("bad")
    write = bytes_writer(d)

    missing = os.path.join(d, "missing.sqsh")
    assert _one_line_refusal(sq, missing) == (
        f"berth: error: open {missing}: No such file or directory\n")
    text = write("text.sqsh", b"just some text, not an image\n" * 10)
    assert _one_line_refusal(sq, text) == (
        f"berth: error: read squashfs {text}: not a squashfs image (no squashfs magic number)\n")
    truncated = write("truncated.sqsh", good[:len(good) // 2])
    assert _one_line_refusal(sq, truncated) == (
        f"berth: error: read squashfs {truncated}: truncated squashfs image: it says "
        f"{int.from_bytes(good[40:48], 'little')} bytes, the file has {len(good) // 2}\n")
    bad_block = bytearray(good)
    bad_block[22:24] = (3).to_bytes(2, "little")  # block_log no longer matches block_size
    corrupt = write("corrupt.sqsh", bytes(bad_block))
    assert _one_line_refusal(sq, corrupt) == (
        f"berth: error: read squashfs {corrupt}: corrupt squashfs image: block size 131072 "
        f"(log 3)\n")
    # A superblock that passes, over an inode table that is garbage: the daemon cannot read
    # the root directory; refused (before anything is mounted), and nothing left behind.
    garbage = bytearray(good)
    inodes, directories = (int.from_bytes(good[o:o + 8], "little") for o in (64, 72))
    garbage[inodes:directories] = b"\xff" * (directories - inodes)
    mangled = write("mangled.sqsh", bytes(garbage))
    assert _one_line_refusal(sq, mangled).startswith(
        f"berth: error: mount squashfs {mangled}: corrupt squashfs image: its root directory "
        f"cannot be read (")


def test_a_named_run_or_create_extracts_the_file_into_a_container(sq, images):
    # enroot's create: a container of the store, extracted from the file, with the image
    # config Berth keeps in it; its changes stay (the run is not on the shared mount).
    rc, out, err = sq("run", "--name", "kept", images["berth"], "echo changed > /etc/motd; pwd")
    assert (rc, out) == (0, "/srv\n"), err
    assert not mounts(sq.runtime)
    assert sq("run", "kept", "cat /etc/motd")[1] == "changed\n"
    assert sq("ps", "-a", "--format", "{{.Names}} {{.Image}}")[1] == f"kept {images['berth']}\n"
    # Rootless, as a rootless unpack: root's files (mksquashfs -all-root) are the user's.
    rootfs = sq("inspect", "--format", "{{.rootfs}}", "kept")[1].strip()
    assert os.stat(os.path.join(rootfs, "root", "secret")).st_uid == sq.identity.uid
    # create: from a plain file (no Berth config), a relative path; the name is taken once.
    rel = os.path.relpath(images["plain"], sq.workdir)
    rc, out, err = sq("create", "--name", "made", rel, "cat", "/etc/motd", check=False)
    assert rc == 0 and len(out.strip()) == 64, err
    assert sq("run", "made")[1] == "motd from the image\n"
    rc, _, err = sq("create", "--name", "made", images["plain"], check=False)
    assert rc == 125
    assert "made" in err and "already" in err, err
    # A file that is not squashfs: one line, and no container left.
    bad = sq.write_file("bad.sqsh", "not an image\n" * 10)
    rc, _, err = sq("create", "--name", "bad", bad, check=False)
    assert rc == 125 and len(err.splitlines()) == 1, err
    assert "bad" not in sq("ps", "-a", "--format", "{{.Names}}")[1]


def test_other_engines_are_refused(sq, images):
    rc, _, err = sq("run", "--engine=proot", images["plain"], "/bin/true", check=False)
    assert rc == 125
    assert err == (f"berth: error: run {images['plain']}: a squashfs image runs with the "
                   "userns engine only\n")


def test_the_policys_runtime_dir_holds_the_mounts(berth, images, scratch, identity, policy):
    """runtime_dir in the site policy (docs/site.md) moves the shared mounts into a folder per
    user beneath it, as it moves the oci engine's state."""
    if os.geteuid() != 0:
        pytest.skip("policy files must be owned by root: run the tests as root")
    shared = tempfile.mkdtemp(prefix="shm-", dir=scratch)
    os.chmod(shared, 0o1777)  # as /dev/shm
    path = policy(f'runtime_dir = "{shared}"\n')
    berth.env.pop("BERTH_RUNTIME_DIR", None)
    mine = os.path.join(shared, f"berth-{identity.uid}")
    try:
        rc, out, err = berth("run", images["plain"], "/bin/echo", "hi",
                             env={"BERTH_SITE_CONF": path}, check=False)
        assert (rc, out, err) == (0, "hi\n", "")
        st = os.stat(mine)
        assert st.st_uid == identity.uid and stat_mode(st) == 0o700
        assert os.listdir(os.path.join(mine, "squashfs"))  # the image's key folder
    finally:
        assert wait_for(lambda: not mounts(shared) and not fuse_procs(shared)), (
            mounts(shared), fuse_procs(shared))


def test_a_runtime_folder_another_user_took_first_is_passed_over(berth, images, scratch,
                                                                identity, policy):
    """On a shared machine another user can make berth-UID in the shared folder first (here
    root's, in the policy's runtime_dir; /tmp/berth-UID without one): the run says whose it is
    and uses a private folder under the user's cache, never the squatter's."""
    if os.geteuid() != 0:
        pytest.skip("policy files must be owned by root: run the tests as root")
    shared = tempfile.mkdtemp(prefix="shm-", dir=scratch)
    os.chmod(shared, 0o1777)
    taken = os.path.join(shared, f"berth-{identity.uid}")
    os.mkdir(taken, 0o777)  # root's, and writable by all: a trap, not a home
    path = policy(f'runtime_dir = "{shared}"\n')
    berth.env.pop("BERTH_RUNTIME_DIR", None)
    private = os.path.join(berth.home, ".cache", "berth", f"run-{os.uname().nodename}")
    try:
        rc, out, err = berth("run", images["plain"], "/bin/echo", "hi",
                             env={"BERTH_SITE_CONF": path}, check=False)
        assert (rc, out) == (0, "hi\n"), err
        assert err == (f"berth: warning: {taken} is a folder of user root (uid 0), not yours: "
                       f"using {private} instead (set BERTH_RUNTIME_DIR or XDG_RUNTIME_DIR to "
                       "choose another)\n")
        assert os.listdir(taken) == []
        st = os.stat(private)
        assert st.st_uid == identity.uid and stat_mode(st) == 0o700
        assert os.listdir(os.path.join(private, "squashfs"))
    finally:
        assert wait_for(lambda: not mounts(private) and not fuse_procs(private)), (
            mounts(private), fuse_procs(private))


def stat_mode(st: os.stat_result) -> int:
    return st.st_mode & 0o7777


WALK_APPLETS = ("sh", "find", "sort", "stat", "readlink", "sha256sum", "ls", "wc", "cat", "while",
                "test", "[")


def _walk_tree(root: str) -> str:
    """A tree with what a directory walk must get right: a directory of 3,000 entries with long
    names (its listing spans many FUSE readdir replies), hard links, symlinks (relative,
    absolute, dangling), a FIFO, odd modes (setuid, sticky, 0600, 0700), an empty file, files of
    other owners, and a 5 MB file of seeded random bytes (data blocks and a fragment)."""
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy2("/bin/busybox", os.path.join(root, "bin", "busybox"))
    for a in WALK_APPLETS:
        if a not in ("while",):
            os.symlink("busybox", os.path.join(root, "bin", a))
    for d in ("etc", "proc", "dev", "sys", "tmp"):
        os.makedirs(os.path.join(root, d))
    for f in ("hosts", "resolv.conf"):
        open(os.path.join(root, "etc", f), "w").close()
    with open(os.path.join(root, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(os.path.join(root, "etc", "group"), "w") as f:
        f.write("root:x:0:\n")
    w = os.path.join(root, "w")
    many = os.path.join(w, "many")
    os.makedirs(many)
    for i in range(3000):
        name = f"entry-{i:05d}-" + "x" * (i % 120)
        with open(os.path.join(many, name), "w") as f:
            f.write("y" * (i % 7))
    os.makedirs(os.path.join(w, "sub", "deeper", "deepest"))
    with open(os.path.join(w, "sub", "a"), "w") as f:
        f.write("hard linked\n")
    os.link(os.path.join(w, "sub", "a"), os.path.join(w, "sub", "hard"))
    os.link(os.path.join(w, "sub", "a"), os.path.join(w, "sub", "deeper", "hard2"))
    os.symlink("a", os.path.join(w, "sub", "rel"))
    os.symlink("/w/sub/deeper", os.path.join(w, "sub", "abs"))
    os.symlink("../nowhere/" + "long" * 40, os.path.join(w, "sub", "dangling"))
    os.mkfifo(os.path.join(w, "sub", "fifo"), 0o640)
    open(os.path.join(w, "empty"), "w").close()
    for name, mode in (("setuid", 0o4755), ("private", 0o600), ("group", 0o640)):
        path = os.path.join(w, name)
        with open(path, "w") as f:
            f.write(name + "\n")
        os.chmod(path, mode)
    os.chmod(os.path.join(w, "sub", "deeper"), 0o700)
    os.chmod(os.path.join(w, "sub", "deeper", "deepest"), 0o1777)
    os.chown(os.path.join(w, "group"), 1234, 4321)
    rng = random.Random(12)
    with open(os.path.join(w, "big"), "wb") as f:
        f.write(rng.randbytes(5 * 1024 * 1024 + 12345))
    for dirpath, _, _ in os.walk(root):
        os.utime(dirpath, (1700000000, 1700000000))
    return root


def test_a_walk_inside_matches_the_image_tree(sq, scratch):
    """From a fresh mount, a walk inside the container sees the tree the image was made from:
    names, types, modes, sizes, link counts, times, symlink targets, hard links as one inode,
    every file the caller's (root inside), and the contents of a large file. The attributes a
    walk sees come from the daemon's READDIRPLUS replies (the kernel keeps them), so this is
    what checks them. Walks after the first see the same tree: the daemon lets the kernel cache
    listings from the second on."""
    d = tempfile.mkdtemp(prefix="walk-", dir=scratch)
    os.chmod(d, 0o755)
    tree = _walk_tree(os.path.join(d, "tree"))
    image = os.path.join(d, "walk.sqsh")
    subprocess.run(["mksquashfs", tree, image, "-comp", "lz4", "-noappend", "-quiet",
                    "-no-progress"], check=True, stdout=subprocess.DEVNULL)
    os.chmod(image, 0o644)
    script = ("cd /w && find . | sort | while read -r p; do "
              "if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then stat -c '%n %f - %u %g - %Y' \"$p\"; "
              "else stat -c '%n %f %s %u %g %h %Y' \"$p\"; fi; "
              "if [ -L \"$p\" ]; then echo \"-> $(readlink \"$p\")\"; fi; done; "
              "stat -c '%i' sub/a sub/hard sub/deeper/hard2 sub/rel | sort -u | wc -l; "
              "sha256sum big; ls -a many | wc -l; "
              # Listed again, twice: berth-squashfs then lets the kernel open directories by
              # itself, listings cached (its first walk opens them without that cache).
              "for i in 1 2 3; do find . -exec stat -c '%n %f %s %h' {} + | sort | sha256sum; done "
              "| uniq | wc -l; ls -a many | wc -l")
    rc, out, err = sq("run", image, "/bin/sh", "-c", script, check=False)
    assert (rc, err) == (0, ""), err

    expected = []
    w = os.path.join(tree, "w")
    paths = ["."]
    for dirpath, dirnames, filenames in os.walk(w):
        for n in dirnames + filenames:
            paths.append("./" + os.path.relpath(os.path.join(dirpath, n), w))
    for p in sorted(paths):
        st = os.lstat(os.path.join(w, p))
        if stat_module.S_ISDIR(st.st_mode):
            expected.append(f"{p} {st.st_mode:x} - 0 0 - {int(st.st_mtime)}")
        else:
            expected.append(f"{p} {st.st_mode:x} {st.st_size} 0 0 {st.st_nlink} "
                            f"{int(st.st_mtime)}")
        if stat_module.S_ISLNK(st.st_mode):
            expected.append("-> " + os.readlink(os.path.join(w, p)))
    expected.append("2")  # sub/a, sub/hard and deeper/hard2 are one inode; rel is another
    with open(os.path.join(w, "big"), "rb") as f:
        expected.append(hashlib.sha256(f.read()).hexdigest() + "  big")
    expected.append("3002")  # 3,000 entries and "." and ".."
    expected += ["1", "3002"]  # three walks that saw the same tree
    assert out.splitlines() == expected

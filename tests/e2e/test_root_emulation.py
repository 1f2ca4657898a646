"""Package managers inside, rootless, with the default engine (runtime/root_emulation.h): the
seccomp root emulation makes set*id, setgroups, chown and device mknod succeed without effect,
and turns apt's sandbox user off; --root-emulation=none and the policy's root_emulation turn it
off. The fast tests use the probe image; the slow one builds a real Debian 12 image with
mmdebstrap (cached) and runs apt-get, useradd, chown and su in it. The default (auto) is the
subordinate-ID mode where the user has ranges (test_subids.py): here the seccomp mode is asked
for by name, or reached as auto's choice without ranges (BERTH_SUBUID naming an empty file)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from test_docker import detach, logs, wait_for
from test_policy import user_file
from test_run import img, kv, run_image  # noqa: F401  (fixtures and a helper)

ALL_CALLS = ["setgroups", "setresgid", "setresuid", "setuid", "chown", "mknod_chr", "mknod_fifo"]
ROOTOPS = "touch /f && /probe rootops /f"


def no_ranges(berth) -> dict:
    """Auto without subordinate ranges: the seccomp mode. A runtime folder of the test's own,
    where no holder of the subordinate-ID mode lives (a live one is used without rereading
    /etc/subuid)."""
    return {"BERTH_SUBUID": "/dev/null", "BERTH_SUBGID": "/dev/null",
            "BERTH_RUNTIME_DIR": berth.make_dir("runtime-no-ranges")}


def rootops(berth, image, *flags, env=None) -> dict:
    _, out, _ = berth("run", "--rm", *flags, image, "/bin/sh", "-c", ROOTOPS, env=env)
    return kv(out)


# --- fast: the probe image, no network ------------------------------------------------------


@pytest.mark.parametrize("how", ["flag", "auto-without-ranges"])
def test_root_calls_succeed_without_effect_under_seccomp(berth, img, how):
    if how == "flag":
        r = rootops(berth, img, "--root-emulation=seccomp")
    else:
        r = rootops(berth, img, env=no_ranges(berth))
    assert {c: r[c] for c in ALL_CALLS} == {c: "ok" for c in ALL_CALLS}, r
    assert (r["uid"], r["gid"], r["owner"]) == ("0", "0", "0:0")  # nothing changed
    assert (r["dev"], r["fifo"]) == ("0", "1")  # no device node; a FIFO as usual


def test_root_emulation_none_refuses_as_before(berth, img):
    r = rootops(berth, img, "--root-emulation=none")
    assert (r["setgroups"], r["setresuid"], r["chown"]) == ("EPERM", "EINVAL", "EINVAL"), r
    assert r["fifo"] == "1"


def test_policy_turns_root_emulation_off_and_info_says_so(berth, img):
    env = user_file(berth, 'root_emulation = "none"\n')
    _, out, _ = berth("run", "--rm", img, "/bin/sh", "-c", ROOTOPS, env=env)
    assert kv(out)["chown"] == "EINVAL"
    _, out, _ = berth("run", "--rm", "--root-emulation=seccomp", img, "/bin/sh", "-c", ROOTOPS,
                      env=env)
    assert kv(out)["chown"] == "ok"  # the command line wins over the user's file
    info = berth.json("info", "--json", env=env)
    assert info["root_emulation"]["mode"] == "none"
    assert info["policy"]["settings"]["root_emulation"]["value"] == "none"
    _, out, _ = berth("info", env=no_ranges(berth))
    assert "Root emulation:    seccomp (one mapped ID; set*id, setgroups, chown and device " \
           "mknod succeed without effect)" in out


def test_unknown_root_emulation_is_one_line(berth, img):
    rc, _, err = berth("run", "--rm", "--root-emulation=fake", img, "true", check=False)
    assert rc == 125
    assert err == "berth: error: run --root-emulation fake: expected auto, subids, seccomp or none\n"


def test_exec_gets_the_containers_root_emulation(berth, img):
    detach(berth, "--name", "emu", "--root-emulation=seccomp", img, "/probe", "signals", "604")
    wait_for(lambda: "ready" in logs(berth, "emu"), "the workload to start")
    _, out, _ = berth("exec", "emu", "/bin/sh", "-c", ROOTOPS)
    assert kv(out)["setresuid"] == "ok" and kv(out)["chown"] == "ok"
    berth("kill", "emu")
    detach(berth, "--name", "plain", "--root-emulation=none", img, "/probe", "signals", "605")
    wait_for(lambda: "ready" in logs(berth, "plain"), "the workload to start")
    _, out, _ = berth("exec", "plain", "/bin/sh", "-c", ROOTOPS)
    assert kv(out)["setresuid"] == "EINVAL"
    berth("kill", "plain")


# --- slow: a real Debian 12 image, apt from Debian's archive --------------------------------

CACHE = os.environ.get("BERTH_TEST_CACHE", "/var/tmp/berth-test-cache")


def archive_reachable() -> bool:
    try:
        socket.create_connection(("deb.debian.org", 80), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def debian_tarball() -> str:
    """Debian 12 (mmdebstrap --variant=apt), built once and kept in CACHE for later runs."""
    path = os.path.join(CACHE, "bookworm-apt.tar")
    if not os.path.isfile(path):
        if shutil.which("mmdebstrap") is None:
            pytest.skip("mmdebstrap is not installed (scripts/setup.sh installs it)")
        if os.geteuid() != 0:
            pytest.skip("building the Debian image needs root (mmdebstrap's root mode)")
        if not archive_reachable():
            pytest.skip("Debian's archive (deb.debian.org) is not reachable")
        os.makedirs(CACHE, mode=0o755, exist_ok=True)
        # Written beside and renamed: an interrupted build leaves no tarball to trust.
        partial = os.path.join(CACHE, "bookworm-apt.partial.tar")
        if os.path.exists(partial):
            os.remove(partial)
        subprocess.run(["mmdebstrap", "--quiet", "--format=tar", "--variant=apt", "bookworm",
                        partial], check=True, stdout=subprocess.DEVNULL, timeout=900)
        os.rename(partial, path)
    os.chmod(CACHE, 0o755)
    os.chmod(path, 0o644)  # the unprivileged user imports it
    return path


def test_apt_install_useradd_chown_su_then_rm_leaves_nothing(berth, debian_tarball):
    """Without subordinate ranges (auto's seccomp mode); test_subids.py has the same with them."""
    if not archive_reachable():
        pytest.skip("Debian's archive (deb.debian.org) is not reachable")
    berth.env.update(no_ranges(berth))
    berth("import", debian_tarball, "deb12", timeout=300)
    script = (
        "set -e; apt-get update -qq; apt-get install -y -qq hello >/dev/null; hello; "
        "useradd -m bob; touch /home/bob/notes; chown bob:bob /home/bob/notes; "
        "su bob -c 'echo su-ran'; id -u")
    _, out, err = berth("run", "--name", "deb", "deb12", "/bin/sh", "-c", script, timeout=600)
    lines = out.splitlines()
    assert "Hello, world!" in lines and "su-ran" in lines, (out, err)
    assert lines[-1] == "0"
    # The package stays in the container: a second run finds it.
    _, out, _ = berth("run", "deb", "/usr/bin/hello")
    assert out == "Hello, world!\n"
    # Every file the package manager wrote is the user's: export reads them all.
    out_tar = os.path.join(berth.workdir, "deb.tar")
    berth("export", "-o", out_tar, "deb", timeout=300)
    names = subprocess.run(["tar", "-tf", out_tar], check=True, stdout=subprocess.PIPE,
                           text=True).stdout.splitlines()
    assert "usr/bin/hello" in [n.lstrip("./") for n in names]
    berth("rm", "deb")
    containers = os.path.join(berth.berth_home, "containers")
    assert not os.path.isdir(containers) or os.listdir(containers) == []
    berth("rmi", "deb12")


def test_apt_without_root_emulation_fails_as_before(berth, debian_tarball):
    berth("import", debian_tarball, "deb12", timeout=300)
    rc, out, err = berth("run", "--rm", "--root-emulation=none", "deb12", "/bin/sh", "-c",
                         "apt-get update 2>&1", check=False, timeout=300)
    assert rc != 0 and "setgroups" in out, (out, err)


# --- a squashfs image: the drop-in goes to a writable run's overlay --------------------------


def test_writable_squashfs_run_gets_the_apt_drop_in_in_its_overlay(berth, identity, scratch,
                                                                   usable_fuse):
    from test_squashfs_run import make_tree, mksquashfs  # noqa: PLC0415 (its fixtures skip)
    for tool in ("mksquashfs", "squashfuse_ll", "fusermount3"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    tree = os.path.join(berth.workdir, "apt-tree")
    make_tree(tree, None)
    os.makedirs(os.path.join(tree, "etc", "apt", "apt.conf.d"))
    image = mksquashfs(tree, os.path.join(berth.workdir, "apt.sqsh"))
    berth.env.update(no_ranges(berth))  # the drop-in is the seccomp mode's
    drop_in = "/etc/apt/apt.conf.d/00berth-root-emulation"
    _, out, _ = berth("run", "--writable", image, "/bin/cat", drop_in)
    assert out.endswith('APT::Sandbox::User "root";\n'), out
    rc, _, _ = berth("run", image, "/bin/cat", drop_in, check=False)  # read-only: not written
    assert rc == 1
    rc, _, _ = berth("run", "--writable", "--root-emulation=none", image, "/bin/cat", drop_in,
                     check=False)
    assert rc == 1

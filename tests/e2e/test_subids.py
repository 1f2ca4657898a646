"""The subordinate-ID mode (runtime/subids.h), rootless: where the test user has ranges in
/etc/subuid and /etc/subgid and Debian's newuidmap/newgidmap are installed, the default (auto)
maps root inside to the user and 1..N to the range, through one holder process per user; set*id,
setgroups and chown are real; rm, export, squash and clone walk the tree inside that namespace.
The fast tests use the probe image; the slow one installs a package from Debian's archive in a
real Debian 12 image (mmdebstrap, cached). Each test keeps its holder in a runtime folder of its
own and kills it at the end."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tarfile
import threading

import pytest

from conftest import subid_holders
from test_docker import detach, logs, wait_for
from test_policy import user_file
from test_root_emulation import ROOTOPS, archive_reachable, debian_tarball  # noqa: F401
from test_run import img, kv, run_image  # noqa: F401  (fixtures and a helper)


def subid_range(identity, path: str) -> tuple[int, int] | None:
    name = pwd.getpwuid(identity.uid).pw_name
    try:
        with open(path) as f:
            for line in f:
                parts = line.strip().split(":")
                if len(parts) == 3 and parts[0] in (name, str(identity.uid)):
                    return int(parts[1]), int(parts[2])
    except OSError:
        return None
    return None


@pytest.fixture
def subids(berth, identity) -> tuple[int, int]:
    """The user's subordinate uid range (start, count); skips where the mode cannot run. The
    holder lives in the test's own runtime folder and is killed at the end."""
    if identity.uid == 0:
        pytest.skip("berth runs as root here: the mode is off")
    for tool in ("newuidmap", "newgidmap"):
        if shutil.which(tool, path="/usr/bin:/bin:/usr/sbin:/sbin") is None:
            pytest.skip(f"{tool} is not installed (Debian package uidmap)")
    uids = subid_range(identity, "/etc/subuid")
    if uids is None or subid_range(identity, "/etc/subgid") is None:
        pytest.skip("the test user has no range in /etc/subuid and /etc/subgid")
    runtime = berth.make_dir("runtime")
    os.chmod(runtime, 0o700)
    berth.env["BERTH_RUNTIME_DIR"] = runtime
    yield uids
    pid = holder_pid(runtime)
    if pid:
        os.kill(pid, signal.SIGKILL)


def holder_pid(runtime: str) -> int:
    try:
        with open(os.path.join(runtime, "subids.pid")) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


# --- fast: the probe image ------------------------------------------------------------------


def test_default_maps_the_subordinate_range_and_ids_are_real(berth, img, subids):
    _, out, _ = berth("run", "--rm", img, "/bin/sh", "-c", "cat /proc/self/uid_map")
    lines = [line.split() for line in out.splitlines()]
    assert lines == [["0", str(berth.identity.uid), "1"], ["1", str(subids[0]), str(subids[1])]]
    _, out, _ = berth("run", "--rm", img, "/bin/sh", "-c", ROOTOPS)
    r = kv(out)
    assert (r["setgroups"], r["setresgid"], r["setresuid"]) == ("ok", "ok", "ok"), r
    assert (r["uid"], r["gid"]) == ("42", "42")  # the switch was real
    _, out, _ = berth("run", "--rm", img, "/bin/sh", "-c", "cat /proc/self/status")
    assert "Seccomp:\t0" in out  # no filter in this mode
    info = berth.json("info", "--json")
    assert info["root_emulation"]["mode"] == "subids"
    assert info["root_emulation"]["configured"] == "auto"
    sub = info["root_emulation"]["subids"]
    assert sub["available"] is True
    assert sub["uids"] == f"{subids[0]}-{subids[0] + subids[1] - 1}"
    assert sub["holder_pid"] == holder_pid(berth.env["BERTH_RUNTIME_DIR"])
    _, out, _ = berth("info")
    assert (f"Root emulation:    subids (root is you; IDs 1-{subids[1]} are your subordinate IDs "
            f"{subids[0]}-{subids[0] + subids[1] - 1}; set*id, setgroups and chown are real)"
            in out), out


def test_volume_files_root_writes_are_the_users_and_others_subordinate(berth, img, subids,
                                                                       identity):
    vol = berth.make_dir("vol")
    berth("run", "--rm", "-v", f"{vol}:/vol", img, "/bin/sh", "-c",
          "echo x > /vol/root-file && echo y > /vol/other && chown 42:42 /vol/other")
    assert os.stat(os.path.join(vol, "root-file")).st_uid == identity.uid
    assert os.stat(os.path.join(vol, "other")).st_uid == subids[0] + 41
    os.remove(os.path.join(vol, "other"))  # the test's cleanup: root's, outside


def test_holder_is_made_once_for_concurrent_first_runs_and_remade_when_killed(berth, img, subids,
                                                                              identity):
    runtime = berth.env["BERTH_RUNTIME_DIR"]
    before = subid_holders(identity.uid)
    results = []

    def one():
        results.append(berth("run", "--rm", img, "/probe", "true", check=False)[0])

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [0, 0, 0, 0]
    made = subid_holders(identity.uid) - before
    first = holder_pid(runtime)
    assert made == {first}, (made, first)
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not alive(first), "the holder to die")
    _, out, _ = berth("run", "--rm", img, "/bin/sh", "-c", ROOTOPS)
    assert kv(out)["uid"] == "42"
    second = holder_pid(runtime)
    assert second not in (0, first) and alive(second)


def test_without_ranges_auto_is_seccomp_and_subids_by_name_is_one_line(berth, img, subids):
    env = {"BERTH_SUBUID": "/dev/null", "BERTH_RUNTIME_DIR": berth.make_dir("elsewhere")}
    _, out, _ = berth("run", "--rm", img, "/bin/sh", "-c", ROOTOPS, env=env)
    assert (kv(out)["setresuid"], kv(out)["uid"]) == ("ok", "0")  # the filter's answer
    info = berth.json("info", "--json", env=env)
    assert info["root_emulation"]["mode"] == "seccomp"
    assert info["root_emulation"]["subids"]["available"] is False
    assert info["root_emulation"]["subids"]["reason"] == \
        "map subordinate IDs /dev/null: no ranges in it"
    rc, _, err = berth("run", "--rm", "--root-emulation=subids", img, "true", env=env,
                       check=False)
    assert rc == 125
    assert err == ("berth: error: run --root-emulation subids: map subordinate IDs /dev/null: "
                   "no ranges in it\n")
    # A file with other users' ranges only: the user is named.
    others = berth.write_file("subuid", "someone-else:200000:65536\n")
    name = pwd.getpwuid(berth.identity.uid).pw_name
    info = berth.json("info", "--json", env={**env, "BERTH_SUBUID": others})
    assert info["root_emulation"]["subids"]["reason"] == \
        f"map subordinate IDs {others}: no range for {name}"
    env = {"BERTH_NEWUIDMAP": "/nonexistent", "BERTH_RUNTIME_DIR": env["BERTH_RUNTIME_DIR"]}
    _, out, _ = berth("run", "--rm", img, "/bin/sh", "-c", ROOTOPS, env=env)
    assert kv(out)["uid"] == "0"


def test_a_holder_that_cannot_start_is_said_once_and_auto_falls_back(berth, img, subids):
    runtime = berth.env["BERTH_RUNTIME_DIR"]
    env = {"BERTH_NEWUIDMAP": "/bin/false"}  # installed, but it fails
    _, out, err = berth("run", "--rm", img, "/bin/sh", "-c", ROOTOPS, env=env)
    assert kv(out)["uid"] == "0"  # seccomp
    failed = os.path.join(runtime, "subids.failed")
    assert err == (f"berth: warning: map subordinate IDs /bin/false: exited with status 1 (runs "
                   f"use the seccomp root emulation until {failed} is removed; "
                   f"--root-emulation=subids tries again)\n")
    _, out, err = berth("run", "--rm", img, "/bin/sh", "-c", ROOTOPS)  # the real helpers now
    assert (kv(out)["uid"], err) == ("0", "")  # not tried again, not said again
    info = berth.json("info", "--json")["root_emulation"]
    assert info["mode"] == "seccomp"
    assert info["subids"]["reason"] == "map subordinate IDs /bin/false: exited with status 1"
    _, out, _ = berth("run", "--rm", "--root-emulation=subids", img, "/bin/sh", "-c", ROOTOPS)
    assert kv(out)["uid"] == "42" and not os.path.exists(failed)
    _, out, _ = berth("run", "--rm", img, "/bin/sh", "-c", ROOTOPS)
    assert kv(out)["uid"] == "42"  # auto is subids again


def test_policy_and_flag_choose_the_mode(berth, img, subids):
    env = user_file(berth, 'root_emulation = "seccomp"\n')
    _, out, _ = berth("run", "--rm", img, "/bin/sh", "-c", ROOTOPS, env=env)
    assert kv(out)["uid"] == "0"
    assert berth.json("info", "--json", env=env)["root_emulation"]["mode"] == "seccomp"
    _, out, _ = berth("run", "--rm", "--root-emulation=subids", img, "/bin/sh", "-c", ROOTOPS,
                      env=env)
    assert kv(out)["uid"] == "42"
    # A container user other than root keeps the one-ID mapping under auto.
    _, out, _ = berth("run", "--rm", "-u", "1234:1234", img, "/bin/sh", "-c",
                      "cat /proc/self/uid_map")
    assert len(out.splitlines()) == 1, out
    _, out, _ = berth("run", "--rm", "--root-emulation=subids", "-u", "1234:1234", img,
                      "/probe", "id")
    assert (kv(out)["uid"], kv(out)["gid"]) == ("1234", "1234")


def test_a_directory_run_keeps_one_owner_under_auto(berth, img, subids):
    """`berth run DIR` writes into the user's own tree, which no `berth rm` walks: auto keeps
    the seccomp mode there; --root-emulation=subids maps the range all the same."""
    root = berth.path("tree")
    berth("unpack", img, root)
    _, out, _ = berth("run", root, "/bin/sh", "-c", ROOTOPS)
    assert (kv(out)["setresuid"], kv(out)["uid"]) == ("ok", "0")
    _, out, _ = berth("run", "--root-emulation=subids", root, "/bin/sh", "-c", ROOTOPS)
    assert kv(out)["uid"] == "42"


def test_exec_joins_the_mapped_namespace(berth, img, subids):
    detach(berth, "--name", "mapped", img, "/probe", "signals", "606")
    wait_for(lambda: "ready" in logs(berth, "mapped"), "the workload to start")
    _, out, _ = berth("exec", "mapped", "/bin/sh", "-c", "cat /proc/self/uid_map")
    assert len(out.splitlines()) == 2, out
    _, out, _ = berth("exec", "mapped", "/bin/sh", "-c", ROOTOPS)
    assert kv(out)["uid"] == "42"
    berth("kill", "mapped")


def test_rm_export_squash_clone_of_files_owned_by_subordinate_ids(berth, img, subids):
    berth("run", "--name", "owned", img, "/bin/sh", "-c",
          "mkdir -p /var/partial /srv/t && echo x > /var/partial/f && chown -R 42:42 "
          "/var/partial && chmod 700 /var/partial && echo y > /srv/t/g && chown -R 7:7 /srv/t")
    containers = os.path.join(berth.berth_home, "containers")
    (cid,) = os.listdir(containers)
    partial = os.path.join(containers, cid, "rootfs", "var", "partial")
    assert os.stat(partial).st_uid == subids[0] + 41  # not the user's on the host
    tar_path = berth.path("owned.tar")
    berth("export", "-o", tar_path, "owned")
    with tarfile.open(tar_path) as t:
        members = {m.name.lstrip("./"): m for m in t.getmembers()}
    assert members["var/partial/f"].uid == 42 and members["var/partial"].uid == 42
    assert members["srv/t/g"].uid == 7
    assert members["bin/busybox"].uid == 0  # the user's files are root's inside
    if shutil.which("unsquashfs"):
        sqsh = berth.path("owned.sqsh")
        berth("squash", "-o", sqsh, "owned")
        listing = subprocess.run(["unsquashfs", "-lln", sqsh], check=True,
                                 stdout=subprocess.PIPE, text=True).stdout
        line = next(x for x in listing.splitlines() if x.endswith("/var/partial/f"))
        assert " 42/42 " in line, line
    _, out, _ = berth("clone", "owned")
    clone = out.strip().splitlines()[-1]
    _, out, _ = berth("run", clone, "/bin/sh", "-c", "cat /var/partial/f; stat -c %u "
                      "/var/partial")
    assert out.split() == ["x", "42"]  # readable, and the owner kept
    berth("rm", "owned")
    berth("rm", clone)
    assert os.listdir(containers) == []


# --- slow: a real Debian 12 image, apt from Debian's archive --------------------------------


def test_apt_install_useradd_chown_su_under_subids_then_rm_leaves_nothing(berth, debian_tarball,
                                                                          subids):
    if not archive_reachable():
        pytest.skip("Debian's archive (deb.debian.org) is not reachable")
    berth("import", debian_tarball, "deb12", timeout=300)
    script = (
        "set -e; test ! -e /etc/apt/apt.conf.d/00berth-root-emulation; "
        "apt-get update -qq; apt-get install -y -qq hello >/dev/null; hello; "
        "useradd -m bob; touch /home/bob/notes; chown bob:bob /home/bob/notes; "
        "su bob -c 'id -u'; ls -ln /home/bob/notes; "
        "stat -c '%u %a' /var/cache/apt/archives/partial; id -u")
    _, out, err = berth("run", "--name", "deb", "deb12", "/bin/sh", "-c", script, timeout=600)
    lines = out.splitlines()
    assert "Hello, world!" in lines, (out, err)
    assert "1000" in lines  # su really switched to bob
    notes = next(x for x in lines if x.endswith("/home/bob/notes")).split()
    assert notes[2:4] == ["1000", "1000"], lines
    assert "42 700" in lines  # apt's own partial folder is _apt's: the switch to _apt was real
    assert lines[-1] == "0"
    _, out, _ = berth("run", "deb", "/usr/bin/hello")
    assert out == "Hello, world!\n"
    out_tar = berth.path("deb.tar")
    berth("export", "-o", out_tar, "deb", timeout=300)
    with tarfile.open(out_tar) as t:
        members = {m.name.lstrip("./"): m for m in t.getmembers()}
    assert "usr/bin/hello" in members
    assert members["var/cache/apt/archives/partial"].uid == 42
    assert members["home/bob/notes"].uid == 1000
    sqsh = berth.path("deb.sqsh")
    berth("squash", "-o", sqsh, "deb", timeout=300)
    assert os.path.getsize(sqsh) > 0
    berth("rm", "deb")
    containers = os.path.join(berth.berth_home, "containers")
    assert not os.path.isdir(containers) or os.listdir(containers) == []
    berth("rmi", "deb12")

"""Berth's Debian packages (scripts/package.sh builds them into dist/) installed into a fresh
Debian 12 root (tests/e2e/debroot.py): there, as an unprivileged user, /usr/bin/berth pulls
from the test registry on 127.0.0.1 and runs the image, a squashfs image runs (its daemon found
in /usr/libexec/berth), `man berth` renders; berthd's system user exists and a changed
configuration survives a reinstall; `dpkg -r` then `dpkg -P` leave the root's files as they
were. The packages are looked for in $BERTH_DEBS (scripts/test.sh sets it after its package
stage: then missing packages fail), else in dist/ (skipped when there are none)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess

import pytest

import debroot
from conftest import REPO_ROOT

PACKAGES = ("berth", "berth-slurm", "berthd")
USER = "tester"
# The fresh root's packages besides Debian's required ones: what the packages depend on (the
# test checks that every dependency is among them, or already in the root) and man-db, which
# renders `man berth`. The cached root is keyed by this list.
ROOT_PACKAGES = ["adduser", "fuse3", "libarchive13", "libcpp-httplib0.11", "libcurl4",
                 "libsquashfs1", "libsqlite3-0", "libssl3", "libstdc++6", "man-db",
                 "slurm-wlm-basic-plugins"]


def debs() -> dict[str, str]:
    folder = os.environ.get("BERTH_DEBS") or os.path.join(REPO_ROOT, "dist")
    found = {}
    for p in PACKAGES:
        paths = sorted(glob.glob(os.path.join(folder, f"{p}_*.deb")))
        if paths:
            found[p] = paths[-1]
    if len(found) != len(PACKAGES):
        if os.environ.get("BERTH_DEBS"):
            pytest.fail(f"BERTH_DEBS={folder}: not every package is there ({sorted(found)})")
        pytest.skip("no packages in dist/: build them with scripts/package.sh")
    return found


# Files the root's own tools make on first use, not the packages: man-db's cache (its trigger
# runs mandb at every install of a man page), dpkg's log, fusermount3's lock (the squashfs run).
NOT_THE_PACKAGES = ("var/cache/man/", "var/log/dpkg.log", "etc/mtab.fuselock")


def changed(root, before: set[str]) -> list[str]:
    """The root's paths added or gone since `before`, but NOT_THE_PACKAGES."""
    return sorted(p for p in root.files() ^ before if not p.startswith(NOT_THE_PACKAGES))


def dependencies(paths: list[str]) -> list[str]:
    """The packages the debs depend on (first of each alternative), but themselves."""
    names = set()
    for path in paths:
        depends = subprocess.run(["dpkg-deb", "-f", path, "Depends"], capture_output=True,
                                 text=True, check=True).stdout
        for item in depends.split(","):
            name = re.split(r"[\s(|:]", item.strip(), maxsplit=1)[0]
            if name and name not in PACKAGES:
                names.add(name)
    return sorted(names)


@pytest.fixture(scope="module")
def root(scratch):
    if os.geteuid() != 0:
        pytest.skip("the Debian root needs root (mount namespaces, pivot_root)")
    for tool in ("mmdebstrap", "unshare", "dpkg-deb"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    found = debs()
    r = debroot.DebRoot(debroot.tarball(ROOT_PACKAGES), os.path.join(scratch, "debroot"))
    missing = [p for p in dependencies(list(found.values()))
               if r.run("dpkg-query", "-W", p, check=False).returncode != 0]
    assert missing == [], f"add {missing} to ROOT_PACKAGES: the packages depend on them"
    for path in found.values():
        shutil.copy2(path, os.path.join(r.tmp, os.path.basename(path)))
    r.debs = {p: "/tmp/" + os.path.basename(path) for p, path in found.items()}
    r.run("useradd", "--no-create-home", "--shell", "/bin/sh", USER)
    return r


def test_install_use_remove_purge(root, pushed_busybox, usable_fuse):
    before = root.files()
    r = root.run("dpkg", "-i", *root.debs.values())
    assert "error" not in r.stdout.lower() + r.stderr.lower(), r.stdout + r.stderr

    # As an unprivileged user, from /usr/bin/berth: the test registry, a run, a squashfs run.
    env = {"BERTH_HOME": "/tmp/store-tester", "BERTH_RUNTIME_DIR": "/tmp/run-tester"}
    root.run("mkdir", "-p", f"/tmp/home-{USER}", "/tmp/run-tester")
    root.run("chown", f"{USER}:{USER}", f"/tmp/home-{USER}", "/tmp/run-tester")
    where = root.run("sh", "-c", "command -v berth", user=USER).stdout
    assert where == "/usr/bin/berth\n"
    root.run("berth", "pull", pushed_busybox, user=USER, env=env)
    out = root.run("berth", "run", "--rm", pushed_busybox, "cat", "/etc/motd", user=USER,
                   env=env).stdout
    assert out == "hello from berth e2e\n"
    root.run("berth", "squash", pushed_busybox, "-o", "/tmp/busybox.sqsh", user=USER, env=env)
    out = root.run("berth", "run", "/tmp/busybox.sqsh", "cat", "/etc/motd", user=USER,
                   env=env).stdout
    assert out == "hello from berth e2e\n"
    # The packages' man pages render.
    for section, page in (("1", "berth"), ("5", "berth.conf"), ("8", "berthd"),
                          ("8", "spank_berth")):
        r = root.run("man", section, page, user=USER, env={"MANPAGER": "cat", "MANWIDTH": "80"})
        assert re.search(rf"^NAME\n +{re.escape(page)} +- ", r.stdout, re.M), r.stdout[:300]
        assert r.stderr == "", r.stderr
    # berthd: its user, its unit, its configuration (a conffile a reinstall leaves alone).
    assert root.run("getent", "passwd", "berthd").stdout.startswith("berthd:")
    assert os.path.isfile(os.path.join(root.root, "lib/systemd/system/berthd.service"))
    out = root.run("berthd", "--version").stdout
    assert out.startswith("berthd ") and "Slurm " in out
    conf = os.path.join(root.root, "etc/berthd/berthd.conf")
    with open(conf, "a") as f:
        f.write("# changed by the site\n")
    root.run("dpkg", "-i", "--force-confold", root.debs["berthd"])
    with open(conf) as f:
        assert f.read().endswith("# changed by the site\n")
    # The plugin's snippet names where the plugin is.
    with open(os.path.join(root.root, "usr/share/berth/spank_berth.conf")) as f:
        line = [x for x in f if not x.startswith("#")][0]
    plugin = line.split()[1]
    assert os.path.isfile(os.path.join(root.root, plugin.lstrip("/"))), line

    root.run("dpkg", "-r", *PACKAGES)
    # Until the purge: berthd's conffile, and what dpkg and deb-systemd-helper keep of a
    # package in the config-files state.
    assert changed(root, before) == [
        "etc/berthd", "etc/berthd/berthd.conf", "var/lib/dpkg/info/berthd.list",
        "var/lib/dpkg/info/berthd.postrm",
        "var/lib/systemd/deb-systemd-helper-enabled/berthd.service.dsh-also"]
    root.run("dpkg", "-P", *PACKAGES)
    assert changed(root, before) == []

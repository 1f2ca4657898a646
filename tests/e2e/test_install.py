"""Berth installed by `cmake --install` into a DESTDIR, under a prefix of its own: every part
where the FHS and Debian expect it, and berth, its squashfs daemon and the Slurm plugin's
client working from there (relocatable: berth finds its helpers relative to itself); the man
pages rendering and naming what the binaries and the docs name. The Debian packages are
tested in test_packages.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT, Berth, _build_dirs
from test_run import userns_works
from test_slurm import sl  # noqa: F401  (fixture)
from test_slurm_sbatch import sbatch

PREFIX = "/opt/berth"


def multiarch() -> str:
    return subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True,
                          check=True).stdout.strip()


def build_dir() -> str:
    dirs = _build_dirs()
    if not dirs:
        pytest.exit("no build folder with src/berth: build it (cmake --build build)", 2)
    return dirs[0]


@pytest.fixture(scope="module")
def destdir(scratch) -> str:
    """`cmake --install BUILD --prefix /opt/berth` with DESTDIR in the session's folder;
    returns DESTDIR + prefix (where the tree is: not where it was configured for)."""
    dest = os.path.join(scratch, "destdir")
    shutil.rmtree(dest, ignore_errors=True)
    r = subprocess.run(["cmake", "--install", build_dir(), "--prefix", PREFIX],
                       env=dict(os.environ, DESTDIR=dest), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return dest + PREFIX


@pytest.fixture
def installed(destdir, identity, berth) -> Berth:
    """The test user's berth runner, running the installed berth."""
    return Berth(os.path.join(destdir, "bin", "berth"), identity, berth.workdir)


def test_cmake_install_puts_every_part_in_its_place(destdir):
    files = set()
    for folder, _, names in os.walk(destdir):
        files.update(os.path.relpath(os.path.join(folder, n), destdir) for n in names)
    plugin_dir = f"lib/{multiarch()}/slurm-wlm"
    assert files == {
        "bin/berth",
        "sbin/berthd",
        "libexec/berth/berth-squashfs",
        "libexec/berth/berth-slurm-client",
        f"{plugin_dir}/spank_berth.so",
        "share/berth/spank_berth.conf",
        "lib/systemd/system/berthd.service",
        "share/doc/berth/examples/berth.conf",
        "share/doc/berth/examples/berthd.conf",
        "share/bash-completion/completions/berth",
        "share/man/man1/berth.1",
        "share/man/man5/berth.conf.5",
        "share/man/man8/berthd.8",
        "share/man/man8/spank_berth.8",
    }
    for program in ("bin/berth", "sbin/berthd", "libexec/berth/berth-squashfs",
                    "libexec/berth/berth-slurm-client"):
        assert os.access(os.path.join(destdir, program), os.X_OK), program
    # The files naming installed paths name the prefix given to --install, not the configured one.
    with open(os.path.join(destdir, "share/berth/spank_berth.conf")) as f:
        lines = [line for line in f if not line.startswith("#")]
    assert lines == [f"required {PREFIX}/{plugin_dir}/spank_berth.so berth={PREFIX}/bin/berth\n"]
    with open(os.path.join(destdir, "lib/systemd/system/berthd.service")) as f:
        unit = f.read()
    assert f"\nExecStart={PREFIX}/sbin/berthd --config /etc/berthd/berthd.conf\n" in unit


def test_the_installed_berth_pulls_runs_and_finds_its_squashfs_daemon(installed, pushed_busybox,
                                                                      usable_fuse, identity):
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    installed("pull", pushed_busybox)
    _, out, _ = installed("run", "--rm", pushed_busybox, "cat", "/etc/motd")
    assert out == "hello from berth e2e\n"
    # A squashfs run needs berth-squashfs, which is only in libexec/berth, not beside berth.
    sqsh = installed.path("busybox.sqsh")
    installed("squash", pushed_busybox, "-o", sqsh)
    runtime = installed.make_dir("runtime")
    _, out, _ = installed("run", sqsh, "cat", "/etc/motd", env={"BERTH_RUNTIME_DIR": runtime})
    assert out == "hello from berth e2e\n"


def test_a_berth_without_its_helpers_says_where_it_looked(berth, identity, usable_fuse, scratch,
                                                          pushed_busybox):
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    alone_dir = berth.make_dir("alone", "bin")
    alone = os.path.join(alone_dir, "berth")
    shutil.copy2(os.path.join(build_dir(), "src", "berth"), alone)
    os.chmod(alone, 0o755)
    lone = Berth(alone, identity, berth.workdir)
    lone("pull", pushed_busybox)
    sqsh = lone.path("busybox.sqsh")
    lone("squash", pushed_busybox, "-o", sqsh)
    rc, _, err = lone("run", sqsh, "true", check=False,
                      env={"BERTH_RUNTIME_DIR": lone.make_dir("runtime")})
    assert rc == 125
    assert err == (f"berth: error: mount squashfs {alone_dir}/berth-squashfs: Berth's squashfs "
                   f"daemon is missing beside the berth binary and in "
                   f"{alone_dir}/../libexec/berth\n"
                   "berth: hint: build it with berth (cmake --build) and install the two "
                   "together (cmake --install)\n")


def test_version_names_the_commit_and_the_slurm_release(installed, destdir):
    v = installed.json("version", "--json")
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?|unknown", v["git_commit"]), v
    head = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode == 0:  # a commit since the build configures again at the next build
        assert v["git_commit"] == head.stdout.strip(), "build again: the build is older than HEAD"
    with open("/usr/include/slurm/slurm_version.h") as f:
        n = int(re.search(r"#define SLURM_VERSION_NUMBER 0x([0-9a-fA-F]+)", f.read()).group(1), 16)
    slurm = f"{n >> 16}.{n >> 8 & 255:02d}.{n & 255}"
    assert v["slurm_release"] == slurm
    out = subprocess.run([os.path.join(destdir, "sbin", "berthd"), "--version"],
                         capture_output=True, text=True, check=True).stdout
    assert out == f"berthd {v['version']} (git {v['git_commit']}, Slurm {slurm})\n"


# --- the man pages -----------------------------------------------------------------------

def man_source(name: str) -> str:
    with open(os.path.join(REPO_ROOT, "docs", "man", name + ".md")) as f:
        return f.read()


@pytest.mark.parametrize("page", ["man1/berth.1", "man5/berth.conf.5", "man8/berthd.8",
                                  "man8/spank_berth.8"])
def test_the_man_pages_render_without_a_warning(destdir, page):
    r = subprocess.run(["man", "-l", os.path.join(destdir, "share/man", page)],
                       env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING="", PAGER="cat",
                                MANPAGER="cat", LANG="C.UTF-8"),
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    name = os.path.basename(page).rsplit(".", 1)[0]
    assert re.search(rf"^NAME\n +{re.escape(name)} +- ", r.stdout, re.M), r.stdout[:400]


def test_berth_1_names_every_command_of_the_binary(berth):
    _, out, _ = berth("--help")
    commands = re.findall(r"^  ([a-z]+) ", out.split("Subcommands:", 1)[1], re.M)
    assert len(commands) > 30, out
    page = man_source("berth.1")
    assert [c for c in commands if f"**{c}**" not in page] == []


def doc_keys(doc: str, pattern: str) -> list[str]:
    """The names the first column of DOC's tables gives in backticks, matching PATTERN."""
    with open(os.path.join(REPO_ROOT, "docs", doc)) as f:
        rows = [line for line in f if line.startswith("| `")]
    keys = []
    for row in rows:
        first = row.split(" | ")[0]
        keys += [k for k in re.findall(r"`([^`]+)`", first) if re.fullmatch(pattern, k)]
    return keys


def test_berth_conf_5_names_every_key_of_the_site_policy():
    keys = doc_keys("site.md", r"\[?[a-z_]+(\.TYPE\])?")
    assert "allowed_registries" in keys and "pull_deadline" in keys and len(keys) >= 25
    page = man_source("berth.conf.5")
    assert [k for k in keys if f"**{k}**" not in page] == []


def test_spank_berth_8_names_every_plugstack_argument_and_option():
    page = man_source("spank_berth.8")
    args = [k.split("=")[0] for k in doc_keys("slurm.md", r"[a-z_]+=.*")]
    assert "berth" in args and "site_conf" in args
    assert [a for a in args if f"**{a}=" not in page] == []
    options = [re.sub(r"[=\[].*", "", k).replace("--[no-]", "--")
               for k in doc_keys("slurm.md", r"--.*")]
    assert "--container-image" in options and len(options) > 10
    page_plain = page.replace("**", "").replace("--[no-]", "--")
    assert [o for o in options if o not in page_plain] == []


# --- the Slurm tier, loading the installed plugin ---------------------------------------

@pytest.fixture
def cluster_destdir(cluster, destdir, scratch) -> str:
    """The installed tree whose plugin is built for `cluster`'s Slurm release (Slurm loads
    only a plugin built against its own major.minor): `destdir` on the host's 22.05; on
    another release, a copy whose plugin (and client) the plugin-only build inside that
    cluster's root installed over it, as a site puts a plugin for its Slurm beside Berth."""
    if cluster.node.release == "22.05":
        return destdir
    dest = os.path.join(scratch, f"destdir-{cluster.node.release}")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(destdir, dest + PREFIX, symlinks=True)
    cluster.node.install_plugin(REPO_ROOT, dest, PREFIX)
    return dest + PREFIX


def test_slurm_loads_the_installed_plugin_which_finds_the_installed_client(
        sl, cluster, cluster_destdir, pushed_busybox):  # noqa: F811
    destdir = cluster_destdir
    plugin = os.path.join(destdir, "lib", multiarch(), "slurm-wlm", "spank_berth.so")
    saved = cluster.plugin, cluster.berth
    cluster.plugin, cluster.berth = plugin, os.path.join(destdir, "bin", "berth")
    cluster.write_plugstack(cluster.plugin_args)
    try:
        out = sl.ok(f"--container-image={pushed_busybox}", "cat", "/etc/motd")
        assert out == "hello from berth e2e\n"
        # The batch script's srun is berth-slurm-client, found in libexec/berth.
        rc, text = sbatch(sl, pushed_busybox, "#!/bin/sh\nsrun true && echo client-ok\n")
        assert rc == 0 and text == "client-ok\n", text
    finally:
        cluster.plugin, cluster.berth = saved
        cluster.write_plugstack(cluster.plugin_args)


def test_bash_completion_reads_commands_options_and_images_from_berth(installed, destdir,
                                                                      pushed_busybox):
    installed("pull", pushed_busybox)
    script = (f"source {destdir}/share/bash-completion/completions/berth\n"
              "try() {\n"  # each case: the words typed so far, the last being completed
              '  COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _berth; echo "${COMPREPLY[*]}"\n'
              "}\n"
              "try berth pu\n"
              "try berth run --rm --netw\n"
              "try berth --ho\n"
              "try berth run 127.0.0.1\n")
    cmd, env = installed.command([])
    env["PATH"] = os.path.join(destdir, "bin") + ":" + env["PATH"]
    r = subprocess.run(installed.identity.prefix + ["bash", "-c", script], env=env,
                       capture_output=True, text=True, cwd=installed.workdir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["pull", "--network", "--home", pushed_busybox]

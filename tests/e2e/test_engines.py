"""The engines, end to end: one table of engines x cases, run as the unprivileged user with
`berth run --engine=NAME`. The image holds glibc (the host's loader and libc) and the probe
linked against it, so that every engine, fakechroot included, runs the same program; its
/lib64 loader link is absolute, as in Debian, to exercise fakechroot's symlink rewriting.

A case an engine cannot do is skipped with the engine's reason; where Berth refuses it, the
refusal line is checked first."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile

import pytest

import imagelib
from conftest import build_file
from test_run import (PATH, assert_killed_berth_takes_the_workload_along,
                      assert_sigterm_forwarded, kv, userns_works)

ENGINES = ["userns", "proot", "fakechroot", "oci"]
MULTIARCH = "x86_64-linux-gnu"
LOADER = f"/lib/{MULTIARCH}/ld-linux-x86-64.so.2"

# Where an engine cannot do a case: the reason, and the refusal Berth prints (None: no refusal
# to check, the case is simply not run).
CANNOT = {
    ("proot", "volume_ro"): ("proot has no read-only binds",
                             "the proot engine cannot make a volume read-only"),
    ("fakechroot", "volume_ro"): ("fakechroot has no read-only binds",
                                  "the fakechroot engine cannot make a volume read-only"),
    ("fakechroot", "user"): ("fakechroot cannot change the user",
                             "the fakechroot engine cannot change the user"),
    ("oci", "user"): ("rootless runc needs container UID 0 mapped and only one ID can be mapped",
                      "the oci engine runs the workload as root inside"),
    ("proot", "signal_exit"): ("proot reports a killed workload as 255, not 128+N", None),
    ("proot", "tmpfs"): ("proot cannot mount a file system", "the proot engine cannot mount a tmpfs"),
    ("fakechroot", "tmpfs"): ("fakechroot cannot mount a file system",
                              "the fakechroot engine cannot mount a tmpfs"),
}


def dynamic_probe() -> str:
    return build_file(os.path.join("tests", "berth_probe_dynamic"), "BERTH_PROBE_DYNAMIC",
                      "berth_probe_dynamic")


def tool_missing(engine: str) -> str:
    """Why the engine cannot run on this host at all ("" when it can)."""
    if engine == "userns":
        return "" if userns_works_cached() else "unprivileged user namespaces are unavailable"
    if engine == "proot":
        return "" if shutil.which("proot") else "proot is not installed"
    if engine == "oci":
        found = shutil.which("runc", path="/usr/sbin:/usr/bin:/sbin:/bin")
        return "" if found else "runc is not installed"
    if engine == "fakechroot":
        lib = f"/usr/lib/{MULTIARCH}/fakechroot/libfakechroot.so"
        return "" if os.path.isfile(lib) else "libfakechroot is not installed"
    return "unknown engine"


_userns = {}


def userns_works_cached() -> bool:
    if "ok" not in _userns:
        from conftest import Identity
        _userns["ok"] = userns_works(Identity())
    return _userns["ok"]


@pytest.fixture(scope="module")
def engine_image(registry, berth_bin):
    """busybox (static, for shells) plus glibc and the dynamic probe at /probe."""
    with open(dynamic_probe(), "rb") as f:
        probe = f.read()
    with open(LOADER, "rb") as f:
        loader = f.read()
    with open(f"/lib/{MULTIARCH}/libc.so.6", "rb") as f:
        libc = f.read()
    passwd = b"root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:app:/home/app:/bin/sh\n"
    group = b"root:x:0:\napp:x:1234:\n"
    glibc = imagelib.Layer([
        imagelib.Dir("lib"), imagelib.Dir(f"lib/{MULTIARCH}"), imagelib.Dir("lib64"),
        imagelib.File(LOADER.lstrip("/"), loader, 0o755),
        imagelib.File(f"lib/{MULTIARCH}/libc.so.6", libc, 0o755),
        imagelib.Symlink("lib64/ld-linux-x86-64.so.2", LOADER),
        imagelib.File("probe", probe, 0o755),
        imagelib.File("etc/passwd", passwd),
        imagelib.File("etc/group", group),
        imagelib.Dir("home"), imagelib.Dir("home/app"),
    ])
    img = imagelib.make_image([imagelib.busybox_layer(), glibc], cmd=["/probe", "id"],
                              config={"Env": [f"PATH={PATH}", "FROM_IMAGE=image"]})
    registry.pusher().push_image("e2e/engines", "1.0", img)
    return f"{registry.host}/e2e/engines:1.0"


@pytest.fixture
def img(berth, engine_image):
    berth("pull", engine_image)
    return engine_image


# --- the cases: each gets (berth, img, engine) and asserts ------------------------------------


def run(berth, engine, img, *args, opts=(), **kw):
    """berth run --rm --engine=ENGINE OPTS... IMAGE ARGS..."""
    return berth("run", "--rm", f"--engine={engine}", *opts, img, *args, **kw)


def case_exit_code(berth, img, engine):
    rc, _, _ = run(berth, engine, img, "/probe", "exit", "7", check=False)
    assert rc == 7


def case_signal_exit(berth, img, engine):
    rc, _, _ = run(berth, engine, img, "/probe", "raise", "9", check=False)
    assert rc == 128 + 9


def case_env(berth, img, engine):
    _, out, _ = run(berth, engine, img, "/probe", "env", opts=["-e", "FROM_CLI=cli"])
    env = dict(line[4:].split("=", 1) for line in out.splitlines() if line.startswith("env="))
    assert env["FROM_CLI"] == "cli" and env["FROM_IMAGE"] == "image" and env["PATH"] == PATH
    assert "BERTH_HOME" not in env


def case_volume_rw(berth, img, engine):
    host_dir = berth.make_dir("vol")
    berth.write_file("vol/given.txt", "from the host\n")
    _, out, _ = run(berth, engine, img, "/probe", "cat", "/data/given.txt",
                    opts=["-v", f"{host_dir}:/data"])
    assert out == "from the host\n"
    run(berth, engine, img, "/probe", "write", "/data/out.txt", "in",
        opts=["-v", f"{host_dir}:/data"])
    with open(os.path.join(host_dir, "out.txt")) as f:
        assert f.read() == "in"
    assert os.stat(os.path.join(host_dir, "out.txt")).st_uid == berth.identity.uid


def case_volume_ro(berth, img, engine):
    host_dir = berth.make_dir("ro")
    rc, _, err = run(berth, engine, img, "/probe", "write", "/data/new.txt", "x",
                     opts=["-v", f"{host_dir}:/data:ro"], check=False)
    assert rc != 0 and "Read-only file system" in err
    assert not os.path.exists(os.path.join(host_dir, "new.txt"))


def case_tmpfs(berth, img, engine):
    _, out, _ = run(berth, engine, img, "/bin/sh", "-c",
                    "echo in > /scratch/x && cat /scratch/x && grep -c ' /scratch tmpfs ' "
                    "/proc/mounts", opts=["--tmpfs", "/scratch:size=1m"])
    assert out == "in\n1\n"


def case_workdir(berth, img, engine):
    _, out, _ = run(berth, engine, img, "/probe", "cwd", opts=["-w", "/srv/work"])
    assert kv(out)["cwd"] == "/srv/work"


def case_user(berth, img, engine):
    _, out, _ = run(berth, engine, img, "/probe", "id", opts=["-u", "1234:1234"])
    assert (kv(out)["uid"], kv(out)["gid"]) == ("1234", "1234")


def engine_facts(berth, engine: str) -> dict:
    """The engine's row of Berth's engine table, as `berth info --json` shows it."""
    return {row["name"]: row for row in berth.json("info", "--json")["engine_table"]}[engine]


def case_root(berth, img, engine):
    _, out, _ = run(berth, engine, img, "/probe", "id")
    # Without root inside (fakechroot: no identity emulation) the workload is the caller.
    want = "0" if engine_facts(berth, engine)["root_inside"] else str(berth.identity.uid)
    assert kv(out)["uid"] == want


def case_stdin(berth, img, engine):
    _, out, _ = run(berth, engine, img, "/probe", "cat", "-", opts=["-i"],
                    input="from stdin\n")
    assert out == "from stdin\n"
    _, out, _ = run(berth, engine, img, "/probe", "cat", "-", input="not for it\n")
    assert out == ""


def case_signal(berth, img, engine):
    assert_sigterm_forwarded(
        berth.popen("run", "--rm", f"--engine={engine}", img, "/probe", "signals", "20"))


def case_killed_berth(berth, img, engine):
    seconds = 410 + ENGINES.index(engine)
    assert_killed_berth_takes_the_workload_along(
        berth.popen("run", "--rm", f"--engine={engine}", img, "/probe", "signals", str(seconds)),
        seconds)


def case_not_found(berth, img, engine):
    rc, _, err = run(berth, engine, img, "no-such-program", check=False)
    assert rc == 127
    assert err.splitlines()[0] == ('berth: error: exec: "no-such-program": '
                                   'executable file not found in $PATH')


def case_setup_persists(berth, img, engine):
    berth("create", "--name", "box", img)
    _, out, _ = berth("setup", "box")
    assert out == "userns\n"
    berth("setup", f"--engine={engine}", "box")
    _, out, _ = berth("setup", "box")
    assert out == f"{engine}\n"
    _, out, err = berth("-v", "run", "box", "/probe", "readlink", "/lib64/ld-linux-x86-64.so.2")
    assert f": the {engine} engine" in err
    assert kv(out)["link"] == LOADER  # fakechroot's host-path links read back as the image's
    # Another engine on the same container sees the image's links again.
    other = "proot" if engine == "userns" else "userns"
    if tool_missing(other):
        return
    _, out, _ = berth("run", f"--engine={other}", "box", "/probe", "readlink",
                      "/lib64/ld-linux-x86-64.so.2")
    assert kv(out)["link"] == LOADER
    rootfs = berth.json("inspect", "box")
    rootfs = (rootfs[0] if isinstance(rootfs, list) else rootfs)["rootfs"]
    assert os.readlink(os.path.join(rootfs, "lib64/ld-linux-x86-64.so.2")) == LOADER


def case_launcher_fds(berth, img, engine):
    # A launcher's descriptors (runtime/launcher.h): PMI_FD's and 3 .. 2+N for
    # --preserve-fds N reach the workload at their numbers; no other of the caller's does.
    # runc is told --preserve-fds 5 to keep 7 and passes 3 .. 7: berth makes the gap /dev/null.
    note = berth.write_file("note", "x\n")
    seen = {}
    for fd in (3, 4, 7):
        cmd, env = berth.command(["run", "--rm", f"--engine={engine}", "--preserve-fds", "1",
                                  img, "/probe", "readlink", f"/proc/self/fd/{fd}"],
                                 {"PMI_FD": "7"})
        r = subprocess.run(["sh", "-c", f'exec 3<"{note}" 4<"{note}" 7<"{note}"; exec "$@"',
                            "sh", *cmd], env=env, capture_output=True, text=True, timeout=120,
                           cwd=berth.workdir)
        seen[fd] = kv(r.stdout).get("link", "closed") if r.returncode == 0 else "closed"
    assert seen[3].endswith("/note") and seen[7].endswith("/note"), seen
    assert seen[4] == ("/dev/null" if engine == "oci" else "closed"), seen


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("engine", ENGINES)
def test_engine(berth, img, engine, case):
    missing = tool_missing(engine)
    if missing:
        pytest.skip(f"{engine}: {missing}")
    cannot = CANNOT.get((engine, case))
    if cannot:
        reason, refusal = cannot
        if refusal:
            checks = {"volume_ro": ["-v", f"{berth.make_dir('ro')}:/data:ro"],
                      "user": ["-u", "1234:1234"], "tmpfs": ["--tmpfs", "/scratch"]}[case]
            rc, _, err = run(berth, engine, img, "/probe", "true", opts=checks, check=False)
            assert rc == 125 and refusal in err.splitlines()[0], err
        pytest.skip(f"{engine}: {reason}")
    CASES[case](berth, img, engine)


def test_info_engine_table_says_what_the_engines_do(berth):
    # The facts `info` shows are the table the runtime reads; the refusals above agree with them.
    rows = {row["name"]: row for row in berth.json("info", "--json")["engine_table"]}
    assert list(rows) == ["userns", "oci", "proot", "fakechroot", "apptainer"]
    for engine in ENGINES:
        assert rows[engine]["read_only_volumes"] == ((engine, "volume_ro") not in CANNOT), engine
    assert [n for n, r in rows.items() if r["devices"]] == ["userns", "oci", "proot"]
    assert [n for n, r in rows.items() if not r["needs_user_namespaces"]] == ["proot", "fakechroot"]
    assert rows["proot"]["package"] == "proot" and rows["oci"]["package"] == "runc"


# --- engine choice and what cannot run --------------------------------------------------------


def test_unknown_engine_is_a_usage_error(berth, img):
    rc, out, err = berth("run", "--rm", "--engine=docker", img, "/probe", "true", check=False)
    assert rc == 125 and out == ""
    assert err.splitlines() == ["berth: error: engine docker: unknown engine",
                                "berth: hint: one of: userns, oci, proot, fakechroot, "
                                "apptainer, auto"]
    assert berth.json("ps", "--json") == []


def test_auto_uses_user_namespaces_when_they_work(berth, img):
    if not userns_works_cached():
        pytest.skip("userns: unprivileged user namespaces are unavailable here")
    _, out, err = berth("-v", "run", "--rm", "--engine=auto", img, "/probe", "id")
    assert kv(out)["uid"] == "0"
    assert ": the userns engine" in err and "engine auto:" not in err


def test_auto_falls_back_when_user_namespaces_are_disabled(berth, img):
    if tool_missing("proot"):
        pytest.skip(f"proot: {tool_missing('proot')}")
    # berth runs in a user namespace whose own limit forbids further ones (the sysctl is per
    # user namespace), as on a host with user.max_user_namespaces=0.
    cmd, env = berth.command(["run", "--rm", "--engine=auto", img, "/probe", "exit", "3"])
    at = cmd.index(berth.binary)
    cmd[at:] = ["unshare", "--user", "--map-root-user", "sh", "-c",
                'echo 0 >/proc/sys/user/max_user_namespaces && exec "$@"', "sh", *cmd[at:]]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd=berth.workdir)
    if r.stderr.startswith(("sh:", "unshare:")):
        pytest.skip(f"auto: cannot make a user namespace without further ones here: {r.stderr}")
    assert r.returncode == 3, r.stderr
    assert r.stderr.splitlines() == [
        "berth: engine auto: probe user namespaces: user namespaces are disabled "
        "(user.max_user_namespaces=0); using proot"]


def test_missing_engine_tool_names_the_package(berth, img):
    # berth itself gets a PATH without proot (the setpriv in front still needs the usual one).
    cmd, env = berth.command(["run", "--rm", "--engine=proot", img, "/probe", "true"])
    at = cmd.index(berth.binary)
    cmd[at:at] = ["/usr/bin/env", "PATH=/nonexistent"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd=berth.workdir)
    assert r.returncode == 125
    assert r.stderr.splitlines() == ["berth: error: engine proot: not installed",
                                     "berth: hint: install the Debian package 'proot'"]


def test_apptainer_is_refused_when_not_installed(berth, img):
    # Runs on every host: berth gets a PATH without apptainer or singularity (installed or not)
    # and no BERTH_APPTAINER, so the engine is exercised up to its refusal.
    cmd, env = berth.command(["run", "--rm", "--engine=apptainer", img, "/probe", "true"])
    at = cmd.index(berth.binary)
    cmd[at:at] = ["/usr/bin/env", "-u", "BERTH_APPTAINER", "PATH=/nonexistent"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd=berth.workdir)
    assert r.returncode == 125, r.stderr
    assert r.stderr.splitlines() == [
        "berth: error: engine apptainer: not installed (neither apptainer nor singularity is on "
        "PATH)",
        "berth: hint: Debian 12 has no package: install Apptainer (https://apptainer.org) or "
        "SingularityCE (https://sylabs.io), or use --engine=userns, oci, proot or fakechroot"]
    assert berth.json("ps", "--json") == []


def test_fakechroot_refuses_a_static_program(berth, img):
    if tool_missing("fakechroot"):
        pytest.skip(f"fakechroot: {tool_missing('fakechroot')}")
    rc, _, err = berth("run", "--rm", "--engine=fakechroot", img, "/bin/busybox", "true",
                       check=False)
    assert rc == 125
    assert err.splitlines()[0] == ("berth: error: run /bin/busybox: the fakechroot engine cannot "
                                   "run a statically linked program (it would see the host's "
                                   "files)")



def exported_link(berth, container: str, member: str) -> str:
    """The target of symlink `member` in `berth export CONTAINER`'s archive."""
    out = os.path.join(berth.make_dir("export"), container + ".tar")
    berth("export", "-o", out, container)
    with tarfile.open(out) as tf:
        return tf.getmember(member).linkname


def rootfs_of(berth, container: str) -> str:
    info = berth.json("inspect", container)
    return (info[0] if isinstance(info, list) else info)["rootfs"]


def test_export_and_clone_after_a_fakechroot_run_hold_the_images_links(berth, img):
    # fakechroot needs host-path links while it owns the container; every other reader of the
    # rootfs (export, clone) sees the image's own form, as the image had it.
    if tool_missing("fakechroot"):
        pytest.skip(f"fakechroot: {tool_missing('fakechroot')}")
    berth("create", "--name", "box", img)
    berth("run", "--engine=fakechroot", "box", "/probe", "true")
    link = "lib64/ld-linux-x86-64.so.2"
    assert exported_link(berth, "box", link) == LOADER
    assert os.readlink(os.path.join(rootfs_of(berth, "box"), link)) == LOADER
    berth("clone", "--name", "copy", "box")
    assert os.readlink(os.path.join(rootfs_of(berth, "copy"), link)) == LOADER
    assert exported_link(berth, "copy", link) == LOADER
    _, out, _ = berth("run", "--engine=fakechroot", "copy", "/probe", "readlink", "/" + link)
    assert kv(out)["link"] == LOADER


def test_links_a_killed_fakechroot_run_left_are_put_back(berth, img):
    # Berth killed under the workload: nothing of it runs afterwards, and the next reader still
    # gets the image's form.
    if tool_missing("fakechroot"):
        pytest.skip(f"fakechroot: {tool_missing('fakechroot')}")
    berth("create", "--name", "box", img)
    p = berth.popen("run", "--engine=fakechroot", "box", "/probe", "signals", "5")
    try:
        assert p.stdout.readline().strip() == "ready"
        p.kill()  # berth itself, SIGKILL: nothing of it runs after the workload
        p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    link = "lib64/ld-linux-x86-64.so.2"
    assert os.readlink(os.path.join(rootfs_of(berth, "box"), link)) != LOADER  # host form
    assert exported_link(berth, "box", link) == LOADER
    assert os.readlink(os.path.join(rootfs_of(berth, "box"), link)) == LOADER


# --- GPU injection (test_gpu.py's fabricated host and images) ----------------------------------

from test_gpu import LIBDIR as GPU_LIBDIR, host, images, pulled  # noqa: E402,F401


@pytest.mark.parametrize("engine", ENGINES)
def test_gpus_through_the_engine(berth, host, pulled, engine):  # noqa: F811
    missing = tool_missing(engine)
    if missing:
        pytest.skip(f"{engine}: {missing}")
    args = ["run", "--rm", f"--engine={engine}", "--gpus", "all", pulled["plain"]]
    if engine == "fakechroot":
        rc, _, err = berth(*args, "gpucheck", "libcuda.so.1", env=host.env(), check=False)
        assert rc == 125
        assert err.splitlines()[1] == ("berth: hint: --gpus needs the userns, oci or proot "
                                       "engine"), err
        pytest.skip("fakechroot: cannot bind device nodes or driver libraries (refusal checked)")
    _, out, _ = berth(*args, "gpucheck", "libcuda.so.1", "libnvidia-ml.so.1", env=host.env())
    facts = kv(out)
    assert facts["lib.libcuda.so.1"].startswith(GPU_LIBDIR + "/"), out
    assert facts["cuda_driver_version"] == "12040"
    _, out, _ = berth(*args, "nvidia-smi", env=host.env())  # a host binary, linked or bound
    assert out.startswith("fake nvidia-smi GPU-")
    if engine == "proot":
        return  # its binds on the host's /dev do not show in a listing of /dev
    _, out, _ = berth(*args, "/probe", "ls", "/dev", env=host.env())
    assert {"nvidiactl", "nvidia0", "nvidia1"} <= {line[5:] for line in out.splitlines()
                                                   if line.startswith("name=")}

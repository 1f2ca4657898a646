"""Fixtures for the end-to-end tier: the real berth binary, run as an
unprivileged user, against real registries on 127.0.0.1.

When the tests run as root, berth runs as the user `berthtest` (created here
if missing) through setpriv; otherwise it runs as the current user. Every test
gets a fresh HOME and BERTH_HOME owned by that user.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import imagelib  # noqa: E402
import servers  # noqa: E402

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEST_USER = "berthtest"

# Credentials the authenticating registries accept.
USERS = {"alice": "wonderland-7", "pusher": "push-it-real-good"}
BOB_PASSWORD = "no-pulls-for-bob"  # acl_registry's user without access


# ---------------------------------------------------------------------------
# The unprivileged user and the binary


class Identity:
    """Who berth runs as, and the command prefix that makes it so."""

    def __init__(self):
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(TEST_USER)
            except KeyError:
                subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", TEST_USER],
                               check=True)
            pw = pwd.getpwnam(TEST_USER)
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
            self.prefix = ["setpriv", f"--reuid={TEST_USER}", f"--regid={TEST_USER}",
                           "--init-groups", "--"]
        else:
            self.uid, self.gid = os.getuid(), os.getgid()
            self.prefix = []

    def chown(self, path: str) -> None:
        if os.geteuid() == 0:
            os.chown(path, self.uid, self.gid)

    def make_dir(self, path: str, mode: int = 0o755) -> str:
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
        self.chown(path)
        return path

    def write_file(self, path: str, text: str, mode: int = 0o644) -> str:
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            self.write_dirs(parent)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        self.chown(path)
        return path

    def write_dirs(self, path: str) -> None:
        missing = []
        while not os.path.isdir(path):
            missing.append(path)
            path = os.path.dirname(path)
        for p in reversed(missing):
            self.make_dir(p)

    def can_run(self, path: str) -> bool:
        r = subprocess.run(self.prefix + ["test", "-x", path])
        return r.returncode == 0


@pytest.fixture(scope="session")
def identity() -> Identity:
    return Identity()


def subid_holders(uid: int) -> set[int]:
    """The pids of the user's subordinate-ID holders (runtime/subids.h: `berth-subids`)."""
    found = set()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() == "berth-subids" and os.stat(f"/proc/{p}").st_uid == uid:
                    found.add(int(p))
        except OSError:
            pass  # gone meanwhile
    return found


@pytest.fixture(scope="session", autouse=True)
def no_holder_left(identity):
    """The holders the session's runs started (the default runtime folder's among them) are
    killed at its end: a test run leaves no process behind."""
    before = subid_holders(identity.uid)
    yield
    for pid in subid_holders(identity.uid) - before:
        try:
            os.kill(pid, 9)
        except OSError:
            pass  # ended meanwhile


@pytest.fixture(scope="session")
def scratch():
    """A session folder under the system temp dir that every user can traverse
    (pytest's own tmp_path lives under a 0700 folder)."""
    d = tempfile.mkdtemp(prefix="berth-e2e-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def pulled_busybox(berth, pushed_busybox, identity):
    """The busybox image in the test user's store, for tests of the userns engine: skipped
    where the test user cannot make a user namespace."""
    r = subprocess.run(identity.prefix + ["unshare", "-Ur", "true"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    berth("pull", pushed_busybox)
    return pushed_busybox


@pytest.fixture
def policy(scratch):
    """Writes a site policy into a fresh root-owned folder (the tests run as root; berth reads
    it as the test user); returns a function (text, mode, owner) -> path; pass the path as
    BERTH_SITE_CONF."""
    folder = tempfile.mkdtemp(prefix="policy-", dir=scratch)
    os.chmod(folder, 0o755)

    def write(text: str, mode: int = 0o644, owner: int = 0, name: str = "berth.conf") -> str:
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(text)
        os.chown(path, owner, owner)
        os.chmod(path, mode)
        return path

    yield write
    shutil.rmtree(folder, ignore_errors=True)


def _build_dirs() -> list[str]:
    """The build folders to take binaries from, best first: the one BERTH_BIN lives in, else
    build/, else any other build*/ folder of the checkout holding a berth (newest first; the
    sanitizer builds last, they run several times slower)."""
    if os.environ.get("BERTH_BIN"):
        binary = os.path.abspath(os.environ["BERTH_BIN"])
        parent = os.path.dirname(binary)
        return [os.path.dirname(parent)] if os.path.basename(parent) == "src" else []
    found = [d for d in glob.glob(os.path.join(REPO_ROOT, "build*"))
             if os.path.isfile(os.path.join(d, "src", "berth"))]
    found.sort(key=lambda d: (os.path.basename(d) != "build", "san" in os.path.basename(d),
                              -os.path.getmtime(os.path.join(d, "src", "berth"))))
    return found


def build_file(relative: str, env_var: str, target: str) -> str:
    """A file the build makes (`relative` to the build folder, e.g. "src/berth"): from
    `env_var` when set, else from the first build folder that has it; ends the session with a
    message naming where it looked when there is none."""
    if os.environ.get(env_var):
        path = os.path.abspath(os.environ[env_var])
        if not os.path.isfile(path):
            pytest.exit(f"{env_var}={path}: no such file", 2)
        return path
    dirs = _build_dirs()
    for d in dirs:
        path = os.path.join(d, relative)
        if os.path.isfile(path):
            return path
    looked = ", ".join(dirs) or os.path.join(REPO_ROOT, "build*")
    pytest.exit(f"{relative} not found (looked in {looked}): build the {target} target "
                f"(cmake -S . -B build && cmake --build build) or set {env_var}", 2)


@pytest.fixture(scope="session")
def berth_bin(identity, scratch) -> str:
    path = build_file(os.path.join("src", "berth"), "BERTH_BIN", "berth")
    if not identity.can_run(path):
        # The unprivileged user cannot reach the build tree: run a copy.
        bindir = os.path.join(scratch, "bin")
        os.makedirs(bindir, mode=0o755, exist_ok=True)
        copy = os.path.join(bindir, "berth")
        shutil.copy2(path, copy)
        os.chmod(copy, 0o755)
        # The squashfs mounts' daemon lives beside the binary (site/squashfs_mount.h).
        # So do the Slurm plugin's client for batch containers (slurm/host_tools.h).
        for helper in ("berth-squashfs", "berth-slurm-client"):
            daemon = os.path.join(os.path.dirname(path), helper)
            if os.path.isfile(daemon):
                shutil.copy2(daemon, os.path.join(bindir, helper))
        path = copy
    return path


# ---------------------------------------------------------------------------
# The per-test berth runner


class Berth:
    """Runs berth as the unprivileged user with a fresh HOME and BERTH_HOME."""

    def __init__(self, binary: str, identity: Identity, workdir: str):
        self.binary, self.identity, self.workdir = binary, identity, workdir
        self.home = identity.make_dir(os.path.join(workdir, "home"))
        self.berth_home = os.path.join(self.home, "berth-store")
        self.env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": self.home,
            "BERTH_HOME": self.berth_home,
            "LANG": "C.UTF-8",
        }

    def command(self, args, env=None) -> tuple[list[str], dict]:
        full_env = dict(self.env)
        full_env.update(env or {})
        return self.identity.prefix + [self.binary, *map(str, args)], full_env

    def __call__(self, *args, check: bool = True, env: dict | None = None,
                 input: str | None = None, timeout: float = 120):
        """Runs berth; returns (rc, stdout, stderr). check=True asserts rc == 0."""
        cmd, full_env = self.command(args, env)
        r = subprocess.run(cmd, env=full_env, input=input if input is not None else "",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout, cwd=self.workdir)
        if check:
            assert r.returncode == 0, (
                f"berth {' '.join(map(str, args))} exited {r.returncode}\n"
                f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        return r.returncode, r.stdout, r.stderr

    def popen(self, *args, env: dict | None = None) -> subprocess.Popen:
        """Starts berth without waiting (setpriv execs, so the pid is berth's)."""
        cmd, full_env = self.command(args, env)
        return subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=self.workdir)

    def json(self, *args, **kw):
        _, out, _ = self(*args, **kw)
        return json.loads(out)

    # What the store holds, looked at from outside.
    def blob_dir(self) -> str:
        return os.path.join(self.berth_home, "blobs", "sha256")

    def blobs(self) -> set[str]:
        d = self.blob_dir()
        return set(os.listdir(d)) if os.path.isdir(d) else set()

    def tmp_files(self) -> set[str]:
        d = os.path.join(self.berth_home, "tmp")
        return set(os.listdir(d)) if os.path.isdir(d) else set()

    def assert_blobs_verified(self) -> None:
        """Every file under blobs/ hashes to its name: nothing half-written is visible."""
        for name in self.blobs():
            with open(os.path.join(self.blob_dir(), name), "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == name, f"blob {name} is corrupt"

    def path(self, *parts) -> str:
        return os.path.join(self.workdir, *parts)

    def make_dir(self, *parts) -> str:
        return self.identity.make_dir(self.path(*parts))

    def write_file(self, rel: str, text: str, mode: int = 0o644) -> str:
        return self.identity.write_file(self.path(rel), text, mode)


@pytest.fixture
def berth(berth_bin, identity, scratch, request) -> Berth:
    name = request.node.name.replace("/", "_")[:80]
    workdir = tempfile.mkdtemp(prefix=name + "-", dir=scratch)
    identity.make_dir(workdir)
    return Berth(berth_bin, identity, workdir)


@pytest.fixture(scope="session")
def usable_fuse(identity) -> None:
    """/dev/fuse open to the test user, as udev's rule (MODE="0666") makes it on an ordinary
    Debian host. These VMs have no udev and leave it 0600 root: running as root, the tests
    set 0666 themselves (scripts/setup.sh does too); otherwise they skip."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse on this host")
    if os.geteuid() == 0 and (os.stat("/dev/fuse").st_mode & 0o006) != 0o006:
        os.chmod("/dev/fuse", 0o666)
    if subprocess.run(identity.prefix + ["test", "-r", "/dev/fuse", "-a", "-w", "/dev/fuse"]
                      ).returncode != 0:
        pytest.skip("/dev/fuse is not usable by the test user (mode 0666 needed)")


# ---------------------------------------------------------------------------
# Registries (one of each per session)


@pytest.fixture(scope="session")
def registry(scratch):
    """A plain registry on 127.0.0.1, no authentication."""
    r = servers.RegistryServer(scratch, name="registry-plain").start()
    yield r
    r.stop()


@pytest.fixture(scope="session")
def htpasswd_registry(scratch):
    path = servers.htpasswd_file(os.path.join(scratch, "htpasswd"), USERS)
    r = servers.RegistryServer(scratch, auth=("htpasswd", path), name="registry-htpasswd").start()
    yield r
    r.stop()


@pytest.fixture(scope="session")
def token_server(scratch):
    t = servers.TokenServer(scratch, USERS).start()
    yield t
    t.stop()


@pytest.fixture(scope="session")
def acl_registry(scratch):
    """A token registry where "bob" logs in but may pull nothing; alice and pusher may."""
    users = dict(USERS, bob=BOB_PASSWORD)
    t = servers.TokenServer(scratch, users, name="token-acl", no_access=("bob",)).start()
    r = servers.RegistryServer(scratch, auth=t.registry_auth(), name="registry-acl").start()
    yield r
    r.stop()
    t.stop()


@pytest.fixture(scope="session")
def token_registry(scratch, token_server):
    r = servers.RegistryServer(scratch, auth=token_server.registry_auth(),
                               name="registry-token").start()
    yield r
    r.stop()


@pytest.fixture(scope="session")
def fake_registry():
    f = servers.FakeRegistry().start()
    yield f
    f.stop()


@pytest.fixture(scope="session")
def busybox_image() -> imagelib.Image:
    """A two-layer OCI image: busybox-static plus a file, gzip."""
    note = imagelib.Layer([imagelib.File("etc/motd", b"hello from berth e2e\n")])
    return imagelib.make_image([imagelib.busybox_layer(), note], fmt="oci")


@pytest.fixture(scope="session")
def pushed_busybox(registry, busybox_image) -> str:
    """The busybox image pushed to the plain registry; returns its reference."""
    registry.pusher().push_image("e2e/busybox", "1.0", busybox_image)
    return f"{registry.host}/e2e/busybox:1.0"


def plugin_copy(path: str, bindir: str) -> str:
    """A copy of the plugin at `path` in `bindir`: srun loads it as the test user, who may not
    reach the build folder (as berth_bin copies berth)."""
    os.makedirs(bindir, mode=0o755, exist_ok=True)
    copy = os.path.join(bindir, "spank_berth.so")
    shutil.copy2(path, copy)
    os.chmod(copy, 0o755)
    return copy


# The one-host Slurm cluster (tests/e2e/slurm.py), shared by every test_slurm*.py module.
@pytest.fixture(scope="session")
def spank_plugin(scratch) -> str:
    path = build_file(os.path.join("src", "spank_berth.so"), "BERTH_SPANK", "spank_berth")
    return plugin_copy(path, os.path.join(scratch, "bin"))


# The releases the Slurm tier runs against, each a cluster of its own: Debian 12's Slurm on this
# machine, and Debian 13's inside a root of its own (tests/e2e/debian_root.py). Tests that take
# `cluster` run once on each (ids slurm22.05, slurm24.11), one cluster at a time.
SLURM_RELEASES = ("22.05", "24.11")


@pytest.fixture(scope="session")
def debian13(scratch, berth_bin):
    """The Debian 13 root with Slurm 24.11, unpacked and entered once per session; skips with
    one line where it cannot be had (no root, no mmdebstrap, Debian 13's archive out of
    reach). Bound in: the checkout (the plugin is built inside), the folder of the berth the
    plugin runs (and berth-slurm-client beside it), and the host's MPICH at its path: the
    site's MPI library that test_slurm_mpi's policy declares, which a site installs on every
    node."""
    import debian_root
    import mpilib
    why = debian_root.unavailable()
    if why:
        pytest.skip(why)
    binds = [REPO_ROOT, os.path.dirname(berth_bin)]
    if os.path.exists(mpilib.HOST_MPICH_LINK):
        binds.append(mpilib.host_mpich())
    root = debian_root.Root(os.path.join(scratch, "debian13"), tuple(binds))
    try:
        root.start()
    except Exception:
        root.stop()
        raise
    yield root
    root.stop()


@pytest.fixture(scope="session")
def spank_plugin_24_11(debian13, scratch) -> str:
    """spank_berth.so built inside the Debian 13 root against Slurm 24.11 (the release that
    loads it must be the one it was built against); a copy the test user can read."""
    return plugin_copy(debian13.build_plugin(REPO_ROOT), os.path.join(scratch, "bin-24.11"))


def slurm_node(request, release: str):
    """(the node Slurm `release` runs on, the plugin built for it), for a cluster fixture."""
    import slurm
    if release == "22.05":
        why = slurm.missing_packages()
        if why:
            pytest.skip(why)
        return slurm.Host(), request.getfixturevalue("spank_plugin")
    return request.getfixturevalue("debian13"), request.getfixturevalue("spank_plugin_24_11")


@pytest.fixture(scope="session", params=SLURM_RELEASES, ids=[f"slurm{r}" for r in SLURM_RELEASES])
def cluster(request, scratch, berth_bin, identity):
    import slurm  # the Slurm tier's modules, only where a test asks for the cluster
    from test_run import userns_works
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    node, plugin = slurm_node(request, request.param)
    name = "slurm" if request.param == "22.05" else f"slurm{request.param}"
    c = slurm.Cluster(os.path.join(scratch, name), plugin, berth_bin, node=node)
    try:
        c.start()
    except Exception:
        c.stop()
        raise
    yield c
    c.stop()

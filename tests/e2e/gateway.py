"""berthd for the end-to-end tests: its binary, an OIDC issuer, and the daemon itself, started
once per test session as the unprivileged test user on a free loopback port.

Test modules import the fixtures they use (`from gateway import berthd, issuers  # noqa`).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

import slurm
from conftest import SLURM_RELEASES, build_file, slurm_node
from oidc import IssuerServer

# The second local account the tests map an identity to (created when the tests run as root).
SECOND_USER = "berthgw2"
AUDIENCE_A = "berth"
AUDIENCE_B = "berth-egi"
ADMIN_GROUP = "/berth/admins"


@pytest.fixture(scope="session")
def berthd_bin(identity, scratch) -> str:
    path = build_file(os.path.join("src", "berthd"), "BERTHD_BIN", "berthd")
    if not identity.can_run(path):
        bindir = identity.make_dir(os.path.join(scratch, "bin"))
        copy = os.path.join(bindir, "berthd")
        shutil.copy2(path, copy)
        os.chmod(copy, 0o755)
        path = copy
    return path


@pytest.fixture(scope="session")
def issuers():
    server = IssuerServer(("a", "b")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def second_user() -> str | None:
    """A second local account, or None when the tests cannot create one (not root)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SECOND_USER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", SECOND_USER],
                       check=True)
    return SECOND_USER


def job_gateway_files(identity, berth, cluster) -> tuple[str, str, str]:
    """For a berthd that runs jobs on `cluster` with the test's berth store: its folder (in
    the test's), a copy of Slurm's JWT key berthd may read, and the [slurm.environment] lines
    (the store's HOME and BERTH_HOME, SLURM_CONF)."""
    workdir = identity.make_dir(os.path.join(berth.workdir, "berthd"))
    key = os.path.join(workdir, "slurm_jwt.key")
    shutil.copy(cluster.jwt_key, key)
    os.chmod(key, 0o600)
    identity.chown(key)
    env = dict(berth.env, SLURM_CONF=cluster.conf)
    return workdir, key, "\n".join(f'{k} = "{v}"' for k, v in env.items())


def gpu_host(cluster, scratch, name: str = "gateway-gpu-host") -> dict:
    """The environment of the fabricated GPU host (test_gpu.FakeHost) under scratch/NAME, for
    GPU jobs on `cluster`; skips where the cluster has no fake GPUs or no C compiler can build
    the fake driver's libraries."""
    if not cluster.gpus:
        pytest.skip("no /dev/tty0 and /dev/tty1 to stand in for GPUs")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the fake driver libraries")
    from test_gpu import fake_host_env
    return fake_host_env(os.path.join(scratch, name))


class Berthd:
    """A running berthd: its URL, process and log, and a small JSON client."""

    def __init__(self, proc: subprocess.Popen, url: str, log: str):
        self.proc, self.url, self.log = proc, url, log

    def request(self, method: str, path: str, token: str | None = None, body=None,
                headers: dict | None = None):
        """(status, headers, JSON body) of one request."""
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, e.headers, json.loads(e.read() or b"null")


def start_berthd(identity, binary: str, config_path: str, log_path: str,
                 timeout: float = 20.0) -> tuple[subprocess.Popen, str]:
    """Starts berthd as the test user; (process, base URL) once it says where it listens.
    On this host for either release's cluster: it reaches Slurm through slurmrestd alone
    (and sacct, which only 22.05's cluster has here: test_gateway_jobs)."""
    log = open(log_path, "w")
    proc = subprocess.Popen(identity.prefix + [binary, "--config", config_path],
                            stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log_path) as f:
            for line in f:
                if line.startswith("berthd: listening on "):
                    return proc, line.split()[-1]
        if proc.poll() is not None:
            with open(log_path) as f:
                raise RuntimeError(f"berthd exited with {proc.returncode}: {f.read()}")
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"berthd did not start within {timeout:.0f} s")


def gateway_config(issuers: IssuerServer, second_user: str | None, extra: str = "",
                   own_account: bool = True) -> str:
    """berthd's configuration for the tests. `own_account`: tokens may map to berthd's own
    account ([accounts] allow_own_account), since the tests run berthd and the jobs as one
    test user; a site never does."""
    a, b = issuers.issuers["a"], issuers.issuers["b"]
    accounts = "[accounts]\nallow_own_account = true\n" if own_account else ""
    text = f"""listen = "127.0.0.1:0"
admin_groups = ["{ADMIN_GROUP}"]
jwks_min_refresh_s = 30
{extra}
{accounts}
[[issuers]]
issuer = "{a.url}"
audience = "{AUDIENCE_A}"
username_claim = "preferred_username"

[[issuers]]
issuer = "{b.url}"
audience = "{AUDIENCE_B}"
"""
    if second_user:
        text += f"""
[[users]]
issuer = "{b.url}"
sub = "egi-0042@egi.eu"
user = "{second_user}"
"""
    return text


@pytest.fixture(scope="session")
def berthd(identity, scratch, berthd_bin, issuers, second_user):
    workdir = identity.make_dir(os.path.join(scratch, "berthd"))
    conf = identity.write_file(os.path.join(workdir, "berthd.conf"),
                               gateway_config(issuers, second_user))
    proc, url = start_berthd(identity, berthd_bin, conf, os.path.join(workdir, "berthd.log"))
    yield Berthd(proc, url, os.path.join(workdir, "berthd.log"))
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_gateway_cluster(request, scratch, berth_bin, identity, name: str = "slurm-gateway",
                          share: str = "shard"):
    """A loopback Slurm cluster (tests/e2e/slurm.py) of the release `request.param` (one of
    conftest.SLURM_RELEASES) under scratch/NAME (NAME-RELEASE after 22.05) for the gateway's
    tests, with its own copy of the plugin built for that release (copying over the file a
    running slurmd has loaded would change it under it); skips where the cluster cannot run.
    Stop it with stop()."""
    from test_run import userns_works
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    release = request.param
    node, plugin = slurm_node(request, release)
    if release != "22.05":
        name = f"{name}-{release}"
    bindir = identity.make_dir(os.path.join(scratch, name + "-bin"))
    copy = os.path.join(bindir, "spank_berth.so")
    shutil.copy2(plugin, copy)
    os.chmod(copy, 0o755)
    c = slurm.Cluster(os.path.join(scratch, name), copy, berth_bin, share=share, node=node)
    try:
        c.start()
    except Exception:
        c.stop()
        raise
    return c


@pytest.fixture(scope="module", params=SLURM_RELEASES, ids=[f"slurm{r}" for r in SLURM_RELEASES])
def gateway_cluster(request, scratch, berth_bin, identity):
    """The loopback Slurm cluster for the gateway's tests, once per release (the same tests
    on each, ids slurm22.05 and slurm24.11): one of their own, for the module, under
    scratch/slurm-gateway-RELEASE. Not test_slurm's `cluster`: a fixture imported into another
    module is a second fixture of the same name, which would start a second cluster in the
    same folder. A module may define its own `gateway_cluster` (another folder, gres/mps)."""
    c = start_gateway_cluster(request, scratch, berth_bin, identity)
    yield c
    c.stop()


@pytest.fixture(scope="module")
def slurmrestd(gateway_cluster, scratch):
    """Debian's slurmrestd with rest_auth/jwt on a free loopback port, in front of the test
    cluster (whose slurm.conf has auth/jwt and its key at cluster.jwt_key); as nobody, since
    slurmrestd refuses to run as root or SlurmUser (slurm.Cluster.start_rest_jwt)."""
    cluster = gateway_cluster
    if not os.path.exists(cluster.jwt_key):
        pytest.skip("Slurm's auth/jwt plugin is not installed (Debian: slurm-wlm-jwt-plugin)")
    proc, url = cluster.start_rest_jwt(os.path.join(scratch, "slurmrestd.log"))
    yield url
    proc.terminate()
    proc.wait(timeout=20)

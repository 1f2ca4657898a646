"""A job submitted through slurmrestd (Debian's `slurmrestd`) runs in its image: REST clients
cannot give SPANK options, so the plugin reads the environment form (BERTH_CONTAINER_IMAGE or
PYXIS_CONTAINER_IMAGE in the job's environment) in slurmstepd. slurmrestd runs once per test
session as the unprivileged test user (it refuses root and SlurmUser), on a unix socket with
rest_auth/local (the peer's uid, no JWT), and the test user submits with curl."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

API = "http://localhost/slurm/v0.0.38"


class Rest:
    def __init__(self, socket_path: str, identity):
        self.socket, self.identity = socket_path, identity

    def __call__(self, method: str, path: str, body: dict | None = None) -> dict:
        cmd = self.identity.prefix + ["curl", "-sS", "--unix-socket", self.socket, "-X", method,
                                      "-H", "Content-Type: application/json", API + path]
        if body is not None:
            cmd += ["--data-binary", json.dumps(body)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture(scope="session")
def slurmrestd(cluster, identity, scratch):
    exe = shutil.which("slurmrestd", path="/usr/sbin:/usr/bin")
    if exe is None:
        pytest.skip("slurmrestd is not installed (Debian: slurmrestd)")
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    d = tempfile.mkdtemp(prefix="slurmrestd-", dir=scratch)
    os.chmod(d, 0o755)
    identity.chown(d)
    sock = os.path.join(d, "rest.sock")
    log = open(os.path.join(d, "slurmrestd.log"), "wb")
    p = subprocess.Popen(identity.prefix + [exe, "-a", "rest_auth/local", "-s",
                                            "openapi/v0.0.38", f"unix:{sock}"],
                         env=dict(os.environ, **cluster.env()), stdout=log, stderr=log)
    deadline = time.monotonic() + 20
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise RuntimeError(f"slurmrestd did not start: see {d}/slurmrestd.log")
        time.sleep(0.05)
    yield Rest(sock, identity)
    p.terminate()
    p.wait(timeout=20)


def submit_and_wait(rest, berth, env: dict, script: str) -> tuple[str, str]:
    """Submits `script` as the test user with `env` as its whole environment; returns (the
    job's final state, its output)."""
    out = berth.path("rest.out")
    job = {"name": "rest", "nodes": "1", "partition": "debug",
           "current_working_directory": berth.workdir, "standard_output": out,
           "environment": {"PATH": "/usr/bin:/bin", "HOME": berth.home,
                           "BERTH_HOME": berth.berth_home, **env}}
    r = rest("POST", "/job/submit", {"script": script, "job": job})
    assert not r.get("errors"), r
    job_id = r["job_id"]
    state = ""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        jobs = rest("GET", f"/job/{job_id}").get("jobs", [])
        state = jobs[0]["job_state"] if jobs else ""
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
            break
        time.sleep(0.3)
    with open(out) as f:
        return state, f.read()


@pytest.mark.parametrize("var", ["BERTH_CONTAINER_IMAGE", "PYXIS_CONTAINER_IMAGE"])
def test_a_rest_submission_runs_in_the_image(slurmrestd, berth, pushed_busybox, var):
    state, text = submit_and_wait(slurmrestd, berth, {var: pushed_busybox},
                                  "#!/bin/sh\ncat /etc/motd\n")
    assert (state, text) == ("COMPLETED", "hello from berth e2e\n")


def test_a_rest_submission_without_an_image_runs_on_the_host(slurmrestd, berth):
    state, text = submit_and_wait(slurmrestd, berth, {}, "#!/bin/sh\ncat /etc/debian_version\n")
    with open("/etc/debian_version") as f:
        assert (state, text) == ("COMPLETED", f.read())


def test_a_rest_submission_with_a_missing_image_fails_and_says_why(slurmrestd, berth, registry):
    state, text = submit_and_wait(slurmrestd, berth,
                                  {"BERTH_CONTAINER_IMAGE": f"{registry.host}/e2e/nothing:1"},
                                  "#!/bin/sh\necho ran\n")
    assert state == "FAILED"
    assert "ran" not in text
    assert text.startswith("berth: error: "), text

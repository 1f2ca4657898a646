"""A job submitted through slurmrestd (Debian's `slurmrestd`) runs in its image: REST clients
cannot give SPANK options, so the plugin reads the environment form (BERTH_CONTAINER_IMAGE or
PYXIS_CONTAINER_IMAGE in the job's environment) in slurmstepd. slurmrestd runs once per
cluster as the unprivileged test user (it refuses root and SlurmUser), on a unix socket with
rest_auth/local (the peer's uid, no JWT), and the test user submits with curl. Each release's
cluster is spoken to in its own API version (slurm.RELEASES: v0.0.38 on 22.05, v0.0.41 on
24.11), whose shapes differ as SHAPES says."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest


def submission_v0038(script: str, job: dict, env: dict) -> dict:
    """v0.0.38: the script beside the job, the environment an object."""
    return {"script": script, "job": dict(job, environment=env)}


def submission_v0041(script: str, job: dict, env: dict) -> dict:
    """v0.0.41: the script inside the job (beside it is deprecated since 24.05), the
    environment a list of NAME=VALUE (since v0.0.39, Slurm 23.02)."""
    return {"job": dict(job, script=script, environment=[f"{k}={v}" for k, v in env.items()])}


# API version: (the submission's body, a job's state from GET /job/ID's record). Since v0.0.40
# (Slurm 23.11) job_state is a list of flags, the base state first.
SHAPES = {
    "v0.0.38": (submission_v0038, lambda job: job["job_state"]),
    "v0.0.41": (submission_v0041, lambda job: job["job_state"][0]),
}


class Rest:
    def __init__(self, socket_path: str, identity, cluster):
        self.socket, self.identity, self.cluster = socket_path, identity, cluster
        self.version = cluster.release.rest_version
        self.submission, self.state = SHAPES[self.version]

    def __call__(self, method: str, path: str, body: dict | None = None) -> dict:
        url = f"http://localhost/slurm/{self.version}{path}"
        cmd = self.identity.prefix + ["curl", "-sS", "--unix-socket", self.socket, "-X", method,
                                      "-H", "Content-Type: application/json", url]
        if body is not None:
            cmd += ["--data-binary", json.dumps(body)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture(scope="session")
def slurmrestd(cluster, identity, scratch):
    if not os.path.exists(cluster.node.path("/usr/sbin/slurmrestd")):
        pytest.skip("slurmrestd is not installed (Debian: slurmrestd)")
    d = tempfile.mkdtemp(prefix="slurmrestd-", dir=scratch)
    os.chmod(d, 0o755)
    identity.chown(d)
    sock = os.path.join(d, "rest.sock")
    with open(os.path.join(d, "slurmrestd.log"), "wb") as log:
        p = cluster.start_slurmrestd(f"unix:{sock}", log, auth="rest_auth/local",
                                     prefix=identity.prefix)
    deadline = time.monotonic() + 20
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise RuntimeError(f"slurmrestd did not start: see {d}/slurmrestd.log")
        time.sleep(0.05)
    yield Rest(sock, identity, cluster)
    p.terminate()
    p.wait(timeout=20)


def submit_and_wait(rest, berth, env: dict, script: str) -> tuple[str, str]:
    """Submits `script` as the test user with `env` as its whole environment; returns (the
    job's final state, its output)."""
    out = berth.path("rest.out")
    job = {"name": "rest", "nodes": "1", "partition": "debug",
           "current_working_directory": berth.workdir, "standard_output": out}
    env = {"PATH": "/usr/bin:/bin", "HOME": berth.home, "BERTH_HOME": berth.berth_home, **env}
    r = rest("POST", "/job/submit", rest.submission(script, job, env))
    assert not r.get("errors"), r
    job_id = r["job_id"]
    state = ""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        jobs = rest("GET", f"/job/{job_id}").get("jobs", [])
        state = rest.state(jobs[0]) if jobs else ""
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


def test_a_rest_submission_without_an_image_runs_on_the_host(slurmrestd, berth, cluster):
    state, text = submit_and_wait(slurmrestd, berth, {}, "#!/bin/sh\ncat /etc/debian_version\n")
    with open(cluster.node.path("/etc/debian_version")) as f:  # the node's own system
        assert (state, text) == ("COMPLETED", f.read())


def test_a_rest_submission_with_a_missing_image_fails_and_says_why(slurmrestd, berth, registry):
    state, text = submit_and_wait(slurmrestd, berth,
                                  {"BERTH_CONTAINER_IMAGE": f"{registry.host}/e2e/nothing:1"},
                                  "#!/bin/sh\necho ran\n")
    assert state == "FAILED"
    assert "ran" not in text
    assert text.startswith("berth: error: "), text


def test_slurmrestd_with_jwt_takes_the_clusters_tokens(cluster, scratch):
    # What berthd's tests stand on, for each release: slurmrestd with rest_auth/jwt on a
    # loopback port (start_rest_jwt), a token for a user made from the cluster's jwt_key, the
    # release's API version served, the others not.
    log = os.path.join(scratch, f"rest-jwt-{cluster.node.release}.log")
    proc, url = cluster.start_rest_jwt(log)
    try:
        def get(path: str, token: str | None) -> int:
            headers = {"X-SLURM-USER-NAME": "root"}
            if token is not None:
                headers["X-SLURM-USER-TOKEN"] = token
            req = urllib.request.Request(url + path, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code
        token = cluster.jwt("root")
        for version in cluster.release.rest_versions:
            assert get(f"/slurm/{version}/ping", token) == 200, version
        assert get(f"/slurm/{cluster.release.rest_version}/ping", None) == 401
        assert get("/slurm/v0.0.39/ping", token) == 404  # served by neither release
    finally:
        proc.terminate()
        proc.wait(timeout=20)

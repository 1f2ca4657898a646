"""berthd's job endpoints on the real loopback Slurm cluster: jobs submitted through Debian's
slurmrestd (rest_auth/jwt, a token berthd mints per call for the mapped user) run their
container through Berth's Slurm plugin; two users who cannot see each other's jobs; retried
submissions with an Idempotency-Key that never make a second job; cancel."""

from __future__ import annotations

import calendar
import concurrent.futures
import glob
import grp
import hashlib
import hmac
import json
import os
import shutil
import pwd
import re
import signal
import sqlite3
import struct
import subprocess
import threading
import time
import urllib.request

import pytest

from gateway import (AUDIENCE_A, AUDIENCE_B, Berthd, berthd_bin, gateway_cluster,  # noqa: F401
                     gateway_config, gpu_host, issuers, job_gateway_files, second_user,
                     slurmrestd, start_berthd)
from oidc import b64json, b64url


@pytest.fixture(scope="module")
def cluster(gateway_cluster):
    return gateway_cluster


@pytest.fixture
def gw(berth, cluster, slurmrestd, issuers, identity, berthd_bin, second_user):
    """berthd with its job endpoints, as the test user, jobs running with this test's berth
    store (the job environment carries its HOME and BERTH_HOME)."""
    workdir, key, env_lines = job_gateway_files(identity, berth, cluster)
    extra = f'database = "{workdir}/jobs.db"\n'
    output = make_output_dir(os.path.join(workdir, "output"), identity)
    conf = gateway_config(issuers, second_user, extra) + f"""
[slurm]
rest_url = "{slurmrestd}"
jwt_key = "{key}"
workdir = "{berth.workdir}"
cluster = "berthtest"
output_dir = "{output}"

[slurm.environment]
{env_lines}

[resources]
cache_s = 0

[gpu_models.fake]
vendor = "NVIDIA"
"""
    conf_path = identity.write_file(os.path.join(workdir, "berthd.conf"), conf)
    log = os.path.join(workdir, "berthd.log")
    proc, url = start_berthd(identity, berthd_bin, conf_path, log)
    g = Berthd(proc, url, log)
    g.db = os.path.join(workdir, "jobs.db")

    def restart(before=None):
        """Stops berthd, runs `before`, and starts it again on the same database."""
        g.proc.terminate()
        g.proc.wait(timeout=10)
        if before:
            before()
        g.proc, g.url = start_berthd(identity, berthd_bin, conf_path, log)

    g.restart = restart
    g.output_dir = output
    g.conf_path = conf_path
    yield g
    g.proc.terminate()
    g.proc.wait(timeout=10)


def default_acl(reader_uid: int) -> bytes:
    """The kernel's binary form of the default ACL "u::rw,u:READER:r,g::-,m::r,o::-" (what
    `setfacl -d -m u:READER:r,g::-,o::-` makes), written without the acl package."""
    entries = [(0x01, 6, 0xFFFFFFFF), (0x02, 4, reader_uid), (0x04, 0, 0xFFFFFFFF),
               (0x10, 4, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def make_output_dir(path: str, identity) -> str:
    """berthd's output_dir as docs/gateway.md says to make it: owned by berthd's account, mode
    1733, with a default ACL that lets that account read what jobs write."""
    identity.make_dir(path, 0o1733)
    os.setxattr(path, "system.posix_acl_default", default_acl(identity.uid))
    return path


def token_a(issuers, identity):
    a = issuers.issuers["a"]
    user = subprocess.run(["id", "-un", str(identity.uid)], capture_output=True,
                          text=True).stdout.strip()
    return a.sign(a.claims("s-alice", AUDIENCE_A, preferred_username=user))


def token_b(issuers):
    b = issuers.issuers["b"]
    return b.sign(b.claims("egi-0042@egi.eu", AUDIENCE_B))


def job_output(berth, job) -> str:
    """The batch script's own output (Slurm's slurm-JOBID.out in the job's working directory):
    only the shell's errors, the container's going to berthd's output_dir."""
    try:
        with open(os.path.join(berth.workdir, f"slurm-{job['slurm_job_id']}.out")) as f:
            return f.read()
    except OSError as e:
        return str(e)


def api_output(gw, token, job_id, tail=None) -> dict:
    """GET /v1/jobs/ID/output's answer (asserting 200)."""
    status, _, out = gw.request("GET", f"/v1/jobs/{job_id}/output" +
                                ("" if tail is None else f"?tail={tail}"), token)
    assert status == 200, out
    return out


def wait_final(gw, token, job_id, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, _, job = gw.request("GET", f"/v1/jobs/{job_id}", token)
        assert status == 200, job
        if job["state"] not in ("ACCEPTED", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} still {job['state']} after {timeout} s")


def comment(gw, job_id) -> str:
    """The Slurm comment berthd gives job `job_id`: "berthd:INSTANCE:ID", INSTANCE the name of
    its database."""
    db = sqlite3.connect(gw.db)
    name = db.execute("SELECT value FROM meta WHERE key = 'instance'").fetchone()[0]
    db.close()
    return f"berthd:{name}:{job_id}"


def squeue_comments(cluster) -> list[str]:
    r = subprocess.run(cluster.command(["squeue", "-h", "-o", "%k"]),
                       env=dict(os.environ, **cluster.env()),
                       capture_output=True, text=True, check=True)
    return r.stdout.split()


def test_job_runs_its_container_through_slurm(gw, berth, issuers, identity, pushed_busybox):
    tok = token_a(issuers, identity)
    status, _, job = gw.request("POST", "/v1/jobs", tok, {
        "name": "motd", "image": pushed_busybox, "command": ["sh", "-c", "grep -q . /etc/motd"],
        "resources": {"tasks": 1, "memory_mb": 200, "walltime_s": 120}})
    assert status == 201, job
    assert job["state"] == "PENDING" and job["slurm_job_id"] > 0 and job["name"] == "motd"
    done = wait_final(gw, tok, job["id"])
    assert done["state"] == "COMPLETED", (done, job_output(berth, done))
    assert done["exit_code"] == 0 and done["nodes"]
    assert 0 < done["start_time"] <= done["end_time"] and done["gpus_allocated"] == 0, done
    # A failing command's status comes back.
    status, _, job = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "command": ["sh", "-c", "exit 3"]})
    assert status == 201, job
    done = wait_final(gw, tok, job["id"])
    assert done["state"] == "FAILED" and done["exit_code"] == 3, done
    # The database has both, accepted then submitted.
    rows = sqlite3.connect(gw.db).execute("SELECT state, slurm_job_id FROM jobs").fetchall()
    assert len(rows) == 2 and all(r[1] > 0 for r in rows)


def test_idempotent_retries_make_one_job(gw, issuers, identity, pushed_busybox, cluster):
    tok = token_a(issuers, identity)
    body = {"image": pushed_busybox, "command": ["busybox", "sleep", "300"]}
    key = {"Idempotency-Key": "retry-1"}
    status, h1, first = gw.request("POST", "/v1/jobs", tok, body, headers=key)
    assert status == 201, first
    for _ in range(3):
        status, h, again = gw.request("POST", "/v1/jobs", tok, body, headers=key)
        assert status == 200 and h["Idempotent-Replayed"] == "true"
        assert again["id"] == first["id"] and again["slurm_job_id"] == first["slurm_job_id"]
    assert squeue_comments(cluster).count(comment(gw, first["id"])) == 1
    # The same key for another request is refused.
    status, _, err = gw.request("POST", "/v1/jobs", tok, dict(body, name="other"), headers=key)
    assert status == 422
    assert err["error"]["message"] == 'Idempotency-Key "retry-1" was used for another request'
    # Cancel.
    status, _, job = gw.request("DELETE", f"/v1/jobs/{first['id']}", tok)
    assert status == 202, job
    assert wait_final(gw, tok, first["id"])["state"] == "CANCELLED"


def test_users_see_only_their_own_jobs(gw, issuers, identity, pushed_busybox, second_user):
    if second_user is None:
        pytest.skip("a second local account needs root to create")
    tok_a, tok_b = token_a(issuers, identity), token_b(issuers)
    status, _, job = gw.request("POST", "/v1/jobs", tok_a,
                                {"image": pushed_busybox, "command": ["true"]})
    assert status == 201, job
    status, _, listed = gw.request("GET", "/v1/jobs", tok_a)
    assert status == 200 and [j["id"] for j in listed["jobs"]] == [job["id"]]
    status, _, listed = gw.request("GET", "/v1/jobs", tok_b)
    assert status == 200 and listed["jobs"] == []
    for method in ("GET", "DELETE"):
        status, _, err = gw.request(method, f"/v1/jobs/{job['id']}", tok_b)
        assert status == 404 and err["error"]["message"] == f"no job {job['id']}"
    wait_final(gw, tok_a, job["id"])


def user_store(berth, user: str) -> dict:
    """HOME and BERTH_HOME for `user`'s jobs: a folder of its own under the test's."""
    home = os.path.join(berth.workdir, "home-" + user)
    os.makedirs(home, exist_ok=True)
    pw = pwd.getpwnam(user)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    return {"HOME": home, "BERTH_HOME": os.path.join(home, "berth-store")}


def test_two_users_submit_list_get_cancel_and_read_output(gw, berth, issuers, identity,
                                                          pushed_busybox, second_user):
    """Two accounts use the gateway side by side: each submits, lists, reads and cancels its own
    jobs and reads their output, written by the job as its owner and read by berthd as its own
    account; neither sees, reads or cancels the other's."""
    if second_user is None:
        pytest.skip("a second local account needs root to create")
    tok_a, tok_b = token_a(issuers, identity), token_b(issuers)
    script = "seq 1 5; echo warn-{0} >&2"
    status, _, a = gw.request("POST", "/v1/jobs", tok_a, {
        "image": pushed_busybox, "command": ["sh", "-c", script.format("a")]})
    assert status == 201, a
    status, _, b = gw.request("POST", "/v1/jobs", tok_b, {
        "image": pushed_busybox, "command": ["sh", "-c", script.format("b")],
        "env": user_store(berth, second_user)})
    assert status == 201, b
    status, _, b_sleep = gw.request("POST", "/v1/jobs", tok_b, {
        "image": pushed_busybox, "command": ["busybox", "sleep", "300"],
        "env": user_store(berth, second_user)})
    assert status == 201, b_sleep
    for tok, mine, theirs in ((tok_a, [a], [b, b_sleep]), (tok_b, [b_sleep, b], [a])):
        status, _, listed = gw.request("GET", "/v1/jobs", tok)
        assert status == 200 and [j["id"] for j in listed["jobs"]] == [j["id"] for j in mine]
        for job in theirs:
            for method, path in (("GET", ""), ("GET", "/output"), ("DELETE", "")):
                status, _, err = gw.request(method, f"/v1/jobs/{job['id']}{path}", tok)
                assert status == 404 and err["error"]["message"] == f"no job {job['id']}", path
    done_a, done_b = wait_final(gw, tok_a, a["id"]), wait_final(gw, tok_b, b["id"])
    out_a, out_b = api_output(gw, tok_a, a["id"]), api_output(gw, tok_b, b["id"])
    assert done_a["state"] == "COMPLETED", (done_a, out_a, job_output(berth, done_a))
    assert done_b["state"] == "COMPLETED", (done_b, out_b, job_output(berth, done_b))
    assert (out_a["stdout"], out_a["stderr"]) == ("1\n2\n3\n4\n5\n", "warn-a\n"), out_a
    assert (out_b["stdout"], out_b["stderr"]) == ("1\n2\n3\n4\n5\n", "warn-b\n"), out_b
    assert not out_a["stdout_truncated"]
    # The last lines only, on request.
    tail = api_output(gw, tok_a, a["id"], tail=2)
    assert (tail["stdout"], tail["stdout_truncated"], tail["tail"]) == ("4\n5\n", True, 2)
    for bad in ("0", "10001", "x"):
        status, _, err = gw.request("GET", f"/v1/jobs/{a['id']}/output?tail={bad}", tok_a)
        assert status == 400
        assert err["error"]["message"] == "tail is not a number of lines from 1 to 10000"
    # Each file is its job owner's and nobody else's to read but berthd's (the default ACL).
    owners = {}
    for name in os.listdir(gw.output_dir):
        st = os.stat(os.path.join(gw.output_dir, name))
        assert st.st_mode & 0o007 == 0, (name, oct(st.st_mode))
        owners[name.split("-")[1]] = pwd.getpwuid(st.st_uid).pw_name
    assert owners[a["id"]] == pwd.getpwuid(identity.uid).pw_name
    assert owners[b["id"]] == second_user
    # B cancels its own job; A could not.
    status, _, cancelled = gw.request("DELETE", f"/v1/jobs/{b_sleep['id']}", tok_b)
    assert status == 202, cancelled
    done = wait_final(gw, tok_b, b_sleep["id"])
    assert done["state"] == "CANCELLED", (done, api_output(gw, tok_b, b_sleep["id"]))
    # The access log has a line per request, with the account that made it.
    with open(gw.log) as f:
        log = f.read()
    assert re.search(rf"^berthd: access GET /v1/jobs/{b['id']}/output 404 [0-9.]+ms "
                     rf"{pwd.getpwuid(identity.uid).pw_name}$", log, re.M), log[-2000:]
    assert re.search(rf"^berthd: access DELETE /v1/jobs/{b_sleep['id']} 202 [0-9.]+ms "
                     rf"{second_user}$", log, re.M), log[-2000:]


def test_systems_show_the_cluster_and_its_state(gw, issuers, identity, cluster, slurmrestd):
    tok = token_a(issuers, identity)
    status, _, answer = gw.request("GET", "/v1/systems", tok)
    assert status == 200, answer
    (system,) = answer["systems"]
    # berthd chose the version it speaks from what slurmrestd offers, and said so once.
    release = cluster.release
    assert system["slurm_api"] == release.rest_version
    with open(gw.log) as f:
        chosen = [line for line in f if " offers " in line]
    offers = ", ".join(release.rest_versions)
    assert chosen == [f"berthd: slurmrestd {slurmrestd} offers {offers}: "
                      f"speaking {release.rest_version}\n"]
    gpus = 4 if cluster.gpus else 0
    assert (system["name"], system["kind"], system["state"]) == ("berthtest", "slurm", "up")
    assert system["nodes"]["total"] == 2 and system["nodes"]["unavailable"] == 0, system
    assert system["cpus"]["total"] == 32 and system["gpus"]["total"] == gpus, system
    # 24.11's partitions have no Default flag (docs/gateway.md, slurmrestd versions).
    default = True if cluster.release.rest_version == "v0.0.38" else None
    assert system["partitions"] == [{"name": "debug", "state": "UP", "default": default,
                                     "nodes": 2, "cpus": 32, "gpus": gpus}]
    env = dict(os.environ, **cluster.env())
    subprocess.run(cluster.command(["scontrol", "update", "NodeName=n2", "State=DRAIN",
                                    "Reason=gateway test"]), env=env, check=True)
    try:
        status, _, answer = gw.request("GET", "/v1/systems", tok)
        system = answer["systems"][0]
        assert (system["state"], system["reason"]) == ("degraded", "1 of 2 nodes unavailable")
        assert system["nodes"]["unavailable"] == 1, system
    finally:
        subprocess.run(cluster.command(["scontrol", "update", "NodeName=n2", "State=RESUME"]),
                       env=env, check=True)
    status, _, _ = gw.request("GET", "/v1/systems", None)
    assert status == 401


def test_a_configured_version_is_spoken_and_one_not_served_says_so(gw, issuers, identity,
                                                                    cluster, slurmrestd):
    """[slurm] api_version pins the slurmrestd version: berthd speaks it without asking, and
    one slurmrestd does not serve (berthd's other version: v0.0.41 on 22.05, v0.0.38 on
    24.11) is named in GET /v1/systems and in a job's failure."""
    pinned = "v0.0.41" if "v0.0.41" not in cluster.release.rest_versions else "v0.0.38"

    def pin():
        with open(gw.conf_path) as f:
            text = f.read()
        identity.write_file(gw.conf_path,
                            text.replace("[slurm]\n", f'[slurm]\napi_version = "{pinned}"\n', 1))
    gw.restart(pin)
    tok = token_a(issuers, identity)
    status, _, answer = gw.request("GET", "/v1/systems", tok)
    assert status == 200, answer
    (system,) = answer["systems"]
    assert (system["slurm_api"], system["state"]) == (pinned, "down"), system
    why = f"slurmrestd does not serve {pinned} ([slurm] api_version)"
    assert system["reason"] == f"GET {slurmrestd}/slurm/{pinned}/ping: {why} (HTTP 404)"
    status, _, job = gw.request("POST", "/v1/jobs", tok, {"image": "busybox"})
    assert (status, job["state"], job["reason"]) == (201, "SUBMIT_FAILED", why), job
    with open(gw.log) as f:
        log = f.read()
    assert f"berthd: slurmrestd API {pinned} ([slurm] api_version)\n" in log
    assert " offers " not in log


def test_an_output_dir_berthd_cannot_read_is_refused_at_start(gw, identity, berthd_bin):
    """An output_dir without the default ACL (jobs' files would be unreadable to berthd, or
    readable by everyone) stops berthd with a one-line error before it serves."""
    bare = identity.make_dir(os.path.join(os.path.dirname(gw.db), "output-no-acl"), 0o1733)
    with open(os.path.join(os.path.dirname(gw.db), "berthd.conf")) as f:
        conf = f.read().replace(f'output_dir = "{gw.output_dir}"', f'output_dir = "{bare}"')
    path = identity.write_file(os.path.join(os.path.dirname(gw.db), "no-acl.conf"), conf)
    r = subprocess.run(identity.prefix + [berthd_bin, "--config", path], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr.splitlines()[0] == (
        f"berthd: read config {bare}: [slurm] output_dir has no default ACL that lets berthd, "
        "and no one else, read the jobs' files")


def test_bad_requests(gw, issuers, identity):
    tok = token_a(issuers, identity)
    for body, message in [
        ({"command": ["true"]}, '"image" is required'),
        ({"image": "x", "resources": {"gpus": -1}}, '"resources.gpus" is not a whole number from 0 to 10000'),
        ({"image": "x", "colour": 1}, '"colour" is not a field of a job request'),
        ({"image": "x", "class": "interactive"}, '"class" is not "batch" or "cloud"'),
        ({"image": "x", "resources": {"gpu_share": 1.5}},
         '"resources.gpu_share" is not a number above 0 and below 1'),
        # This berthd has no [share]: a GPU share is refused before anything is recorded.
        ({"image": "x", "resources": {"gpu_share": 0.25}},
         '"resources.gpu_share" asks for a share of a GPU, which this site does not offer'),
        # A GPU model the site's [gpu_models] does not list.
        ({"image": "x", "resources": {"gpus": 1, "gpu_model": "a100"}},
         '"resources.gpu_model" is "a100", not a GPU model of this site (known: fake)'),
    ]:
        status, _, err = gw.request("POST", "/v1/jobs", tok, body)
        assert status == 400 and err["error"]["message"] == message, body
    status, _, _ = gw.request("POST", "/v1/jobs", None, {"image": "x"})
    assert status == 401


def test_restart_settles_jobs_a_crash_left_accepted(gw, berth, issuers, identity, cluster,
                                                    slurmrestd, pushed_busybox):
    """berthd records a job, then dies before it hears from Slurm (simulated by writing the
    ACCEPTED rows itself): one job never reached Slurm, the other did. After a restart the
    first is submitted and the second found by its comment; neither is in Slurm twice."""
    user = subprocess.run(["id", "-un", str(identity.uid)], capture_output=True,
                          text=True).stdout.strip()
    tok = token_a(issuers, identity)
    never_sent = {"image": pushed_busybox, "command": ["true"]}
    sent = {"image": pushed_busybox, "command": ["sleep", "300"]}
    slurm_ids = {}

    def crash_leftovers():
        slurm_comment = comment(gw, 1002)
        db = sqlite3.connect(gw.db)
        for job_id, body in ((1001, never_sent), (1002, sent)):
            db.execute("INSERT INTO jobs (id, owner, issuer, subject, request, state, created_at, "
                       "updated_at) VALUES (?, ?, 'iss', 's-alice', ?, 'ACCEPTED', 1, 1)",
                       (job_id, user, json.dumps(body)))
        db.commit()
        db.close()
        identity.chown(gw.db)
        # Job 1002 reached Slurm before the crash: submitted as berthd would have.
        key = open(cluster.jwt_key, "rb").read()
        now = int(time.time())
        head = b64json({"alg": "HS256", "typ": "JWT"}) + "." + b64json(
            {"iat": now, "exp": now + 60, "sun": user})
        token = head + "." + b64url(hmac.new(key, head.encode(), hashlib.sha256).digest())
        script = "#!/bin/sh\nexec sleep 300\n"
        job = {"name": "left", "comment": slurm_comment,
               "current_working_directory": berth.workdir}
        version = cluster.release.rest_version
        if version == "v0.0.38":  # the submission's shape (docs/gateway.md, slurmrestd versions)
            submission = {"script": script, "job": dict(job, environment={"PATH": "/usr/bin:/bin"})}
        else:
            submission = {"job": dict(job, script=script, environment=["PATH=/usr/bin:/bin"])}
        req = urllib.request.Request(
            f"{slurmrestd}/slurm/{version}/job/submit", method="POST",
            data=json.dumps(submission).encode(),
            headers={"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token,
                     "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            slurm_ids[1002] = json.load(r)["job_id"]

    gw.restart(crash_leftovers)
    with open(gw.log) as f:
        assert "berthd: reconciled: 1 found in Slurm, 1 submitted, 0 left for later" in f.read()
    status, _, found = gw.request("GET", "/v1/jobs/1002", tok)
    assert status == 200 and found["slurm_job_id"] == slurm_ids[1002], found
    assert squeue_comments(cluster).count(comment(gw, 1002)) == 1
    status, _, resent = gw.request("GET", "/v1/jobs/1001", tok)
    assert status == 200 and resent["slurm_job_id"] > 0, resent
    assert wait_final(gw, tok, "1001")["state"] == "COMPLETED"
    gw.request("DELETE", "/v1/jobs/1002", tok)
    assert wait_final(gw, tok, "1002")["state"] == "CANCELLED"


def test_gpu_job_gets_its_gpu(gw, berth, issuers, identity, cluster, scratch, pushed_busybox):
    """A job asking for one GPU of the model "fake" (the GRES type, one of [gpu_models]) gets
    one of the node's (fake, GRES) GPUs from Slurm, and the plugin injects that one, renumbered
    from 0, from a fabricated driver host."""
    from test_gpu import UUID0
    env = gpu_host(cluster, scratch)
    tok = token_a(issuers, identity)
    status, _, job = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "env": env, "resources": {"gpus": 1, "gpu_model": "fake"},
        "command": ["sh", "-c", "echo gpus=$CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES; "
                                "exec busybox sleep 300"]})
    assert status == 201, job
    # While it runs: Slurm's record of the allocation (one GPU of the node it runs on), and
    # the output so far.
    deadline = time.monotonic() + 90
    while True:
        status, _, running = gw.request("GET", f"/v1/jobs/{job['id']}", tok)
        out = api_output(gw, tok, job["id"])
        if running["state"] == "RUNNING" and out["stdout"]:
            break
        assert running["state"] in ("PENDING", "RUNNING", "CONFIGURING"), (
            running, out, job_output(berth, running))
        assert time.monotonic() < deadline, (running, out)
        time.sleep(0.2)
    assert out["stdout"] == f"gpus=0 {UUID0}\n", out
    assert running["gpus_allocated"] == 1 and running["gpu_model"] == "fake", running
    assert re.fullmatch(r"gpu:fake:1\(IDX:[01]\)", running["gres_detail"][0]), running
    assert gw.request("DELETE", f"/v1/jobs/{job['id']}", tok)[0] == 202
    done = wait_final(gw, tok, job["id"])
    # Slurm forgets the GPUs of an ended job; berthd keeps what it saw.
    assert (done["state"], done["gpus_allocated"]) == ("CANCELLED", 1), done
    assert done["gres_detail"] == running["gres_detail"], (done, running)


def test_gpu_share_job_gets_a_shard_and_the_mps_directories(gw, berth, issuers, identity,
                                                             cluster, scratch, pushed_busybox):
    """[share] with Slurm's gres/shard (4 shards per fake GPU): a quarter of a GPU is one shard
    (test_gateway_share_mps.py: the same with gres/mps)."""
    run_share_jobs(gw, berth, issuers, identity, cluster, scratch, pushed_busybox)


def share_tres_per_node(cluster, gres: str) -> str:
    """scontrol's TresPerNode of a job asking for `gres` per node ("shard:1"): `gres:shard:1`
    on 22.05, `gres/shard:1` on 24.11 (docs/gateway.md, release differences)."""
    return f"TresPerNode=gres{':' if cluster.node.release == '22.05' else '/'}{gres}"


def share_gpu(cluster, gres: str, detail: str) -> int | None:
    """The index of the one GPU a share job's gres_detail names, else None: `shard:1(IDX:0)`
    on 22.05; on 24.11 each GPU's units in use of its count, `shard:1(1/4,0/4)`, the GPU the
    one in use (docs/gateway.md, slurmrestd versions)."""
    if cluster.node.release == "22.05":
        m = re.fullmatch(re.escape(gres) + r"\(IDX:([01])\)", detail)
        return int(m.group(1)) if m else None
    m = re.fullmatch(re.escape(gres) + r"\((\d+)/\d+,(\d+)/\d+\)", detail)
    if not m:
        return None
    used = [int(m.group(1)) > 0, int(m.group(2)) > 0]
    return used.index(True) if used.count(True) == 1 else None


def run_share_jobs(gw, berth, issuers, identity, cluster, scratch, pushed_busybox):
    """berthd restarted with [share] as the cluster splits its fake GPUs (cluster.share):
    two jobs asking for a quarter of a GPU each get that GRES on the same GPU and run at once;
    inside each container the node's MPS pipe and log directories (made here, under the fake
    host's root, with a marker file) are bound, CUDA_MPS_PIPE_DIRECTORY and
    CUDA_MPS_LOG_DIRECTORY name them, and an MPS job has Slurm's
    CUDA_MPS_ACTIVE_THREAD_PERCENTAGE."""
    from test_gpu import UUID0, UUID1
    env = gpu_host(cluster, scratch)
    pipe, log = "/run/berth-mps/pipe", "/run/berth-mps/log"
    for d, marker in ((pipe, "pipe-marker"), (log, "log-marker")):
        host_dir = env["BERTH_DRIVER_ROOT"] + d
        os.makedirs(host_dir, exist_ok=True)
        os.chmod(os.path.dirname(host_dir), 0o755)
        os.chmod(host_dir, 0o755)
        with open(os.path.join(host_dir, "marker"), "w") as f:
            f.write(marker + "\n")
    with open(gw.conf_path) as f:
        conf = f.read()
    conf += (f'\n[share]\ngres = "{cluster.share}"\nunits_per_gpu = {cluster.share_units}\n'
             f'pipe_dir = "{pipe}"\nlog_dir = "{log}"\n')
    gw.restart(lambda: identity.write_file(gw.conf_path, conf))
    # A quarter: 1 of 4 shards (rounded up), or 25 of MPS's 100.
    gres = f"{cluster.share}:{-(-cluster.share_units // 4)}"
    percentage = "25" if cluster.share == "mps" else "none"
    tok = token_a(issuers, identity)
    script = ("echo pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY "
              "pct=${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-none} "
              "gpus=$CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES; "
              "cat $CUDA_MPS_PIPE_DIRECTORY/marker $CUDA_MPS_LOG_DIRECTORY/marker; "
              "exec busybox sleep 300")
    jobs = []
    try:
        for _ in range(2):
            status, _, job = gw.request("POST", "/v1/jobs", tok, {
                "image": pushed_busybox, "env": env, "resources": {"gpu_share": 0.25},
                "command": ["sh", "-c", script]})
            assert status == 201, job
            assert (job["gpu_share"], job["gres"]) == (0.25, gres), job
            jobs.append(job["id"])
        running, outs = {}, {}
        deadline = time.monotonic() + 120
        while len(outs) < 2:
            for job_id in jobs:
                status, _, j = gw.request("GET", f"/v1/jobs/{job_id}", tok)
                out = api_output(gw, tok, job_id)
                # Three lines, or an error (a marker that is not there) to show at once.
                if j["state"] == "RUNNING" and (out["stdout"].count("\n") >= 3 or out["stderr"]):
                    running[job_id], outs[job_id] = j, out
                assert j["state"] in ("PENDING", "RUNNING", "CONFIGURING"), (
                    j, out, job_output(berth, j))
            assert time.monotonic() < deadline, (running, outs)
            time.sleep(0.2)
        placed = set()
        for job_id in jobs:
            j, out = running[job_id], outs[job_id]
            # Slurm's record: the GRES asked for, on one GPU while it runs.
            r = subprocess.run(cluster.command(["scontrol", "-d", "show", "job",
                                                str(j["slurm_job_id"])]),
                               env=dict(os.environ, **cluster.env()), capture_output=True,
                               text=True, check=True)
            assert share_tres_per_node(cluster, gres) in r.stdout.split(), r.stdout
            gpu = share_gpu(cluster, gres, j["gres_detail"][0])
            assert gpu is not None, j
            placed.add((j["nodes"], gpu))
            uuid = (UUID0, UUID1)[gpu]
            assert out["stdout"] == (f"pipe={pipe} log={log} pct={percentage} gpus=0 {uuid}\n"
                                     "pipe-marker\nlog-marker\n"), out
            assert j["gpus_allocated"] == 0 and j["gpu_share"] == 0.25, j
        # Both at once, on the same GPU of the same node (Slurm fills the first node first).
        assert len(placed) == 1, running
        time.sleep(2)  # whole seconds of GPU time for the accounting below (Slurm's clock)
    finally:
        # Left running, a job would outlive this module's cluster (its holders with it).
        for job_id in jobs:
            gw.request("DELETE", f"/v1/jobs/{job_id}", tok)
        ended = [wait_final(gw, tok, job_id) for job_id in jobs]
    # Accounting (berthd's database): a quarter of a GPU for the time each ran. The window
    # holds these two jobs' times alone (the module's other GPU jobs ended before).
    since = min(j["start_time"] for j in ended)
    until = max(j["end_time"] for j in ended) + 1
    status, _, body = gw.request("GET", f"/v1/accounting?since={since}&until={until}", tok)
    assert status == 200, body
    want = sum(0.25 * (j["end_time"] - j["start_time"]) for j in ended) / 3600
    user = pwd.getpwuid(identity.uid).pw_name
    rows = [r for r in body["rows"] if r["user"] == user]
    assert want > 0 and len(rows) == 1, (body, ended)
    assert abs(rows[0]["gpu_hours"] - want) < 1e-3, (rows, want, ended)


def test_kill_9_during_200_submissions_loses_and_duplicates_nothing(gw, issuers, identity,
                                                                    cluster):
    """200 submissions from 8 clients, each with its Idempotency-Key; berthd is killed with
    SIGKILL after about a third were acknowledged, restarted, and every client retries what was
    not acknowledged. Every job then exists exactly once in the database and in Slurm, and every
    acknowledged id is still its key's job. The partition is down meanwhile (it queues jobs
    and starts none), so the 200 jobs do not load the machine."""
    slurm_env = dict(os.environ, **cluster.env())
    user = subprocess.run(["id", "-un", str(identity.uid)], capture_output=True,
                          text=True).stdout.strip()
    subprocess.run(cluster.command(["scontrol", "update", "PartitionName=debug", "State=DOWN"]),
                   env=slurm_env, check=True)
    try:
        tok = token_a(issuers, identity)
        acked: dict[str, str] = {}
        lock = threading.Lock()
        killed = threading.Event()

        def submit(i: int) -> None:
            key = f"crash-{i}"
            try:
                status, _, job = gw.request("POST", "/v1/jobs", tok,
                                            {"name": key, "image": "127.0.0.1:1/none:1",
                                             "command": ["true"]},
                                            headers={"Idempotency-Key": key})
            except OSError:
                return  # the connection died with berthd: not acknowledged
            if status in (200, 201):
                with lock:
                    acked[key] = job["id"]
                    if len(acked) >= 70 and not killed.is_set():
                        killed.set()
                        os.kill(gw.proc.pid, signal.SIGKILL)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(submit, range(200)))
        assert killed.is_set() and len(acked) < 200
        before = dict(acked)
        gw.restart()
        with open(gw.log) as f:
            reconciled = [line for line in f if line.startswith("berthd: reconciled:")][-1]
        print(f"acknowledged before the kill: {len(before)}; {reconciled.strip()}")
        assert "0 left for later" in reconciled
        for i in range(200):
            key = f"crash-{i}"
            status, _, job = gw.request("POST", "/v1/jobs", tok,
                                        {"name": key, "image": "127.0.0.1:1/none:1",
                                         "command": ["true"]},
                                        headers={"Idempotency-Key": key})
            assert status in (200, 201), job
            assert job["slurm_job_id"] > 0, (job["state"], job["reason"])
            if key in before:
                assert job["id"] == before[key] and status == 200
            acked[key] = job["id"]
        rows = sqlite3.connect(gw.db).execute(
            "SELECT idempotency_key, COUNT(*) FROM jobs WHERE idempotency_key LIKE 'crash-%' "
            "GROUP BY idempotency_key").fetchall()
        assert len(rows) == 200 and all(n == 1 for _, n in rows)
        comments = subprocess.run(cluster.command(["squeue", "-h", "-t", "all", "-u", user,
                                                   "-o", "%k"]),
                                  env=slurm_env, capture_output=True, text=True,
                                  check=True).stdout.split()
        for key, job_id in acked.items():
            assert comments.count(comment(gw, job_id)) == 1, key
    finally:
        subprocess.run(cluster.command(["scancel", "-u", user]), env=slurm_env)
        subprocess.run(cluster.command(["scontrol", "update", "PartitionName=debug", "State=UP"]),
                       env=slurm_env)


def admin_token(issuers, identity):
    from gateway import ADMIN_GROUP
    a = issuers.issuers["a"]
    user = subprocess.run(["id", "-un", str(identity.uid)], capture_output=True,
                          text=True).stdout.strip()
    return a.sign(a.claims("s-alice", AUDIENCE_A, preferred_username=user, groups=[ADMIN_GROUP]))


def scrape(gw, token) -> str:
    req = urllib.request.Request(gw.url + "/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        return r.read().decode()


def sample(text: str, name: str, **labels) -> float:
    """The value of the series `name` whose labels include `labels` (0 when absent)."""
    for line in text.splitlines():
        m = re.fullmatch(r"([a-z_]+)(\{(.*)\})? (\S+)", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            return float(m.group(4))
    return 0.0


def test_metrics_pass_promtool_and_move(gw, issuers, identity, pushed_busybox):
    """GET /metrics is Prometheus' text format (promtool agrees), for administrators only, and
    its counters move with the requests, the token failures and the jobs."""
    if shutil.which("promtool") is None:
        pytest.skip("no promtool (Debian's prometheus package)")
    admin, user = admin_token(issuers, identity), token_a(issuers, identity)
    assert gw.request("GET", "/metrics", user)[0] == 403
    assert gw.request("GET", "/metrics", None)[0] == 401
    before = scrape(gw, admin)
    assert gw.request("GET", "/v1/me", "not-a-jwt")[0] == 401
    status, _, job = gw.request("POST", "/v1/jobs", user, {"image": pushed_busybox,
                                                            "command": ["true"]})
    assert status == 201, job
    gw.request("GET", "/v1/jobs", user)
    counter = "berthd_http_requests_total"
    posted = sample(before, counter, route="/v1/jobs", method="POST", status="201") + 1
    # cpp-httplib logs a request (where berthd counts it) after its answer is sent: a scrape
    # right after the answer can come before the count, so scrape until the POST is counted.
    deadline = time.monotonic() + 10
    after = scrape(gw, admin)
    while (sample(after, counter, route="/v1/jobs", method="POST", status="201") < posted
           and time.monotonic() < deadline):
        time.sleep(0.05)
        after = scrape(gw, admin)
    check = subprocess.run(["promtool", "check", "metrics"], input=after, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert sample(after, counter, route="/v1/jobs", method="POST", status="201") == posted
    assert sample(after, counter, route="/v1/me", status="401") >= 1
    assert sample(after, "berthd_token_failures_total", reason="malformed") == \
        sample(before, "berthd_token_failures_total", reason="malformed") + 1
    assert sample(after, "berthd_slurm_requests_total", method="POST", status="200") >= 1
    assert sample(after, "berthd_slurm_request_duration_seconds_count", method="POST") >= 1
    assert sum(sample(after, "berthd_jobs", state=s) for s in
               ("ACCEPTED", "PENDING", "RUNNING", "COMPLETED", "CONFIGURING", "COMPLETING")) >= 1
    # A job's route is one label, whatever its id.
    gw.request("GET", f"/v1/jobs/{job['id']}", user)
    assert sample(scrape(gw, admin), counter, route="/v1/jobs/{id}", status="200") >= 1
    wait_final(gw, user, job["id"])


def test_resources_are_glue_and_follow_allocations(gw, issuers, identity, cluster,
                                                   pushed_busybox):
    """GET /v1/resources: GLUE 2.1 entities from Slurm; a running job shows in its share's
    RunningJobs and UsedSlots, and no more once it has ended."""
    tok = token_a(issuers, identity)
    status, _, doc = gw.request("GET", "/v1/resources", tok)
    assert status == 200, doc
    for entity in ("ComputingService", "ComputingManager", "ComputingShare",
                   "ExecutionEnvironment", "ComputingManagerAccelerator",
                   "ComputingShareAccelerator", "AcceleratorEnvironment"):
        assert entity in doc, entity
    manager = doc["ComputingManager"][0]
    assert manager["ProductName"] == "SLURM" and manager["TotalLogicalCPUs"] >= 2, manager
    assert sum(e["TotalInstances"] for e in doc["ExecutionEnvironment"]) == 2, doc
    if cluster.gpus:
        acc = doc["ComputingManagerAccelerator"][0]
        assert acc["Type"] == "GPU" and acc["TotalNumbers"] >= 1, acc
        assert doc["AcceleratorEnvironment"][0]["Model"] == "fake", doc["AcceleratorEnvironment"]
    status, _, job = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "command": ["busybox", "sleep", "300"]})
    assert status == 201, job
    deadline = time.monotonic() + 90
    while gw.request("GET", f"/v1/jobs/{job['id']}", tok)[2]["state"] != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.2)

    def share():
        # The answer is kept for the cache time (15 s by default): wait for a fresh one.
        time.sleep(0.1)
        s, _, d = gw.request("GET", "/v1/resources", tok)
        assert s == 200, d
        return d["ComputingShare"][0], d["ComputingService"][0]

    deadline = time.monotonic() + 60
    while True:
        sh, service = share()
        if sh["RunningJobs"] >= 1:
            break
        assert time.monotonic() < deadline, sh
    assert sh["UsedSlots"] >= 1 and service["RunningJobs"] >= 1, (sh, service)
    assert gw.request("DELETE", f"/v1/jobs/{job['id']}", tok)[0] == 202
    wait_final(gw, tok, job["id"])
    deadline = time.monotonic() + 60
    while share()[0]["RunningJobs"] != 0:
        assert time.monotonic() < deadline


def test_accounting_matches_the_jobs_hours(gw, berth, issuers, identity, pushed_busybox,
                                           cluster, scratch):
    """GET /v1/accounting (berthd's database as the source, no slurmdbd asked): CPU- and
    GPU-hours of a scripted set of jobs computed by hand from their own start and end times;
    JSON and CSV agree."""
    host = gpu_host(cluster, scratch)
    tok = token_a(issuers, identity)
    since = int(time.time()) - 1
    ids = []
    for cpus, gpus, seconds in ((1, 0, 1), (2, 0, 2), (1, 1, 2)):
        status, _, job = gw.request("POST", "/v1/jobs", tok, {
            "image": pushed_busybox, "command": ["busybox", "sleep", str(seconds)],
            "env": host, "resources": {"cpus_per_task": cpus, "gpus": gpus}})
        assert status == 201, job
        ids.append((job["id"], cpus, gpus))
    want_cpu = want_gpu = 0.0
    for job_id, cpus, gpus in ids:
        done = wait_final(gw, tok, job_id)
        assert done["state"] == "COMPLETED", done
        want_cpu += cpus * (done["end_time"] - done["start_time"]) / 3600
        want_gpu += gpus * (done["end_time"] - done["start_time"]) / 3600
    until = int(time.time()) + 1
    status, _, body = gw.request("GET", f"/v1/accounting?since={since}&until={until}", tok)
    assert status == 200, body
    user = pwd.getpwuid(identity.uid).pw_name
    [row] = [r for r in body["rows"] if r["user"] == user]
    assert row["jobs"] >= 3 and abs(row["cpu_hours"] - want_cpu) < 1e-3, (row, want_cpu)
    assert want_gpu > 0 and abs(row["gpu_hours"] - want_gpu) < 1e-3, (row, want_gpu)
    req = urllib.request.Request(gw.url + f"/v1/accounting?since={since}&until={until}&format=csv",
                                 headers={"Authorization": f"Bearer {tok}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        csv = r.read().decode().splitlines()
    assert csv[0] == "user,gpu_hours,cpu_hours,jobs"
    assert f"{user},{row['gpu_hours']:.4f},{row['cpu_hours']:.4f},{row['jobs']}" in csv, csv
    assert gw.request("GET", "/v1/accounting?group_by=node", tok)[0] == 400


def sacct_window(cluster, identity, since: int, until: int) -> list[dict]:
    """Every allocation Slurm's accounting has in [since, until), read with sacct's text
    output (not the JSON berthd reads), times in UTC: the hand computation's input."""
    r = subprocess.run(cluster.command(
        ["sacct", "-X", "-P", "-n", "--allusers", "-S", time.strftime("%Y-%m-%dT%H:%M:%S",
         time.gmtime(since)), "-E", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(until - 1)),
         "-o", "JobID,User,Account,Start,End,AllocTRES,State"]),
        env=dict(os.environ, TZ="UTC", **cluster.env()), capture_output=True, text=True,
        check=True)
    jobs = []
    for line in r.stdout.splitlines():
        job_id, user, account, start, end, tres, state = line.split("|")
        if start in ("Unknown", "None", ""):
            continue
        t = lambda s: calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%S"))  # noqa: E731
        alloc = dict(item.split("=", 1) for item in tres.split(",") if "=" in item)
        jobs.append({"id": int(job_id), "user": user, "account": account, "start": t(start),
                     "end": 0 if end == "Unknown" else t(end), "state": state,
                     "gpus": int(alloc.get("gres/gpu", 0)), "cpus": int(alloc.get("cpu", 0)),
                     "model": next((k[len("gres/gpu:"):] for k in alloc
                                    if k.startswith("gres/gpu:")), "")})
    return jobs


def test_accounting_from_sacct_matches_slurms_own_times(gw, berth, issuers, identity, cluster,
                                                        scratch, pushed_busybox):
    """[accounting] source = "sacct" (slurmdbd on MariaDB): a scripted set of jobs, one GPU for
    3 s, two GPUs for 2 s and a 2-CPU job, then GET /v1/accounting by user, group (the Slurm
    account, which berthd sets to the caller's primary group) and GPU model matches the hours
    computed by hand from Slurm's own start and end times; JSON and CSV. Then a GPU-hour quota
    the group has used refuses the next GPU job, its use read from sacct."""
    if cluster.node.release != "22.05":
        # Not Slurm's difference, the tier's: berthd runs on this host (its libraries are
        # Debian 12's), whose 22.05 sacct cannot talk to a 24.11 slurmdbd, and the test user
        # it runs as cannot enter the 24.11 root.
        pytest.skip("berthd's sacct here is Debian 12's (22.05), not the 24.11 cluster's")
    if cluster.accounting is None:
        pytest.skip("no slurmdbd here (Debian: slurmdbd mariadb-server)")
    env = gpu_host(cluster, scratch)
    user = pwd.getpwuid(identity.uid).pw_name
    group = grp.getgrgid(pwd.getpwuid(identity.uid).pw_gid).gr_name
    # sacct's JSON names a job's user through its association: the user must be known there.
    cluster.add_account(group, [user])
    with open(gw.conf_path) as f:
        base = f.read()
    sacct_conf = base + (f'\n[accounting]\nsource = "sacct"\nsacct = "/usr/bin/sacct"\n'
                         f'slurm_conf = "{cluster.conf}"\ntimeout_s = 30\n')
    gw.restart(lambda: identity.write_file(gw.conf_path, sacct_conf))
    tok = token_a(issuers, identity)
    since = int(time.time()) - 1
    ids = []
    for resources, seconds in (({"gpus": 1}, 3), ({"gpus": 2}, 2), ({"cpus_per_task": 2}, 1)):
        status, _, job = gw.request("POST", "/v1/jobs", tok, {
            "image": pushed_busybox, "env": env, "resources": resources,
            "command": ["busybox", "sleep", str(seconds)]})
        assert status == 201, job
        ids.append(job["id"])
    slurm_ids = set()
    for job_id in ids:
        done = wait_final(gw, tok, job_id)
        assert done["state"] == "COMPLETED", (done, job_output(berth, done))
        slurm_ids.add(done["slurm_job_id"])
    # slurmctld sends a job's end to slurmdbd a moment after it ends.
    deadline = time.monotonic() + 30
    while True:
        until = int(time.time()) + 1
        jobs = sacct_window(cluster, identity, since, until)
        mine = [j for j in jobs if j["id"] in slurm_ids]
        if len(mine) == 3 and all(j["end"] for j in mine):
            break
        assert time.monotonic() < deadline, jobs
        time.sleep(0.5)
    assert sorted((j["gpus"], j["cpus"], j["model"], j["account"]) for j in mine) == [
        (0, 2, "", group), (1, 1, "fake", group), (2, 1, "fake", group)], mine

    def hours(rows_of, key):
        """GPU- and CPU-hours and jobs by `key`, clipped to the window, by hand."""
        out = {}
        for j in jobs:
            s = min(j["end"] or until, until) - max(j["start"], since)
            if s <= 0 or (key == "model" and not j["gpus"]):
                continue
            row = out.setdefault(j[key], [0.0, 0.0, 0])
            row[0] += j["gpus"] * s / 3600
            row[1] += j["cpus"] * s / 3600
            row[2] += 1
        return out

    for group_by, key in (("user", "user"), ("group", "account"), ("gpu_model", "model")):
        status, _, body = gw.request(
            "GET", f"/v1/accounting?since={since}&until={until}&group_by={group_by}", tok)
        assert status == 200, body
        assert body["source"] == "sacct" and body["group_by"] == group_by, body
        want = hours(jobs, key)
        if group_by == "user":  # a caller sees its own jobs only
            want = {user: want[user]}
        got = {r[group_by]: [r["gpu_hours"], r["cpu_hours"], r["jobs"]] for r in body["rows"]}
        assert got.keys() == want.keys(), (got, want)
        for k in want:
            assert abs(got[k][0] - want[k][0]) < 1e-3 and abs(got[k][1] - want[k][1]) < 1e-3, (
                group_by, got, want)
            assert got[k][2] == want[k][2], (group_by, got, want)
        req = urllib.request.Request(
            gw.url + f"/v1/accounting?since={since}&until={until}&group_by={group_by}&format=csv",
            headers={"Authorization": f"Bearer {tok}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            csv = r.read().decode().splitlines()
        assert csv[0] == f"{group_by},gpu_hours,cpu_hours,jobs", csv
        assert sorted(csv[1:]) == sorted(f"{k},{v[0]:.4f},{v[1]:.4f},{v[2]}"
                                         for k, v in got.items()), csv
    # The scripted jobs' own share: each ran at least its sleep (1 GPU x 3 s, 2 GPUs x 2 s).
    for j in mine:
        assert j["end"] - j["start"] >= {1: 3, 2: 2, 0: 1}[j["gpus"]], mine
    gpu_hours_by_hand = sum(j["gpus"] * (j["end"] - j["start"]) for j in mine) / 3600
    assert gpu_hours_by_hand >= (1 * 3 + 2 * 2) / 3600, mine

    # A quota the group has used up (what it used this month includes these jobs): the next
    # GPU job is refused, its use read from sacct; a CPU job is not.
    quota_conf = sacct_conf + f'\n[quotas]\nperiod = "month"\n[quotas.groups."{group}"]\ngpu_hours = 0.001\n'
    gw.restart(lambda: identity.write_file(gw.conf_path, quota_conf))
    status, _, err = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "env": env, "resources": {"gpus": 1},
        "command": ["busybox", "true"]})
    assert status == 403, err
    assert err["error"]["quota"] == f'[quotas.groups."{group}"] gpu_hours', err
    assert err["error"]["used_gpu_hours"] >= gpu_hours_by_hand - 1e-6, (err, gpu_hours_by_hand)
    status, _, cpu = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "command": ["busybox", "true"]})
    assert status == 201, cpu
    wait_final(gw, tok, cpu["id"])
    # Slurm's accounting unreachable: a one-line 503, never the database's figures.
    broken = sacct_conf.replace('sacct = "/usr/bin/sacct"', f'sacct = "{scratch}/no-such-sacct"')
    gw.restart(lambda: identity.write_file(gw.conf_path, broken))
    status, _, err = gw.request("GET", "/v1/accounting", tok)
    assert status == 503, err
    assert err["error"]["message"] == (f'exec: "{scratch}/no-such-sacct": No such file or '
                                       "directory"), err


def fake_nvml_state(identity, berth, name: str, util: int) -> str:
    """A state file of the fake libnvidia-ml (tests/fake_gpu/nvml.c): the fabricated host's two
    GPUs at `util` per cent; the test may append processes."""
    from test_gpu import UUID0, UUID1
    path = identity.write_file(os.path.join(berth.workdir, f"nvml-{name}.state"), (
        "driver 550.54.15\n"
        f"gpu {UUID0} 00000000:07:00.0 NVIDIA A100-SXM4-40GB\n"
        f"gpu {UUID1} 00000000:85:00.0 NVIDIA H100 80GB HBM3\n"
        f"util 0 {util} 1\nutil 1 {util} 1\nmem 0 40960 100\nmem 1 81559 100\n"
        "cc 0 8 0\ncc 1 9 0\n"))
    os.chmod(path, 0o644)
    return path


def restart_reclaiming(gw, identity, berth_bin, reclaim: str, top: str = "") -> None:
    """berthd again, reconciling every second, with `top` above the database key and
    [reclaim] sampling every second plus the `reclaim` lines."""
    with open(gw.conf_path) as f:
        conf = f.read()
    conf = conf.replace("database = ", f"{top}reconcile_interval_s = 1\ndatabase = ", 1)
    conf += f'\n[reclaim]\nsample_interval_s = 1\n{reclaim}berth = "{berth_bin}"\n'
    gw.restart(lambda: identity.write_file(gw.conf_path, conf))


def test_idle_gpu_job_is_flagged_then_cancelled_and_a_busy_one_is_not(
        gw, berth, issuers, identity, cluster, scratch, pushed_busybox, berth_bin):
    """[reclaim]: each GPU job samples its GPUs in a step of its own (srun --overlap, `berth gpu
    stats --json`) beside its output; berthd reads the samples at each reconciliation. The job
    whose (fake NVML) GPU stays idle is flagged, told so in its stderr, and cancelled; the job
    whose GPU is busy runs on."""
    host = gpu_host(cluster, scratch, "gateway-reclaim-host")
    states = {name: fake_nvml_state(identity, berth, name, util)
              for name, util in (("idle", 0), ("busy", 90))}
    # berthd again, reclaiming: sample every second, idle after 3 s, cancel.
    restart_reclaiming(gw, identity, berth_bin,
                       'idle_for_s = 3\nidle_below_pct = 5\naction = "cancel"\n')
    tok = token_a(issuers, identity)
    jobs = {}
    try:
        for name, state in states.items():
            status, _, job = gw.request("POST", "/v1/jobs", tok, {
                "image": pushed_busybox, "env": dict(host, BERTH_FAKE_NVML_STATE=state),
                "resources": {"gpus": 1}, "command": ["busybox", "sleep", "300"]})
            assert status == 201, job
            jobs[name] = job["id"]
        try:
            idle = wait_final(gw, tok, jobs["idle"], timeout=90)
        except AssertionError as e:
            files = {f: open(os.path.join(gw.output_dir, f), errors="replace").read()[-1500:]
                     for f in sorted(os.listdir(gw.output_dir))}
            with open(gw.log) as f:
                raise AssertionError(f"{e}\n{files}\n{f.read()[-3000:]}") from None
        assert idle["state"] == "CANCELLED" and idle["idle_gpus"] is True, idle
        out = api_output(gw, tok, jobs["idle"])
        assert f"berthd: job {jobs['idle']}: its 1 GPU(s) have been idle (below 5% use)" in out["stderr"], out
        status, _, busy = gw.request("GET", f"/v1/jobs/{jobs['busy']}", tok)
        assert busy["state"] == "RUNNING" and busy["idle_gpus"] is False, busy
        assert gw.request("DELETE", f"/v1/jobs/{jobs['busy']}", tok)[0] == 202
        wait_final(gw, tok, jobs["busy"])
        # What the samples measured is GLUE's ComputeCapability and driver Version
        # (gateway/gpu_facts.h), kept across a restart with no GPU job running.
        gw.restart()

        def measured():
            status, _, doc = gw.request("GET", "/v1/resources", tok)
            assert status == 200, doc
            return [a for a in doc["AcceleratorEnvironment"] if "ComputeCapability" in a]

        accs = measured()
        assert len(accs) == 1, accs
        assert set(accs[0]["ComputeCapability"]) <= {"8.0", "9.0"}, accs
        assert accs[0]["ComputeCapability"] and accs[0]["Version"] == "550.54.15", accs
    finally:
        # Left running, a job would outlive this module's cluster (its holders with it).
        for job_id in jobs.values():
            gw.request("DELETE", f"/v1/jobs/{job_id}", tok)
        for job_id in jobs.values():
            wait_final(gw, tok, job_id)


def test_idle_gpus_of_a_two_node_job_are_sampled_on_both_nodes(
        gw, berth, issuers, identity, cluster, scratch, pushed_busybox, berth_bin):
    """[reclaim] across nodes: the sampler is a step of one task per node overlapping the
    container's (srun --overlap --mem=0), each node's document lands in the one samples file,
    and berthd counts both nodes' GPUs before it flags the job."""
    host = gpu_host(cluster, scratch, "gateway-reclaim-host")
    state = fake_nvml_state(identity, berth, "idle2", 0)
    restart_reclaiming(gw, identity, berth_bin, "idle_for_s = 3\nidle_below_pct = 5\n")
    tok = token_a(issuers, identity)
    status, _, job = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "env": dict(host, BERTH_FAKE_NVML_STATE=state),
        "resources": {"nodes": 2, "tasks": 2, "gpus": 2},
        "command": ["busybox", "sleep", "300"]})
    assert status == 201, job
    try:
        deadline = time.monotonic() + 90
        while True:
            status, _, j = gw.request("GET", f"/v1/jobs/{job['id']}", tok)
            out = api_output(gw, tok, job["id"])
            if j.get("idle_gpus") and "have been idle" in out["stderr"]:
                break
            assert j["state"] in ("PENDING", "CONFIGURING", "RUNNING"), (j, out)
            assert time.monotonic() < deadline, (j, out, open(gw.log).read()[-3000:])
            time.sleep(0.5)
        r = subprocess.run(cluster.command(["scontrol", "show", "job", str(j["slurm_job_id"])]),
                           env=dict(os.environ, **cluster.env()), capture_output=True, text=True,
                           check=True)
        # Two nodes (slurmrestd 22.05 gave such a job one until berthd sent "nodes" as text).
        assert "NodeList=n[1-2]" in r.stdout.split(), r.stdout
        # Both nodes' GPUs, counted from both nodes' documents (the policy only flags here).
        assert f"berthd: job {job['id']}: its 2 GPU(s) have been idle" in out["stderr"], out
        assert j["state"] == "RUNNING", j
    finally:
        gw.request("DELETE", f"/v1/jobs/{job['id']}", tok)
        wait_final(gw, tok, job["id"])


def step_processes(slurm_job_id: int) -> list[int]:
    """The pids of Slurm job `slurm_job_id`'s batch shell and of everything its step 0 runs
    (the container): the descendants of the slurmstepds titled "slurmstepd: [ID.batch]" and
    "[ID.0]", read from /proc (not the slurmstepds themselves)."""
    parent, title = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                title[int(entry)] = f.read().split(b"\0")[0].decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
    batch = [p for p, t in title.items() if t == f"slurmstepd: [{slurm_job_id}.batch]"]
    step0 = [p for p, t in title.items() if t == f"slurmstepd: [{slurm_job_id}.0]"]
    shells = [p for p, pp in parent.items() if pp in batch]
    below, frontier = [], list(step0)
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        below += frontier
    return shells + below if shells and below else []


def test_gpu_processes_of_no_running_job_are_reported_as_orphans(
        gw, berth, issuers, identity, cluster, scratch, pushed_busybox, berth_bin):
    """[reclaim] also finds orphans: the sampler of a running GPU job sees every process on its
    GPU (the fake NVML lists what the test writes), `berth gpu stats` attributes each to its
    Slurm job through /proc, and berthd reports those of no running job, once each in the
    audit log, in berthd_gpu_orphan_processes and at GET /v1/orphans (administrators only):
    here a `sleep` the test starts outside Slurm and one carrying the id of a Slurm job that
    is not running, never the job's own processes."""
    from test_gpu import UUID0, UUID1
    host = gpu_host(cluster, scratch, "gateway-reclaim-host")
    state = fake_nvml_state(identity, berth, "orphans", 90)
    with open(state) as f:
        base = f.read()
    audit = os.path.join(os.path.dirname(gw.db), "audit.log")
    restart_reclaiming(gw, identity, berth_bin, "idle_for_s = 3600\n",
                       top=f'audit_log = "{audit}"\n')
    tok, admin = token_a(issuers, identity), admin_token(issuers, identity)
    # Outside any Slurm job: one of root's, and one of the job owner's that names a Slurm job
    # that is not running (as a process a finished job left behind would).
    stray = subprocess.Popen(["sleep", "300"])
    leftover = subprocess.Popen(identity.prefix + ["env", "SLURM_JOB_ID=999999", "sleep", "300"])
    job_id = None
    try:
        status, _, job = gw.request("POST", "/v1/jobs", tok, {
            "image": pushed_busybox, "env": dict(host, BERTH_FAKE_NVML_STATE=state),
            # An empty environment: no SLURM_JOB_ID to tell its job by, only its ancestry.
            "resources": {"gpus": 1},
            "command": ["busybox", "env", "-i", "busybox", "sleep", "300"]})
        assert status == 201, job
        job_id = job["id"]
        deadline = time.monotonic() + 90
        own = []
        while time.monotonic() < deadline and not own:
            time.sleep(0.5)
            job = gw.request("GET", f"/v1/jobs/{job_id}", tok)[2]
            if job["state"] == "RUNNING":
                own = step_processes(job["slurm_job_id"])
        assert own, (job, job_output(berth, job))
        procs = [*own[:12], stray.pid, leftover.pid]
        identity.write_file(state, base + "".join(f"proc {gpu} {pid} 100\n" for gpu in (0, 1)
                                                  for pid in procs))
        deadline = time.monotonic() + 60
        orphans = {}
        while time.monotonic() < deadline and set(orphans) != {stray.pid, leftover.pid}:
            time.sleep(0.5)
            status, _, body = gw.request("GET", "/v1/orphans", admin)
            assert status == 200 and body["watching"] is True, body
            orphans = {o["pid"]: o for o in body["orphans"]}
        if set(orphans) != {stray.pid, leftover.pid}:
            files = {f: open(os.path.join(gw.output_dir, f), errors="replace").read()[-3000:]
                     for f in sorted(os.listdir(gw.output_dir)) if f.endswith((".gpu", ".log"))}
            raise AssertionError(f"orphans {orphans}, job's own {own}\n{files}")
        assert gw.request("GET", "/v1/orphans", tok)[0] == 403
        # The sampler's own words: every process of the job's attributed to it through its
        # slurmstepd ancestor (no cgroups on this cluster: proctrack/linuxproc).
        # (The folder's name has the test's id, "[slurm22.05]": not a pattern.)
        pattern = os.path.join(glob.escape(gw.output_dir), f"berthd-{job_id}-*.gpu")
        newest = max(glob.glob(pattern), key=os.path.getmtime)
        with open(newest) as f:
            text, docs, at = f.read(), [], 0
        while True:
            at = len(text) - len(text[at:].lstrip())
            try:
                doc, at = json.JSONDecoder().raw_decode(text, at)
            except ValueError:
                break
            docs.append(doc)
        sampled = {p["pid"]: p for g in docs[-1]["gpus"] for p in g["processes"]}
        for pid in own[:12]:
            if pid in sampled and sampled[pid]["command"] is not None:  # None: it has ended
                assert (sampled[pid]["slurm_job_id"], sampled[pid]["slurm_job_from"]) == \
                    (job["slurm_job_id"], "slurmstepd"), (pid, sampled[pid])
        assert sum(sampled.get(pid, {}).get("command") is not None for pid in own) >= 2, sampled
        s, l = orphans[stray.pid], orphans[leftover.pid]
        node = s["node"]
        assert node in ("n1", "n2") and l["node"] == node, orphans
        assert (s["user"], s["uid"], s["command"], s["slurm_job_id"], s["reason"]) == \
            ("root", 0, "sleep", None, "no Slurm job"), s
        assert (l["uid"], l["command"], l["slurm_job_id"], l["slurm_job_from"], l["reason"]) == \
            (identity.uid, "sleep", 999999, "environ", "Slurm job 999999 is not running"), l
        assert s["seen_by"] == {"id": str(job_id), "slurm_job_id": job["slurm_job_id"]}, s
        assert s["gpu_uuid"] in (UUID0, UUID1) and 0 < s["first_seen"] <= s["last_seen"], s
        metrics = scrape(gw, admin)
        assert sample(metrics, "berthd_gpu_orphan_processes", node=node) == 2, metrics
        if shutil.which("promtool"):
            check = subprocess.run(["promtool", "check", "metrics"], input=metrics,
                                   capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
        # Found once each, however many reconciliations see them again.
        time.sleep(3)
        with open(audit) as f:
            found = [json.loads(line) for line in f if '"gpu.orphan"' in line]
        assert sorted(e["detail"]["pid"] for e in found) == sorted([stray.pid, leftover.pid]), found
        assert all(e["outcome"] == "found" and e["route"] == "reconcile" for e in found), found
        # Gone from NVML's list, gone from the report.
        identity.write_file(state, base + "".join(f"proc {gpu} {pid} 100\n" for gpu in (0, 1)
                                                  for pid in [*own[:12], leftover.pid]))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and stray.pid in orphans:
            time.sleep(0.5)
            orphans = {o["pid"]: o for o in gw.request("GET", "/v1/orphans", admin)[2]["orphans"]}
        assert set(orphans) == {leftover.pid}, orphans
        assert sample(scrape(gw, admin), "berthd_gpu_orphan_processes", node=node) == 1
    finally:
        for p in (stray, leftover):
            p.kill()
            p.wait()
        if job_id is not None:
            gw.request("DELETE", f"/v1/jobs/{job_id}", tok)
            wait_final(gw, tok, job_id)

#!/usr/bin/env python3
"""Captures slurmrestd's answers for the unit tests' goldens (README.md):

    capture.py URL JWT_KEY USER VERSION OUTDIR

URL is slurmrestd's http://HOST:PORT (rest_auth/jwt), JWT_KEY the cluster's auth/jwt key, USER
an account whose jobs may run on the cluster's debug partition (two nodes n1, n2 with
gpu:fake:2 and shard GRES, as tests/e2e/slurm.py writes them), VERSION v0.0.38 or v0.0.41. It
submits held, running, GPU, shard, failing, signalled and timed-out jobs (about two minutes: the
time limit is one minute; the timed-out one is caught while it completes, too) and writes each
answer as OUTDIR/NAME.json, as it came but for this host's name (written "host1") and the
client's port; of the OpenAPI document it keeps the version and the paths' names.
"""

import base64
import hashlib
import hmac
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request

URL, KEY, USER, V, OUT = sys.argv[1:6]


def token() -> str:
    def b64(b: bytes) -> str:
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    now = int(time.time())
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64(json.dumps({"iat": now, "exp": now + 600, "sun": USER}).encode())
    with open(KEY, "rb") as f:
        mac = hmac.new(f.read(), f"{head}.{claims}".encode(), hashlib.sha256).digest()
    return f"{head}.{claims}.{b64(mac)}"


def call(method: str, path: str, body=None) -> tuple[int, str]:
    headers = {"X-SLURM-USER-NAME": USER, "X-SLURM-USER-TOKEN": token()}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    prefix = "" if path.startswith("/openapi") else f"/slurm/{V}"
    req = urllib.request.Request(URL + prefix + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def save(name: str, answer: tuple[int, str]) -> None:
    text = answer[1]
    if name == "openapi_v3":
        doc = json.loads(text)
        text = json.dumps({"openapi": doc["openapi"], "info": doc["info"],
                           "paths": {p: {} for p in doc["paths"]}}, indent=2)
    text = text.replace(f'"{socket.gethostname().split(".")[0]}"', '"host1"')
    text = re.sub(r'"source": "\[::\]:\d+\(fd:\d+\)"', '"source": "[::]:6820(fd:9)"', text)
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    print(name, answer[0])


def number(n: int):
    return n if V == "v0.0.38" else {"set": True, "infinite": False, "number": n}


def submit(name: str, script: str, **fields) -> int:
    env = {"PATH": "/usr/bin:/bin", "BERTHD_JOB_ID": "1"}
    job = {"name": "capture", "current_working_directory": "/tmp",
           "comment": "berthd:0123456789abcdef:1", "nodes": "1", "tasks": 1, "cpus_per_task": 1,
           "standard_output": "/dev/null", "standard_error": "/dev/null", **fields}
    if V == "v0.0.38":
        body = {"script": script, "job": dict(job, environment=env)}
    else:
        body = {"job": dict(job, script=script,
                            environment=[f"{k}={v}" for k, v in env.items()])}
    answer = call("POST", "/job/submit", body)
    if name:
        save(name, answer)
    return json.loads(answer[1])["job_id"]


def wait(job: int, states: set, completing: str = "") -> None:
    """Until the job is in one of `states` and no longer COMPLETING (v0.0.41 lists the flag
    beside the base state); the first answer that says COMPLETING is saved as `completing`."""
    for _ in range(3000):
        answer = call("GET", f"/job/{job}")
        state = json.loads(answer[1])["jobs"][0]["job_state"]
        state = set(state if isinstance(state, list) else [state])
        if "COMPLETING" in state and completing:
            save(completing, answer)
            completing = ""
        if state & states and "COMPLETING" not in state:
            return
        time.sleep(0.1)
    raise RuntimeError(f"job {job} never reached {states}")


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    save("openapi_v3", call("GET", "/openapi/v3"))
    for name in ("ping", "nodes", "partitions"):
        save(name, call("GET", "/" + name))
    gpu = {"gpus": "1"} if V == "v0.0.38" else {"tres_per_job": "gres/gpu:1"}
    shard = {"gres": "shard:2"} if V == "v0.0.38" else {"tres_per_node": "gres/shard:2"}
    held = submit("", "#!/bin/sh\nsleep 1\n", hold=True)
    save("job_pending_held", call("GET", f"/job/{held}"))
    running = submit("submit", "#!/bin/sh\nsleep 60\n", time_limit=number(5),
                     memory_per_node=number(200), **gpu)
    wait(running, {"RUNNING"})
    save("job_running_gpu", call("GET", f"/job/{running}"))
    shared = submit("", "#!/bin/sh\nsleep 60\n", **shard)
    wait(shared, {"RUNNING"})
    save("job_running_shard", call("GET", f"/job/{shared}"))
    save("jobs", call("GET", "/jobs"))
    for job in (running, shared, held):
        call("DELETE", f"/job/{job}")
    wait(running, {"CANCELLED"})
    save("job_cancelled", call("GET", f"/job/{running}"))
    ended = {name: submit("", script) for name, script in (
        ("job_completed", "#!/bin/sh\nexit 0\n"), ("job_failed", "#!/bin/sh\nexit 3\n"),
        ("job_signalled", "#!/bin/sh\nkill -9 $$\n"))}
    # SIGTERM ignored: the job stays COMPLETING until SIGKILL comes, KillWait (5 s) later.
    timeout = submit("", "#!/bin/sh\ntrap '' TERM\nwhile :; do sleep 1; done\n",
                     time_limit=number(1))
    for name, job in ended.items():
        wait(job, {"COMPLETED", "FAILED"})
        save(name, call("GET", f"/job/{job}"))
    save("error_submit_partition", call("POST", "/job/submit", {
        "script": "#!/bin/sh\ntrue\n", "job": {"partition": "nosuch", "environment": {"A": "1"}}}
        if V == "v0.0.38" else {"job": {"script": "#!/bin/sh\ntrue\n", "partition": "nosuch",
                                        "environment": ["A=1"]}}))
    save("error_job_unknown", call("GET", "/job/999999"))
    wait(timeout, {"TIMEOUT"}, completing="job_completing")
    save("job_timeout", call("GET", f"/job/{timeout}"))


if __name__ == "__main__":
    main()

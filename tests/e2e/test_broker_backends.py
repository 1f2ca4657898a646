"""A broker berthd with a database ([broker], docs/broker.md) over a Kubernetes site and a Marathon
site that are loopback recorders (no Kubernetes or Mesos can run here): the job lands there as
the backend's own object, named after the broker's attempt key, with the caller's token; the
Kubernetes recorder holds each Job it is sent to Debian's python3-kubernetes models (strictly,
as test_broker_manifests.py does) and the Marathon recorder each app to Marathon's app schema;
GET through the broker shows the state the recorder reports, DELETE reaches it, and a resend of
the same attempt is answered 409 and makes no second copy."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import test_broker_manifests as manifests
from conftest import REPO_ROOT
from gateway import (AUDIENCE_A, Berthd, berthd_bin, gateway_config, issuers,  # noqa: F401
                     second_user, start_berthd)

GLUE = os.path.join(REPO_ROOT, "tests", "data", "broker", "glue_ogf.json")  # V100 nodes


class Recorder:
    """A loopback HTTP server answering as Kubernetes' batch/v1 Jobs or Marathon's apps do:
    every request kept, each object posted checked with `check` (a list of errors; any makes
    the answer 422), a name posted twice answered 409."""

    def __init__(self, kind: str, check):
        self.kind, self.check = kind, check
        self.requests: list[dict] = []
        self.objects: dict[str, dict] = {}  # name -> body
        self.status: dict = {}  # what a read of any object reports
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, doc) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _serve(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                with recorder.lock:
                    recorder.requests.append({"method": self.command, "path": self.path,
                                              "authorization": self.headers.get("Authorization"),
                                              "body": body})
                    status, doc = recorder.answer(self.command, self.path, body)
                self._answer(status, doc)

            do_GET = do_POST = do_DELETE = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, method: str, path: str, body: str):
        if self.kind == "kubernetes":
            collection = "/apis/batch/v1/namespaces/ml/jobs"
            if method == "POST" and path == collection:
                return self.made(json.loads(body), lambda d: d["metadata"]["name"])
            name = path[len(collection) + 1:].split("?")[0] if path.startswith(collection) else ""
            if method == "GET" and name in self.objects:
                return 200, dict(self.objects[name], status=self.status)
            if method == "DELETE" and name in self.objects and path.endswith(
                    "?propagationPolicy=Background"):
                del self.objects[name]
                return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
            return 404, {"kind": "Status", "message": f"jobs.batch \"{name}\" not found",
                         "reason": "NotFound", "code": 404}
        if method == "POST" and path == "/v2/apps":
            return self.made(json.loads(body), lambda d: d["id"].lstrip("/"))
        name = path[len("/v2/apps/"):].split("?")[0] if path.startswith("/v2/apps/") else ""
        if method == "GET" and name in self.objects:
            return 200, {"app": dict(self.objects[name], **self.status)}
        if method == "DELETE" and name in self.objects:
            del self.objects[name]
            return 200, {"version": "2026-12-04T00:00:00.000Z", "deploymentId": "d-1"}
        return 404, {"message": f"App '/{name}' does not exist"}

    def made(self, doc: dict, name_of):
        errors = self.check(doc)
        if errors:
            return 422, {"kind": "Status", "message": "; ".join(errors), "code": 422}
        name = name_of(doc)
        if name in self.objects:
            return 409, {"kind": "Status", "reason": "AlreadyExists", "code": 409,
                         "message": f"{name} already exists"}
        self.objects[name] = doc
        return 201, doc

    def posts(self) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if r["method"] == "POST"]


@pytest.fixture(scope="module")
def k8s():
    r = Recorder("kubernetes", manifests.kubernetes_errors)
    yield r
    r.stop()


@pytest.fixture(scope="module")
def marathon():
    r = Recorder("marathon", lambda d: manifests.schema_errors(d, "marathon-app.json"))
    yield r
    r.stop()


def token(issuers, identity) -> str:
    a = issuers.issuers["a"]
    user = subprocess.run(["id", "-un", str(identity.uid)], capture_output=True,
                          text=True).stdout.strip()
    return a.sign(a.claims("s-alice", AUDIENCE_A, preferred_username=user))


def broker_config(k8s, marathon, issuers, identity, second_user, workdir) -> str:
    glue = os.path.join(workdir, "site.json")
    shutil.copy(GLUE, glue)
    identity.chown(glue)
    conf = gateway_config(issuers, second_user, f'database = "{workdir}/broker.db"\n') + f"""
[broker]

[[broker.sites]]
name = "k8s"
kind = "kubernetes"
url = "{k8s.url}"
resources = "{glue}"
info_ttl_s = 0
namespace = "ml"

[[broker.sites]]
name = "marathon"
kind = "marathon"
url = "{marathon.url}"
resources = "{glue}"
info_ttl_s = 0
"""
    return identity.write_file(os.path.join(workdir, "berthd.conf"), conf)


@pytest.fixture(scope="module")
def broker(k8s, marathon, issuers, identity, berthd_bin, scratch, second_user):
    workdir = identity.make_dir(os.path.join(scratch, "backends-broker"))
    path = broker_config(k8s, marathon, issuers, identity, second_user, workdir)
    log = os.path.join(workdir, "berthd.log")
    proc, url = start_berthd(identity, berthd_bin, path, log)
    yield Berthd(proc, url, log)
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def job_body(site: str) -> dict:
    return {"name": "train", "image": "registry.example.org/ml/train:1",
            "command": ["python3", "train.py"],
            "resources": {"gpus": "V100:1", "walltime_s": 3600},
            "placement": {"sites": [site]}}


def test_a_job_lands_at_kubernetes_as_a_v1_job_is_read_and_deleted_there(broker, k8s, issuers,
                                                                          identity):
    tok = token(issuers, identity)
    status, _, job = broker.request("POST", "/v1/jobs", tok, job_body("k8s"))
    assert status == 201, job
    assert job["site"] == "k8s" and job["attempts"][0]["outcome"] == "submitted", job
    key = job["attempts"][0]["key"]
    name = "berth-" + key[len("broker:"):].replace(":", "-")
    assert job["site_job_id"] == name, job
    posts = k8s.posts()
    assert len(posts) == 1, posts
    assert posts[0]["path"] == "/apis/batch/v1/namespaces/ml/jobs"
    assert posts[0]["authorization"] == "Bearer " + tok  # the caller, as the site sees them
    sent = json.loads(posts[0]["body"])
    assert manifests.kubernetes_errors(sent) == []
    assert sent["metadata"]["name"] == name and sent["metadata"]["namespace"] == "ml", sent
    limits = sent["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1", sent
    assert sent["spec"]["activeDeadlineSeconds"] == 3600, sent

    k8s.status = {"active": 1, "ready": 1}
    status, _, seen = broker.request("GET", f"/v1/jobs/{job['id']}", tok)
    assert status == 200 and seen["state"] == "RUNNING", seen
    assert seen["site_status"] == {"active": 1, "ready": 1}, seen
    k8s.status = {"active": 0, "failed": 1, "conditions": [
        {"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
         "message": "Job was active longer than specified deadline"}]}
    status, _, seen = broker.request("GET", f"/v1/jobs/{job['id']}", tok)
    assert status == 200 and seen["state"] == "TIMEOUT", seen
    assert seen["reason"].startswith("DeadlineExceeded: "), seen
    # A job that timed out through its own walltime stays where it ended.
    assert seen["site"] == "k8s" and len(seen["attempts"]) == 1, seen


def test_a_cancel_reaches_kubernetes_with_background_propagation(broker, k8s, issuers, identity):
    tok = token(issuers, identity)
    k8s.status = {}
    status, _, job = broker.request("POST", "/v1/jobs", tok, job_body("k8s"))
    assert status == 201 and job["state"] == "PENDING", job
    status, _, cancelled = broker.request("DELETE", f"/v1/jobs/{job['id']}", tok)
    assert status == 202 and cancelled["state"] == "CANCELLED", cancelled
    deletes = [r for r in k8s.requests if r["method"] == "DELETE"]
    assert deletes[-1]["path"] == (f"/apis/batch/v1/namespaces/ml/jobs/{job['site_job_id']}"
                                   "?propagationPolicy=Background"), deletes
    assert job["site_job_id"] not in k8s.objects


def test_a_job_lands_at_marathon_as_an_app_of_the_schema_and_a_resend_is_409(
        broker, marathon, issuers, identity):
    tok = token(issuers, identity)
    status, _, job = broker.request("POST", "/v1/jobs", tok, job_body("marathon"))
    assert status == 201, job
    assert job["site"] == "marathon" and job["attempts"][0]["outcome"] == "submitted", job
    name = job["site_job_id"]
    posts = marathon.posts()
    assert len(posts) == 1 and posts[0]["path"] == "/v2/apps", posts
    sent = json.loads(posts[0]["body"])
    assert manifests.schema_errors(sent, "marathon-app.json") == []
    assert sent["id"] == "/" + name and sent["gpus"] == 1, sent
    assert sent["container"]["type"] == "MESOS", sent
    # The same app again, as a broker sends it after a crash: Marathon says 409, one app.
    status, doc = marathon.answer("POST", "/v2/apps", posts[0]["body"])
    assert status == 409 and list(marathon.objects) == [name], doc

    marathon.status = {"tasksRunning": 1, "tasksStaged": 0}
    status, _, seen = broker.request("GET", f"/v1/jobs/{job['id']}", tok)
    assert status == 200 and seen["state"] == "RUNNING", seen
    marathon.status = {"tasksRunning": 0, "lastTaskFailure": {"state": "TASK_FINISHED"}}
    status, _, seen = broker.request("GET", f"/v1/jobs/{job['id']}", tok)
    assert status == 200 and seen["state"] == "COMPLETED", seen


def test_a_cancel_reaches_marathon(broker, marathon, issuers, identity):
    tok = token(issuers, identity)
    marathon.status = {}
    status, _, job = broker.request("POST", "/v1/jobs", tok, job_body("marathon"))
    assert status == 201, job
    status, _, cancelled = broker.request("DELETE", f"/v1/jobs/{job['id']}", tok)
    assert status == 202 and cancelled["state"] == "CANCELLED", cancelled
    assert marathon.requests[-1]["method"] == "DELETE"
    assert marathon.requests[-1]["path"] == f"/v2/apps/{job['site_job_id']}"
    assert job["site_job_id"] not in marathon.objects

"""berthd as a broker ([broker], docs/broker.md) over a real berthd site in front of the loopback
Slurm cluster, a site described by a GLUE file, and a site that is down: POST /v1/placements
puts each GPU model where it is, rejects every other candidate with its reason, learns which
callers a site refuses from the site's own answers, and GET /v1/sites shows what it read; as a
broker with a job database, it sends jobs on, moves them from a refusal, from a site's dry run and
from a pending timeout at another real Slurm (site p, a second loopback cluster), and races them
across the two Slurms, a job never living at two. Site c (A100s, a tight quota) has a third
Slurm of its own; site b is a second berthd over site a's."""

from __future__ import annotations

import contextlib
import copy
import grp
import json
import os
import pwd
import random
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from gateway import (AUDIENCE_A, AUDIENCE_B, Berthd, berthd_bin, gateway_config, issuers,  # noqa: F401
                     second_user, slurmrestd, start_berthd, start_gateway_cluster)

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module", params=["22.05"], ids=["slurm22.05"])
def gateway_cluster(request, scratch, berth_bin, identity):
    """The site's cluster: one release is enough here, the broker reads berthd, not Slurm."""
    c = start_gateway_cluster(request, scratch, berth_bin, identity, "slurm-broker")
    yield c
    c.stop()


def stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_berthd(identity, berthd_bin, path) -> Berthd:
    """berthd started on configuration file `path`, logging to berthd.log beside it."""
    log = os.path.join(os.path.dirname(path), "berthd.log")
    proc, url = start_berthd(identity, berthd_bin, path, log)
    return Berthd(proc, url, log)


def start_site(name, extra, gateway_cluster, slurmrestd, issuers, identity, berthd_bin, scratch,
               second_user, audience=AUDIENCE_A) -> Berthd:
    """A berthd site named `name` in front of the loopback Slurm, opening partition debug to
    brokers (a job naming another is refused), with `extra` appended to its configuration;
    it takes issuer a's tokens for `audience` and writes its audit log to the returned site's
    `audit`."""
    workdir = identity.make_dir(os.path.join(scratch, f"broker-site-{name}"))
    key = os.path.join(workdir, "slurm_jwt.key")
    shutil.copy(gateway_cluster.jwt_key, key)
    os.chmod(key, 0o600)
    identity.chown(key)
    audit = os.path.join(workdir, "audit.jsonl")
    conf = gateway_config(issuers, second_user,
                          f'database = "{workdir}/jobs.db"\naudit_log = "{audit}"\n')
    conf = conf.replace(f'audience = "{AUDIENCE_A}"\n', f'audience = "{audience}"\n', 1)
    conf += f"""
[slurm]
rest_url = "{slurmrestd}"
jwt_key = "{key}"
cluster = "site-{name}"
partitions = ["debug"]
""" + extra
    path = identity.write_file(os.path.join(workdir, "berthd.conf"), conf)
    site = run_berthd(identity, berthd_bin, path)
    site.audit = audit
    return site


def site_audit(site, event: str) -> list[tuple[str, dict]]:
    """(outcome, detail) of each of `site`'s audit lines of `event`, oldest first."""
    with open(site.audit) as f:
        return [(line["outcome"], line["detail"]) for line in map(json.loads, f)
                if line["event"] == event]


@pytest.fixture(scope="module")
def site_a(gateway_cluster, slurmrestd, issuers, identity, berthd_bin, scratch, second_user):
    """A berthd site: its cluster's fake GPUs published as H100s with CUDA 12.4."""
    site = start_site("a", f"""
[resources]
cache_s = 0
infiniband = true
url = "http://site-a.example.org:8080"

[gpu_models.fake]
vendor = "NVIDIA"
model = "{H100}"
memory_mb = 85520
cuda_version = "12.4"
driver_version = "550.54.15"
""", gateway_cluster, slurmrestd, issuers, identity, berthd_bin, scratch, second_user)
    yield site
    stop(site.proc)


def token_a(issuers, identity, sub="s-alice"):
    a = issuers.issuers["a"]
    user = subprocess.run(["id", "-un", str(identity.uid)], capture_output=True,
                          text=True).stdout.strip()
    return a.sign(a.claims(sub, AUDIENCE_A, preferred_username=user))


@pytest.fixture(scope="module")
def broker(site_a, issuers, identity, berthd_bin, scratch, second_user):
    """A fourth berthd, the broker, over site a, a GLUE file of L40S nodes made from what site a
    published, and a berthd that is not there."""
    workdir = identity.make_dir(os.path.join(scratch, "broker"))
    status, _, doc = site_a.request("GET", "/v1/resources", token_a(issuers, identity))
    assert status == 200, doc
    paper = copy.deepcopy(doc)
    for env in paper.get("AcceleratorEnvironment", []):
        env["Model"] = "NVIDIA L40S"
        env["Memory"] = 48305
    for env in paper["ExecutionEnvironment"]:
        env.pop("NetworkInfo", None)  # no InfiniBand there
    paper_file = identity.write_file(os.path.join(workdir, "paper.json"), json.dumps(paper))
    user = subprocess.run(["id", "-un", str(identity.uid)], capture_output=True,
                          text=True).stdout.strip()
    # A caller the broker maps and site a does not.
    conf = gateway_config(issuers, second_user) + f"""
[[users]]
issuer = "{issuers.issuers["b"].url}"
sub = "visitor"
user = "{user}"

[broker]

[[broker.sites]]
name = "a"
url = "{site_a.url}"
info_ttl_s = 60

[[broker.sites]]
name = "gone"
url = "http://127.0.0.1:1"

[[broker.sites]]
name = "paper"
kind = "static"
resources = "{paper_file}"
info_ttl_s = 0

[[broker.sites]]
name = "k8s"
kind = "kubernetes"
url = "https://k8s.example.org:6443"
resources = "{paper_file}"
info_ttl_s = 0
namespace = "ml"
"""
    path = identity.write_file(os.path.join(workdir, "berthd.conf"), conf)
    b = run_berthd(identity, berthd_bin, path)
    b.has_gpus = bool(doc.get("AcceleratorEnvironment"))
    yield b
    stop(b.proc)


def verdicts(answer) -> dict:
    """{(site, class or None): [reason codes]} of a placements answer."""
    return {(c["site"], c["class"]): [r["code"] for r in c["reasons"]]
            for c in answer["candidates"]}


def place(broker, token, body):
    return broker.request("POST", "/v1/placements", token, body)


def test_each_model_lands_where_it_is(broker, issuers, identity):
    if not broker.has_gpus:
        pytest.skip("the cluster has no fake GPUs (/dev/tty0 and /dev/tty1)")
    tok = token_a(issuers, identity)
    status, _, answer = place(broker, tok, {"image": "x", "resources": {"gpus": "H100:1"}})
    assert status == 200, answer
    assert answer["chosen"]["site"] == "a", answer
    status, _, answer = place(broker, tok, {"image": "x", "resources": {"gpus": "L40S:1"}})
    assert status == 200, answer
    assert answer["chosen"]["site"] in ("paper", "k8s"), answer
    # A model no site has: 422, every candidate rejected with its reason, the down site too.
    status, _, answer = place(broker, tok, {"image": "x", "resources": {"gpus": "H200:1"}})
    assert status == 422, answer
    assert answer["chosen"] is None
    seen = verdicts(answer)
    assert seen[("gone", None)] == ["site_down"], seen
    assert {codes[0] for (site, _), codes in seen.items() if site != "gone"} <= {
        "no_gpu_model", "gpus_per_node"}, seen
    assert any(codes == ["no_gpu_model"] for (site, _), codes in seen.items() if site == "a")


def test_minimums_are_checked_against_what_the_site_published(broker, issuers, identity):
    if not broker.has_gpus:
        pytest.skip("the cluster has no fake GPUs (/dev/tty0 and /dev/tty1)")
    tok = token_a(issuers, identity)
    status, _, answer = place(broker, tok, {
        "image": "x", "resources": {"gpus": 1, "gpu": {"model": "H100", "cuda_min": "12.5"}}})
    assert status == 422, answer
    a = [c for c in answer["candidates"] if c["site"] == "a" and c["reasons"][0]["code"] !=
         "gpus_per_node"]
    assert a and a[0]["reasons"] == [{"code": "cuda_too_old",
                                      "message": "asks CUDA 12.5 or newer; this class has 12.4"}]
    # 12.4 is newer than 12.2: a minimum, not an equality.
    status, _, answer = place(broker, tok, {
        "image": "x", "resources": {"gpus": 1, "gpu": {"model": "H100", "cuda_min": "12.2"}}})
    assert status == 200 and answer["chosen"]["site"] == "a", answer
    # No GPU job has measured the compute capability there: a minimum cannot pass.
    status, _, answer = place(broker, tok, {
        "image": "x",
        "resources": {"gpus": 1, "gpu": {"model": "H100", "compute_capability_min": "8.0"}}})
    assert status == 422, answer
    assert ["compute_capability"] in [codes for (site, _), codes in verdicts(answer).items()
                                      if site == "a"]


def test_a_cpu_job_fits_everywhere_that_is_up(broker, issuers, identity):
    status, _, answer = place(broker, token_a(issuers, identity),
                              {"image": "x", "resources": {"cpus_per_task": 1}})
    assert status == 200, answer
    fits = {c["site"] for c in answer["candidates"] if c["verdict"] == "fit"}
    assert fits == {"a", "paper", "k8s"}, answer
    for c in answer["candidates"]:
        if c["verdict"] == "fit":
            assert set(c["factors"]) == {"start_now", "wait", "free", "fit", "preference",
                                         "reliability"}
            assert all(0 <= v <= 100 for v in c["factors"].values()), c


def test_a_site_that_refuses_the_caller_is_rejected_for_that_caller(broker, issuers, identity):
    """The site's own 403 for a caller the broker knows but the site does not: that caller's
    candidates there are rejected with the site's reason, another caller's are not."""
    b = issuers.issuers["b"]
    visitor = b.sign(b.claims("visitor", AUDIENCE_B))
    status, _, answer = place(broker, visitor, {"image": "x"})
    assert status == 200, answer  # the file sites take it
    refused = [c for c in answer["candidates"] if c["site"] == "a"]
    assert [c["reasons"][0]["code"] for c in refused] == ["issuer_untrusted"], refused
    assert refused[0]["reasons"][0]["message"].startswith(
        "the site does not take the caller's token (HTTP 403: "), refused
    assert answer["chosen"]["site"] in ("k8s", "paper"), answer  # the two file sites tie
    # Learnt per caller: alice is still taken there.
    status, _, answer = place(broker, token_a(issuers, identity), {"image": "x"})
    assert status == 200 and "a" in {c["site"] for c in answer["candidates"]
                                     if c["verdict"] == "fit"}, answer


def test_sites_shows_what_the_broker_read(broker, issuers, identity):
    status, _, body = broker.request("GET", "/v1/sites", token_a(issuers, identity))
    assert status == 200, body
    sites = {s["name"]: s for s in body["sites"]}
    assert sites["a"]["up"] and sites["a"]["fresh"] and sites["a"]["kind"] == "berthd"
    assert not sites["gone"]["up"] and "127.0.0.1:1" in sites["gone"]["error"], sites["gone"]
    assert sites["paper"]["kind"] == "static" and sites["paper"]["url"] is None
    if broker.has_gpus:
        assert set(sites["a"]["gpus"]) == {H100}, sites["a"]
        assert set(sites["paper"]["gpus"]) == {"NVIDIA L40S"}, sites["paper"]


def test_a_bad_request_is_one_line_and_a_gateway_has_no_placements(broker, site_a, issuers,
                                                                    identity):
    tok = token_a(issuers, identity)
    status, _, body = place(broker, tok, {"image": "x", "resources": {"gpus": "A100:0"}})
    assert status == 400, body
    assert "\n" not in body["error"]["message"] and "A100:0" in body["error"]["message"], body
    status, _, body = place(broker, tok, {"image": "x", "placement": {"strategy": "lottery"}})
    assert status == 400 and "placement.strategy" in body["error"]["message"], body
    # No [broker]: no such route.
    assert site_a.request("POST", "/v1/placements", tok, {"image": "x"})[0] == 404
    assert broker.request("POST", "/v1/placements", None, {"image": "x"})[0] == 401


def test_infiniband_only_where_the_site_publishes_it(broker, site_a, issuers, identity):
    tok = token_a(issuers, identity)
    status, _, doc = site_a.request("GET", "/v1/resources", tok)
    assert status == 200, doc
    assert doc["ComputingEndpoint"][0]["URL"] == "http://site-a.example.org:8080", doc
    status, _, answer = place(broker, tok, {"image": "x", "resources": {"infiniband": True}})
    assert status == 200 and answer["chosen"]["site"] == "a", answer
    assert {tuple(codes) for (site, _), codes in verdicts(answer).items() if site == "paper"} == {
        ("no_infiniband",)}, answer


def test_a_manifest_is_what_the_one_site_would_be_sent(broker, site_a, issuers, identity):
    """POST /v1/manifests: the berthd site's own job body, pinned to the GRES type and partition
    of the class the broker chose; a Kubernetes site's Job, read strictly by Debian's
    python3-kubernetes; nothing is submitted anywhere."""
    tok = token_a(issuers, identity)
    if broker.has_gpus:
        status, _, answer = broker.request("POST", "/v1/manifests", tok, {
            "image": "x", "command": ["true"], "resources": {"gpus": "H100:1"},
            "placement": {"sites": ["a"]}})
        assert status == 200, answer
        assert answer["kind"] == "berthd" and answer["site"] == "a", answer
        assert answer["manifest"]["resources"]["gpu_model"] == "fake", answer
        assert answer["manifest"]["resources"]["partition"] == answer["partition"], answer
        # A body the site takes as it is: its own dry run says so (and records nothing).
        status, _, fit = site_a.request("POST", "/v1/jobs?dry_run=1", tok, answer["manifest"])
        assert status == 200 and fit["fits"] is True, fit
        status, _, answer = broker.request("POST", "/v1/manifests", tok, {
            "image": "registry.example.org/ml/train:1", "resources": {"gpus": "L40S:1"},
            "placement": {"sites": ["k8s"]}})
        assert status == 200, answer
        job = answer["manifest"]
        assert job["kind"] == "Job" and job["metadata"]["namespace"] == "ml", job
        from test_broker_manifests import kubernetes_errors
        assert kubernetes_errors(job) == []
    status, _, body = broker.request("POST", "/v1/manifests", tok, {
        "image": "x", "placement": {"sites": ["a", "k8s"]}})
    assert status == 400, body
    assert body["error"]["message"] == (
        "placement.sites: must name the one site whose manifest is wanted"), body
    status, _, listed = site_a.request("GET", "/v1/jobs", tok)
    assert status == 200 and listed["jobs"] == [], listed


# An INDIGO template in the shape of DEEP's (broker/tosca.h): a Marathon app on a Docker box on
# a Compute node that names its GPU model and its CUDA minimum.
TOSCA_H100 = """tosca_definitions_version: tosca_simple_yaml_1_0
topology_template:
  inputs:
    num_gpus:
      type: integer
      default: 1
  node_templates:
    Compute:
      type: tosca.nodes.indigo.Compute
      capabilities:
        host:
          properties:
            num_gpus: { get_input: num_gpus }
            gpu_model: H100
        os:
          properties:
            cuda_min_version: "12.2"
    Docker:
      type: tosca.nodes.indigo.Container.Runtime.Docker
      requirements:
      - host: Compute
    app:
      type: tosca.nodes.indigo.Container.Application.Docker.Marathon
      properties:
        command: nvidia-smi
      requirements:
      - host: Docker
      artifacts:
        image:
          file: x
"""


def post_text(b, path: str, token, text: str, content_type: str):
    """(status, JSON body) of a POST of `text` as it is."""
    h = {"Content-Type": content_type}
    if token is not None:
        h["Authorization"] = "Bearer " + token
    req = urllib.request.Request(b.url + path, data=text.encode(), headers=h, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_a_tosca_template_is_placed_as_the_job_it_says(broker, issuers, identity):
    """A TOSCA template posted as YAML is the job its nodes describe: H100s at CUDA 12.2 or
    newer land on site a; CUDA 12.5 is a minimum that site a's 12.4 does not meet; a bad
    property is a one-line 400 naming the node and the property."""
    tok = token_a(issuers, identity)
    bad = TOSCA_H100.replace("num_gpus: { get_input: num_gpus }", "num_gpus: two")
    status, body = post_text(broker, "/v1/placements", tok, bad, "application/yaml")
    assert status == 400, body
    assert body["error"]["message"] == (
        "node Compute: host.num_gpus: two is not a whole number from 0 to 10000"), body
    if not broker.has_gpus:
        pytest.skip("the cluster has no fake GPUs (/dev/tty0 and /dev/tty1)")
    status, answer = post_text(broker, "/v1/placements", tok, TOSCA_H100, "application/yaml")
    assert status == 200 and answer["chosen"]["site"] == "a", answer
    status, answer = post_text(broker, "/v1/placements", tok,
                               TOSCA_H100.replace('"12.2"', '"12.5"'), "text/yaml")
    assert status == 422, answer
    assert ["cuda_too_old"] in [codes for (site, _), codes in verdicts(answer).items()
                                if site == "a"], answer
    # The JSON form: the template with inputs, and a site to show the manifest of.
    status, answer = post_text(broker, "/v1/manifests", tok, json.dumps(
        {"template": TOSCA_H100, "inputs": {"num_gpus": 1}, "placement": {"sites": ["a"]}}),
        "application/json")
    assert status == 200 and answer["site"] == "a", answer
    assert answer["manifest"]["command"] == ["/bin/sh", "-c", "nvidia-smi"], answer


def test_rank_answers_a_cloud_provider_ranker_request(broker):
    """POST /v1/rank, without a token as CPR takes none: CPR's answer to CPR's request."""
    request = {
        "preferences": [{"service_type": "compute", "priority": [
            {"sla_id": "s1", "service_id": "a", "weight": 0.5},
            {"sla_id": "s2", "service_id": "b", "weight": 0.5}]}],
        "sla": [{"id": "s1", "provider": "P1", "services": [{"service_id": "a", "targets": [
                    {"type": "public_ip", "restrictions": {"total_limit": 10}}]}]},
                {"id": "s2", "provider": "P2", "services": [{"service_id": "b", "targets": [
                    {"type": "computing_time", "restrictions": {"total_limit": 1000}}]}]}],
        "monitoring": []}
    status, answer = post_text(broker, "/v1/rank", None, json.dumps(request), "application/json")
    assert status == 200, answer
    assert answer == [
        {"provider": "P1", "service_id": "a", "sla_weight": 0.5, "total_score": 10.0,
         "rank": 2, "ranked": True},
        {"provider": "P2", "service_id": "b", "sla_weight": 0.5, "total_score": 16.6,
         "rank": 1, "ranked": True}], answer
    status, body = post_text(broker, "/v1/rank", None, "[]", "application/json")
    assert status == 400 and body["error"]["message"] == "it is not a JSON object", body


@pytest.fixture(scope="module")
def site_b(gateway_cluster, slurmrestd, issuers, identity, berthd_bin, scratch, second_user):
    """A second berthd in front of the same Slurm that queues no job of anyone's
    (max_queued_jobs = 0): it refuses every job a broker sends it, which the broker learns
    beforehand only from its dry run (count limits are the site's own)."""
    site = start_site("b", """
[limits]
max_queued_jobs = 0

[resources]
cache_s = 0
""", gateway_cluster, slurmrestd, issuers, identity, berthd_bin, scratch, second_user)
    yield site
    stop(site.proc)


def submitting_broker_config(site_a, site_b, issuers, identity, second_user, workdir,
                             ask_b=False) -> str:
    """The configuration of a broker with a database in `workdir` over site b (weighted first;
    unless `ask_b`, not asked for dry runs: the broker learns of its count limit only from its
    refusal) and site a; its path."""
    conf = gateway_config(issuers, second_user, f'database = "{workdir}/broker.db"\n') + f"""
[broker]

[[broker.sites]]
name = "b"
url = "{site_b.url}"
weight = 10
dry_run = {"true" if ask_b else "false"}

[[broker.sites]]
name = "a"
url = "{site_a.url}"
"""
    return identity.write_file(os.path.join(workdir, "berthd.conf"), conf)


@pytest.fixture(scope="module")
def submitting_broker(site_a, site_b, issuers, identity, berthd_bin, scratch, second_user):
    workdir = identity.make_dir(os.path.join(scratch, "submitting-broker"))
    path = submitting_broker_config(site_a, site_b, issuers, identity, second_user, workdir)
    b = run_berthd(identity, berthd_bin, path)
    yield b
    stop(b.proc)


def test_me_says_the_callers_limits_for_a_broker_to_read(site_b, issuers, identity):
    status, _, me = site_b.request("GET", "/v1/me", token_a(issuers, identity))
    assert status == 200, me
    assert me["limits"] == {"max_queued_jobs": {"value": 0, "from": "default"}}, me
    assert me["quota"] is None, me


def site_jobs(site, tok) -> list:
    status, _, listed = site.request("GET", "/v1/jobs", tok)
    assert status == 200, listed
    return listed["jobs"]


def test_a_job_goes_on_from_a_site_that_refuses_it_and_is_there_once(submitting_broker, site_a,
                                                                      site_b, issuers, identity):
    """Site b, first by weight, refuses the job (it queues none); the broker
    sends it to site a, where it is in Slurm once, and reads, lists and cancels it there as the
    caller."""
    tok = token_a(issuers, identity)
    before_a, before_b = len(site_jobs(site_a, tok)), len(site_jobs(site_b, tok))
    body = {"image": "127.0.0.1:1/none:1", "command": ["true"],
            "resources": {"walltime_s": 600}}
    status, _, job = submitting_broker.request("POST", "/v1/jobs", tok, body,
                                               headers={"Idempotency-Key": "one"})
    assert status == 201, job
    assert job["site"] == "a", job
    outcomes = [(a["site"], a["outcome"]) for a in job["attempts"]]
    assert outcomes == [("b", "refused"), ("a", "submitted")], job
    assert job["attempts"][0]["cause"].startswith("HTTP 403: "), job
    assert "max_queued_jobs" in job["attempts"][0]["cause"], job
    # At site a, the job the broker sent, in Slurm; none at site b.
    at_a = site_jobs(site_a, tok)
    assert len(at_a) == before_a + 1 and len(site_jobs(site_b, tok)) == before_b
    mine = [j for j in at_a if j["id"] == job["site_job_id"]]
    assert mine and mine[0]["slurm_job_id"] > 0, at_a
    # The same key again: the same job, nothing sent anywhere.
    status, headers, again = submitting_broker.request("POST", "/v1/jobs", tok, body,
                                                       headers={"Idempotency-Key": "one"})
    assert status == 200 and headers["Idempotent-Replayed"] == "true", again
    assert again["id"] == job["id"] and len(site_jobs(site_a, tok)) == before_a + 1
    status, _, seen = submitting_broker.request("GET", f"/v1/jobs/{job['id']}", tok)
    assert status == 200 and seen["site"] == "a" and seen["slurm_job_id"] > 0, seen
    status, _, listed = submitting_broker.request("GET", "/v1/jobs", tok)
    assert status == 200 and [j["id"] for j in listed["jobs"]] == [job["id"]], listed
    status, _, cancelled = submitting_broker.request("DELETE", f"/v1/jobs/{job['id']}", tok)
    assert status == 202, cancelled
    # Another caller sees none of it.
    b = issuers.issuers["b"]
    visitor = b.sign(b.claims("visitor", AUDIENCE_B))
    assert submitting_broker.request("GET", f"/v1/jobs/{job['id']}", visitor)[0] != 200


def test_a_sites_dry_run_rejects_it_before_anything_is_sent(site_a, site_b, issuers, identity,
                                                           berthd_bin, scratch, second_user):
    """A broker that asks each fitting berthd site's dry run: site b (weighted first) says its
    count limit refuses the caller, so b is rejected in the placement with b's own words and the
    job goes to a without an attempt at b; a was asked about the class it got."""
    tok = token_a(issuers, identity)
    workdir = identity.make_dir(os.path.join(scratch, "asking-broker"))
    path = submitting_broker_config(site_a, site_b, issuers, identity, second_user, workdir,
                                    ask_b=True)
    broker = run_berthd(identity, berthd_bin, path)
    try:
        status, health = site_b.request("GET", "/v1/health")[0::2]
        assert status == 200 and health["dry_run"] is True, health
        assert broker.request("GET", "/v1/health")[2]["dry_run"] is False
        before_b = len(site_audit(site_b, "job.dry_run"))
        body = {"image": "127.0.0.1:1/none:1", "command": ["true"],
                "resources": {"walltime_s": 600}}
        status, _, answer = place(broker, tok, body)
        assert status == 200 and answer["chosen"]["site"] == "a", answer
        at_b = [c for c in answer["candidates"] if c["site"] == "b"]
        assert len(at_b) == 1 and at_b[0]["partition"] is None, answer
        assert [r["code"] for r in at_b[0]["reasons"]] == ["quota"], answer
        assert at_b[0]["reasons"][0]["message"].startswith("the site says: "), answer
        assert "max_queued_jobs" in at_b[0]["reasons"][0]["message"], answer
        asked_b = site_audit(site_b, "job.dry_run")[before_b:]
        assert [o for o, _ in asked_b] == ["refused"] and asked_b[0][1]["reason"] == "limit"
        before_a, jobs_b = len(site_jobs(site_a, tok)), len(site_jobs(site_b, tok))
        asked_a = len(site_audit(site_a, "job.dry_run"))
        status, _, job = broker.request("POST", "/v1/jobs", tok, body)
        assert status == 201 and job["site"] == "a", job
        assert [(a["site"], a["outcome"]) for a in job["attempts"]] == [("a", "submitted")], job
        assert len(site_jobs(site_a, tok)) == before_a + 1
        assert len(site_jobs(site_b, tok)) == jobs_b
        # a was asked once for this job, about the class it was sent to, and said it fits.
        said = site_audit(site_a, "job.dry_run")[asked_a:]
        assert [o for o, _ in said] == ["fits"], said
        assert job["attempts"][0]["partition"] == "debug", job
        status, _, _ = broker.request("DELETE", f"/v1/jobs/{job['id']}", tok)
        assert status == 202
    finally:
        stop(broker.proc)


def test_a_job_every_site_refuses_is_submit_failed_with_each_cause(submitting_broker, issuers,
                                                                    identity):
    tok = token_a(issuers, identity)
    body = {"image": "127.0.0.1:1/none:1", "resources": {"walltime_s": 600},
            "placement": {"sites": ["b"]}}
    status, _, job = submitting_broker.request("POST", "/v1/jobs", tok, body)
    assert status == 201, job
    assert job["state"] == "SUBMIT_FAILED" and job["site"] is None, job
    assert job["reason"].startswith("no site took the job: b: HTTP 403: "), job
    # Nothing fits at all: 422, the placements answer, nothing recorded.
    status, _, answer = submitting_broker.request(
        "POST", "/v1/jobs", tok, {"image": "x", "resources": {"gpus": "B200:1"}})
    assert status == 422 and answer["chosen"] is None, answer


def test_a_broker_killed_anywhere_leaves_every_job_at_one_site(site_a, site_b, issuers, identity,
                                                               berthd_bin, scratch, second_user):
    """20 jobs, each refused at b and sent on to a, the broker killed (SIGKILL) at a random
    moment of each submission and started again; the client retries with its key as a client
    of any gateway does. Then every job is at site a once: none lost, none twice, none at b."""
    workdir = identity.make_dir(os.path.join(scratch, "killed-broker"))
    path = submitting_broker_config(site_a, site_b, issuers, identity, second_user, workdir)
    log = os.path.join(workdir, "berthd.log")
    tok = token_a(issuers, identity)
    before_a, before_b = len(site_jobs(site_a, tok)), len(site_jobs(site_b, tok))
    body = {"image": "127.0.0.1:1/none:1", "command": ["true"], "resources": {"walltime_s": 600}}
    rng = random.Random(31)
    proc, url = start_berthd(identity, berthd_bin, path, log)
    broker = Berthd(proc, url, log)
    ids = []
    try:
        for i in range(20):
            key = {"Idempotency-Key": f"killed-{i}"}

            def post():
                try:
                    broker.request("POST", "/v1/jobs", tok, body, headers=key)
                except (urllib.error.URLError, ConnectionError, OSError):
                    pass  # killed under it

            t = threading.Thread(target=post)
            t.start()
            time.sleep(rng.uniform(0, 0.08))
            proc.kill()
            proc.wait()
            t.join()
            proc, url = start_berthd(identity, berthd_bin, path, log + f".{i}")
            broker = Berthd(proc, url, log)
            status, _, job = broker.request("POST", "/v1/jobs", tok, body, headers=key)
            assert status in (200, 201), job
            ids.append(job["id"])
        # What a kill left half sent goes on at the owner's next look.
        for job_id in ids:
            status, _, job = broker.request("GET", f"/v1/jobs/{job_id}", tok)
            assert status == 200 and job["site"] == "a", job
            assert [a["outcome"] for a in job["attempts"]] == ["refused", "submitted"], job
    finally:
        stop(proc)
    assert len(set(ids)) == 20
    at_a = site_jobs(site_a, tok)
    assert len(at_a) == before_a + 20, [j["id"] for j in at_a]
    assert len(site_jobs(site_b, tok)) == before_b


A100 = "NVIDIA A100-SXM4-80GB"


@contextlib.contextmanager
def slurm_of_its_own(request, scratch, berth_bin, identity, name):
    """A loopback Slurm cluster named `name` of its own with its slurmrestd (JWT), for a site
    that has one: (cluster, slurmrestd's process, its URL); both stopped at the end."""
    cluster = start_gateway_cluster(request, scratch, berth_bin, identity, name)
    rest = None
    try:
        rest, url = cluster.start_rest_jwt(os.path.join(scratch, f"{name}-slurmrestd.log"))
        yield cluster, rest, url
    finally:
        if rest is not None:
            rest.terminate()
            rest.wait(timeout=20)
        cluster.stop()


@pytest.fixture(scope="module", params=["22.05"], ids=["slurm22.05"])
def site_c(request, issuers, identity, berthd_bin, scratch, second_user, berth_bin):
    """A third berthd, in front of a Slurm of its own (a third loopback cluster), whose GPUs
    are A100s with CUDA 12.2 and whose GPU-hour quota leaves the caller's group a hundredth of
    an hour a month."""
    group = grp.getgrgid(pwd.getpwuid(identity.uid).pw_gid).gr_name
    with slurm_of_its_own(request, scratch, berth_bin, identity, "slurm-broker-c") as (
            cluster, _, url):
        site = start_site("c", f"""
[resources]
cache_s = 0

[gpu_models.fake]
vendor = "NVIDIA"
model = "{A100}"
memory_mb = 81920
cuda_version = "12.2"
driver_version = "535.104.05"

[quotas]
period = "month"

[quotas.groups."{group}"]
gpu_hours = 0.01
""", cluster, url, issuers, identity, berthd_bin, scratch, second_user)
        try:
            yield site
        finally:
            stop(site.proc)


def test_three_sites_each_model_and_minimum_lands_right_and_a_quota_counts(
        site_a, site_b, site_c, issuers, identity, berthd_bin, scratch, second_user):
    """A broker over three berthd sites: a (H100, CUDA 12.4, InfiniBand), b (its count limits
    refuse everything) and c (A100 80GB, CUDA 12.2, a quota of 0.01 GPU-hours); each request
    goes where its model, its CUDA minimum, its InfiniBand and the caller's quota say."""
    tok = token_a(issuers, identity)
    status, _, doc = site_c.request("GET", "/v1/resources", tok)
    if status != 200 or not doc.get("AcceleratorEnvironment"):
        pytest.skip("the cluster has no fake GPUs (/dev/tty0 and /dev/tty1)")
    status, _, me = site_c.request("GET", "/v1/me", tok)
    assert status == 200 and me["quota"]["gpu_hours"] == 0.01, me
    workdir = identity.make_dir(os.path.join(scratch, "three-site-broker"))
    conf = gateway_config(issuers, second_user) + f"""
[broker]

[[broker.sites]]
name = "a"
url = "{site_a.url}"

[[broker.sites]]
name = "b"
url = "{site_b.url}"

[[broker.sites]]
name = "c"
url = "{site_c.url}"
"""
    path = identity.write_file(os.path.join(workdir, "berthd.conf"), conf)
    broker = run_berthd(identity, berthd_bin, path)
    try:
        def chosen(resources):
            status, _, answer = place(broker, tok, {"image": "x", "resources": resources})
            return (answer["chosen"] or {}).get("site") if status in (200, 422) else answer

        assert chosen({"gpus": "H100:1"}) == "a"
        assert chosen({"gpus": "A100:80GB:1"}) == "c"
        # An 80 GB A100 is not the 40 GB model; 80 GB is at least 40.
        assert chosen({"gpus": 1, "gpu": {"model": ["A100-40GB"]}}) is None
        assert chosen({"gpus": "A100:40GB..:1"}) == "c"
        assert chosen({"gpus": 1, "gpu": {"cuda_min": "12.3"}}) == "a"
        assert chosen({"gpus": "A100:1", "infiniband": True}) is None
        # The quota: 0.01 GPU-hours left at c is enough for a job without a time limit, not for
        # an hour of one GPU.
        status, _, answer = place(broker, tok, {"image": "x",
                                                "resources": {"gpus": "A100:1",
                                                              "walltime_s": 3600}})
        assert status == 422, answer
        at_c = {r["code"] for c in answer["candidates"] if c["site"] == "c"
                for r in c["reasons"]}
        assert "quota" in at_c, answer
    finally:
        stop(broker.proc)



AUDIENCE_X = "berthd-site-x"


@pytest.fixture(scope="module")
def site_x(gateway_cluster, slurmrestd, issuers, identity, berthd_bin, scratch, second_user):
    """A berthd site that takes issuer a's tokens only for its own audience, AUDIENCE_X: a
    caller's token for AUDIENCE_A is refused there."""
    site = start_site("x", "[resources]\ncache_s = 0\n", gateway_cluster, slurmrestd, issuers,
                      identity, berthd_bin, scratch, second_user, audience=AUDIENCE_X)
    yield site
    stop(site.proc)


@pytest.fixture(scope="module")
def exchanging_broker(site_x, issuers, identity, berthd_bin, scratch, second_user):
    """A broker with a database over site x twice: "x" with token = "exchange" (RFC 8693 at
    issuer a, as its client "berth broker"), and "x-forward", which forwards the caller's token
    and so must find AUDIENCE_X in its aud."""
    a = issuers.issuers["a"]
    a.exchange_clients["berth broker"] = "s3cret:+/"
    workdir = identity.make_dir(os.path.join(scratch, "exchanging-broker"))
    secret = identity.write_file(os.path.join(workdir, "exchange.secret"), "s3cret:+/\n",
                                 mode=0o600)
    conf = gateway_config(issuers, second_user, f'database = "{workdir}/broker.db"\n')
    claim = 'username_claim = "preferred_username"\n'
    conf = conf.replace(claim, claim + f"""exchange_client_id = "berth broker"
exchange_client_secret_file = "{secret}"
""", 1) + f"""
[broker]

[[broker.sites]]
name = "x"
url = "{site_x.url}"
token = "exchange"
audience = "{AUDIENCE_X}"

[[broker.sites]]
name = "x-forward"
url = "{site_x.url}"
audience = "{AUDIENCE_X}"
"""
    path = identity.write_file(os.path.join(workdir, "berthd.conf"), conf)
    b = run_berthd(identity, berthd_bin, path)
    yield b
    stop(b.proc)
    a.exchange_clients.pop("berth broker", None)


def test_an_exchange_site_gets_a_token_for_its_audience_from_the_callers_issuer(
        exchanging_broker, site_x, issuers, identity):
    """Site x refuses the caller's token (audience A); through the broker, with token =
    "exchange", it is placed on and sent a job with a token for its own audience, of the same
    user, got by RFC 8693 at issuer a; the forwarding entry is rejected without being sent."""
    a = issuers.issuers["a"]
    tok = token_a(issuers, identity)
    assert site_x.request("GET", "/v1/resources", tok)[0] == 401
    del a.exchanges[:]
    status, _, answer = place(exchanging_broker, tok, {"image": "x"})
    assert status == 200, answer
    assert answer["chosen"]["site"] == "x", answer
    forward = [c for c in answer["candidates"] if c["site"] == "x-forward"]
    assert [c["reasons"] for c in forward] == [[{
        "code": "issuer_untrusted",
        "message": "the site does not take the caller's token (the caller's token is not for "
                   f'audience "{AUDIENCE_X}" (its aud: "{AUDIENCE_A}"); token = "exchange" '
                   "would get one)"}]], answer
    assert [(e["client"], e["audience"], e["subject_token"]) for e in a.exchanges] == [
        ("berth broker", AUDIENCE_X, tok)], a.exchanges
    # A job through the broker: at site x as the caller, with the token kept from the placement.
    body = {"image": "127.0.0.1:1/none:1", "command": ["true"], "resources": {"walltime_s": 600},
            "placement": {"sites": ["x"]}}
    status, _, job = exchanging_broker.request("POST", "/v1/jobs", tok, body)
    assert status == 201, job
    assert job["site"] == "x" and [e["outcome"] for e in job["attempts"]] == ["submitted"], job
    own = a.sign(a.claims("s-alice", AUDIENCE_X, preferred_username=pwd.getpwuid(
        identity.uid).pw_name))
    assert job["site_job_id"] in [j["id"] for j in site_jobs(site_x, own)]
    status, _, seen = exchanging_broker.request("GET", f"/v1/jobs/{job['id']}", tok)
    assert status == 200 and seen["site"] == "x", seen
    assert exchanging_broker.request("DELETE", f"/v1/jobs/{job['id']}", tok)[0] == 202
    assert len(a.exchanges) == 1, a.exchanges  # one exchange served all of it


def test_a_failed_exchange_rejects_the_site_with_the_issuers_words(exchanging_broker, issuers,
                                                                   identity):
    a = issuers.issuers["a"]
    a.exchange_refused.add(AUDIENCE_X)
    try:
        tok = token_a(issuers, identity, sub="s-carol")  # a caller the broker has not seen
        status, _, answer = place(exchanging_broker, tok, {"image": "x",
                                                           "placement": {"sites": ["x"]}})
        assert status == 422, answer
        [x] = [c for c in answer["candidates"] if c["site"] == "x"]
        [reason] = x["reasons"]
        assert reason["code"] == "issuer_untrusted", answer
        assert reason["message"] == (
            "the site does not take the caller's token (token exchange for audience "
            f'"{AUDIENCE_X}" failed: POST {a.url}/token: invalid_target: audience '
            f"'{AUDIENCE_X}' is not allowed (HTTP 400))"), answer
    finally:
        a.exchange_refused.discard(AUDIENCE_X)
    # Never kept: asked again, the issuer now grants it.
    status, _, answer = place(exchanging_broker, tok, {"image": "x", "placement": {"sites": ["x"]}})
    assert status == 200 and answer["chosen"]["site"] == "x", answer


@pytest.fixture(scope="module", params=["22.05"], ids=["slurm22.05"])
def busy_site(request, issuers, identity, berthd_bin, scratch, second_user, berth_bin):
    """Site p: a berthd in front of a Slurm of its own (a second loopback cluster), whose two
    nodes a job of root's holds (sleep, --exclusive): a job sent there pends. Its cluster is
    the returned site's `cluster`, its slurmrestd process `rest`."""
    with slurm_of_its_own(request, scratch, berth_bin, identity, "slurm-broker-p") as (
            cluster, rest, url):
        held = cluster.run(["sbatch", "--parsable", "-N", "2", "--exclusive", "-o", "/dev/null",
                            "--wrap", "sleep 600"], cwd="/tmp")
        assert held.returncode == 0, held.stderr
        site = start_site("p", "[resources]\ncache_s = 0\n", cluster, url, issuers, identity,
                          berthd_bin, scratch, second_user)
        site.cluster, site.rest = cluster, rest
        try:
            yield site
        finally:
            stop(site.proc)


def slurm_job(cluster, job_id) -> dict:
    """{state, submit, end} of Slurm job `job_id` of `cluster` (times as Slurm's ISO text)."""
    out = cluster.run(["squeue", "-h", "-t", "all", "-j", str(job_id), "-O",
                       "State:20,SubmitTime:24,EndTime:24"])
    assert out.returncode == 0, out.stderr
    state, submit, end = out.stdout.split()
    return {"state": state, "submit": submit, "end": end}


def slurm_id_at(site, tok, site_job_id) -> int:
    status, _, job = site.request("GET", f"/v1/jobs/{site_job_id}", tok)
    assert status == 200 and job["slurm_job_id"] > 0, job
    return job["slurm_job_id"]


def start_busy_broker(busy_site, site_a, issuers, identity, berthd_bin, scratch, second_user,
                      name, round_s=0) -> Berthd:
    """A broker over site p (weighted first) and site a, start_now not counted, so that a
    job goes to p although p cannot start it now; its own round every `round_s` seconds
    (reconcile_interval_s), none for 0."""
    workdir = identity.make_dir(os.path.join(scratch, name))
    conf = gateway_config(issuers, second_user, f'database = "{workdir}/broker.db"\n'
                          f"reconcile_interval_s = {round_s}\n") + f"""
[broker]

[broker.score]
start_now = 0

[[broker.sites]]
name = "p"
url = "{busy_site.url}"
weight = 10

[[broker.sites]]
name = "a"
url = "{site_a.url}"
"""
    path = identity.write_file(os.path.join(workdir, "berthd.conf"), conf)
    return run_berthd(identity, berthd_bin, path)


def test_a_job_pending_past_its_timeout_moves_to_another_slurm_and_lives_once(
        busy_site, site_a, gateway_cluster, issuers, identity, berthd_bin, scratch, second_user):
    """failover.pending_timeout_s across two real Slurms: the job pends at p; at the owner's GET
    after the timeout the broker cancels it at p, and only once p's Slurm has it CANCELLED
    does it reach a's Slurm: never two live copies."""
    tok = token_a(issuers, identity)
    broker = start_busy_broker(busy_site, site_a, issuers, identity, berthd_bin, scratch,
                               second_user, "busy-broker")
    try:
        body = {"image": "127.0.0.1:1/none:1", "command": ["true"],
                "resources": {"walltime_s": 600}, "failover": {"pending_timeout_s": 2}}
        status, _, job = broker.request("POST", "/v1/jobs", tok, body)
        assert status == 201 and job["site"] == "p", job
        at_p = slurm_id_at(busy_site, tok, job["site_job_id"])
        assert slurm_job(busy_site.cluster, at_p)["state"] == "PENDING"
        status, _, seen = broker.request("GET", f"/v1/jobs/{job['id']}", tok)
        assert status == 200 and seen["site"] == "p", seen  # not yet past its timeout
        time.sleep(3.5)
        status, _, seen = broker.request("GET", f"/v1/jobs/{job['id']}", tok)
        assert status == 200 and seen["site"] == "a", seen
        assert [(a["site"], a["outcome"]) for a in seen["attempts"]] == [
            ("p", "cancelled"), ("a", "submitted")], seen
        assert seen["attempts"][0]["cause"].startswith("pending at p longer than "), seen
        at_a = slurm_id_at(site_a, tok, seen["site_job_id"])
        p_copy, a_copy = slurm_job(busy_site.cluster, at_p), slurm_job(gateway_cluster, at_a)
        assert p_copy["state"] == "CANCELLED", p_copy
        assert p_copy["end"] <= a_copy["submit"], (p_copy, a_copy)
        # A later look moves nothing: one attempt at each site.
        status, _, again = broker.request("GET", f"/v1/jobs/{job['id']}", tok)
        assert status == 200 and len(again["attempts"]) == 2, again
    finally:
        stop(broker.proc)


def test_a_race_across_two_slurms_keeps_the_one_that_ran_with_no_one_asking(
        busy_site, site_a, gateway_cluster, issuers, identity, berthd_bin, scratch, second_user):
    """placement.strategy = "race": the job is sent to p and a at once; a's Slurm starts it (it
    fails there, pulling nothing: the user's own end, which stays) while p's pends. No one asks
    the broker about the job: its own round, with the token the owner came with, gives the job
    to a and p's copy is CANCELLED in p's Slurm."""
    tok = token_a(issuers, identity)
    broker = start_busy_broker(busy_site, site_a, issuers, identity, berthd_bin, scratch,
                               second_user, "racing-broker", round_s=1)
    try:
        body = {"image": "127.0.0.1:1/none:1", "command": ["true"],
                "resources": {"walltime_s": 600}, "placement": {"strategy": "race"}}
        status, _, job = broker.request("POST", "/v1/jobs", tok, body)
        assert status == 201 and job["site"] is None, job
        assert sorted(a["site"] for a in job["attempts"]) == ["a", "p"], job
        assert job["reason"].startswith("racing at "), job
        by_site = {a["site"]: a for a in job["attempts"]}
        at_p = slurm_id_at(busy_site, tok, by_site["p"]["site_job_id"])
        at_a = slurm_id_at(site_a, tok, by_site["a"]["site_job_id"])
        deadline = time.monotonic() + 60
        while slurm_job(gateway_cluster, at_a)["state"] in ("PENDING", "CONFIGURING"):
            assert time.monotonic() < deadline, slurm_job(gateway_cluster, at_a)
            time.sleep(0.5)
        # GET /v1/jobs lists the jobs as last read, asking no site: what the rounds wrote.
        deadline = time.monotonic() + 60
        while True:
            status, _, listed = broker.request("GET", "/v1/jobs", tok)
            assert status == 200, listed
            seen = next(j for j in listed["jobs"] if j["id"] == job["id"])
            if seen["site"] is not None:
                break
            assert time.monotonic() < deadline, seen
            time.sleep(0.5)
        assert seen["site"] == "a", seen
        outcomes = {a["site"]: a["outcome"] for a in seen["attempts"]}
        assert outcomes["p"] == "cancelled", seen
        assert slurm_job(busy_site.cluster, at_p)["state"] == "CANCELLED"
        assert slurm_job(gateway_cluster, at_a)["state"] != "CANCELLED"
    finally:
        stop(broker.proc)


def test_a_site_whose_slurmrestd_is_down_is_passed_over(busy_site, site_a, issuers, identity,
                                                        berthd_bin, scratch, second_user):
    """p's slurmrestd stopped (last in this module: p stays so): p cannot say what it has, so
    the broker rejects it as down and the job goes to a, never reaching p."""
    tok = token_a(issuers, identity)
    before = len(site_jobs(busy_site, tok))
    busy_site.rest.terminate()
    busy_site.rest.wait(timeout=20)
    broker = start_busy_broker(busy_site, site_a, issuers, identity, berthd_bin, scratch,
                               second_user, "rest-down-broker")
    try:
        body = {"image": "127.0.0.1:1/none:1", "command": ["true"],
                "resources": {"walltime_s": 600}}
        status, _, answer = place(broker, tok, body)
        assert status == 200 and answer["chosen"]["site"] == "a", answer
        assert verdicts(answer)[("p", None)] == ["site_down"], answer
        status, _, job = broker.request("POST", "/v1/jobs", tok, body)
        assert status == 201 and job["site"] == "a", job
        assert [a["site"] for a in job["attempts"]] == ["a"], job
        assert len(site_jobs(busy_site, tok)) == before
        assert broker.request("DELETE", f"/v1/jobs/{job['id']}", tok)[0] == 202
    finally:
        stop(broker.proc)

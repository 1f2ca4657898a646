"""The berth client of berthd (docs/gateway.md, "The berth client"): `berth submit`, `jobs`,
`job show|cancel|logs` as the unprivileged test user against a real berthd in front of the
loopback Slurm cluster, with a token of the fixture issuer; `berth sites` against a broker over
that berthd and a site described by a GLUE file; the errors a user meets, each one line."""

from __future__ import annotations

import copy
import json
import os
import subprocess

import pytest

from gateway import (AUDIENCE_A, Berthd, berthd_bin, gateway_config, issuers,  # noqa: F401
                     job_gateway_files, second_user, slurmrestd, start_berthd,
                     start_gateway_cluster)
from test_gateway_jobs import make_output_dir, token_a, wait_final

L40S = "NVIDIA L40S"


@pytest.fixture(scope="module", params=["22.05"], ids=["slurm22.05"])
def gateway_cluster(request, scratch, berth_bin, identity):
    """One release is enough: the client speaks to berthd, not to Slurm."""
    c = start_gateway_cluster(request, scratch, berth_bin, identity, "slurm-client")
    yield c
    c.stop()


def stop(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def gw(berth, gateway_cluster, slurmrestd, issuers, identity, berthd_bin, second_user):
    """berthd with its job endpoints and job output, as the test user, jobs running with this
    test's berth store."""
    workdir, key, env_lines = job_gateway_files(identity, berth, gateway_cluster)
    output = make_output_dir(os.path.join(workdir, "output"), identity)
    conf = gateway_config(issuers, second_user, f'database = "{workdir}/jobs.db"\n') + f"""
[slurm]
rest_url = "{slurmrestd}"
jwt_key = "{key}"
workdir = "{berth.workdir}"
cluster = "berthclient"
output_dir = "{output}"
# The partition a broker may send jobs to.
partitions = ["debug"]

[slurm.environment]
{env_lines}

[resources]
cache_s = 0
"""
    path = identity.write_file(os.path.join(workdir, "berthd.conf"), conf)
    log = os.path.join(workdir, "berthd.log")
    proc, url = start_berthd(identity, berthd_bin, path, log)
    yield Berthd(proc, url, log)
    stop(proc)


def client_env(gw, token) -> dict:
    return {"BERTH_GATEWAY": gw.url, "BERTH_TOKEN": token}


def table(text: str) -> list[list[str]]:
    """print_table's rows: columns three spaces apart (a cell holds at most single spaces)."""
    return [[c.strip() for c in line.split("   ") if c.strip()] for line in text.splitlines()]


def test_submit_list_show_logs_and_cancel(gw, berth, issuers, identity, pushed_busybox):
    tok = token_a(issuers, identity)
    env = client_env(gw, tok)
    _, out, err = berth("submit", "--name", "hello", "--time", "2", "--mem", "200M",
                        "--cpus", "1", pushed_busybox, "sh", "-c",
                        "echo out-line; echo err-line >&2", env=env)
    job_id = out.strip()
    assert job_id.isdigit() and err == "", (out, err)
    done = wait_final(gw, tok, job_id)
    assert done["state"] == "COMPLETED", done
    # What the options asked for is what berthd recorded.
    shown = berth.json("job", "show", "--json", job_id, env=env)
    assert shown == done
    assert (shown["name"], shown["walltime_s"]) == ("hello", 120), shown

    _, out, _ = berth("jobs", env=env)
    rows = table(out)
    assert rows[0] == ["JOB ID", "NAME", "IMAGE", "STATE", "EXIT", "SLURM ID", "NODES",
                       "CREATED"], out
    assert rows[1][:6] == [job_id, "hello", pushed_busybox, "COMPLETED", "0",
                           str(done["slurm_job_id"])], out
    status, _, listed = gw.request("GET", "/v1/jobs", tok)
    assert status == 200 and berth.json("jobs", "--json", env=env) == listed

    _, out, _ = berth("job", "show", job_id, env=env)
    fields = {row[0]: row[1] if len(row) > 1 else "" for row in table(out)}
    assert fields["id"] == job_id and fields["state"] == "COMPLETED", out
    assert fields["exit_code"] == "0" and fields["image"] == pushed_busybox, out
    assert fields["end_time"].endswith("Z"), out  # a time, in RFC 3339

    # The container's streams, each where it belongs.
    _, out, err = berth("job", "logs", job_id, env=env)
    assert (out, err) == ("out-line\n", "err-line\n")
    assert berth.json("job", "logs", "--json", "--tail", "1", job_id, env=env)["tail"] == 1

    # A retry with the same key is the same job; cancel ends it.
    key = ["--idempotency-key", "client-1"]
    _, first, _ = berth("submit", *key, pushed_busybox, "busybox", "sleep", "300", env=env)
    _, again, _ = berth("submit", *key, pushed_busybox, "busybox", "sleep", "300", env=env)
    assert first == again and first.strip() != job_id, (first, again)
    _, out, _ = berth("job", "cancel", first.strip(), env=env)
    assert out == first
    assert wait_final(gw, tok, first.strip())["state"] == "CANCELLED"


def test_a_token_from_oidc_agent(gw, berth, issuers, identity):
    """oidc-agent's `oidc-token ACCOUNT` (a stand-in on PATH that knows one account), named by
    --oidc-agent-account or $OIDC_AGENT_ACCOUNT."""
    tok = token_a(issuers, identity)
    bindir = berth.make_dir("oidc-bin")
    berth.write_file("oidc-bin/oidc-token",
                     f'#!/bin/sh\n[ "$1" = egi ] || {{ echo "no account $1" >&2; exit 1; }}\n'
                     f'echo {tok}\n', mode=0o755)
    path = bindir + ":" + berth.env["PATH"]
    env = {"BERTH_GATEWAY": gw.url, "PATH": path}
    assert berth.json("jobs", "--json", "--oidc-agent-account", "egi", env=env) == {"jobs": []}
    assert berth.json("jobs", "--json", env=dict(env, OIDC_AGENT_ACCOUNT="egi")) == {"jobs": []}
    # The flag names the account over a token in the environment.
    env["BERTH_TOKEN"] = "not-a-token"
    assert berth.json("jobs", "--json", "--oidc-agent-account", "egi", env=env) == {"jobs": []}
    rc, out, err = berth("jobs", "--oidc-agent-account", "cern", env=env, check=False)
    assert (rc, out) == (1, "")
    assert err == ("no account cern\n"
                   "berth: error: authenticate oidc-token cern: exited with status 1\n")


def test_errors_are_one_line(gw, berth, issuers, identity):
    tok = token_a(issuers, identity)
    rc, out, err = berth("jobs", check=False)
    assert (rc, out) == (1, "")
    assert err == ("berth: error: read environment BERTH_GATEWAY: not set, and no --gateway given\n"
                   "berth: hint: name the berthd to ask: --gateway https://HOST[:PORT] or "
                   "$BERTH_GATEWAY\n")
    rc, _, err = berth("jobs", "--gateway", gw.url, check=False)
    assert rc == 1 and err.startswith(
        "berth: error: read environment BERTH_TOKEN: not set, and no oidc-agent account given\n")
    # berthd's own 401 message, as it said it.
    status, _, refusal = gw.request("GET", "/v1/jobs", "not-a-token")
    assert status == 401, refusal
    rc, out, err = berth("jobs", env=client_env(gw, "not-a-token"), check=False)
    assert (rc, out) == (1, "")
    assert err == (
        f"berth: error: GET {gw.url}/v1/jobs: {refusal['error']['message']} (HTTP 401)\n")
    env = client_env(gw, tok)
    for args, method in ((("job", "show"), "GET"), (("job", "cancel"), "DELETE")):
        rc, out, err = berth(*args, "424242", env=env, check=False)
        assert (rc, out) == (1, "")
        assert err == f"berth: error: {method} {gw.url}/v1/jobs/424242: no job 424242 (HTTP 404)\n"
    rc, _, err = berth("job", "logs", "424242", env=env, check=False)
    assert rc == 1 and err == (
        f"berth: error: GET {gw.url}/v1/jobs/424242/output: no job 424242 (HTTP 404)\n")
    # berthd's 400 for a body it does not take, and the client's own for an option.
    rc, _, err = berth("submit", "--gpus", "H100:2", "x", env=env, check=False)
    assert rc == 1 and err.startswith(f"berth: error: POST {gw.url}/v1/jobs: ") and \
        err.endswith(" (HTTP 400)\n") and "resources.gpus" in err, err
    rc, _, err = berth("submit", "--time", "soon", "x", env=env, check=False)
    assert rc == 1 and err == (
        "berth: error: parse --time soon: not a time limit (MINUTES, MM:SS, HH:MM:SS, D-HH, "
        "D-HH:MM, D-HH:MM:SS)\n")
    # A gateway is no broker.
    rc, _, err = berth("sites", env=env, check=False)
    assert rc == 1 and err.startswith(f"berth: error: GET {gw.url}/v1/sites: ") and \
        "(HTTP 404)\nberth: hint: only a berthd broker" in err, err
    status, _, listed = gw.request("GET", "/v1/jobs", tok)
    assert status == 200 and listed["jobs"] == [], listed


@pytest.fixture
def broker(gw, issuers, identity, berthd_bin, second_user, berth):
    """A broker, with jobs of its own, over the gateway (a berthd site) and a GLUE file of L40S
    nodes made from what the gateway publishes."""
    workdir = identity.make_dir(os.path.join(berth.workdir, "broker"))
    status, _, doc = gw.request("GET", "/v1/resources", token_a(issuers, identity))
    assert status == 200, doc
    paper = copy.deepcopy(doc)
    for env in paper.get("AcceleratorEnvironment", []):
        env["Model"] = L40S
        env["Memory"] = 48305
    paper_file = identity.write_file(os.path.join(workdir, "paper.json"), json.dumps(paper))
    conf = gateway_config(issuers, second_user, f'database = "{workdir}/broker.db"\n') + f"""
[broker]

[[broker.sites]]
name = "hpc"
url = "{gw.url}"
info_ttl_s = 60

[[broker.sites]]
name = "paper"
kind = "static"
resources = "{paper_file}"
info_ttl_s = 0
"""
    path = identity.write_file(os.path.join(workdir, "berthd.conf"), conf)
    log = os.path.join(workdir, "berthd.log")
    proc, url = start_berthd(identity, berthd_bin, path, log)
    b = Berthd(proc, url, log)
    b.has_gpus = bool(doc.get("AcceleratorEnvironment"))
    yield b
    stop(proc)


def test_sites_and_where_a_job_fits(broker, berth, issuers, identity):
    tok = token_a(issuers, identity)
    env = client_env(broker, tok)
    status, _, sites = broker.request("GET", "/v1/sites", tok)
    assert status == 200 and berth.json("sites", "--json", env=env) == sites
    _, out, _ = berth("sites", env=env)
    rows = table(out)
    assert rows[0] == ["SITE", "KIND", "UP", "FRESH", "READ", "CLASSES", "GPUS", "ERROR"], out
    by_name = {r[0]: r for r in rows[1:]}
    assert by_name["hpc"][1:4] == ["berthd", "yes", "yes"], out
    assert by_name["paper"][1:4] == ["static", "yes", "yes"], out
    if broker.has_gpus:
        assert by_name["paper"][6].startswith(L40S + ": "), out

    # With a requirement: the broker's dry run, every candidate's verdict and reasons.
    status, _, answer = broker.request("POST", "/v1/placements", tok,
                                       {"image": "berth-sites", "resources": {"gpus": "H200:1"}})
    assert status == 422, answer
    assert berth.json("sites", "--json", "--gpus", "H200:1", env=env) == answer
    _, out, _ = berth("sites", "--gpus", "H200:1", env=env)
    rows = table(out)
    assert rows[0] == ["SITE", "PARTITION", "CLASS", "VERDICT", "SCORE", "WHY NOT"], out
    assert len(rows) == 1 + len(answer["candidates"]), out
    assert all(r[3] == "rejected" for r in rows[1:]), out
    reasons = {c["reasons"][0]["code"] for c in answer["candidates"]}
    assert reasons <= {"no_gpu_model", "gpus_per_node"}, answer
    assert all(r[5].split(":")[0] in reasons for r in rows[1:]), out
    if broker.has_gpus:
        status, _, answer = broker.request("POST", "/v1/placements", tok, {
            "image": "berth-sites", "resources": {"gpus": "L40S:1"}})
        assert status == 200 and answer["chosen"]["site"] == "paper", answer
        _, out, _ = berth("sites", "--gpus", "L40S:1", env=env)
        chosen = [r for r in table(out)[1:] if r[3] == "chosen"]
        assert [(r[0], r[2]) for r in chosen] == [("paper", answer["chosen"]["class"])], out


def test_a_job_through_the_broker(broker, gw, berth, issuers, identity, pushed_busybox):
    """The same commands against a broker: the job goes to the berthd site, the table names the
    site, and show, logs and cancel reach it there."""
    tok = token_a(issuers, identity)
    env = client_env(broker, tok)
    _, out, _ = berth("submit", "--time", "2", pushed_busybox, "sh", "-c", "echo via-broker",
                      env=env)
    job_id = out.strip()
    done = wait_final(broker, tok, job_id)
    assert done["state"] == "COMPLETED" and done["site"] == "hpc", done
    _, out, _ = berth("jobs", env=env)
    rows = table(out)
    assert rows[0][-1] == "SITE" and rows[1][0] == job_id and rows[1][-1] == "hpc", out
    fields = {row[0]: row[1] if len(row) > 1 else "" for row in table(
        berth("job", "show", job_id, env=env)[1])}
    assert fields["site"] == "hpc" and fields["site_job_id"] == done["site_job_id"], fields
    assert berth("job", "logs", job_id, env=env)[1:] == ("via-broker\n", "")
    # At the site, the one job the broker sent.
    status, _, listed = gw.request("GET", "/v1/jobs", tok)
    assert status == 200 and [j["id"] for j in listed["jobs"]] == [done["site_job_id"]], listed

    _, out, _ = berth("submit", pushed_busybox, "busybox", "sleep", "300", env=env)
    assert berth("job", "cancel", out.strip(), env=env)[1] == out
    assert wait_final(broker, tok, out.strip())["state"] == "CANCELLED"

    # No site takes it: every site's reasons, one line, and nothing is recorded.
    status, _, answer = broker.request("POST", "/v1/placements", tok,
                                       {"image": "x", "resources": {"gpus": "H200:1"}})
    assert status == 422, answer
    rc, out, err = berth("submit", "--gpus", "H200:1", "x", env=env, check=False)
    assert (rc, out) == (1, "")
    assert err.startswith(
        f"berth: error: POST {broker.url}/v1/jobs: no site can take the job: hpc/") and \
        err.endswith(" (HTTP 422)\n") and err.count("\n") == 1, err
    for c in answer["candidates"]:
        assert f"{c['site']}/{c['class']}: {c['reasons'][0]['message']}" in err, (c, err)
    assert len(berth.json("jobs", "--json", env=env)["jobs"]) == 2

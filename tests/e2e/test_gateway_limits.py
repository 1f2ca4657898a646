"""berthd's limits on the real loopback Slurm cluster, through Debian's slurmrestd: requests
over a per-job limit (walltime, GPUs, the cloud cap) refused with a 403 that names it before
Slurm hears of them; the running and queued counts refusing until a job is cancelled, never
an accepted job's own retry; a group's entry and a user's; a `class: cloud` job cut by berthd
at its cap (or its own walltime) within 5 s and shown so; a group's GPU-hour quota refusing its next GPU job, not a CPU job;
the dry run (POST /v1/jobs?dry_run=1) answering each of those checks with the broker's reason
code and recording nothing; a partition of [slurm] partitions taken and another refused; and
the audit log's line for each decision."""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import time

import pytest

from gateway import (AUDIENCE_A, AUDIENCE_B, Berthd, berthd_bin, gateway_cluster,  # noqa: F401
                     gateway_config, gpu_host, issuers, job_gateway_files, second_user,
                     slurmrestd, start_berthd)

CLOUD_CAP_S = 60  # Slurm's time limits are whole minutes: one is the shortest cap there is
LONG_GROUP = "/berth/long"
# The GPU-hour budget of the test user's primary group: 1.8 GPU-seconds, which one GPU job of a
# few seconds uses up. The period is a month, so that a test seldom straddles two.
TINY_BUDGET = 0.0005
# Two VOs (token groups) of users of one Unix group: the first has the tiny budget, the second
# none.
VO_TINY, VO_FREE = "/berth/vo-tiny", "/berth/vo-free"
# A VO with a budget of nothing: a GPU job of its members is over its quota from the start.
VO_SPENT = "/berth/vo-spent"


def primary_group(identity) -> str:
    return grp.getgrgid(pwd.getpwuid(identity.uid).pw_gid).gr_name


@pytest.fixture
def gw(request, berth, gateway_cluster, slurmrestd, issuers, identity, berthd_bin, second_user):
    """berthd with its job endpoints, limits and an audit log, on a fresh database; with the
    site's start estimate (sbatch --test-only on this cluster) where the test asks for
    "estimate" (parametrize gw indirectly)."""
    cluster = gateway_cluster
    estimate = ""
    if getattr(request, "param", None) == "estimate":
        estimate = f'start_estimate = "sbatch"\nslurm_conf = "{cluster.conf}"\n'
    workdir, key, env_lines = job_gateway_files(identity, berth, cluster)
    audit = os.path.join(workdir, "audit.jsonl")
    extra = f'database = "{workdir}/jobs.db"\naudit_log = "{audit}"\n'
    second = ""
    if second_user:
        second = f"""
[limits.users.{second_user}]
max_queued_jobs = 1
"""
    conf = gateway_config(issuers, second_user, extra) + f"""
[slurm]
rest_url = "{slurmrestd}"
jwt_key = "{key}"
workdir = "{berth.workdir}"
partitions = ["debug"]
{estimate}
[slurm.environment]
{env_lines}

[limits]
max_walltime_s = 600
max_gpus_per_job = 1
max_running_jobs = 1
max_queued_jobs = 2
cloud_max_walltime_s = {CLOUD_CAP_S}

[limits.groups."{LONG_GROUP}"]
max_walltime_s = 1200
{second}
[quotas]
period = "month"

[quotas.groups."{primary_group(identity)}"]
gpu_hours = {TINY_BUDGET}

[quotas.groups."{VO_TINY}"]
gpu_hours = {TINY_BUDGET}

[quotas.groups."{VO_SPENT}"]
gpu_hours = 0
"""
    conf_path = identity.write_file(os.path.join(workdir, "berthd.conf"), conf)
    log = os.path.join(workdir, "berthd.log")
    proc, url = start_berthd(identity, berthd_bin, conf_path, log)
    g = Berthd(proc, url, log)
    g.audit = audit
    yield g
    g.proc.terminate()
    g.proc.wait(timeout=10)


def local_user(identity) -> str:
    return subprocess.run(["id", "-un", str(identity.uid)], capture_output=True,
                          text=True).stdout.strip()


def token_a(issuers, identity, groups=None):
    a = issuers.issuers["a"]
    return a.sign(a.claims("s-alice", AUDIENCE_A, preferred_username=local_user(identity),
                           groups=groups))


def token_b(issuers):
    b = issuers.issuers["b"]
    return b.sign(b.claims("egi-0042@egi.eu", AUDIENCE_B))


def audit_lines(gw) -> list[dict]:
    with open(gw.audit) as f:
        text = f.read()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def decisions(gw, event: str) -> list[tuple[str, dict]]:
    return [(line["outcome"], line["detail"]) for line in audit_lines(gw)
            if line["event"] == event]


def wait_state(gw, token, job_id, done, timeout=120) -> dict:
    """The job once `done(state)` holds, polled; the test fails if it never does."""
    deadline = time.monotonic() + timeout
    while True:
        status, _, job = gw.request("GET", f"/v1/jobs/{job_id}", token)
        assert status == 200, job
        if done(job["state"]):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job['state']} after {timeout} s")
        time.sleep(0.5)


def job_output(berth, job) -> str:
    """The batch script's output (slurm-JOBID.out in the job's working directory)."""
    try:
        with open(os.path.join(berth.workdir, f"slurm-{job['slurm_job_id']}.out")) as f:
            return f.read()
    except OSError as e:
        return str(e)


def final(state: str) -> bool:
    return state not in ("ACCEPTED", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING")


def slurm(cluster, *args) -> str:
    return subprocess.run(cluster.command(list(args)), env=dict(os.environ, **cluster.env()),
                          capture_output=True, text=True, check=True).stdout


def test_per_job_limits_are_refused_before_slurm(gw, issuers, identity, gateway_cluster,
                                                 pushed_busybox):
    tok = token_a(issuers, identity)
    user = local_user(identity)
    before = slurm(gateway_cluster, "squeue", "-h", "-t", "all", "-u", user, "-o", "%i").split()
    for body, limit, value, requested, message in [
        ({"resources": {"walltime_s": 601}}, "max_walltime_s", 600, 601,
         "the job asks for a walltime of 601 s, the limit max_walltime_s = 600 (default)"),
        ({"resources": {"gpus": 2}}, "max_gpus_per_job", 1, 2,
         "the job asks for 2 GPUs, the limit max_gpus_per_job = 1 (default)"),
        ({"class": "cloud", "resources": {"walltime_s": 120}}, "cloud_max_walltime_s", 60, 120,
         "the cloud job asks for a walltime of 120 s, the limit cloud_max_walltime_s = 60 "
         "(default)"),
    ]:
        status, _, err = gw.request("POST", "/v1/jobs", tok, dict(body, image=pushed_busybox))
        assert status == 403, err
        assert err == {"error": {"status": 403, "message": message, "limit": limit,
                                 "value": value, "requested": requested}}
    # A member of LONG_GROUP has its longer cap, and nothing more.
    tok_long = token_a(issuers, identity, groups=["/other", LONG_GROUP])
    status, _, err = gw.request("POST", "/v1/jobs", tok_long, {
        "image": pushed_busybox, "resources": {"walltime_s": 1260}})
    assert status == 403 and err["error"]["message"] == (
        f"the job asks for a walltime of 1260 s, the limit max_walltime_s = 1200 "
        f"(group {LONG_GROUP})")
    # Nothing refused reached Slurm, and no job was recorded.
    after = slurm(gateway_cluster, "squeue", "-h", "-t", "all", "-u", user, "-o", "%i").split()
    assert after == before
    status, _, listed = gw.request("GET", "/v1/jobs", tok)
    assert status == 200 and listed["jobs"] == []
    refused = [d for outcome, d in decisions(gw, "job.submit") if outcome == "refused"]
    assert refused == [
        {"limit": "max_walltime_s", "value": 600, "requested": 601, "from": "default"},
        {"limit": "max_gpus_per_job", "value": 1, "requested": 2, "from": "default"},
        {"limit": "cloud_max_walltime_s", "value": 60, "requested": 120, "from": "default"},
        {"limit": "max_walltime_s", "value": 1200, "requested": 1260,
         "from": f"group {LONG_GROUP}"},
    ]
    from test_gateway_jobs import admin_token, sample, scrape
    metrics = scrape(gw, admin_token(issuers, identity))
    assert sample(metrics, "berthd_limit_refusals_total", limit="max_walltime_s") == 2, metrics
    assert sample(metrics, "berthd_limit_refusals_total", limit="max_gpus_per_job") == 1


def test_running_and_queued_counts_refuse_until_a_cancel(gw, berth, issuers, identity,
                                                         gateway_cluster, pushed_busybox,
                                                         second_user):
    """max_running_jobs = 1 with a job running; then max_queued_jobs = 2 with the partition
    down (jobs queue and never start). Each refusal lifts once a job is cancelled; the retry
    of an accepted job is its job again, not one over the limit."""
    tok = token_a(issuers, identity)
    user = local_user(identity)
    sleeper = {"image": pushed_busybox, "command": ["/bin/busybox", "sleep", "300"],
               "resources": {"walltime_s": 300}}
    status, _, running = gw.request("POST", "/v1/jobs", tok, sleeper)
    assert status == 201, running
    started = wait_state(gw, tok, running["id"], lambda s: s not in ("ACCEPTED", "PENDING"))
    assert started["state"] == "RUNNING", (started, job_output(berth, started))
    status, _, err = gw.request("POST", "/v1/jobs", tok, sleeper)
    assert status == 403, err
    assert err["error"] == {"status": 403, "limit": "max_running_jobs", "value": 1, "current": 1,
                            "message": f"{user} has 1 running jobs, the limit max_running_jobs "
                                       "= 1 (default)"}
    status, _, _ = gw.request("DELETE", f"/v1/jobs/{running['id']}", tok)
    assert status == 202
    wait_state(gw, tok, running["id"], final)

    slurm(gateway_cluster, "scontrol", "update", "PartitionName=debug", "State=DOWN")
    try:
        queued = []
        for i in range(2):
            status, _, job = gw.request("POST", "/v1/jobs", tok, sleeper,
                                        headers={"Idempotency-Key": f"q{i}"})
            assert status == 201 and job["state"] == "PENDING", job
            queued.append(job)
        status, _, err = gw.request("POST", "/v1/jobs", tok, sleeper,
                                    headers={"Idempotency-Key": "q2"})
        assert status == 403 and err["error"]["limit"] == "max_queued_jobs", err
        assert err["error"]["current"] == 2 and err["error"]["value"] == 2
        # The retry of an accepted job is that job, though the count is full.
        status, h, again = gw.request("POST", "/v1/jobs", tok, sleeper,
                                      headers={"Idempotency-Key": "q0"})
        assert status == 200 and h["Idempotent-Replayed"] == "true", again
        assert again["id"] == queued[0]["id"]
        if second_user:
            # Counts are per account, and the second user's own entry sets its limit.
            tok_b = token_b(issuers)
            status, _, job_b = gw.request("POST", "/v1/jobs", tok_b, sleeper)
            assert status == 201 and job_b["state"] == "PENDING", job_b
            status, _, err = gw.request("POST", "/v1/jobs", tok_b, sleeper)
            assert status == 403 and err["error"]["message"] == (
                f"{second_user} has 1 queued jobs, the limit max_queued_jobs = 1 "
                f"(user {second_user})"), err
            assert gw.request("DELETE", f"/v1/jobs/{job_b['id']}", tok_b)[0] == 202
        status, _, _ = gw.request("DELETE", f"/v1/jobs/{queued[1]['id']}", tok)
        assert status == 202
        status, _, third = gw.request("POST", "/v1/jobs", tok, sleeper,
                                      headers={"Idempotency-Key": "q2"})
        assert status == 201, third
        gw.request("DELETE", f"/v1/jobs/{queued[0]['id']}", tok)
        gw.request("DELETE", f"/v1/jobs/{third['id']}", tok)
    finally:
        subprocess.run(gateway_cluster.command(["scancel", "-u", user]),
                       env=dict(os.environ, **gateway_cluster.env()))
        if second_user:
            subprocess.run(gateway_cluster.command(["scancel", "-u", second_user]),
                           env=dict(os.environ, **gateway_cluster.env()))
        slurm(gateway_cluster, "scontrol", "update", "PartitionName=debug", "State=UP")

    submits = decisions(gw, "job.submit")
    outcomes = [o for o, _ in submits]
    assert outcomes == (["accepted", "refused", "accepted", "accepted", "refused", "replayed"] +
                        (["accepted", "refused"] if second_user else []) + ["accepted"])
    assert [d["limit"] for o, d in submits if o == "refused"] == (
        ["max_running_jobs", "max_queued_jobs"] + (["max_queued_jobs"] if second_user else []))
    accepted = [d for o, d in submits if o == "accepted"]
    assert accepted[0]["id"] == running["id"] and accepted[0]["slurm_job_id"] > 0
    assert accepted[0]["walltime_s"] == 300 and accepted[0]["class"] == "batch"
    cancels = decisions(gw, "job.cancel")
    assert [d["id"] for _, d in cancels][:1] == [running["id"]]
    assert all(o == "accepted" for o, _ in cancels)
    # Every request's token was accepted and named the caller.
    tokens = [line for line in audit_lines(gw) if line["event"] == "token"]
    assert tokens and all(t["outcome"] == "accepted" for t in tokens)
    assert {t["user"] for t in tokens} == {user} | ({second_user} if second_user else set())


def test_cloud_job_is_cut_at_its_cap(gw, berth, issuers, identity, gateway_cluster,
                                     pushed_busybox):
    """A cloud job without a walltime gets the cloud cap as its Slurm time limit (the backstop);
    berthd cuts it at the cap itself, within 5 s by Slurm's own start and end times (Slurm alone
    would take up to a minute more: it checks time limits every 30 s, then waits KillWait), and
    the job's answer says it was cut at the cap (TIMEOUT). Waits a minute and a little."""
    tok = token_a(issuers, identity)
    status, _, job = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "class": "cloud", "command": ["/bin/busybox", "sleep", "600"]})
    assert status == 201, job
    assert job["class"] == "cloud" and job["walltime_s"] == CLOUD_CAP_S
    limit = slurm(gateway_cluster, "squeue", "-h", "-j", str(job["slurm_job_id"]), "-o", "%l")
    assert limit.strip() == "1:00"
    submitted = time.monotonic()
    done = wait_state(gw, tok, job["id"], final, timeout=240)
    print(f"cloud job with a {CLOUD_CAP_S} s cap: {done['state']} seen "
          f"{time.monotonic() - submitted:.0f} s after its submission")
    assert done["state"] == "TIMEOUT", (done, job_output(berth, done))
    assert done["reason"] == "cut at the cloud walltime cap, 60 s (cloud_max_walltime_s)"
    ran = done["end_time"] - done["start_time"]
    assert CLOUD_CAP_S <= ran <= CLOUD_CAP_S + 5, done
    status, _, listed = gw.request("GET", "/v1/jobs", tok)
    assert listed["jobs"][0]["reason"] == done["reason"]


def test_cloud_job_is_cut_at_the_walltime_it_asked_for(gw, berth, issuers, identity,
                                                      gateway_cluster, pushed_busybox):
    """A cloud job asking for 15 s has Slurm's shortest limit, a minute, as its backstop;
    berthd cuts it at 15 s (by Slurm's start and end times, within 5 s) and says so."""
    tok = token_a(issuers, identity)
    status, _, job = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "class": "cloud", "resources": {"walltime_s": 15},
        "command": ["/bin/busybox", "sleep", "600"]})
    assert status == 201, job
    assert job["walltime_s"] == 15
    limit = slurm(gateway_cluster, "squeue", "-h", "-j", str(job["slurm_job_id"]), "-o", "%l")
    assert limit.strip() == "1:00"
    done = wait_state(gw, tok, job["id"], final, timeout=180)
    assert done["state"] == "TIMEOUT", (done, job_output(berth, done))
    assert done["reason"] == "cut at the walltime it asked for, 15 s"
    assert 15 <= done["end_time"] - done["start_time"] <= 20, done
    with open(gw.log) as f:
        assert "berthd: cut 1 cloud job(s) at their time limit\n" in f.read()


def test_gpu_hour_quota_refuses_the_next_gpu_job_not_a_cpu_job(gw, issuers, identity, scratch,
                                                               gateway_cluster, pushed_busybox):
    """[quotas]: the primary group of the test user has 1.8 GPU-seconds a month. A GPU job of a
    few seconds uses them up (berthd's database as the accounting source); the next GPU job is
    refused with a 403 naming the quota, before Slurm hears of it; a job without GPUs is still
    accepted."""
    env = gpu_host(gateway_cluster, scratch)
    tok = token_a(issuers, identity)
    group = primary_group(identity)
    gpu_job = {"image": pushed_busybox, "env": env, "resources": {"gpus": 1},
               "command": ["busybox", "sleep", "3"]}
    status, _, first = gw.request("POST", "/v1/jobs", tok, gpu_job)
    assert status == 201, first
    done = wait_state(gw, tok, first["id"], final)
    assert done["state"] == "COMPLETED", done
    used = (done["end_time"] - done["start_time"]) / 3600
    assert used >= TINY_BUDGET, done
    status, _, err = gw.request("POST", "/v1/jobs", tok, gpu_job)
    assert status == 403, err
    e = err["error"]
    key = f'[quotas.groups."{group}"] gpu_hours'
    assert (e["quota"], e["group"], e["budget_gpu_hours"], e["period"]) == (
        key, group, TINY_BUDGET, "month"), e
    assert abs(e["used_gpu_hours"] - used) < 1e-6, (e, used)
    month = time.strftime("%Y-%m-01T00:00:00Z", time.gmtime())
    assert e["message"] == (f"group {group} has used {used:.4f} of its {TINY_BUDGET:g} GPU-hours "
                            f"in the month from {month}, the quota {key} = {TINY_BUDGET:g}"), e
    # A job without GPUs is not held back; and nothing refused was recorded.
    status, _, cpu = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "command": ["busybox", "true"]})
    assert status == 201, cpu
    wait_state(gw, tok, cpu["id"], final)
    status, _, listed = gw.request("GET", "/v1/jobs", tok)
    assert [j["id"] for j in listed["jobs"]] == [cpu["id"], first["id"]]
    refused = [d for o, d in decisions(gw, "job.submit") if o == "refused"]
    assert refused == [{"quota": key, "group": group, "budget_gpu_hours": TINY_BUDGET,
                        "used_gpu_hours": e["used_gpu_hours"], "period": "month",
                        "since": e["since"]}]


def test_gpu_hour_quotas_are_per_vo_not_per_unix_group(gw, issuers, identity, scratch,
                                                      gateway_cluster, pushed_busybox):
    """[accounting] group_by = "token" (the default): jobs count for their VO, a token group.
    Two callers of one Unix group, one in a VO with the tiny budget and one in a VO without a
    quota: once a GPU job of the first has used the budget, its next GPU job is refused naming
    its VO, while the second's is accepted; and a "group" the caller is not in is a 403."""
    env = gpu_host(gateway_cluster, scratch)
    tiny = token_a(issuers, identity, groups=[VO_FREE + "-not-mine", VO_TINY])
    free = token_a(issuers, identity, groups=[VO_FREE])
    gpu_job = {"image": pushed_busybox, "env": env, "resources": {"gpus": 1},
               "command": ["busybox", "sleep", "3"]}
    status, _, first = gw.request("POST", "/v1/jobs", tiny, gpu_job)
    assert status == 201, first
    # The first of the token's groups with a quota entry is the job's VO.
    assert first["group"] == VO_TINY, first
    done = wait_state(gw, tiny, first["id"], final)
    assert done["state"] == "COMPLETED", done
    status, _, err = gw.request("POST", "/v1/jobs", tiny, gpu_job)
    assert status == 403, err
    assert err["error"]["group"] == VO_TINY, err
    # The Unix group has used nothing of its own budget, nor has the other VO.
    status, _, other = gw.request("POST", "/v1/jobs", free, gpu_job)
    assert status == 201, other
    assert other["group"] == VO_FREE, other
    wait_state(gw, free, other["id"], final)
    status, _, err = gw.request("POST", "/v1/jobs", free, dict(gpu_job, group=VO_TINY))
    assert status == 403, err
    assert err["error"]["message"] == (
        f'group "{VO_TINY}" is not one of your token groups (yours: {VO_FREE}): name one of '
        "them, or leave group out"), err
    status, _, usage = gw.request("GET", "/v1/accounting?group_by=group&since=0", free)
    assert status == 200, usage
    assert sorted(r["group"] for r in usage["rows"]) == [VO_FREE, VO_TINY], usage


def test_dry_run_says_whether_a_job_fits_and_records_nothing(gw, issuers, identity,
                                                             gateway_cluster, pushed_busybox):
    """POST /v1/jobs?dry_run=1: the checks of a submission, answered 200 with the verdict in
    the broker's reason codes (a limit's, the site's, a quota's); nothing recorded, nothing
    sent to Slurm, a job.dry_run line in the audit log for each."""
    tok = token_a(issuers, identity)
    user = local_user(identity)
    before = slurm(gateway_cluster, "squeue", "-h", "-t", "all", "-u", user, "-o", "%i").split()
    for body, reason, message in [
        ({"resources": {"gpus": 1, "walltime_s": 600}}, None, None),
        ({"resources": {"partition": "debug"}}, None, None),
        ({"resources": {"gpus": 2}}, "max_gpus_per_job",
         "the job asks for 2 GPUs, the limit max_gpus_per_job = 1 (default)"),
        ({"resources": {"walltime_s": 601}}, "walltime",
         "the job asks for a walltime of 601 s, the limit max_walltime_s = 600 (default)"),
        ({"class": "cloud", "resources": {"walltime_s": 120}}, "walltime",
         "the cloud job asks for a walltime of 120 s, the limit cloud_max_walltime_s = 60 "
         "(default)"),
        ({"resources": {"partition": "long"}}, "partition",
         "resources.partition: \"long\" is not one of this site's partitions (debug)"),
        ({"resources": {"gpus": 1, "gpu_type": "h100"}}, "no_gpu_model",
         "\"resources.gpu_model\" is \"h100\", not a GPU model of this site (it names none in "
         "[gpu_models])"),
        ({"resources": {"gpu_share": 0.5}}, "share_unsupported",
         "\"resources.gpu_share\" asks for a share of a GPU, which this site does not offer"),
    ]:
        status, _, answer = gw.request("POST", "/v1/jobs?dry_run=1", tok,
                                       dict(body, image=pushed_busybox))
        assert status == 200, (body, answer)
        assert answer == {"fits": reason is None, "reason": reason, "message": message,
                          "start_estimate": None}, body
    # A GPU job of a VO whose GPU-hour quota is spent; a CPU job of the same VO fits.
    spent = token_a(issuers, identity, groups=[VO_SPENT])
    status, _, answer = gw.request("POST", "/v1/jobs?dry_run=1", spent,
                                   {"image": pushed_busybox, "resources": {"gpus": 1}})
    assert status == 200, answer
    month = time.strftime("%Y-%m-01T00:00:00Z", time.gmtime())
    key = f'[quotas.groups."{VO_SPENT}"] gpu_hours'
    assert answer == {"fits": False, "reason": "quota", "start_estimate": None,
                      "message": f"group {VO_SPENT} has used 0.0000 of its 0 GPU-hours in the "
                                 f"month from {month}, the quota {key} = 0"}, answer
    status, _, answer = gw.request("POST", "/v1/jobs?dry_run=1", spent, {"image": pushed_busybox})
    assert status == 200 and answer["fits"] is True, answer
    # What is not a job request stays a 400, as does a dry_run that is neither 1 nor 0.
    status, _, err = gw.request("POST", "/v1/jobs?dry_run=1", tok,
                                {"image": pushed_busybox, "resources": {"disks": 1}})
    assert status == 400, err
    assert err["error"]["message"] == '"resources.disks" is not a field of a job request'
    status, _, err = gw.request("POST", "/v1/jobs?dry_run=yes", tok, {"image": pushed_busybox})
    assert status == 400 and err["error"]["message"] == "dry_run is not 1 or 0", err
    # Nothing was recorded or reached Slurm; each dry run has its audit line, no submission has.
    status, _, listed = gw.request("GET", "/v1/jobs", tok)
    assert status == 200 and listed["jobs"] == [], listed
    after = slurm(gateway_cluster, "squeue", "-h", "-t", "all", "-u", user, "-o", "%i").split()
    assert after == before
    dry = decisions(gw, "job.dry_run")
    assert [o for o, _ in dry] == (["fits"] * 2 + ["refused"] * 7 + ["fits"] + ["invalid"] * 2)
    assert dry[0][1] == {"reason": None, "message": None, "class": "batch"}
    assert dry[2][1] == {"reason": "max_gpus_per_job", "class": "batch",
                         "message": "the job asks for 2 GPUs, the limit max_gpus_per_job = 1 "
                                    "(default)"}
    assert dry[-1][1] == {"reason": "dry_run is not 1 or 0"}
    assert decisions(gw, "job.submit") == []


@pytest.mark.parametrize("gw", ["estimate"], indirect=True)
def test_dry_run_gives_slurms_own_start_estimate(gw, issuers, identity, gateway_cluster,
                                                 pushed_busybox):
    """[slurm] start_estimate = "sbatch": a dry run that fits says when Slurm would start the
    job (sbatch --test-only, asked as berthd's own account with a token berthd mints), as Unix
    seconds; a job Slurm could never start fits berthd's checks and has no estimate, sbatch's
    words in the audit line; a job that does not fit is not asked about. Nothing reaches Slurm's
    queue."""
    if gateway_cluster.node.release != "22.05":
        pytest.skip("berthd runs as the test user, and this release's sbatch is in a Debian "
                    "root only root can enter")
    tok = token_a(issuers, identity)
    before = slurm(gateway_cluster, "squeue", "-h", "-t", "all", "-o", "%i").split()
    asked = int(time.time())
    status, _, answer = gw.request("POST", "/v1/jobs?dry_run=1", tok,
                                   {"image": pushed_busybox,
                                    "resources": {"partition": "debug", "walltime_s": 300}})
    assert status == 200, answer
    assert answer["fits"] is True and answer["reason"] is None, answer
    when = answer["start_estimate"]
    # An idle cluster starts it now; the estimate is Slurm's, not berthd's clock.
    assert isinstance(when, int) and asked - 60 <= when <= asked + 3600, answer
    # More memory than any node has: berthd's checks pass, Slurm could never start it.
    status, _, answer = gw.request("POST", "/v1/jobs?dry_run=1", tok,
                                   {"image": pushed_busybox, "resources": {"memory_mb": 10**6}})
    assert status == 200, answer
    assert answer == {"fits": True, "reason": None, "message": None, "start_estimate": None}
    status, _, answer = gw.request("POST", "/v1/jobs?dry_run=1", tok,
                                   {"image": pushed_busybox, "resources": {"gpus": 2}})
    assert answer["fits"] is False and answer["start_estimate"] is None, answer
    dry = decisions(gw, "job.dry_run")
    assert [o for o, _ in dry] == ["fits", "fits", "refused"], dry
    assert dry[0][1]["start_estimate"] == when and "estimate_error" not in dry[0][1]
    assert "start_estimate" not in dry[1][1], dry[1]
    assert dry[1][1]["estimate_error"].startswith("estimate start sbatch: "), dry[1]
    assert "exit status 1" in dry[1][1]["estimate_error"], dry[1]
    assert "estimate_error" not in dry[2][1] and "start_estimate" not in dry[2][1]
    assert slurm(gateway_cluster, "squeue", "-h", "-t", "all", "-o", "%i").split() == before


def test_a_job_runs_in_a_partition_the_site_opens_and_no_other(gw, issuers, identity,
                                                               gateway_cluster, pushed_busybox):
    """resources.partition: one of [slurm] partitions is the job's partition in Slurm; another
    is a 400 naming the site's, before anything is recorded."""
    tok = token_a(issuers, identity)
    status, _, job = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "command": ["busybox", "true"],
        "resources": {"partition": "debug"}})
    assert status == 201, job
    assert job["partition"] == "debug", job
    assert slurm(gateway_cluster, "squeue", "-h", "-t", "all", "-j", str(job["slurm_job_id"]),
                 "-o", "%P").split() == ["debug"]
    wait_state(gw, tok, job["id"], final)
    status, _, err = gw.request("POST", "/v1/jobs", tok, {
        "image": pushed_busybox, "resources": {"partition": "long"}})
    assert status == 400, err
    message = "resources.partition: \"long\" is not one of this site's partitions (debug)"
    assert err["error"]["message"] == message
    status, _, listed = gw.request("GET", "/v1/jobs", tok)
    assert [j["id"] for j in listed["jobs"]] == [job["id"]], listed
    assert [(o, d) for o, d in decisions(gw, "job.submit") if o == "invalid"] == [
        ("invalid", {"reason": message})]


def test_audit_log_records_refused_tokens_and_identities(gw, issuers, identity):
    status, h, _ = gw.request("GET", "/v1/me", "not-a-token")
    assert status == 401
    refused_id = h["X-Request-Id"]
    b = issuers.issuers["b"]
    unmapped = b.sign(b.claims("nobody@egi.eu", AUDIENCE_B))
    status, _, err = gw.request("GET", "/v1/me", unmapped)
    assert status == 403, err
    status, h, _ = gw.request("GET", "/v1/me", token_a(issuers, identity))
    assert status == 200
    lines = audit_lines(gw)
    assert [(x["event"], x["outcome"]) for x in lines] == [
        ("token", "refused"), ("mapping", "refused"), ("token", "accepted")]
    for x in lines:
        assert list(x) == ["time", "event", "outcome", "issuer", "sub", "user", "request_id",
                           "route", "detail"]
        assert x["route"] == "GET /v1/me"
        assert x["time"].endswith("Z") and len(x["time"]) == len("2026-11-26T03:40:23.042Z")
    assert lines[0]["request_id"] == refused_id and lines[0]["sub"] == ""
    assert lines[0]["detail"]["reason"]
    assert (lines[1]["issuer"], lines[1]["sub"], lines[1]["user"]) == (b.url, "nobody@egi.eu", "")
    assert lines[1]["detail"] == {"reason": err["error"]["message"]}
    assert lines[2]["user"] == local_user(identity) and lines[2]["request_id"] == h["X-Request-Id"]
    assert len({x["request_id"] for x in lines}) == 3


def test_openapi_document_describes_the_limits(gw):
    status, _, doc = gw.request("GET", "/v1/openapi.json")
    assert status == 200
    post = doc["paths"]["/v1/jobs"]["post"]["responses"]
    assert "limits" in post["403"]["description"]
    error = doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]
    assert {"limit", "value", "requested", "current"} <= set(error)
    job = doc["components"]["schemas"]["Job"]["properties"]
    assert {"class", "walltime_s"} <= set(job)


def test_resources_publish_the_gpu_limit_as_max_slots_per_job(gw, issuers, identity,
                                                              gateway_cluster):
    """GET /v1/resources: a share's GPUs say how many one job may have ([limits]
    max_gpus_per_job, everyone's), as GLUE 2.1's MaxSlotsPerJob."""
    if not gateway_cluster.gpus:
        pytest.skip("the cluster has no GPUs (GRES), so no share lists any")
    status, _, doc = gw.request("GET", "/v1/resources", token_a(issuers, identity))
    assert status == 200, doc
    accs = doc["ComputingShareAccelerator"]
    assert accs and all(a["MaxSlotsPerJob"] == 1 for a in accs), accs

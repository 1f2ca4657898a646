"""`berth gpu stats` end to end, as the unprivileged user, on the fabricated GPU host of
test_gpu.py: its libnvidia-ml is tests/fake_gpu/nvml.c, a real ELF library exporting NVML's
entry points, which answers from the state file named by BERTH_FAKE_NVML_STATE (its format is
in that file's header). Berth finds it through driver discovery and reads it in a forked child."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess

import pytest

from test_gpu import UUID0, UUID1, VERSION, FakeHost

TWO_GPUS = (f"driver {VERSION}\n"
            f"gpu {UUID0} 00000000:07:00.0 NVIDIA A100-SXM4-40GB\n"
            f"gpu {UUID1} 00000000:85:00.0 NVIDIA H100 80GB HBM3\n"
            "mem 0 40960 1024\nmem 1 81559 0\ntemp 0 45\npower 0 61234\n")


@pytest.fixture(scope="module")
def host(scratch):
    base = os.path.join(scratch, "gpu-stats-host")
    if os.path.exists(base):
        shutil.rmtree(base)
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) to build the fabricated driver's libraries")
    return FakeHost(base)


@pytest.fixture
def nvml(host, scratch):
    """Writes the fake NVML's state; returns (write, env)."""
    path = os.path.join(scratch, "nvml-state")

    def write(text: str) -> None:
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)

    return write, host.env(BERTH_FAKE_NVML_STATE=path)


def library(host) -> str:
    return os.path.join(host.root, f"usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{VERSION}")


def test_json_reports_what_nvml_says(berth, nvml):
    write, env = nvml
    write(TWO_GPUS + "util 0 37 12\nutil 1 0 0\nproc 0 4242 1000\nproc 0 4243 -\n")
    doc = berth.json("gpu", "stats", "--json", env=env)
    assert doc["driver_version"] == VERSION
    assert doc["samples"] == 1 and doc["time"].endswith("Z")
    assert [g["uuid"] for g in doc["gpus"]] == [UUID0, UUID1]
    g = doc["gpus"][0]
    assert (g["index"], g["name"], g["bus_id"]) == (0, "NVIDIA A100-SXM4-40GB", "0000:07:00.0")
    assert g["utilization"] == {"gpu": 37, "memory": 12}
    assert g["memory"] == {"total_mib": 40960, "used_mib": 1024}
    assert (g["temperature_c"], g["power_w"], g["error"]) == (45, 61.234, None)
    assert [(p["pid"], p["used_memory_mib"]) for p in g["processes"]] == \
        [(4242, 1000), (4243, None)]
    h = doc["gpus"][1]
    assert h["processes"] == [] and h["temperature_c"] is None and h["power_w"] is None
    assert h["window"]["utilization_gpu"] == {"min": 0, "mean": 0, "max": 0}


def test_compute_capability_is_measured_by_nvml_for_stats_and_info(berth, nvml):
    """nvmlDeviceGetCudaComputeCapability's answer, in `gpu stats` and `gpu info` (JSON and
    the text's CC column); a GPU NVML cannot say it of shows none."""
    write, env = nvml
    write(TWO_GPUS + "cc 0 8 0\n")
    doc = berth.json("gpu", "stats", "--json", env=env)
    assert [g["compute_capability"] for g in doc["gpus"]] == ["8.0", None], doc["gpus"]
    info = berth.json("gpu", "info", "--json", env=env)
    by_uuid = {g["uuid"]: g["compute_capability"] for g in info["nvidia"]["gpus"]}
    assert by_uuid[UUID0] == "8.0" and by_uuid[UUID1] is None, info["nvidia"]["gpus"]
    _, out, _ = berth("gpu", "info", env=env)
    header = next(line for line in out.splitlines() if line.startswith("INDEX"))
    assert "CC" in header.split(), out
    row = next(line for line in out.splitlines() if UUID0 in line)
    assert " 8.0 " in row, out
    # Without NVML's answer `gpu info` still works, without the column.
    write("")
    _, out, _ = berth("gpu", "info", env=env)
    header = next(line for line in out.splitlines() if line.startswith("INDEX"))
    assert "CC" not in header.split(), out


def test_a_changed_state_changes_the_output(berth, nvml):
    write, env = nvml
    write(TWO_GPUS + "util 0 5 1\n")
    doc = berth.json("gpu", "stats", "--json", env=env)
    assert doc["gpus"][0]["utilization"]["gpu"] == 5 and doc["gpus"][0]["processes"] == []
    write(TWO_GPUS + "util 0 90 40\nproc 0 77 2048\n")
    doc = berth.json("gpu", "stats", "--json", env=env)
    assert doc["gpus"][0]["utilization"] == {"gpu": 90, "memory": 40}
    assert [(p["pid"], p["used_memory_mib"]) for p in doc["gpus"][0]["processes"]] == \
        [(77, 2048)]


def test_samples_give_the_windows_minimum_mean_and_maximum(berth, nvml):
    write, env = nvml
    # The fake answers the n-th reading of GPU 0 with the n-th pair.
    write(TWO_GPUS + "util 0 10 1 20 2 60 3\nutil 1 0 0\n")
    doc = berth.json("gpu", "stats", "--json", "--samples", "3", "--interval-ms", "10", env=env)
    assert (doc["samples"], doc["interval_ms"]) == (3, 10)
    g = doc["gpus"][0]
    assert g["utilization"] == {"gpu": 60, "memory": 3}
    assert g["window"]["utilization_gpu"] == {"min": 10, "mean": 30, "max": 60}
    assert g["window"]["utilization_memory"] == {"min": 1, "mean": 2, "max": 3}
    assert g["window"]["memory_used_mib"] == {"min": 1024, "mean": 1024, "max": 1024}
    _, out, _ = berth("gpu", "stats", "--samples", "3", "--interval-ms", "10", env=env)
    lines = out.splitlines()
    assert lines[0].endswith(", 3 samples 10 ms apart: utilisation as mean (min-max)")
    assert lines[2].split()[:5] == ["0", "NVIDIA", "A100-SXM4-40GB", "0000:07:00.0", "30%"]
    assert "(10-60)" in lines[2]


def test_text_is_a_table_of_gpus_and_processes(berth, nvml):
    write, env = nvml
    write(TWO_GPUS + "util 0 37 12\nproc 0 4242 1000\n")
    _, out, _ = berth("gpu", "stats", env=env)
    lines = out.splitlines()
    assert lines[0].startswith(f"NVIDIA driver {VERSION}, ")
    assert lines[1].split() == ["GPU", "NAME", "BUS", "ID", "UTIL", "MEM", "UTIL", "MEMORY",
                                "(MiB)", "TEMP", "POWER"]
    assert lines[2].split() == ["0", "NVIDIA", "A100-SXM4-40GB", "0000:07:00.0", "37%", "12%",
                                "1024", "/", "40960", "45C", "61.2W"]
    assert lines[3].split() == ["1", "NVIDIA", "H100", "80GB", "HBM3", "0000:85:00.0", "-", "-",
                                "0", "/", "81559", "-", "-"]
    assert lines[5].split() == ["GPU", "PID", "USER", "JOB", "COMMAND", "MEMORY", "(MiB)"]
    assert lines[6].split()[:2] == ["0", "4242"] and lines[6].split()[-1] == "1000"
    assert len(lines) == 7


def test_processes_are_attributed_to_their_owner_command_and_slurm_job(berth, nvml, identity):
    """Each process NVML lists is looked up in /proc: its uid and account, its command, and
    its Slurm job: here from its environment (SLURM_JOB_ID, readable for one's own processes)
    for a process of the caller's, none for one of another account's outside any job, and
    nothing at all for a pid that is not running."""
    write, env = nvml
    mine = subprocess.Popen(identity.prefix + ["env", "SLURM_JOB_ID=31337", "sleep", "300"])
    other = subprocess.Popen(["sleep", "300"])  # root's, when the tests run as root
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        write(TWO_GPUS + f"proc 0 {mine.pid} 10\nproc 0 {other.pid} 20\nproc 1 {gone.pid} 30\n")
        doc = berth.json("gpu", "stats", "--json", env=env)
        assert doc["node"] == socket.gethostname()
        a, b = doc["gpus"][0]["processes"]
        user = pwd.getpwuid(identity.uid).pw_name
        assert a == {"pid": mine.pid, "used_memory_mib": 10, "uid": identity.uid, "user": user,
                     "command": "sleep", "slurm_job_id": 31337, "slurm_job_from": "environ"}, a
        assert (b["pid"], b["uid"], b["command"], b["slurm_job_id"], b["slurm_job_from"]) == \
            (other.pid, os.getuid(), "sleep", None, None), b
        assert doc["gpus"][1]["processes"] == [
            {"pid": gone.pid, "used_memory_mib": 30, "uid": None, "user": None, "command": None,
             "slurm_job_id": None, "slurm_job_from": None}]
        doc = berth.json("gpu", "stats", "--json", env=dict(env, SLURMD_NODENAME="n7"))
        assert doc["node"] == "n7"
        _, out, _ = berth("gpu", "stats", env=env)
        rows = [line.split() for line in out.splitlines()]
        assert ["0", str(mine.pid), user, "31337", "sleep", "10"] in rows, out
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()


def test_gpus_selects_as_run_does(berth, nvml):
    write, env = nvml
    write(TWO_GPUS + "util 0 37 12\nutil 1 3 4\n")
    for args, extra, want in [
        (["--gpus", "device=1"], {}, [UUID1]),
        (["--gpus", f"device={UUID0}"], {}, [UUID0]),
        (["--gpus", "1"], {}, [UUID0]),  # a count, as with docker run
        (["--gpus", "all"], {}, [UUID0, UUID1]),
        ([], {"CUDA_VISIBLE_DEVICES": "1"}, [UUID1]),  # a Slurm job's GPUs
        (["--gpus", "device=0"], {"CUDA_VISIBLE_DEVICES": "1"}, [UUID1]),
    ]:
        doc = berth.json("gpu", "stats", "--json", *args, env={**env, **extra})
        assert [g["uuid"] for g in doc["gpus"]] == want, (args, extra)
    rc, _, err = berth("gpu", "stats", "--gpus", "device=2", env=env, check=False)
    assert rc == 1
    assert err.splitlines()[0] == "berth: error: select GPUs GPU 2: no such GPU: 2 GPUs are on this host"
    rc, _, err = berth("gpu", "stats", "--gpus", "bogus", env=env, check=False)
    assert rc == 1 and err.splitlines()[0] == "berth: error: parse --gpus bogus: unknown field 'bogus'"


def test_a_hung_nvml_is_killed_after_the_time_limit(berth, nvml, host):
    write, env = nvml
    for where in ("nvmlInit_v2", "nvmlDeviceGetUtilizationRates"):
        write(TWO_GPUS + f"hang {where}\n")
        # The subprocess timeout only keeps a broken berth from stalling the suite.
        rc, out, err = berth("gpu", "stats", "--json", "--timeout", "1", env=env, check=False,
                             timeout=60)
        assert rc == 1 and out == "", where
        assert err.splitlines()[0] == (f"berth: error: read NVML {library(host)}: NVML gave no "
                                       "answer within 1 s (is the driver hung?); its process "
                                       "was killed"), where


def test_nvml_errors_are_one_line(berth, nvml, host, scratch):
    write, env = nvml
    write(TWO_GPUS + "fail nvmlInit_v2 9\n")
    rc, _, err = berth("gpu", "stats", env=env, check=False)
    assert rc == 1
    assert err.splitlines()[0] == (f"berth: error: read NVML {library(host)}: nvmlInit_v2: "
                                   "Driver Not Loaded")
    # Without a driver: the words `gpu info` says, under the command's own name.
    empty = os.path.join(scratch, "no-driver")
    os.makedirs(empty, exist_ok=True)
    rc, _, info_err = berth("gpu", "info", env={"BERTH_DRIVER_ROOT": empty}, check=False)
    assert rc == 1
    rc, _, err = berth("gpu", "stats", env={"BERTH_DRIVER_ROOT": empty}, check=False)
    assert rc == 1
    assert err.splitlines()[0] == f"berth: error: gpu stats: no NVIDIA driver found under {empty}"
    assert err.replace("gpu stats", "gpu info") == info_err
    rc, _, err = berth("gpu", "stats", "--samples", "0", env=env, check=False)
    assert rc != 0 and "--samples" in err

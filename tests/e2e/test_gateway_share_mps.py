"""berthd's GPU shares as Slurm's gres/mps: the job test of test_gateway_jobs.py on a loopback
cluster of this module's own, whose fake GPUs are split by gres/mps (100 per GPU) instead of
gres/shard (Slurm 22.05 cannot have both on a node: FIELD-NOTES)."""

from __future__ import annotations

import pytest

from conftest import SLURM_RELEASES

from gateway import (berthd_bin, issuers, second_user, slurmrestd,  # noqa: F401
                     start_gateway_cluster)
from test_gateway_jobs import cluster, gw, run_share_jobs  # noqa: F401


@pytest.fixture(scope="module", params=SLURM_RELEASES, ids=[f"slurm{r}" for r in SLURM_RELEASES])
def gateway_cluster(request, scratch, berth_bin, identity):
    c = start_gateway_cluster(request, scratch, berth_bin, identity, "slurm-gateway-mps",
                              share="mps")
    yield c
    c.stop()


def test_gpu_share_job_gets_mps_and_the_mps_directories(gw, berth, issuers, identity, cluster,
                                                        scratch, pushed_busybox):
    """A quarter of a GPU is mps:25; Slurm sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25, which the
    container keeps beside the bound MPS directories."""
    assert cluster.share == "mps"
    run_share_jobs(gw, berth, issuers, identity, cluster, scratch, pushed_busybox)

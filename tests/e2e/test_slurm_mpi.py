"""MPI under the Slurm plugin, on the one-host cluster of test_slurm.py, as the unprivileged
user: `srun --mpi=pmi2` with a real MPICH ping-pong in an image that has its own (stand-in)
libmpich.so.12, with and without `--container-mpi` and the site's `container_mpi=` default;
`srun --mpi=pmix` with a real PMIx client in the container."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest

import mpilib
from test_slurm import Slurm

PMIX_LIB = "/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so.2"

PMIX_HELLO = r"""
#include <pmix.h>
#include <stdio.h>
int main(void) {
  pmix_proc_t me, wild;
  pmix_status_t rc = PMIx_Init(&me, NULL, 0);
  if (rc != PMIX_SUCCESS) {
    fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
    return 1;
  }
  pmix_value_t* v = NULL;
  unsigned size = 0;
  wild = me;
  wild.rank = PMIX_RANK_WILDCARD;
  if (PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v) == PMIX_SUCCESS) {
    size = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
  }
  rc = PMIx_Fence(NULL, 0, NULL, 0);
  printf("pmix rank %u of %u fence %s\n", me.rank, size, PMIx_Error_string(rc));
  PMIx_Finalize(NULL, 0);
  return 0;
}
"""


# What the node's PMIx server (Slurm's mpi/pmix with the release's Debian PMIx) leaves in the
# step's server directory, and the data store it offers its clients: Debian 12's PMIx 4.2
# keeps its shared-memory store (ds21) in files there; Debian 13's PMIx 5.0 offers shmem2,
# then hash (which the image's PMIx 4 client takes), and leaves no file there.
PMIX_SERVER = {"22.05": ("pmix_dstor_", "gds=ds21"), "24.11": ("", "gds=shmem2,hash")}


@pytest.fixture(scope="module")
def mpi_parts(scratch):
    """The image tar (ping-pong, the stand-in MPICH, a PMIx client when libpmix-dev is here)
    and a root-owned site policy declaring the host's MPICH."""
    why = mpilib.missing()
    if why:
        pytest.skip(why)
    work = tempfile.mkdtemp(prefix="slurm-mpi-", dir=scratch)
    os.chmod(work, 0o755)
    bins, dirs = [], []
    pmix = subprocess.run(["pkg-config", "--cflags", "--libs", "pmix"], capture_output=True,
                          text=True)
    if pmix.returncode == 0 and os.path.exists(PMIX_LIB):
        src = os.path.join(work, "pmix_hello.c")
        with open(src, "w") as f:
            f.write(PMIX_HELLO)
        out = os.path.join(work, "pmix_hello")
        subprocess.run(["cc", "-O2", "-o", out, src, *pmix.stdout.split()], check=True)
        bins.append(out)
        dirs.append(os.path.dirname(os.path.dirname(PMIX_LIB)))  # its plugins
    tar = mpilib.image_tar(work, tuple(bins), tuple(dirs))
    policy = mpilib.site_policy(os.path.join(work, "berth.conf"))
    return {"tar": tar, "policy": policy, "pmix": bool(bins)}


@pytest.fixture
def mpi_sl(berth, cluster, mpi_parts):
    """The plugin with the MPI site policy (site_conf=) and, per test, more plugstack
    arguments; the plain plugstack again afterwards."""
    berth("import", mpi_parts["tar"], "mpiimg")
    sl = Slurm(berth, cluster)

    def plugstack(extra: str = "") -> None:
        cluster.write_plugstack(f"site_conf={mpi_parts['policy']} {extra}")
    plugstack()
    sl.plugstack = plugstack
    yield sl
    cluster.write_plugstack(cluster.plugin_args)


def test_pmi2_ranks_use_the_images_mpi_or_with_container_mpi_the_hosts(mpi_sl):
    # Without --container-mpi: the image's own library answers in both ranks.
    out = mpi_sl.ok("-n2", "--mpi=pmi2", "--container-image=mpiimg", "/app/pingpong", "8")
    assert mpilib.ranks(out) == [f"rank 0 of 2: {mpilib.IMAGE_MPICH}",
                                 f"rank 1 of 2: {mpilib.IMAGE_MPICH}"]
    # With it: the host's MPICH, bound over the image's; MPI_Init's PMI exchange goes through
    # each task's PMI_FD, and the ping-pong runs through MPICH's own transports.
    out = mpi_sl.ok("-n2", "--mpi=pmi2", "--container-image=mpiimg", "--container-mpi",
                    "/app/pingpong", "8")
    ranks = mpilib.ranks(out)
    assert [r.split(":")[0] for r in ranks] == ["rank 0 of 2", "rank 1 of 2"], out
    assert all("MPICH Version:" in r and "image MPICH" not in r for r in ranks), out
    assert "size 8 latency_us" in out
    # The type by name, and the environment form.
    out = mpi_sl.ok("-n2", "--mpi=pmi2", "--container-image=mpiimg", "--container-mpi=mpich",
                    "/app/pingpong", "8")
    assert all("MPICH Version:" in r for r in mpilib.ranks(out)), out
    out = mpi_sl.ok("-n2", "--mpi=pmi2", "--container-image=mpiimg", "/app/pingpong", "8",
                    env={"BERTH_CONTAINER_MPI": "1"})
    assert all("MPICH Version:" in r for r in mpilib.ranks(out)), out


def test_an_undeclared_mpi_type_fails_the_step(mpi_sl):
    rc, _, err = mpi_sl.srun("--mpi=pmi2", "--container-image=mpiimg", "--container-mpi=cray",
                             "true")
    assert rc != 0
    assert ("berth: error: inject MPI --mpi=cray: the site policy declares no MPI cray "
            "(declared: mpich)") in err


def test_site_default_applies_to_mpi_steps_only(mpi_sl):
    mpi_sl.plugstack("container_mpi=true")
    out = mpi_sl.ok("-n2", "--mpi=pmi2", "--container-image=mpiimg", "/app/pingpong", "8")
    assert all("MPICH Version:" in r for r in mpilib.ranks(out)), out
    # A user's --no-container-mpi wins over the site's default.
    out = mpi_sl.ok("-n2", "--mpi=pmi2", "--container-image=mpiimg", "--no-container-mpi",
                    "/app/pingpong", "8")
    assert all(mpilib.IMAGE_MPICH in r for r in mpilib.ranks(out)), out
    # A step without an MPI plugin keeps the image's library (one rank, no PMI).
    out = mpi_sl.ok("--container-image=mpiimg", "/app/pingpong")
    assert mpilib.ranks(out) == [f"rank 0 of 1: {mpilib.IMAGE_MPICH}"]


def test_pmix_client_in_the_container(mpi_sl, mpi_parts):
    if not mpi_parts["pmix"]:
        pytest.skip("libpmix2 and libpmix-dev are not installed (scripts/setup.sh installs them)")
    rc, out, err = mpi_sl.srun("-n2", "--mpi=pmix", "--container-image=mpiimg",
                               "/app/pmix_hello")
    assert rc == 0, err
    assert sorted(out.splitlines()) == ["pmix rank 0 of 2 fence SUCCESS",
                                        "pmix rank 1 of 2 fence SUCCESS"]
    # The server's shared-memory data store was reachable (unbound, PMIx falls back to
    # messages and prints "PMIX ERROR ... gds_ds12_lock_pthread.c").
    assert "PMIX ERROR" not in err, err
    # The step's server directory is inside, at its path; the modules it chose are MCA
    # parameters for the image's PMIx (enroot's PMI hook's variables).
    files, gds = PMIX_SERVER[mpi_sl.cluster.node.release]
    rc, out, err = mpi_sl.srun("--mpi=pmix", "--container-image=mpiimg", "sh", "-c",
                               'ls "$PMIX_SERVER_TMPDIR" && echo bound; echo "gds=$PMIX_MCA_gds"')
    assert rc == 0 and "bound" in out and files in out and gds in out, (rc, out, err)

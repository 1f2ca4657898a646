"""The Slurm tier's two releases (conftest.SLURM_RELEASES): each cluster runs the Slurm it
says, with the plugin built for it, and the Debian 13 root's absence is one clear line."""

from __future__ import annotations

import os
import socket

import debian_root


def test_each_cluster_runs_its_release_with_a_plugin_it_loads(cluster):
    # The node's own clients: srun's version is the release's, and its options are the
    # plugin's too (a plugin stamped with another release is refused, and so is srun).
    r = cluster.run(["srun", "--version"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"slurm-wlm {cluster.node.release}."), r.stdout
    r = cluster.run(["srun", "--help"])
    assert r.returncode == 0, r.stderr
    assert "--container-image=" in r.stdout, r.stdout


def test_an_archive_out_of_reach_is_one_line(tmp_path, monkeypatch):
    # No cached root and Debian's archive unreachable (a loopback port nothing listens on):
    # the tier's reason to skip, in one line naming what it could not reach.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("BERTH_E2E_CACHE", str(tmp_path))
    monkeypatch.setenv("BERTH_DEBIAN_MIRROR", f"http://127.0.0.1:{port}/debian")
    why = debian_root.unavailable()
    if os.geteuid() != 0:
        assert why == "the Slurm 24.11 tier unpacks and enters a Debian 13 root: it needs root"
        return
    assert why.startswith("the Slurm 24.11 tier needs Debian 13's archive: mmdebstrap cannot "
                          f"reach http://127.0.0.1:{port}/debian/dists/trixie/InRelease ("), why
    assert "\n" not in why

"""InfiniBand/RDMA on a fabricated two-HCA host (BERTH_SYSFS_ROOT, BERTH_DEV_ROOT): this
kernel has no InfiniBand and no modprobe. mlx5_0 (mlx5_core, uverbs1, umad0/issm0) and rxe0
(soft RoCE, uverbs0); stand-in device nodes are plain files, bound as real ones would be."""

from __future__ import annotations

import json
import os
import subprocess

import pytest


def fabricate(root: str) -> None:
    def put(rel, text=""):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)

    def link(target, rel):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        os.symlink(target, p)

    pci = "sys/devices/pci0000:00/0000:00:02.0"
    os.makedirs(os.path.join(root, "sys/bus/pci/drivers/mlx5_core"))
    os.makedirs(os.path.join(root, pci))
    link("../../../bus/pci/drivers/mlx5_core", f"{pci}/driver")
    put(f"{pci}/infiniband/mlx5_0/node_guid", "0c42:a103:0016:054c\n")
    put(f"{pci}/infiniband/mlx5_0/node_type", "1: CA\n")
    put(f"{pci}/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n")
    put(f"{pci}/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n")
    link("../../../0000:00:02.0", f"{pci}/infiniband/mlx5_0/device")
    put(f"{pci}/infiniband_verbs/uverbs1/ibdev", "mlx5_0\n")
    put(f"{pci}/infiniband_mad/umad0/ibdev", "mlx5_0\n")
    put(f"{pci}/infiniband_mad/issm0/ibdev", "mlx5_0\n")
    put("sys/devices/virtual/infiniband/rxe0/node_guid", "5054:00ff:fe12:3456\n")
    put("sys/devices/virtual/infiniband/rxe0/node_type", "1: CA\n")
    put("sys/devices/virtual/infiniband_verbs/uverbs0/ibdev", "rxe0\n")
    link(f"../../devices/pci0000:00/0000:00:02.0/infiniband/mlx5_0",
         "sys/class/infiniband/mlx5_0")
    link("../../devices/virtual/infiniband/rxe0", "sys/class/infiniband/rxe0")
    link(f"../../devices/pci0000:00/0000:00:02.0/infiniband_verbs/uverbs1",
         "sys/class/infiniband_verbs/uverbs1")
    link("../../devices/virtual/infiniband_verbs/uverbs0", "sys/class/infiniband_verbs/uverbs0")
    put("sys/class/infiniband_verbs/abi_version", "6\n")
    link(f"../../devices/pci0000:00/0000:00:02.0/infiniband_mad/umad0",
         "sys/class/infiniband_mad/umad0")
    for n in ("uverbs0", "uverbs1", "rdma_cm", "umad0", "issm0"):
        put(f"dev/infiniband/{n}", f"{n}\n")


@pytest.fixture
def host(berth, scratch):
    root = berth.path("ibhost")
    fabricate(root)
    subprocess.run(["chmod", "-R", "a+rX", root], check=True)
    return {"BERTH_SYSFS_ROOT": root, "BERTH_DEV_ROOT": root}


@pytest.fixture
def img(pulled_busybox):
    return pulled_busybox


def devices(berth, img, host, *args, env=None):
    e = dict(host, **(env or {}))
    _, out, _ = berth("run", "--rm", *args, img, "sh", "-c",
                      "ls /dev/infiniband 2>/dev/null | tr '\\n' ' '; cat /dev/infiniband/* "
                      "2>/dev/null | tr '\\n' ' '", env=e)
    return out.strip()


def test_ib_info_json(berth, host):
    info = berth.json("ib", "info", "--json", env=host)
    assert info["found"] is True
    assert [(h["index"], h["name"], h["driver"], h["uverbs"]) for h in info["hcas"]] == [
        (0, "mlx5_0", "mlx5_core", "/dev/infiniband/uverbs1"),
        (1, "rxe0", "", "/dev/infiniband/uverbs0")]
    assert info["hcas"][0]["ports"][0]["state"] == "4: ACTIVE"
    assert info["rdma_cm"] == "/dev/infiniband/rdma_cm"


def test_ib_info_without_hcas_fails(berth, scratch):
    empty = berth.make_dir("empty")
    rc, out, err = berth("ib", "info", check=False, env={"BERTH_SYSFS_ROOT": empty})
    assert rc == 1
    assert err.splitlines()[0] == (f"berth: error: ib info: no InfiniBand/RDMA device under "
                                   f"{empty}/sys/class/infiniband")


def test_selection_injects_only_the_selected_and_never_umad(berth, img, host):
    assert devices(berth, img, host, "--ib", "mlx5_0") == "rdma_cm uverbs1 rdma_cm uverbs1"
    assert devices(berth, img, host, "--ib", "1") == "rdma_cm uverbs0 rdma_cm uverbs0"
    assert devices(berth, img, host, "--ib", "all") == (
        "rdma_cm uverbs0 uverbs1 rdma_cm uverbs0 uverbs1")
    assert devices(berth, img, host, "--ib", "none") == ""
    assert devices(berth, img, host) == ""  # nothing asked: nothing read, nothing injected


def test_sysfs_view_of_the_selected_hca(berth, img, host):
    """This kernel's /sys has no InfiniBand class: the view is built from the fabricated
    host's sysfs, the selected HCA readable, the other absent, the other classes still there."""
    if os.path.exists("/sys/class/infiniband"):
        pytest.skip("this host's /sys has InfiniBand: the class is narrowed in place instead")
    _, out, _ = berth("run", "--rm", "--ib", "mlx5_0", img, "sh", "-c",
                      "ls /sys/class/infiniband /sys/class/infiniband_verbs; "
                      "cat /sys/class/infiniband/mlx5_0/node_type "
                      "/sys/class/infiniband_verbs/uverbs1/ibdev; "
                      "ls /sys/class/infiniband/rxe0 /sys/class/infiniband_verbs/uverbs0 "
                      "2>&1 >/dev/null | busybox wc -l; ls /sys/class/net | busybox grep -cx lo", env=host)
    assert out.split("\n") == ["/sys/class/infiniband:", "mlx5_0", "",
                               "/sys/class/infiniband_verbs:", "abi_version", "uverbs1",
                               "1: CA", "mlx5_0", "2", "1", ""], out


def test_mellanox_visible_devices(berth, img, host):
    assert devices(berth, img, host, "-e", "MELLANOX_VISIBLE_DEVICES=rxe0") == (
        "rdma_cm uverbs0 rdma_cm uverbs0")
    assert devices(berth, img, host, "-e", "MELLANOX_VISIBLE_DEVICES=void") == ""
    # --ib wins over the variable.
    assert devices(berth, img, host, "--ib", "0", "-e", "MELLANOX_VISIBLE_DEVICES=1") == (
        "rdma_cm uverbs1 rdma_cm uverbs1")


def test_bad_id_is_one_line(berth, img, host):
    rc, _, err = berth("run", "--rm", "--ib", "mlx5_9", img, "true", check=False, env=host)
    assert rc == 125
    assert err.strip() == ("berth: error: select HCAs --ib mlx5_9: no HCA mlx5_9 "
                           "(present: 0=mlx5_0, 1=rxe0)")


def test_asked_without_hcas_is_an_error(berth, img):
    empty = berth.make_dir("empty")
    rc, _, err = berth("run", "--rm", "--ib", "all", img, "true", check=False,
                       env={"BERTH_SYSFS_ROOT": empty})
    assert rc == 125
    assert err.splitlines()[0] == (f"berth: error: select HCAs --ib all: no InfiniBand/RDMA "
                                   f"device under {empty}/sys/class/infiniband")


def test_memlock_limit_is_carried(berth, img, host):
    cmd, env = berth.command(["run", "--rm", "--ib", "all", img, "sh", "-c", "ulimit -l"],
                             host)
    r = subprocess.run(["sh", "-c", 'ulimit -S -l 4096 && exec "$@"', "sh", *cmd], env=env,
                       capture_output=True, text=True, timeout=120, cwd=berth.workdir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "4096"


def test_cdi_spec_for_rdma_round_trips(berth, img, host):
    spec_dir = berth.make_dir("cdi")
    berth("cdi", "generate", "--kind", "rdma", "-o", os.path.join(spec_dir, "rdma.json"),
          env=host)
    with open(os.path.join(spec_dir, "rdma.json")) as f:
        doc = json.load(f)
    assert doc["kind"] == "berth.dev/rdma"
    assert [d["name"] for d in doc["devices"]] == ["0", "mlx5_0", "1", "rxe0", "all"]
    assert "umad" not in json.dumps(doc) and "issm" not in json.dumps(doc)
    # The spec drives a run through --device, as any CDI consumer would.
    _, out, _ = berth("run", "--rm", "--device", "berth.dev/rdma=rxe0", img, "ls",
                      "/dev/infiniband", env=dict(host, BERTH_CDI_SPEC_DIRS=spec_dir))
    assert out.split() == ["rdma_cm", "uverbs0"]


@pytest.mark.skipif(os.geteuid() != 0, reason="policy files must be owned by root")
def test_site_default_injects_where_there_are_hcas(berth, img, host, scratch):
    import tempfile
    folder = tempfile.mkdtemp(prefix="ib-policy-", dir=scratch)
    os.chmod(folder, 0o755)
    conf = os.path.join(folder, "berth.conf")
    with open(conf, "w") as f:
        f.write('ib = "rxe0"\n')
    os.chmod(conf, 0o644)
    site = {"BERTH_SITE_CONF": conf}
    assert devices(berth, img, host, env=site) == "rdma_cm uverbs0 rdma_cm uverbs0"
    assert devices(berth, img, host, "--ib", "none", env=site) == ""
    # A host without HCAs: the site's default is no error.
    empty = berth.make_dir("empty")
    rc, _, err = berth("run", "--rm", img, "true", check=False,
                       env={**site, "BERTH_SYSFS_ROOT": empty})
    assert rc == 0, err

"""Store safety: tampered registries, killed pulls, many pulls at once."""

import errno
import hashlib
import json
import os
import re
import signal
import time

import pytest

import imagelib
import servers
from imagelib import File, Layer

MiB = 1 << 20


def random_layer(name: str, size: int, compression: str = "gzip") -> Layer:
    return Layer([File(name, os.urandom(size))], compression)


def hex_of(digest: str) -> str:
    return digest.split(":", 1)[1]


def tamper(path: str) -> str:
    """Flips one byte in the middle of a file (same size); returns the new digest."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF
        f.seek(0)
        f.write(data)
    return "sha256:" + hashlib.sha256(bytes(data)).hexdigest()


@pytest.mark.parametrize("which", ["layer", "config"])
def test_tampered_blob_is_rejected(berth, registry, pushed_busybox, which):
    # A store that already holds an image: it must stay exactly as it was.
    berth("pull", pushed_busybox)
    before_images = berth.json("images", "--json")
    before_blobs = berth.blobs()

    img = imagelib.make_image([random_layer("noise", 256 * 1024)], label="tamper-" + which)
    repo = f"tamper/{which}"
    registry.pusher().push_image(repo, "1", img)
    bad = img.layers[0] if which == "layer" else img.config
    actual = tamper(registry.blob_data_path(bad.digest))
    ref = f"{registry.host}/{repo}:1"

    rc, out, err = berth("pull", ref, check=False)
    assert (rc, out) == (1, "")
    assert err == f"berth: error: pull {ref}: verify {bad.digest}: digest mismatch: got {actual}\n"
    assert berth.json("images", "--json") == before_images
    assert hex_of(bad.digest) not in berth.blobs()
    assert not any(n.endswith(".partial") for n in berth.tmp_files())
    if which == "config":
        assert berth.blobs() == before_blobs
    else:
        # The config was verified before the layer failed; it may stay, nothing else new.
        assert berth.blobs() - before_blobs <= {hex_of(img.config.digest)}
    berth.assert_blobs_verified()


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_killed_pull_leaves_nothing_half_written_and_resumes(berth, registry):
    big = 8 * MiB
    img = imagelib.make_image([Layer([File("small", b"small\n")]),
                               random_layer("big", big, "none")], label="killed")
    registry.pusher().push_image("kill/big", "1", img)
    layer = img.layers[1]
    partial = os.path.join(berth.berth_home, "tmp", hex_of(layer.digest) + ".partial")

    proxy = servers.ThrottleProxy(registry.port, rate=1 * MiB).start()
    try:
        ref = f"{proxy.host}/kill/big:1"
        p = berth.popen("pull", ref)
        try:
            wait_for(lambda: os.path.exists(partial) and os.path.getsize(partial) >= MiB, 30,
                     "half the big layer")
        finally:
            p.send_signal(signal.SIGKILL)
            p.communicate()
        assert p.returncode == -signal.SIGKILL
        got = os.path.getsize(partial)
        assert MiB <= got < layer.size

        # Nothing half-written is visible: no layer blob, no image, only verified blobs.
        assert hex_of(layer.digest) not in berth.blobs()
        assert berth.json("images", "--json") == []
        berth.assert_blobs_verified()

        # The next pull resumes where the killed one stopped.
        proxy.rate = None
        proxy.reset_counters()
        _, out, err = berth("-v", "pull", ref)
        assert out.endswith(ref + "\n")
        m = re.search(rf"berth: resuming {layer.digest} at byte (\d+)\n", err)
        assert m, err
        assert int(m.group(1)) >= got - 64 * 1024
        assert proxy.bytes_down < layer.size - got + 256 * 1024
        assert not os.path.exists(partial)
        _, out, _ = berth("verify", ref)
        assert out == f"{ref}: 4 blobs verified\n"
    finally:
        proxy.stop()


def test_many_pulls_at_once_share_one_store(berth, registry):
    jobs = 6
    layers = [imagelib.busybox_layer()] + [random_layer(f"part{i}", 512 * 1024) for i in range(3)]
    img = imagelib.make_image(layers, label="job-array")
    registry.pusher().push_image("jobs/array", "1", img)
    layer_bytes = sum(b.size for b in img.layers)

    # Slow enough that the pulls overlap, fast enough to finish in seconds.
    proxy = servers.ThrottleProxy(registry.port, rate=8 * MiB).start()
    try:
        ref = f"{proxy.host}/jobs/array:1"
        procs = [berth.popen("pull", "-q", ref) for _ in range(jobs)]
        results = [(p.wait(120), *p.communicate()) for p in procs]
    finally:
        proxy.stop()
    for rc, out, err in results:
        assert (rc, out, err) == (0, ref + "\n", "")

    [rec] = berth.json("images", "--json")
    assert rec["name"] == ref and rec["digest"] == img.manifest.digest
    assert berth.blobs() == {hex_of(b.digest) for b in [*img.blobs(), img.manifest]}
    assert not any(n.endswith(".partial") for n in berth.tmp_files())
    berth.assert_blobs_verified()
    # Each layer crossed the wire once, not once per job.
    assert proxy.bytes_down < layer_bytes * 1.5, (proxy.bytes_down, layer_bytes)
    _, out, _ = berth("verify", ref)
    assert out == f"{ref}: {len(layers) + 2} blobs verified\n"


def test_store_blob_changed_after_pull_is_not_unpacked(berth, registry):
    """The store trusts nothing it did not verify: create checks each layer's digest and
    diff_id while unpacking it, so a blob changed after the pull makes no container."""
    img = imagelib.make_image([Layer([File("etc/data", b"a" * 65536)], "none")],
                              label="changed-in-store")
    registry.pusher().push_image("changed/app", "1", img)
    ref = f"{registry.host}/changed/app:1"
    berth("pull", ref)
    blob = os.path.join(berth.blob_dir(), hex_of(img.layers[0].digest))
    os.chmod(blob, 0o644)  # blobs are read-only; the attacker here is the store's owner
    actual = tamper(blob)
    rc, out, err = berth("create", "--name", "c1", ref, check=False)
    assert (rc, out) == (125, "")
    assert err == (f"berth: error: create container from {ref}: verify {blob}: the layer file "
                   f"hashes to {actual}, not {img.layers[0].digest}\n"
                   "berth: hint: the file changed after it was stored: pull the image again\n")
    assert berth.json("ps", "--json") == []


def test_store_blob_swapped_after_pull_is_not_unpacked(berth, registry):
    """A layer blob replaced by another valid layer (gzip, whole, its own diff_id right) after
    the pull: what pull verified is not trusted at create, which hashes the file it reads."""
    img = imagelib.make_image([Layer([File("etc/data", b"a" * 65536)], "gzip")],
                              label="swapped-a")
    other = imagelib.make_image([Layer([File("etc/data", b"b" * 65536)], "gzip")],
                                label="swapped-b")
    registry.pusher().push_image("swapped/app", "1", img)
    ref = f"{registry.host}/swapped/app:1"
    berth("pull", ref)
    blob = os.path.join(berth.blob_dir(), hex_of(img.layers[0].digest))
    os.chmod(blob, 0o644)  # blobs are read-only; the attacker here is the store's owner
    with open(blob, "wb") as f:
        f.write(other.layers[0].data)
    rc, out, err = berth("create", "--name", "c1", ref, check=False)
    assert (rc, out) == (125, "")
    assert err == (f"berth: error: create container from {ref}: verify {blob}: the layer file "
                   f"hashes to {other.layers[0].digest}, not {img.layers[0].digest}\n"
                   "berth: hint: the file changed after it was stored: pull the image again\n")
    assert berth.json("ps", "--json") == []


def test_pull_records_each_layers_diff_id_on_its_blob(berth, registry):
    """The diff_id a pull hashed while a layer downloaded is kept on the blob (an attribute set
    before the blob is published), so that create hashes only the file it reads, not its
    decompressed stream again; config and manifest blobs carry none."""
    img = imagelib.make_image([Layer([File("etc/a", b"a" * 65536)], "gzip"),
                               Layer([File("etc/b", os.urandom(300000))], "zstd")],
                              label="diff-id-record")
    registry.pusher().push_image("recorded/app", "1", img)
    ref = f"{registry.host}/recorded/app:1"
    berth("pull", ref)
    recorded = []
    for blob in img.layers + [img.config]:
        try:
            recorded.append(os.getxattr(os.path.join(berth.blob_dir(), hex_of(blob.digest)),
                                        "user.berth.diff_id").decode())
        except OSError as e:
            if e.errno == errno.ENOTSUP:
                pytest.skip("the store's file system keeps no user attributes")
            recorded.append(None)  # ENODATA: none recorded
    assert recorded == img.diff_ids + [None]
    berth("create", "--name", "c1", ref)
    [c1] = berth.json("ps", "--json")
    assert c1["names"] == ["c1"]
    with open(os.path.join(c1["rootfs"], "etc/a"), "rb") as f:
        assert f.read() == b"a" * 65536


def test_pull_checks_diff_ids(berth, fake_registry):
    """A config whose diff_id does not match the uncompressed layer is refused on pull, as on
    load (before: pulled, and the mismatch never noticed)."""
    img = imagelib.make_image([Layer([File("x", b"x")])])
    config = json.loads(img.config.data)
    config["rootfs"]["diff_ids"] = ["sha256:" + "1" * 64]
    cfg = imagelib.Blob(json.dumps(config).encode(), img.config.media_type)
    manifest = json.loads(img.manifest.data)
    manifest["config"] = cfg.descriptor()
    body = json.dumps(manifest).encode()
    fake_registry.manifests[("lying/config", "1")] = (imagelib.OCI_MANIFEST, body)
    fake_registry.blobs.update({cfg.digest: cfg.data, img.layers[0].digest: img.layers[0].data})
    ref = f"{fake_registry.host}/lying/config:1"
    rc, out, err = berth("pull", ref, check=False)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: pull {ref}: verify {img.layers[0].digest}: the uncompressed "
                   f"layer hashes to {img.diff_ids[0]}, not the diff_id sha256:{'1' * 64} the "
                   "image config lists\n")
    assert berth.json("images", "--json") == []


@pytest.mark.parametrize("where,command", [("", "images"), ("", "ps"), ("blobs", "images"),
                                           ("containers", "ps")])
def test_store_others_can_write_is_refused(berth, where, command):
    """A store whose directories group or others can write is refused with one line (before:
    used as it was, so another user could swap images or root filesystems)."""
    berth("images")  # makes the store
    berth("ps")
    path = os.path.join(berth.berth_home, where) if where else berth.berth_home
    os.chmod(path, 0o777)
    try:
        rc, out, err = berth(command, check=False)
    finally:
        os.chmod(path, 0o755)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: open store {path}: writable by others (mode 0777): another "
                   f"user could change its images and containers\nberth: hint: make it private: "
                   f"chmod go-w {path}\n")


def test_slow_registry_is_cut_off_and_the_retry_resumes(berth, registry):
    """A transfer slower than the configured low-speed limit is cut off with a clear line and
    retried, resuming; the next pull finishes the download (before: only a transfer stalled
    at under 1 byte/s for 60 s was cut off)."""
    img = imagelib.make_image([random_layer("slow", 3 * MiB, "none")], label="slow")
    registry.pusher().push_image("slow/app", "1", img)
    layer = img.layers[0]
    config_dir = berth.make_dir("config")
    berth.write_file("config/config.json",
                     json.dumps({"pull-low-speed-limit": MiB, "pull-low-speed-time": 1}))
    env = {"BERTH_CONFIG_DIR": config_dir}
    proxy = servers.ThrottleProxy(registry.port, rate=256 * 1024).start()
    try:
        ref = f"{proxy.host}/slow/app:1"
        url = f"http://{proxy.host}/v2/slow/app/blobs/{layer.digest}"
        rc, out, err = berth("pull", "-q", ref, env=env, check=False)
        assert (rc, out) == (1, "")
        slow = f"GET {url}: slower than {MiB} bytes/s for 1 s"
        assert err == (f"berth: warning: {slow}; retrying (2/3)\n"
                       f"berth: warning: {slow}; retrying (3/3)\n"
                       f"berth: error: pull {ref}: {slow}\n")
        partial = os.path.join(berth.berth_home, "tmp", hex_of(layer.digest) + ".partial")
        got = os.path.getsize(partial)
        assert 0 < got < layer.size
        proxy.rate = None
        proxy.reset_counters()
        berth("pull", "-q", ref, env=env)
        assert proxy.bytes_down < layer.size - got + 64 * 1024  # resumed, not started over
    finally:
        proxy.stop()
    berth.assert_blobs_verified()


def test_pull_deadline(berth, registry):
    img = imagelib.make_image([random_layer("late", 2 * MiB, "none")], label="late")
    registry.pusher().push_image("late/app", "1", img)
    config_dir = berth.make_dir("config")
    berth.write_file("config/config.json", json.dumps({"pull-deadline": 1}))
    proxy = servers.ThrottleProxy(registry.port, rate=512 * 1024).start()
    try:
        ref = f"{proxy.host}/late/app:1"
        rc, out, err = berth("pull", "-q", ref, env={"BERTH_CONFIG_DIR": config_dir},
                             check=False)
    finally:
        proxy.stop()
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: pull {ref}: GET http://{proxy.host}/v2/late/app/blobs/"
                   f"{img.layers[0].digest}: the deadline passed before the transfer ended\n")
    assert berth.json("images", "--json") == []

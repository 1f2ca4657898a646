"""Squashed images in the store (`berth pull --squash`, store_format = "squashfs") and the site's
central read-only store (central_store), end to end: a real registry, Berth's squashfs daemon, the
real binary as the unprivileged test user; the central store is filled by berth run as root."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import imagelib
from imagelib import File, Layer
from test_commands import stage_dirs
from test_integrity import hex_of, random_layer, tamper
from test_run import userns_works

MiB = 1 << 20


@pytest.fixture(scope="module")
def sq_images(registry):
    """Two images sharing their busybox layer, and one with a big layer; name -> (ref, image)."""
    made = {}
    for name, layers in (
            ("app", [imagelib.busybox_layer(), Layer([File("etc/motd", b"squashed app\n")])]),
            ("other", [imagelib.busybox_layer(), Layer([File("etc/motd", b"other app\n")])]),
            ("big", [imagelib.busybox_layer(), random_layer("big", 96 * MiB, "none")])):
        img = imagelib.make_image(layers, label="sq-" + name)
        registry.pusher().push_image("sq/" + name, "1", img)
        made[name] = (f"{registry.host}/sq/{name}:1", img)
    return made


@pytest.fixture
def can_mount(identity, usable_fuse):
    for tool in ("fusermount3",):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/setup.sh installs it)")
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")


@pytest.fixture
def sqb(berth):
    """berth with a runtime directory of this test's own (the squashfs mounts live there)."""
    runtime = berth.make_dir("runtime")
    berth.env["BERTH_RUNTIME_DIR"] = runtime
    return berth


def record(berth, ref: str) -> dict:
    return next(i for i in berth.json("images", "--json") if i["name"] == ref)


def is_squashfs(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"hsqs"


def layer_hexes(img) -> set[str]:
    return {hex_of(b.digest) for b in img.layers}


# --- pull --squash and the commands that look at the store --------------------------------


def test_pull_squash_keeps_one_file_and_no_layers(berth, sq_images):
    ref, img = sq_images["app"]
    _, out, _ = berth("pull", "--squash", ref)
    assert out.endswith(f"Status: Downloaded newer image for {ref}\n{ref}\n")
    rec = record(berth, ref)
    assert rec["format"] == "squashfs"
    squash = hex_of(rec["squash"])
    # The manifest, the config and the squashfs file; no layer blob, nothing in tmp/.
    assert berth.blobs() == {hex_of(img.manifest.digest), hex_of(img.config.digest), squash}
    assert not (berth.blobs() & layer_hexes(img))
    assert stage_dirs(berth) == []
    path = os.path.join(berth.blob_dir(), squash)
    assert is_squashfs(path)
    assert rec["size"] == os.path.getsize(path)
    berth.assert_blobs_verified()
    assert berth("verify", ref)[1] == f"{ref}: 3 blobs verified\n"
    # Pulled again: up to date, in the same form.
    assert "Status: Image is up to date" in berth("pull", "--squash", ref)[1]
    assert record(berth, ref)["squash"] == rec["squash"]


def test_images_table_says_the_format(berth, sq_images):
    berth("pull", "--squash", sq_images["app"][0])
    berth("pull", sq_images["other"][0])
    lines = berth("images")[1].splitlines()
    assert lines[0].split() == ["REPOSITORY", "TAG", "IMAGE", "ID", "PLATFORM", "SIZE", "FORMAT"]
    assert lines[1].endswith(" squashfs") and "sq/app" in lines[1]
    assert lines[2].endswith(" layers") and "sq/other" in lines[2]


def test_pull_converts_between_forms(berth, sq_images):
    ref, img = sq_images["app"]
    berth("pull", ref)
    assert layer_hexes(img) <= berth.blobs()
    # Layers -> squashfs: the layers present are used, then dropped.
    _, out, _ = berth("pull", "--squash", ref)
    assert "Downloaded newer image" in out
    squash = hex_of(record(berth, ref)["squash"])
    assert berth.blobs() == {hex_of(img.manifest.digest), hex_of(img.config.digest), squash}
    # And back: the layers are fetched again, the squashfs file goes.
    berth("pull", "--no-squash", ref)
    rec = record(berth, ref)
    assert (rec["format"], rec["squash"]) == ("layers", "")
    assert berth.blobs() == ({hex_of(img.manifest.digest), hex_of(img.config.digest)} |
                             layer_hexes(img))
    berth.assert_blobs_verified()


def test_layers_another_image_uses_stay(berth, sq_images):
    (app, app_img), (other, other_img) = sq_images["app"], sq_images["other"]
    berth("pull", other)
    berth("pull", "--squash", app)
    shared = layer_hexes(app_img) & layer_hexes(other_img)
    assert shared and shared <= berth.blobs()
    assert not (layer_hexes(app_img) - shared) & berth.blobs()
    # rmi of the layered image now drops the shared layer too; gc finds nothing left over.
    berth("rmi", other)
    assert not shared & berth.blobs()
    assert berth.json("gc", "--json")["count"] == 0
    berth("verify", app)


def test_layers_left_while_the_store_is_busy_are_gcs(berth, sq_images):
    """When another command pins the store as the squashed record is written, the layers
    cannot be deleted at once: they stay as unused blobs, and gc removes exactly them."""
    ref, img = sq_images["app"]
    berth("pull", "--squash", sq_images["other"][0])  # makes the store (and gc.lock)
    lock = os.path.join(berth.berth_home, "gc.lock")
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # as a pull in progress holds it (Store::pin())
        berth("pull", "--squash", ref)
        assert layer_hexes(img) <= berth.blobs()
        df = berth.json("system", "df", "--json")
        assert df["unused_blobs"]["total"] == len(layer_hexes(img))
    finally:
        os.close(fd)
    j = berth.json("gc", "--json")
    assert {r["digest"] for r in j["removed"]} == set(b.digest for b in img.layers)
    assert {r["kind"] for r in j["removed"]} == {"blob"}
    assert not layer_hexes(img) & berth.blobs()
    berth("verify", ref)


def test_rmi_deletes_the_squashfs_file(berth, sq_images):
    ref, _ = sq_images["app"]
    berth("pull", "--squash", ref)
    _, out, _ = berth("rmi", ref)
    assert out == f"Untagged: {ref}\nDeleted: 3 blobs\n"
    assert berth.blobs() == set()


def test_inspect_squashed_image(berth, sq_images):
    ref, img = sq_images["app"]
    berth("pull", "--squash", ref)
    rec = record(berth, ref)
    j = berth.json("inspect", ref)
    assert (j["format"], j["store"]) == ("squashfs", "user")
    assert j["squash"]["digest"] == rec["squash"]
    assert j["squash"]["path"] == os.path.join(berth.blob_dir(), hex_of(rec["squash"]))
    assert j["squash"]["size"] == rec["size"]
    assert j["config"]["config"]["Labels"] == {"berth.test": "sq-app"}
    assert [l["digest"] for l in j["layers"]] == [b.digest for b in img.layers]


def test_system_df_counts_the_squashfs_file(berth, sq_images):
    ref, img = sq_images["app"]
    berth("pull", "--squash", ref)
    rec = record(berth, ref)
    df = berth.json("system", "df", "--json")
    size = rec["size"] + img.manifest.size + img.config.size
    assert df["images"]["size"] == size
    assert df["images"]["reclaimable"] == size
    assert df["unused_blobs"]["total"] == 0
    item = df["images"]["items"][0]
    assert (item["name"], item["size"], item["unique_size"]) == (ref, size, size)


def test_image_prune_removes_squashed_images(berth, sq_images, registry):
    _, img = sq_images["app"]
    by_digest = f"{registry.host}/sq/app@{img.manifest.digest}"
    berth("pull", "--squash", by_digest)
    assert record(berth, by_digest)["format"] == "squashfs"
    j = berth.json("image", "prune", "-f", "--json")
    assert j["untagged"] == [by_digest]
    assert j["blobs_deleted"] == 3
    assert berth.blobs() == set()


def test_squash_of_a_squashed_image_copies_its_file(berth, sq_images):
    ref, _ = sq_images["app"]
    berth("pull", "--squash", ref)
    blob = os.path.join(berth.blob_dir(), hex_of(record(berth, ref)["squash"]))
    out = berth.path("app.sqsh")
    j = berth.json("squash", "--json", ref, "-o", out)
    assert (j["compressor"], j["size"]) == ("lz4", os.path.getsize(blob))
    with open(out, "rb") as a, open(blob, "rb") as b:
        assert a.read() == b.read()
    assert berth.json("inspect", "--json", out)["berth"]["reference"] == ref


def test_create_refuses_a_squashed_image(berth, sq_images):
    ref, _ = sq_images["app"]
    berth("pull", "--squash", ref)
    rc, out, err = berth("create", ref, check=False)
    assert (rc, out) == (125, "")
    assert err == (f"berth: error: create {ref}: the image is stored as one squashfs file "
                   f"(pull --squash), without its layers\n"
                   f"berth: hint: run it as it is (berth run {ref}), or pull its layers: "
                   f"berth pull --no-squash {ref}\n")
    rc, _, err = berth("unpack", ref, berth.path("dir"), check=False)
    assert rc == 1 and err.startswith(f"berth: error: unpack {ref}: the image is stored as one")
    rc, _, err = berth("save", "-o", berth.path("x.tar"), ref, check=False)
    assert rc == 1 and err.startswith(f"berth: error: save {ref}: the image is stored as one")


def test_run_squashed_image_without_extracting(sqb, sq_images, can_mount):
    ref, _ = sq_images["app"]
    sqb("pull", "--squash", ref)
    blobs = sqb.blobs()
    _, out, _ = sqb("run", "--rm", ref, "cat", "/etc/motd")
    assert out == "squashed app\n"
    # No container, nothing unpacked: the store is as it was.
    assert sqb.json("ps", "--json") == []
    assert sqb.blobs() == blobs
    # A discarded writable overlay, as for FILE.sqsh.
    _, out, _ = sqb("run", "--writable", ref, "/bin/sh", "-c", "echo x > /etc/motd && cat /etc/motd")
    assert out == "x\n"
    assert sqb("run", ref, "cat", "/etc/motd")[1] == "squashed app\n"
    rc, _, err = sqb("run", "--name", "c1", ref, "true", check=False)
    assert (rc, err) == (125, f"berth: error: run {ref}: --name applies to containers, not to a "
                              f"squashfs image\n")


def test_store_format_setting_squashes_pulls_and_runs(sqb, sq_images, can_mount):
    ref, _ = sq_images["app"]
    config_dir = sqb.make_dir("config")
    conf = sqb.write_file("config/berth.conf", 'store_format = "squashfs"\n')
    sqb.env["BERTH_CONFIG_DIR"] = config_dir
    s = sqb.json("info", "--json")["policy"]["settings"]["store_format"]
    assert s == {"value": "squashfs", "source": conf}
    # run of an image not stored pulls it squashed, then runs it from the file.
    rc, out, err = sqb("run", ref, "cat", "/etc/motd")
    assert (rc, out) == (0, "squashed app\n")
    assert f"Unable to find image '{ref}' locally" in err
    assert record(sqb, ref)["format"] == "squashfs"
    # --no-squash overrides the preference; create always pulls layers.
    other, _ = sq_images["other"]
    sqb("pull", "--no-squash", other)
    assert record(sqb, other)["format"] == "layers"
    sqb("rmi", other)
    sqb("create", other)
    assert record(sqb, other)["format"] == "layers"


def test_killed_squash_leaves_only_what_gc_removes(berth, sq_images):
    ref, img = sq_images["big"]
    berth("pull", ref)  # the layers first, so that the kill lands in the squash
    before = berth.blobs()
    proc = berth.popen("pull", "--squash", ref)
    deadline = time.monotonic() + 60
    while not stage_dirs(berth) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    if proc.poll() is not None:
        proc.communicate()
        pytest.skip("the squash finished before it could be killed (a fast machine)")
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert record(berth, ref)["format"] == "layers"  # the record is the old one
    assert stage_dirs(berth)
    j = berth.json("gc", "--json")
    assert {r["kind"] for r in j["removed"]} <= {"staging", "blob"}
    assert stage_dirs(berth) == [] and berth.blobs() == before
    # And the next pull --squash works.
    berth("pull", "--squash", ref)
    assert record(berth, ref)["format"] == "squashfs"
    assert berth.json("gc", "--json")["count"] == 0
    berth.assert_blobs_verified()


# --- the site policy and the central store (root-owned files: the tests run as root) ------

needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="policy files and the central store must be root's")


def root_berth(berth_bin: str, home: str, *args) -> str:
    """Runs berth as root (the administrator) on the central store `home`."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "BERTH_HOME": home,
           "LANG": "C.UTF-8"}
    r = subprocess.run([berth_bin, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture
def central(scratch, berth_bin, sq_images):
    """A root-owned central store holding sq/app squashed and sq/other as layers; returns
    (folder, policy path)."""
    if os.geteuid() != 0:
        pytest.skip("the central store must be root's: run the tests as root")
    folder = tempfile.mkdtemp(prefix="central-", dir=scratch)
    os.chmod(folder, 0o755)
    store = os.path.join(folder, "store")
    root_berth(berth_bin, store, "pull", "--squash", sq_images["app"][0])
    root_berth(berth_bin, store, "pull", sq_images["other"][0])
    policy = os.path.join(folder, "berth.conf")
    with open(policy, "w") as f:
        f.write(f'central_store = "{store}"\n')
    os.chmod(policy, 0o644)
    yield store, policy
    shutil.rmtree(folder, ignore_errors=True)


def tree_state(root: str) -> dict:
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            st = os.lstat(os.path.join(d, n))
            out[os.path.relpath(os.path.join(d, n), root)] = (st.st_mode, st.st_size,
                                                             st.st_mtime_ns)
    return out


@needs_root
def test_locked_store_format_refuses_the_flag(berth, sq_images, policy):
    policy = policy('store_format = "squashfs"\nlock = ["store_format"]\n')
    ref, _ = sq_images["app"]
    rc, _, err = berth("pull", "--no-squash", ref, check=False, env={"BERTH_SITE_CONF": policy})
    assert (rc, err) == (1, f"berth: error: pull --no-squash: the site policy {policy} locks "
                              f"store_format\n")
    berth("pull", ref, env={"BERTH_SITE_CONF": policy})
    assert record(berth, ref)["format"] == "squashfs"


@needs_root
def test_central_store_images_and_inspect(berth, central, sq_images):
    store, policy = central
    env = {"BERTH_SITE_CONF": policy}
    state = tree_state(store)
    listed = {i["name"]: i for i in berth.json("images", "--json", env=env)}
    app, other = sq_images["app"][0], sq_images["other"][0]
    assert (listed[app]["store"], listed[app]["format"]) == ("central", "squashfs")
    assert (listed[other]["store"], listed[other]["format"]) == ("central", "layers")
    lines = berth("images", env=env)[1].splitlines()
    assert any("sq/app" in l and l.endswith("squashfs (central)") for l in lines)
    j = berth.json("inspect", app, env=env)
    assert j["store"] == "central" and j["squash"]["path"].startswith(store + "/blobs/sha256/")
    # Nothing was pulled or copied, and nothing written there.
    assert berth.blobs() == set()
    assert tree_state(store) == state
    # The user's own image of the same name comes first.
    berth("pull", app)
    assert record(berth, app)["store"] == "user"


@needs_root
def test_central_store_runs_verified_once(sqb, central, sq_images, can_mount):
    store, policy = central
    sqb.env["BERTH_SITE_CONF"] = policy
    app = sq_images["app"][0]
    state = tree_state(store)
    _, out, err = sqb("-v", "run", app, "cat", "/etc/motd")
    assert out == "squashed app\n"
    assert "verifying" in err
    verdicts = os.path.join(sqb.berth_home, "central-verified")
    assert len(os.listdir(verdicts)) == 1
    _, out, err = sqb("-v", "run", app, "cat", "/etc/motd")
    assert out == "squashed app\n"
    assert "verifying" not in err and "verified before" in err
    assert sqb.blobs() == set() and tree_state(store) == state
    # gc keeps a verdict while its file version is there.
    _, out, _ = sqb("gc")
    assert "verdict" not in out and len(os.listdir(verdicts)) == 1
    # A file changed in place is a new version: hashed again, and refused.
    squash = sqb.json("inspect", app)["squash"]["path"]
    tamper(squash)
    rc, _, err = sqb("run", app, "true", check=False)
    assert rc == 125
    assert err.startswith(f"berth: error: verify {squash}: digest mismatch: got sha256:")
    # The old version's verdict can serve no more: gc removes it.
    _, out, _ = sqb("gc")
    assert "Deleted 1 stale central store verdict: " in out
    assert os.listdir(verdicts) == []


@needs_root
def test_central_store_must_be_trusted(berth, central, sq_images):
    store, policy = central
    env = {"BERTH_SITE_CONF": policy}
    app = sq_images["app"][0]
    squash = berth.json("inspect", app, env=env)["squash"]["path"]
    os.chmod(squash, 0o666)
    rc, _, err = berth("run", app, "true", check=False, env=env)
    assert (rc, err.splitlines()[0]) == (
        125, f"berth: error: central store {squash}: refused: writable by group or others")
    os.chmod(squash, 0o444)
    os.chown(os.path.join(store, "images.json"), berth.identity.uid, berth.identity.gid)
    rc, _, err = berth("images", check=False, env=env)
    assert (rc, err.splitlines()[0]) == (
        1, f"berth: error: central store {store}/images.json: refused: owned by uid "
             f"{berth.identity.uid}, not root")
    os.chown(os.path.join(store, "images.json"), 0, 0)
    os.chmod(store, 0o775)
    rc, _, err = berth("images", check=False, env=env)
    assert rc == 1
    assert err.splitlines()[0] == (f"berth: error: central_store of {policy}: central store {store}: "
                                   f"refused: writable by group or others")


@needs_root
def test_central_store_refuses_images_kept_as_layers(berth, central, sq_images):
    _, policy = central
    other = sq_images["other"][0]
    rc, _, err = berth("run", other, "true", check=False, env={"BERTH_SITE_CONF": policy})
    assert rc == 125
    assert err == (f"berth: error: central store {other}: the image is kept as layers there: "
                   f"the central store serves squashed images only\n"
                   f"berth: hint: ask the administrators to pull it with --squash, or pull it "
                   f"yourself: berth pull {other}\n")
    assert berth.blobs() == set()

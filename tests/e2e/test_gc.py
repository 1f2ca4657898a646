"""Lifetimes: whatever a killed or refused command leaves, `berth gc` removes, safely while
other berth processes run; `image prune` and `system df` in Docker's spirit; a replaced image
name releases the old image's blobs."""

from __future__ import annotations

import gzip
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
from test_commands import (_kill_mid_stream, _layout_of, _oci_layout_tar, rootfs_entries,
                           stage_dirs, write_bytes)
from test_integrity import hex_of, random_layer, wait_for

MiB = 1 << 20


def gc_json(berth, *args) -> dict:
    return berth.json("gc", "--json", *args)


def blob_hexes(image: imagelib.Image) -> set[str]:
    return {hex_of(b.digest) for b in [*image.blobs(), image.manifest]}


def files_size(root: str) -> int:
    """Apparent size of the regular files under `root`, each hard link once (as Berth counts)."""
    seen, total = set(), 0
    for d, _, files in os.walk(root):
        for f in files:
            st = os.lstat(os.path.join(d, f))
            if not (st.st_mode & 0o170000 == 0o100000):
                continue
            if st.st_nlink > 1:
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def verify_all(berth) -> None:
    for rec in berth.json("images", "--json"):
        _, out, _ = berth("verify", rec["name"])
        assert out.endswith(" blobs verified\n"), out
    berth.assert_blobs_verified()


def push(registry, repo: str, tag: str, label: str, size: int = 64 * 1024) -> imagelib.Image:
    img = imagelib.make_image([random_layer(label, size)], label=label)
    registry.pusher().push_image(repo, tag, img)
    return img


def test_gc_on_a_clean_store_reclaims_nothing(berth, pushed_busybox):
    berth("pull", pushed_busybox)
    blobs = berth.blobs()
    _, out, err = berth("gc")
    assert (out, err) == ("Total reclaimed space: 0 B\n", "")
    assert berth.blobs() == blobs
    assert gc_json(berth) == {"dry_run": False, "removed": [], "in_use": [], "count": 0,
                              "bytes": 0}


def test_killed_pull_leaves_a_partial_that_gc_removes(berth, registry, pushed_busybox):
    berth("pull", pushed_busybox)
    img = imagelib.make_image([random_layer("big", 8 * MiB, "none")], label="gc-killed")
    registry.pusher().push_image("gc/killed", "1", img)
    layer = img.layers[0]
    tmp = os.path.join(berth.berth_home, "tmp")
    partial = os.path.join(tmp, hex_of(layer.digest) + ".partial")
    proxy = servers.ThrottleProxy(registry.port, rate=1 * MiB).start()
    try:
        p = berth.popen("pull", f"{proxy.host}/gc/killed:1")
        try:
            wait_for(lambda: os.path.exists(partial) and os.path.getsize(partial) >= MiB, 30,
                     "part of the layer")
        finally:
            p.send_signal(signal.SIGKILL)
            p.communicate()
    finally:
        proxy.stop()
    size = os.path.getsize(partial)
    config = hex_of(img.config.digest)
    assert config in berth.blobs()  # fetched before the layer, named by no record

    _, out, _ = berth("gc", "--dry-run")
    assert os.path.exists(partial) and config in berth.blobs()
    _, out2, _ = berth("gc")
    assert out2 == out.replace("Would delete", "Deleted").replace("reclaimable", "reclaimed")
    assert out2 == ("Deleted 1 unused blob: {}\n"
                    "Deleted 1 interrupted download: {}\n"
                    "Total reclaimed space: {}\n").format(
        human(img.config.size), human(size), human(img.config.size + size))
    assert sorted(os.listdir(tmp)) == []
    assert config not in berth.blobs()
    verify_all(berth)


def human(n: int) -> str:
    """Berth's human_size: decimal units, three significant digits."""
    if n < 1000:
        return f"{n} B"
    v, units = float(n), ["B", "kB", "MB", "GB", "TB"]
    u = 0
    while v >= 1000 and u < 4:
        v /= 1000
        u += 1
    return f"{v:.3g} {units[u]}"


@pytest.mark.parametrize("command", ["import", "load"])
def test_killed_import_or_load_leaves_staging_that_gc_removes(berth, command):
    if command == "import":
        data = gzip.compress(imagelib.tar_bytes(rootfs_entries([File("big", os.urandom(4 << 20))])),
                             compresslevel=1)
        args = ["import", "-", "local/killed:1"]
    else:
        image = imagelib.make_image([imagelib.busybox_layer(),
                                     Layer([File("big", os.urandom(4 << 20))], compression="none")])
        data = _oci_layout_tar(*_layout_of(image))
        args = ["load"]
    _kill_mid_stream(berth, args, data)
    assert len(stage_dirs(berth)) == 1
    assert berth.json("images", "--json") == []
    tmp = os.path.join(berth.berth_home, "tmp")
    staged = files_size(os.path.join(tmp, stage_dirs(berth)[0]))
    assert staged > 0

    dry = gc_json(berth, "--dry-run")
    assert len(stage_dirs(berth)) == 1  # a dry run removes nothing
    assert dry["dry_run"] is True
    assert [r["kind"] for r in dry["removed"]] == ["staging"]
    assert dry["bytes"] == staged
    done = gc_json(berth)
    assert {**done, "dry_run": True} == dry
    assert os.listdir(tmp) == []
    # The store still works and verifies.
    path = write_bytes(berth, "again", data)
    if command == "import":
        berth("import", path, "local/killed:1")
    else:
        berth("load", "-i", path)
    verify_all(berth)


def test_gc_leaves_a_running_pull_alone_and_the_pull_succeeds(berth, registry):
    img = imagelib.make_image([random_layer("slow-a", 2 * MiB, "none"),
                               random_layer("slow-b", 2 * MiB, "none")], label="gc-concurrent")
    registry.pusher().push_image("gc/concurrent", "1", img)
    proxy = servers.ThrottleProxy(registry.port, rate=1 * MiB).start()
    try:
        ref = f"{proxy.host}/gc/concurrent:1"
        p = berth.popen("pull", "-q", ref)
        tmp = os.path.join(berth.berth_home, "tmp")
        wait_for(lambda: any(n.endswith(".partial") and os.path.getsize(os.path.join(tmp, n)) > 0
                             for n in (os.listdir(tmp) if os.path.isdir(tmp) else [])),
                 30, "the pull to start downloading")
        # A gc that may not wait: the pull holds the store, so it gives up in one line, having
        # removed nothing of the pull's.
        rc, out, err = berth("gc", "--timeout", "1", check=False)
        assert (rc, out) == (1, "")
        assert err == (f"berth: error: gc {berth.berth_home}: the store is still busy after 1 s: "
                       "a command using its blobs (pull, import, load, create, squash, save, "
                       "unpack) holds it\n"
                       "berth: hint: try again when it has finished, or with a longer --timeout\n")
        # A gc that waits: it finishes after the pull, and takes nothing the pull wrote.
        g = berth.popen("-v", "gc", "--json")
        time.sleep(0.5)
        assert g.poll() is None, g.communicate()
        out, err = p.communicate(timeout=60)
        assert (p.returncode, out, err) == (0, ref + "\n", "")
        gout, gerr = g.communicate(timeout=60)
        assert g.returncode == 0, gerr
        assert ("Waiting for the commands using the store's blobs (pull, import, load, create, "
                "squash, save, unpack) to finish..." in gerr)
        assert json.loads(gout)["count"] == 0
    finally:
        proxy.stop()
    assert berth.blobs() == blob_hexes(img)
    _, out, _ = berth("verify", ref)
    assert out == f"{ref}: 4 blobs verified\n"


def test_protected_name_refuses_a_pull_and_gc_reclaims_its_blobs(berth, registry):
    first = push(registry, "gc/protected", "1", "prot-one")
    ref = f"{registry.host}/gc/protected:1"
    berth("pull", ref)
    berth("protect", ref)
    kept = berth.blobs()
    second = push(registry, "gc/protected", "1", "prot-two")
    rc, _, err = berth("pull", ref, check=False)
    assert rc == 1 and "is protected" in err, err
    leaked = berth.blobs() - kept
    assert leaked and leaked <= blob_hexes(second)  # downloaded, then refused
    assert berth.json("images", "--json")[0]["id"] == first.config.digest

    result = gc_json(berth)
    assert {r["digest"] for r in result["removed"] if r["kind"] == "blob"} == \
        {"sha256:" + h for h in leaked}
    assert result["bytes"] == sum(r["bytes"] for r in result["removed"])
    assert berth.blobs() == kept
    verify_all(berth)


def test_replacing_a_name_releases_the_old_images_blobs(berth, registry):
    # pull: the tag moves to another image
    old = push(registry, "gc/moving", "1", "moving-old")
    ref = f"{registry.host}/gc/moving:1"
    berth("pull", ref)
    assert berth.blobs() == blob_hexes(old)
    new = push(registry, "gc/moving", "1", "moving-new")
    berth("pull", ref)
    assert berth.blobs() == blob_hexes(new)
    # import: the same name given to another root filesystem
    berth("import", write_bytes(berth, "a.tar", imagelib.tar_bytes([File("a", b"one\n")])),
          "local/app:1")
    blobs_a = berth.blobs() - blob_hexes(new)
    berth("import", write_bytes(berth, "b.tar", imagelib.tar_bytes([File("b", b"two\n")])),
          "local/app:1")
    assert not (berth.blobs() & blobs_a)
    # load: an archive naming an image the store holds under another image
    image = imagelib.make_image([Layer([File("c", b"three\n")])], label="loaded")
    berth("load", "-i", write_bytes(berth, "l.tar",
                                    _oci_layout_tar(*_layout_of(image, "docker.io/local/app:1"))))
    assert berth.blobs() == blob_hexes(new) | blob_hexes(image)
    assert gc_json(berth)["count"] == 0  # nothing was left for gc
    verify_all(berth)


def test_image_prune(berth, registry, pushed_busybox, busybox_image):
    used = pushed_busybox
    spare = f"{registry.host}/gc/spare:1"
    spare_img = push(registry, "gc/spare", "1", "spare")
    guarded_img = push(registry, "gc/guarded", "1", "guarded")
    guarded = f"{registry.host}/gc/guarded:1"
    by_digest = f"{registry.host}/gc/spare@{spare_img.manifest.digest}"
    for ref in (used, spare, guarded, by_digest):
        berth("pull", ref)
    berth("protect", guarded)
    berth("create", "--name", "keeper", used)

    rc, out, err = berth("image", "prune", check=False)  # stdin is not a terminal
    assert (rc, out) == (1, "")
    assert err == ("berth: error: image prune: not confirmed: standard input is not a terminal\n"
                   "berth: hint: use -f to prune without asking\n")
    # Without -a: only the image recorded by digest alone (TAG <none>); its blobs stay, spare
    # names them too.
    _, out, _ = berth("image", "prune", "-f")
    assert out == f"Untagged: {by_digest}\nDeleted: 0 blobs\nTotal reclaimed space: 0 B\n"
    # -a: every image no container uses, protected ones excepted.
    before = berth.blobs()
    res = berth.json("image", "prune", "-a", "-f", "--json")
    assert res["untagged"] == [spare]
    assert res["blobs_deleted"] == len(blob_hexes(spare_img))
    assert res["bytes"] == sum(b.size for b in [*spare_img.blobs(), spare_img.manifest])
    assert sorted(image["name"] for image in berth.json("images", "--json")) == \
        sorted([used, guarded])
    assert berth.blobs() == before - blob_hexes(spare_img)
    verify_all(berth)
    assert guarded_img.config.digest in {i["id"] for i in berth.json("images", "--json")}


def test_system_df_matches_the_files_on_disk(berth, registry, pushed_busybox, busybox_image):
    other = push(registry, "gc/df", "1", "df-other")
    berth("pull", pushed_busybox)
    berth("pull", f"{registry.host}/gc/df:1")
    berth("tag", pushed_busybox, "local/again:1")  # one image, two names: counted once
    berth("create", "--name", "df1", pushed_busybox)
    # Leftovers: an unused blob and an abandoned staging folder.
    stray = b"a blob nothing names\n"
    stray_hex = hashlib.sha256(stray).hexdigest()
    berth.identity.write_file(os.path.join(berth.blob_dir(), stray_hex), stray.decode(), 0o444)
    stage = os.path.join(berth.berth_home, "tmp", "stage-abcdef")
    berth.identity.write_file(os.path.join(stage, "f0"), "x" * 1000)
    berth.identity.write_file(os.path.join(stage, "lock"), "")

    df = berth.json("system", "df", "--json")
    blob_dir = berth.blob_dir()
    referenced = blob_hexes(busybox_image) | blob_hexes(other)
    size_of = {h: os.path.getsize(os.path.join(blob_dir, h)) for h in berth.blobs()}
    assert df["images"]["total"] == 2 and df["images"]["active"] == 1
    assert df["images"]["size"] == sum(size_of[h] for h in referenced)
    assert df["images"]["reclaimable"] == sum(size_of[h] for h in blob_hexes(other))
    cdir = os.path.join(berth.berth_home, "containers")
    [cid] = [n for n in os.listdir(cdir) if not n.startswith(".")]
    assert df["containers"]["total"] == 1 and df["containers"]["active"] == 0
    assert df["containers"]["size"] == files_size(os.path.join(cdir, cid))
    assert df["containers"]["reclaimable"] == df["containers"]["size"]
    assert (df["unused_blobs"]["total"], df["unused_blobs"]["size"]) == (1, len(stray))
    assert df["unused_blobs"]["reclaimable"] == len(stray)
    assert (df["staging"]["total"], df["staging"]["size"]) == (1, 1000)
    # Everything under blobs/ is an image's or unused: nothing counted twice, nothing missed.
    assert df["images"]["size"] + df["unused_blobs"]["size"] == files_size(blob_dir)

    _, out, _ = berth("system", "df")
    lines = out.splitlines()
    assert re.split(r"\s{3,}", lines[0]) == ["TYPE", "TOTAL", "ACTIVE", "SIZE", "RECLAIMABLE"]
    row = re.split(r"\s{3,}", lines[1])
    share = df["images"]["reclaimable"] * 100 // df["images"]["size"]
    assert row == ["Images", "2", "1", human(df["images"]["size"]),
                   f"{human(df['images']['reclaimable'])} ({share}%)"]
    assert re.split(r"\s{3,}", lines[3]) == ["Unused blobs", "1", "0", human(len(stray)),
                                             f"{human(len(stray))} (100%)"]
    assert re.split(r"\s{3,}", lines[4]) == ["Staging", "1", "0", "1 kB", "1 kB (100%)"]
    _, verbose, _ = berth("system", "df", "-v")
    assert "Images space usage:" in verbose and "df1" in verbose

    # gc takes exactly what df called reclaimable outside images and containers.
    res = gc_json(berth)
    assert res["bytes"] == df["unused_blobs"]["reclaimable"] + df["staging"]["reclaimable"]
    df = berth.json("system", "df", "--json")
    assert (df["unused_blobs"]["total"], df["staging"]["total"]) == (0, 0)


def test_half_created_container_and_dangling_name_are_removed(berth, pushed_busybox):
    berth("pull", pushed_busybox)
    berth("create", "--name", "real", pushed_busybox)
    cdir = os.path.join(berth.berth_home, "containers")
    half = os.path.join(cdir, ".tmp-" + "ab" * 32)
    berth.identity.write_file(os.path.join(half, "rootfs", "etc", "motd"), "half\n")
    names = os.path.join(berth.berth_home, "names")
    os.symlink("../containers/" + "cd" * 32, os.path.join(names, "gone"))
    os.lchown(os.path.join(names, "gone"), berth.identity.uid, berth.identity.gid)
    _, out, _ = berth("gc")
    assert out == ("Deleted 1 half-created or half-removed container: 5 B\n"
                   "Deleted 1 dangling container name: 0 B\n"
                   "Total reclaimed space: 5 B\n")
    assert not os.path.exists(half)
    assert os.listdir(names) == ["real"]
    assert berth.json("ps", "--json")[0]["names"] == ["real"]


def test_gc_waits_for_a_save_reading_the_blobs(berth, registry):
    img = push(registry, "gc/saved", "1", "saved", 2 * MiB)
    ref = f"{registry.host}/gc/saved:1"
    berth("pull", ref)
    # To a pipe this test reads only later: save blocks once it is full, the store pinned.
    p = berth.popen("save", ref)
    assert len(p.stdout.buffer.read(1)) == 1  # it writes, so it holds the pin
    rc, out, err = berth("gc", "--timeout", "1", check=False)
    assert (rc, out) == (1, "")
    assert err.startswith(f"berth: error: gc {berth.berth_home}: the store is still busy "
                          "after 1 s: a command using its blobs"), err
    p.stdout.buffer.read()
    p.wait(timeout=60)
    assert p.returncode == 0, p.stderr.read()
    assert berth.blobs() == blob_hexes(img)

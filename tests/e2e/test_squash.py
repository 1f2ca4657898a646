"""berth squash IMAGE|CONTAINER -o FILE.sqsh and berth inspect FILE.sqsh: the squashfs file is
read back with squashfs-tools' own unsquashfs (not the library that wrote it) and compared with
`berth unpack` of the same image."""

import hashlib
import json
import os
import shutil
import stat
import subprocess
import time

import pytest

import imagelib
from imagelib import Dir, File, Hardlink, Layer, Opaque, Symlink, Whiteout

pytestmark = pytest.mark.skipif(shutil.which("unsquashfs") is None,
                                reason="unsquashfs (Debian squashfs-tools) is not installed")

SETID = stat.S_ISUID | stat.S_ISGID


def layers():
    lower = Layer([
        Dir("bin"), File("bin/busybox", open(imagelib.BUSYBOX, "rb").read(), 0o755),
        Symlink("bin/sh", "busybox"),
        File("topfile", b"deleted by the upper layer\n"),
        File("kept", b"stays\n"),
        Dir("a"), File("a/keep", b"keep\n"), File("a/gone", b"gone\n"),
        Dir("a/subdir"), File("a/subdir/deep", b"deep\n"),
        Dir("opq"), File("opq/old1", b"old\n"), Dir("opq/sub"), File("opq/sub/old2", b"old\n"),
        Dir("data"), File("data/orig", b"linked\n", 0o640),
        Hardlink("data/hard", "data/orig"),
        Symlink("data/rel", "orig"),
        Symlink("data/abs", "/data/orig"),
        Symlink("dangling", "/no/such/file"),
        File("usr/bin/suid", b"#!/bin/sh\n", 0o4755),
        File("home/user/owned", b"mine\n", 0o600, uid=1000, gid=1000),
        # A hard link whose first name the upper layer deletes: its data must survive.
        File("shadow/first", b"data of a hidden first name\n"),
        Hardlink("shadow/second", "shadow/first"),
    ])
    upper = Layer([
        Whiteout("topfile"),
        Whiteout("a/gone"),
        Whiteout("a/subdir"),
        Whiteout("shadow/first"),
        Opaque("opq"), File("opq/new", b"new\n"),
        File("kept", b"replaced\n"),
        Hardlink("data/hard2", "data/orig"),  # a link to a file of the lower layer
        Dir("etc", 0o700),
        File("etc/motd", b"hello\n"),
    ], compression="zstd")
    return [lower, upper]


def describe(root, skip=()):
    """path -> (kind, mode bits, link target or content hash), for every path under root."""
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            if rel.split("/")[0] in skip:
                continue
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), None)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(f.read()).hexdigest())
    return out


def rootless_view(desc):
    """What a rootless unpack can keep: no set-id bits, directories u+rwx."""
    out = {}
    for k, (kind, mode, extra) in desc.items():
        if kind == "file":
            mode &= ~SETID
        elif kind == "dir":
            mode |= 0o700
        out[k] = (kind, mode, extra)
    return out


def extract(sqsh, dest):
    """unsquashfs as root (this test process), so owners and set-id bits are restored."""
    subprocess.run(["unsquashfs", "-no-progress", "-d", dest, sqsh], check=True,
                   stdout=subprocess.DEVNULL)
    return dest


def one_error_line(err):
    lines = [line for line in err.splitlines() if not line.startswith("berth: hint:")]
    assert len(lines) == 1 and lines[0].startswith("berth: error: "), err
    return lines[0]


@pytest.fixture
def pushed(berth, registry):
    img = imagelib.make_image(layers(), fmt="oci", label="squash")
    registry.pusher().push_image("squash/layers", "1", img)
    ref = f"{registry.host}/squash/layers:1"
    berth("pull", ref)
    return ref, img


def test_squash_matches_unpack(berth, pushed):
    ref, img = pushed
    sqsh = berth.path("img.sqsh")
    _, out, _ = berth("squash", ref, "-o", sqsh)
    assert out.startswith(f"{sqsh}: ") and "(lz4)" in out
    root = berth.path("root")
    berth("unpack", ref, root)

    ex = extract(sqsh, berth.path("ex"))
    got = describe(ex, skip=(".berth",))
    assert rootless_view(got) == describe(root)
    assert "topfile" not in got and "a/gone" not in got and "opq/old1" not in got
    assert got["kept"][2] == hashlib.sha256(b"replaced\n").hexdigest()
    # What only the squashfs keeps: the image's owners and set-id bits.
    assert got["usr/bin/suid"][1] == 0o4755
    assert got["etc"][1] == 0o700
    st = os.lstat(os.path.join(ex, "home/user/owned"))
    assert (st.st_uid, st.st_gid) == (1000, 1000)
    st = os.lstat(os.path.join(ex, "bin/busybox"))
    assert (st.st_uid, st.st_gid) == (0, 0)
    # Hard links are one inode, also when one name's layer-mate was whited out.
    ino = {p: os.lstat(os.path.join(ex, p)).st_ino for p in ("data/orig", "data/hard", "data/hard2")}
    assert len(set(ino.values())) == 1
    assert os.lstat(os.path.join(ex, "data/orig")).st_nlink == 3
    with open(os.path.join(ex, "shadow/second"), "rb") as f:
        assert f.read() == b"data of a hidden first name\n"

    # unsquashfs's own listing agrees on types and link targets.
    listing = subprocess.run(["unsquashfs", "-lln", sqsh], check=True, text=True,
                             stdout=subprocess.PIPE).stdout
    assert "squashfs-root/data/abs -> /data/orig" in listing
    assert any(line.startswith("-rwsr-xr-x 0/0") and line.endswith("squashfs-root/usr/bin/suid")
               for line in listing.splitlines())

    # The image's config rides along.
    with open(os.path.join(ex, ".berth/image.json")) as f:
        meta = json.load(f)
    assert meta["schemaVersion"] == 1
    assert meta["reference"] == ref
    assert meta["digest"] == img.manifest.digest
    assert meta["config"] == json.loads(img.config.data)


def test_squash_compressors_and_inspect_round_trip(berth, pushed):
    ref, img = pushed
    for comp, level in (("zstd", "3"), ("gzip", "1")):
        sqsh = berth.path(f"img-{comp}.sqsh")
        _, out, _ = berth("squash", ref, "-o", sqsh, "--compressor", comp, "--level", level, "--json")
        report = json.loads(out)
        assert report["compressor"] == comp and report["size"] == os.path.getsize(sqsh)
        info = berth.json("inspect", sqsh, "--json")
        assert info["compressor"] == comp
        assert info["berth"]["reference"] == ref
        assert info["berth"]["digest"] == img.manifest.digest
        assert info["berth"]["config"]["rootfs"]["diff_ids"] == img.diff_ids
        assert info["inodes"] == report["inodes"]
    _, out, _ = berth("inspect", berth.path("img-zstd.sqsh"))
    assert f"Image:       {ref}\n" in out and "Compressor:  zstd\n" in out


def test_squash_is_reproducible(berth, pushed):
    """The same image gives the same bytes: the file system's time is the image's creation
    time (before: the time of the squash, so every squash differed). SOURCE_DATE_EPOCH pins
    it, for containers too."""
    ref, _ = pushed
    a, b = berth.path("a.sqsh"), berth.path("b.sqsh")
    berth("squash", ref, "-o", a)
    time.sleep(1.1)  # a time taken from the clock would differ now
    berth("squash", ref, "-o", b)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()
    assert berth.json("inspect", a, "--json")["mtime"] == 1704067200  # 2024-01-01T00:00:00Z
    berth("create", "--name", "pinned", ref)
    c, d = berth.path("c.sqsh"), berth.path("d.sqsh")
    for out in (c, d):
        berth("squash", "pinned", "-o", out, env={"SOURCE_DATE_EPOCH": "1000000000"})
        time.sleep(1.1)
    with open(c, "rb") as fc, open(d, "rb") as fd:
        assert fc.read() == fd.read()
    assert berth.json("inspect", c, "--json")["mtime"] == 1000000000


def test_inspect_squashfs_without_berth_metadata(berth):
    tree = berth.make_dir("tree")
    berth.write_file("tree/hello", "hi\n")
    plain = berth.path("plain.sqsh")
    subprocess.run(["mksquashfs", tree, plain, "-comp", "lz4", "-quiet", "-noappend"],
                   check=True, stdout=subprocess.DEVNULL)
    _, out, _ = berth("inspect", plain)
    assert out.startswith("Image:       no Berth metadata (/.berth/image.json)\n")
    assert "Compressor:  lz4\n" in out and "Inodes:      2\n" in out
    info = berth.json("inspect", plain, "--json")
    assert info["berth"] is None and info["inodes"] == 2

    notsq = berth.write_file("not.sqsh", "just text\n" * 100)
    rc, _, err = berth("inspect", notsq, check=False)
    assert rc != 0
    assert one_error_line(err) == (f"berth: error: read squashfs {notsq}: not a squashfs image "
                                   f"(no squashfs magic number)")
    half = berth.path("half.sqsh")
    with open(plain, "rb") as f, open(half, "wb") as g:
        whole = f.read()
        g.write(whole[:200])
    bytes_used = int.from_bytes(whole[40:48], "little")  # the superblock's image length
    rc, _, err = berth("inspect", half, check=False)
    assert rc != 0
    assert one_error_line(err) == (f"berth: error: read squashfs {half}: truncated squashfs image: "
                                   f"it says {bytes_used} bytes, the file has 200")


def test_squash_container_shows_its_change(berth, pushed):
    ref, _ = pushed
    berth("create", "--name", "c1", ref)
    berth("run", "c1", "/bin/sh", "-c", "echo changed > /etc/motd && rm /kept")
    sqsh = berth.path("c1.sqsh")
    berth("squash", "c1", "-o", sqsh)
    ex = extract(sqsh, berth.path("ex"))
    with open(os.path.join(ex, "etc/motd")) as f:
        assert f.read() == "changed\n"
    assert not os.path.lexists(os.path.join(ex, "kept"))
    # Files the user owns on the host are root's inside, as export writes them.
    st = os.lstat(os.path.join(ex, "etc/motd"))
    assert (st.st_uid, st.st_gid) == (0, 0)
    info = berth.json("inspect", sqsh, "--json")
    assert info["berth"]["reference"] == ref
    assert info["berth"]["container"]["names"] == ["c1"]


def test_corrupt_layer_fails_in_one_line_and_leaves_no_file(berth, pushed):
    ref, img = pushed
    blob = os.path.join(berth.blob_dir(), img.layers[0].digest.split(":")[1])
    os.chmod(blob, 0o644)
    with open(blob, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    out_dir = berth.make_dir("out")
    sqsh = os.path.join(out_dir, "img.sqsh")
    rc, out, err = berth("squash", ref, "-o", sqsh, check=False)
    assert rc != 0 and out == ""
    line = one_error_line(err)
    assert line.startswith(f"berth: error: squash {ref}: ")
    assert os.listdir(out_dir) == []


def test_bad_options_and_unwritable_output(berth, pushed):
    ref, _ = pushed
    rc, _, err = berth("squash", ref, "-o", berth.path("x.sqsh"), "--compressor", "lzo",
                       check=False)
    assert rc != 0
    assert one_error_line(err) == "berth: error: squash lzo: unknown compressor"
    rc, _, err = berth("squash", ref, "-o", berth.path("x.sqsh"), "--level", "5", check=False)
    assert one_error_line(err) == "berth: error: squash lz4: this compressor has no levels"
    rc, _, err = berth("squash", ref, "-o", berth.path("x.sqsh"), "--compressor", "zstd",
                       "--level", "40", check=False)
    assert one_error_line(err) == "berth: error: squash zstd: level 40 is out of range 1-22"
    locked = berth.identity.make_dir(berth.path("locked"), 0o555)
    target = os.path.join(locked, "x.sqsh")
    rc, _, err = berth("squash", ref, "-o", target, check=False)
    assert rc != 0
    assert one_error_line(err) == f"berth: error: squash {ref}: create {target}: Permission denied"
    assert not os.path.exists(berth.path("x.sqsh"))


def test_killed_squash_leaves_no_file(berth, registry):
    big = Layer([File(f"d/f{i:05d}", os.urandom(16384)) for i in range(4000)], "gzip")
    img = imagelib.make_image([big], label="squash-kill")
    registry.pusher().push_image("squash/kill", "1", img)
    ref = f"{registry.host}/squash/kill:1"
    berth("pull", ref)
    out_dir = berth.make_dir("out")
    p = berth.popen("squash", ref, "-o", os.path.join(out_dir, "k.sqsh"), "--compressor", "gzip",
                    "--level", "9")
    time.sleep(0.5)
    p.kill()
    assert p.wait() == -9, "squash ended before it was killed: make the image larger"
    assert os.listdir(out_dir) == []

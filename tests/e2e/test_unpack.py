"""Unpacking: whiteouts, opaque directories, links, and hostile layers."""

import os

import pytest

import imagelib
from imagelib import Dir, File, Hardlink, Layer, Opaque, Symlink, Whiteout


def pull_and_unpack(berth, registry, repo, layers, check=True):
    img = imagelib.make_image(layers, fmt="oci", label=repo)
    registry.pusher().push_image(repo, "1", img)
    ref = f"{registry.host}/{repo}:1"
    berth("pull", ref)
    root = berth.path("root")
    rc, out, err = berth("unpack", ref, root, check=check)
    return ref, root, rc, out, err


def read(path):
    with open(path) as f:
        return f.read()


def tree(root):
    """Every path under root, relative, sorted."""
    out = []
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            out.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(out)


def test_whiteouts_opaque_dirs_and_links(berth, registry):
    lower = Layer([
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
    ])
    upper = Layer([
        Whiteout("topfile"),
        Whiteout("a/gone"),
        Whiteout("a/subdir"),
        Opaque("opq"), File("opq/new", b"new\n"),
        File("kept", b"replaced\n"),
        Hardlink("data/hard2", "data/orig"),
    ], compression="zstd")
    _, root, _, _, _ = pull_and_unpack(berth, registry, "unpack/layers", [lower, upper])

    assert tree(root) == sorted([
        "a", "a/keep", "data", "data/abs", "data/hard", "data/hard2", "data/orig", "data/rel",
        "dangling", "kept", "opq", "opq/new"])
    assert read(f"{root}/kept") == "replaced\n"
    assert read(f"{root}/opq/new") == "new\n"
    orig = os.stat(f"{root}/data/orig")
    assert os.stat(f"{root}/data/hard").st_ino == orig.st_ino
    assert os.stat(f"{root}/data/hard2").st_ino == orig.st_ino
    assert orig.st_nlink == 3
    assert orig.st_mode & 0o777 == 0o640
    assert os.readlink(f"{root}/data/rel") == "orig"
    assert os.readlink(f"{root}/data/abs") == "/data/orig"
    assert os.readlink(f"{root}/dangling") == "/no/such/file"
    # Files belong to the user who unpacked.
    assert orig.st_uid == berth.identity.uid


def test_whiteout_of_a_file_then_recreated_as_dir(berth, registry):
    lower = Layer([File("thing", b"file\n"), File("etc/conf", b"a\n")])
    upper = Layer([Whiteout("thing"), Dir("thing"), File("thing/inside", b"dir now\n")])
    _, root, _, _, _ = pull_and_unpack(berth, registry, "unpack/recreate", [lower, upper])
    assert read(f"{root}/thing/inside") == "dir now\n"


# --------------------------------------------------------------------------
# Hostile layers: every one must be refused, and nothing may land outside.

def hostile_layers(outside: str):
    """name -> layer entries; `outside` is an absolute folder beside the target."""
    return {
        "dotdot-path": [File("../escaped", b"x")],
        "dotdot-inside-path": [Dir("etc"), File("etc/../../escaped", b"x")],
        "absolute-path": [File(os.path.join(outside, "escaped"), b"x")],
        "write-through-symlink": [Symlink("link", "../outside"), File("link/escaped", b"x")],
        "write-through-absolute-symlink": [Symlink("link", outside), File("link/escaped", b"x")],
        "symlink-parent-dir": [Symlink("etc", "../outside"), Dir("etc/escaped")],
        "hardlink-to-outside": [Hardlink("escaped", "../outside/secret")],
        "hardlink-absolute": [Hardlink("escaped", os.path.join(outside, "secret"))],
        "hardlink-through-symlink": [Symlink("link", "../outside"),
                                     Hardlink("escaped", "link/secret")],
    }


@pytest.mark.parametrize("case", list(hostile_layers("/x")))
def test_hostile_layer_is_refused(berth, registry, case):
    outside = berth.make_dir("outside")
    secret = berth.write_file("outside/secret", "do not touch\n")
    entries = hostile_layers(outside)[case]
    ref, root, rc, out, err = pull_and_unpack(
        berth, registry, f"hostile/{case}",
        [Layer([File("ok", b"fine\n")]), Layer(entries)], check=False)
    assert (rc, out) == (1, "")
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"berth: error: unpack {ref}: unpack ")
    assert "escapes the root" in lines[0]
    # Nothing outside changed; the half-built target is gone.
    assert sorted(os.listdir(outside)) == ["secret"]
    assert read(secret) == "do not touch\n" and os.stat(secret).st_nlink == 1
    assert sorted(os.listdir(berth.workdir)) == ["home", "outside"]
    assert not os.path.exists(root)


def test_root_entry_is_the_roots_metadata(berth, registry):
    """`umoci insert DIR /` (Debian's umoci) writes layers whose first entry is "/": the root
    directory's metadata, as GNU tar, umoci and Podman take it (before: refused as an escape).
    The layer is built here in the same shape: Debian's umoci 0.4.7 leaves the tar of an
    insert without its final padding, which no tar reader accepts, so it cannot be used as is."""
    img = imagelib.make_image([imagelib.busybox_layer(),
                               Layer([Dir("/", 0o750), Dir("etc/"), File("etc/greeting", b"hi\n")])],
                              label="root-entry")
    registry.pusher().push_image("root-entry/app", "1", img)
    ref = f"{registry.host}/root-entry/app:1"
    berth("pull", ref)
    root = berth.path("root")
    berth("unpack", ref, root)
    with open(os.path.join(root, "etc", "greeting"), "rb") as f:
        assert f.read() == b"hi\n"
    assert os.stat(root).st_mode & 0o7777 == 0o750 | 0o700

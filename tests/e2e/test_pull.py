"""Pulling each manifest format, then images / inspect / verify / unpack / rmi."""

import os

import pytest

import imagelib
from imagelib import File, Layer, Symlink


def pull_lines(ref: str, digest: str, status: str = "Downloaded newer image") -> str:
    return f"Digest: {digest}\nStatus: {status} for {ref}\n{ref}\n"


def busybox_layers(compression: str):
    note = Layer([File("etc/motd", f"motd {compression}\n".encode())], compression)
    return [imagelib.busybox_layer(compression), note]


# name -> (manifest format, layer compression, index format or None)
FORMATS = {
    "docker-v2s2": ("docker", "gzip", None),
    "oci-gzip": ("oci", "gzip", None),
    "oci-zstd": ("oci", "zstd", None),
    "oci-uncompressed": ("oci", "none", None),
    "docker-manifest-list": ("docker", "gzip", "docker"),
    "oci-index": ("oci", "zstd", "oci"),
}


@pytest.mark.parametrize("name", list(FORMATS))
def test_pull_inspect_verify_unpack_rmi(berth, registry, name):
    fmt, compression, index_fmt = FORMATS[name]
    img = imagelib.make_image(busybox_layers(compression), fmt=fmt, label=name)
    pusher = registry.pusher()
    repo = f"formats/{name}"
    index = None
    if index_fmt:
        arm = imagelib.make_image([Layer([File("arch", b"arm64\n")], compression)], fmt=fmt,
                                  platform="linux/arm64/v8", label=name)
        index = pusher.push_index(repo, "v1", [arm, img], fmt=index_fmt)
    else:
        pusher.push_image(repo, "v1", img)
    ref = f"{registry.host}/{repo}:v1"

    _, out, err = berth("pull", ref)
    assert out == pull_lines(ref, img.manifest.digest)
    assert err == ""

    [rec] = berth.json("images", "--json")
    assert rec["name"] == ref
    assert rec["repository"] == f"{registry.host}/{repo}"
    assert rec["tag"] == "v1"
    assert rec["digest"] == img.manifest.digest
    assert rec["index_digest"] == (index.digest if index else "")
    assert rec["id"] == img.config.digest
    assert rec["platform"] == "linux/amd64"
    assert rec["layers"] == [b.digest for b in img.layers]
    assert rec["size"] == sum(b.size for b in img.layers)

    info = berth.json("inspect", ref)
    assert info["name"] == ref
    assert info["manifest_digest"] == img.manifest.digest
    assert info["index_digest"] == (index.digest if index else "")
    assert info["media_type"] == img.manifest.media_type
    assert info["id"] == img.config.digest
    assert info["platform"] == {"os": "linux", "architecture": "amd64", "variant": ""}
    assert info["layers"] == [{"digest": b.digest, "size": b.size, "media_type": b.media_type}
                              for b in img.layers]
    assert info["config"]["config"]["Labels"] == {"berth.test": name}
    assert info["config"]["rootfs"]["diff_ids"] == img.diff_ids
    assert info["manifest"]["config"]["digest"] == img.config.digest

    nblobs = len(img.layers) + 2 + (1 if index else 0)
    _, out, _ = berth("verify", ref)
    assert out == f"{ref}: {nblobs} blobs verified\n"
    expected_blobs = {b.digest.split(":")[1] for b in [*img.blobs(), img.manifest]}
    if index:
        expected_blobs.add(index.digest.split(":")[1])
    assert berth.blobs() == expected_blobs
    berth.assert_blobs_verified()

    root = berth.path("rootfs")
    _, out, err = berth("unpack", ref, root)
    assert (out, err) == ("", "")
    with open(os.path.join(root, "bin/busybox"), "rb") as f, open(imagelib.BUSYBOX, "rb") as g:
        assert f.read() == g.read()
    assert os.stat(os.path.join(root, "bin/busybox")).st_mode & 0o777 == 0o755
    assert os.readlink(os.path.join(root, "bin/sh")) == "busybox"
    with open(os.path.join(root, "etc/motd")) as f:
        assert f.read() == f"motd {compression}\n"
    assert not os.path.exists(os.path.join(root, "arch"))  # the arm64 image was not chosen

    _, out, _ = berth("rmi", ref)
    assert out == f"Untagged: {ref}\nDeleted: {nblobs} blobs\n"
    assert berth.json("images", "--json") == []
    assert berth.blobs() == set()


def test_pull_again_is_up_to_date(berth, pushed_busybox, busybox_image):
    berth("pull", pushed_busybox)
    _, out, _ = berth("pull", pushed_busybox)
    assert out == pull_lines(pushed_busybox, busybox_image.manifest.digest, "Image is up to date")


def test_pull_quiet_prints_only_the_name(berth, pushed_busybox):
    _, out, err = berth("pull", "-q", pushed_busybox)
    assert (out, err) == (pushed_busybox + "\n", "")
    _, out, err = berth("-q", "pull", pushed_busybox)
    assert (out, err) == (pushed_busybox + "\n", "")


def test_pull_by_digest(berth, registry, pushed_busybox, busybox_image):
    ref = f"{registry.host}/e2e/busybox@{busybox_image.manifest.digest}"
    _, out, _ = berth("pull", ref)
    assert out.endswith(ref + "\n")
    [rec] = berth.json("images", "--json")
    assert rec["name"] == ref
    assert rec["digest"] == busybox_image.manifest.digest


@pytest.mark.parametrize("form", ["docker://{host}/e2e/busybox:1.0",
                                  "docker://{host}#e2e/busybox:1.0", "{host}#e2e/busybox:1.0"])
def test_pull_and_run_take_apptainer_and_enroot_forms(berth, registry, pushed_busybox, form):
    """docker://IMAGE (Apptainer, skopeo) and enroot's docker://REGISTRY#IMAGE name the image
    HOST/IMAGE, for pull as for run."""
    typed = form.format(host=registry.host)
    berth("pull", "-q", typed)
    [rec] = berth.json("images", "--json")
    assert rec["name"] == pushed_busybox
    _, out, _ = berth("run", "--rm", typed, "echo", "ran")
    assert out == "ran\n"


def test_images_table_and_ids(berth, pushed_busybox, busybox_image):
    berth("pull", pushed_busybox)
    short_id = busybox_image.config.digest.split(":")[1][:12]
    _, out, _ = berth("images")
    header, row = out.splitlines()
    assert header.split() == ["REPOSITORY", "TAG", "IMAGE", "ID", "PLATFORM", "SIZE", "FORMAT"]
    repo = pushed_busybox.rsplit(":", 1)[0]
    assert row.split()[:4] == [repo, "1.0", short_id, "linux/amd64"]
    assert row.split()[-1] == "layers"
    # Columns line up under their headings.
    assert row.index(short_id) == header.index("IMAGE ID")
    _, out, _ = berth("images", "-q")
    assert out == short_id + "\n"
    # An image can be named by its ID prefix too.
    assert berth.json("inspect", short_id[:8])["name"] == pushed_busybox


def test_chunked_upload_pulls_the_same(berth, registry):
    img = imagelib.make_image([imagelib.busybox_layer()], fmt="docker", label="chunked")
    registry.pusher().push_image("e2e/chunked", "c", img, chunk_size=64 * 1024)
    ref = f"{registry.host}/e2e/chunked:c"
    berth("pull", ref)
    assert berth("verify", ref)[1] == f"{ref}: 3 blobs verified\n"


def test_rmi_keeps_blobs_another_image_uses(berth, registry, pushed_busybox, busybox_image):
    registry.pusher().push_image("e2e/busybox-copy", "2", busybox_image)
    other = f"{registry.host}/e2e/busybox-copy:2"
    berth("pull", pushed_busybox)
    berth("pull", other)
    before = berth.blobs()
    _, out, _ = berth("rmi", other)
    assert out == f"Untagged: {other}\nDeleted: 0 blobs\n"
    assert berth.blobs() == before
    assert [r["name"] for r in berth.json("images", "--json")] == [pushed_busybox]


def test_rmi_unknown_image(berth):
    rc, out, err = berth("rmi", "nosuch:1", check=False)
    assert rc == 1
    assert out == ""
    assert err.splitlines()[0].startswith("berth: error: ")
    assert "nosuch:1" in err and "no such image" in err

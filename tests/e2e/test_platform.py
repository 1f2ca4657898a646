"""Choosing one image from a multi-platform index with --platform."""

import pytest

import imagelib
from imagelib import File, Layer

PLATFORMS = ["linux/amd64", "linux/arm64/v8", "linux/arm/v7", "linux/ppc64le"]


@pytest.fixture(scope="module")
def multi(registry):
    """An OCI index and a Docker manifest list over the same four images."""
    images = {p: imagelib.make_image([Layer([File("platform", p.encode() + b"\n")])], fmt="oci",
                                     platform=p, label=p)
              for p in PLATFORMS}
    pusher = registry.pusher()
    pusher.push_index("multi/oci", "1", list(images.values()), fmt="oci")
    docker = {p: imagelib.make_image([Layer([File("platform", p.encode() + b"\n")])],
                                     fmt="docker", platform=p, label=p)
              for p in PLATFORMS}
    pusher.push_index("multi/docker", "1", list(docker.values()), fmt="docker")
    return {"oci": (f"{registry.host}/multi/oci:1", images),
            "docker": (f"{registry.host}/multi/docker:1", docker)}


@pytest.mark.parametrize("kind", ["oci", "docker"])
@pytest.mark.parametrize("platform", PLATFORMS)
def test_platform_selects_its_image(berth, multi, kind, platform):
    ref, images = multi[kind]
    img = images[platform]
    _, out, _ = berth("pull", "--platform", platform, ref)
    assert out.splitlines()[0] == f"Digest: {img.manifest.digest}"
    [rec] = berth.json("images", "--json")
    assert rec["digest"] == img.manifest.digest
    assert rec["id"] == img.config.digest
    assert rec["platform"] == platform
    os_, arch, *variant = platform.split("/")
    info = berth.json("inspect", ref)
    assert info["platform"] == {"os": os_, "architecture": arch,
                                "variant": variant[0] if variant else ""}
    _, table, _ = berth("images")
    assert table.splitlines()[1].split()[3] == platform
    root = berth.path("root")
    berth("unpack", ref, root)
    with open(f"{root}/platform") as f:
        assert f.read() == platform + "\n"


def test_default_platform_is_the_hosts(berth, multi):
    ref, images = multi["oci"]
    berth("pull", ref)
    [rec] = berth.json("images", "--json")
    assert rec["platform"] == "linux/amd64"
    assert rec["digest"] == images["linux/amd64"].manifest.digest


def test_platform_aliases(berth, multi):
    ref, images = multi["oci"]
    berth("pull", "--platform", "linux/aarch64", ref)
    [rec] = berth.json("images", "--json")
    assert rec["digest"] == images["linux/arm64/v8"].manifest.digest


def test_no_matching_platform_lists_the_available_ones(berth, multi):
    ref, _ = multi["oci"]
    rc, out, err = berth("pull", "--platform", "linux/s390x", ref, check=False)
    assert rc == 1
    assert out == ""
    assert err == (
        f"berth: error: pull {ref}: select platform linux/s390x: no image for platform "
        f"linux/s390x in {imagelib.OCI_INDEX}; available: "
        "linux/amd64, linux/arm64/v8, linux/arm/v7, linux/ppc64le\n")
    assert berth.json("images", "--json") == []


def test_variant_mismatch_is_no_match(berth, multi):
    ref, _ = multi["docker"]
    rc, _, err = berth("pull", "--platform", "linux/arm/v6", ref, check=False)
    assert rc == 1
    assert "no image for platform linux/arm/v6" in err
    assert "available: linux/amd64, linux/arm64/v8, linux/arm/v7, linux/ppc64le" in err


def test_platform_of_a_single_manifest_is_checked(berth, registry):
    img = imagelib.make_image([Layer([File("x", b"x")])], platform="linux/ppc64le")
    registry.pusher().push_image("multi/single-ppc", "1", img)
    ref = f"{registry.host}/multi/single-ppc:1"
    rc, _, err = berth("pull", "--platform", "linux/amd64", ref, check=False)
    assert rc == 1
    assert err == (f"berth: error: pull {ref}: select platform linux/amd64: image {ref} "
                   "is for linux/ppc64le, not the requested platform\n")
    # Without --platform the image is taken, with a warning.
    rc, _, err = berth("pull", ref)
    assert err == f"berth: warning: image {ref} is for linux/ppc64le, this host is linux/amd64\n"


def test_malformed_platform_value(berth, multi):
    ref, _ = multi["oci"]
    rc, out, err = berth("pull", "--platform", "linux/arm/v7/extra", ref, check=False)
    assert rc != 0
    assert err.splitlines()[0] == (
        "berth: error: parse platform linux/arm/v7/extra: expected os/arch[/variant]")


def test_platform_of_a_stored_single_platform_image_is_checked(berth, registry):
    """A name already stored from a single-platform manifest is not 'up to date' for another
    --platform: the pull says the image is for another platform (before: "Image is up to date"
    for the wrong platform)."""
    img = imagelib.make_image([Layer([File("platform", b"arm64\n")])], platform="linux/arm64",
                              label="single-arm64")
    registry.pusher().push_image("single/arm64", "1", img)
    ref = f"{registry.host}/single/arm64:1"
    berth("pull", "--platform", "linux/arm64", ref)
    _, out, _ = berth("pull", "--platform", "linux/arm64", ref)
    assert out.splitlines()[1] == f"Status: Image is up to date for {ref}"
    rc, out, err = berth("pull", "--platform", "linux/ppc64le", ref, check=False)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: pull {ref}: select platform linux/ppc64le: image {ref} is for "
                   "linux/arm64, not the requested platform\n")

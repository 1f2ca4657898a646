"""Saved registry credentials go only to the registry they were saved for (and to the token
realm that registry's own challenge names): a blob redirect to another host never carries
them, and a 401 from there is an error naming that host (the CVE-2020-15157 class)."""

import pytest

import imagelib
import servers

USER, PASSWORD = "carol", "s3cret-for-the-registry"


@pytest.fixture
def redirecting(berth):
    """A registry behind Basic credentials whose blob downloads go to BlobStorage on another
    origin, with `berth login` done; yields (registry, storage, image, reference)."""
    img = imagelib.make_image([imagelib.Layer([imagelib.File("etc/app", b"app\n")])])
    reg = servers.FakeRegistry()
    reg.manifests[("team/app", "1")] = (imagelib.OCI_MANIFEST, img.manifest.data)
    storage = servers.BlobStorage({b.digest: b.data for b in img.blobs()})
    reg.blob_redirect = storage.url
    reg.start()
    storage.start()
    try:
        berth("login", "-u", USER, "--password-stdin", reg.host, input=PASSWORD + "\n")
        reg.basic_auth = (USER, PASSWORD)
        yield reg, storage, img, f"{reg.host}/team/app:1"
    finally:
        reg.stop()
        storage.stop()


def test_redirect_to_storage_carries_no_credentials(berth, redirecting):
    reg, storage, img, ref = redirecting
    _, out, _ = berth("pull", ref)
    assert out.splitlines()[0] == f"Digest: {img.manifest.digest}"
    paths = sorted(p for p, _ in storage.seen)
    assert paths == sorted(f"/v2/team/app/blobs/{b.digest}" for b in img.blobs())
    assert [a for _, a in storage.seen] == [None] * len(storage.seen)


@pytest.mark.parametrize("challenge", [
    'Bearer realm="{url}/token",service="storage"',
    'Basic realm="storage"',
])
def test_storage_asking_for_credentials_gets_none(berth, redirecting, challenge):
    reg, storage, img, ref = redirecting
    storage.challenge = challenge.format(url=storage.url)
    rc, out, err = berth("pull", ref, check=False)
    assert (rc, out) == (1, "")
    first = storage.seen[0][0]
    assert err == (f"berth: error: pull {ref}: GET {storage.url}{first}: redirected to "
                   f"{storage.host}, which asks for credentials; the credentials for {reg.host} "
                   f"are sent only to {reg.host} (HTTP 401)\n")
    assert not any(p.startswith("/token") for p, _ in storage.seen)
    assert [a for _, a in storage.seen] == [None] * len(storage.seen)
    assert berth.json("images", "--json") == []

"""Parsers have limits: hostile manifests, token responses and catalog links from a registry
are one line of error, quickly, never a crash or exception text."""

import time

import pytest

from imagelib import OCI_MANIFEST

DEEP = b"[" * 200_000 + b"]" * 200_000  # 400 kB nested 200,000 deep
HUGE = b'{"a": "' + b"x" * (50 << 20) + b'"}'  # 50 MB


def one_line_error(berth, *args):
    start = time.monotonic()
    rc, out, err = berth(*args, check=False)
    elapsed = time.monotonic() - start
    assert (rc, out) == (1, ""), err
    assert len(err.splitlines()) == 1, err
    assert "json.exception" not in err and "terminate" not in err, err
    # "well under a second" on a quiet machine; generous here because the test machine is shared
    assert elapsed < 5, elapsed
    return err


# Parametrized by name only: the test's name reaches the berth fixture's environment.
@pytest.mark.parametrize("name, body, detail", [
    ("deep", DEEP, "malformed manifest: nested deeper than 256 levels"),
    ("huge", HUGE, f"response larger than {4 << 20} bytes"),
], ids=["deep", "huge"])
def test_hostile_manifest(berth, fake_registry, name, body, detail):
    fake_registry.manifests[("hostile", name)] = (OCI_MANIFEST, body)
    try:
        ref = f"{fake_registry.host}/hostile:{name}"
        err = one_line_error(berth, "pull", ref)
    finally:
        del fake_registry.manifests[("hostile", name)]
    assert err.startswith(f"berth: error: pull {ref}: "), err
    assert err.endswith(detail + "\n"), err
    assert berth.blobs() == set()


@pytest.mark.parametrize("name, body, detail", [
    ("deep", DEEP, "token response from {realm}: nested deeper than 256 levels"),
    ("huge", HUGE, "response larger than 1048576 bytes"),
    ("not-json", b"{token", "token response from {realm}: "),
], ids=["deep", "huge", "not-json"])
def test_hostile_token_response(berth, fake_registry, name, body, detail):
    realm = f"http://{fake_registry.host}/token"
    fake_registry.token_body = body
    try:
        ref = f"{fake_registry.host}/tokens:{name}"
        err = one_line_error(berth, "pull", ref)
    finally:
        fake_registry.token_body = None
    assert err.startswith(f"berth: error: pull {ref}: "), err
    assert detail.format(realm=realm) in err, err


def test_catalog_link_to_another_host_is_not_followed(berth, fake_registry):
    host = fake_registry.host
    fake_registry.catalog_pages = [
        (["e2e/lim-one"], f'<http://{host}/v2/_catalog?page=1>; rel="next"'),
        (["e2e/lim-two"], '<https://evil.example:8443/v2/_catalog?page=2>; rel="next"'),
        (["e2e/lim-three"], None),
    ]
    try:
        err = one_line_error(berth, "search", f"{host}/lim-")
        assert err == (f"berth: error: GET http://{host}/v2/_catalog: the next "
                       "page's link leads to https://evil.example:8443, not this registry; not "
                       "following it\n")
        # A link with no path at all (before: an uncaught std::out_of_range).
        fake_registry.catalog_pages[1] = (["e2e/lim-two"], '<https://evil.example>; rel="next"')
        err = one_line_error(berth, "search", f"{host}/lim-")
        assert "leads to https://evil.example, not this registry" in err
        # The registry's own origin, written absolute, is followed.
        fake_registry.catalog_pages[1] = (["e2e/lim-two"], None)
        hits = berth.json("search", "--json", f"{host}/lim-")
        assert [h["name"] for h in hits] == [f"{host}/e2e/lim-one", f"{host}/e2e/lim-two"]
    finally:
        fake_registry.catalog_pages = None

"""Plain HTTP is spoken only to registries marked insecure; loopback names
(127.0.0.1, ::1, localhost) always count as insecure. 127.0.0.2 is loopback
too, but not one of those names, so it stands for a remote registry here."""

import json
import os

import pytest

import servers

TLS_HANDSHAKE = 0x16  # first byte of a TLS record carrying a ClientHello


@pytest.fixture
def remote(registry, pushed_busybox):
    """The plain registry reached as 127.0.0.2:PORT, through a counting proxy."""
    proxy = servers.ThrottleProxy(registry.port, listen_host="127.0.0.2").start()
    yield proxy, f"{proxy.host}/e2e/busybox:1.0"
    proxy.stop()


def test_https_by_default(berth, remote):
    proxy, ref = remote
    rc, out, err = berth("pull", ref, check=False)
    assert (rc, out) == (1, "")
    assert err.startswith(f"berth: error: pull {ref}: GET https://{proxy.host}/v2/e2e/busybox/"
                          "manifests/1.0: ")
    assert len(err.splitlines()) == 1
    # Only TLS went over the wire: no request in clear.
    assert proxy.first_bytes, "berth did not connect"
    assert all(b[0] == TLS_HANDSHAKE for b in proxy.first_bytes)


def test_insecure_registry_flag(berth, remote):
    proxy, ref = remote
    _, out, _ = berth("--insecure-registry", proxy.host, "pull", ref)
    assert out.endswith(ref + "\n")
    assert all(b.startswith(b"GET ") for b in proxy.first_bytes)


def test_insecure_registry_flag_by_host(berth, remote):
    proxy, ref = remote
    berth("--insecure-registry", "127.0.0.2", "pull", ref)


def test_insecure_registry_flag_for_another_host_does_not_apply(berth, remote):
    proxy, ref = remote
    rc, _, err = berth("--insecure-registry", "127.0.0.3", "pull", ref, check=False)
    assert rc == 1 and f"GET https://{proxy.host}/" in err


def test_insecure_registries_env(berth, remote):
    proxy, ref = remote
    berth("pull", ref, env={"BERTH_INSECURE_REGISTRIES": f"example.org,{proxy.host}"})


def test_insecure_registries_config_file(berth, remote):
    proxy, ref = remote
    config_dir = berth.make_dir("config")
    berth.write_file("config/config.json",
                     json.dumps({"insecure-registries": ["example.org", proxy.host]}))
    berth("pull", ref, env={"BERTH_CONFIG_DIR": config_dir})


def test_malformed_config_file_is_named(berth, remote):
    _, ref = remote
    config_dir = berth.make_dir("config")
    path = berth.write_file("config/config.json", "{insecure")
    rc, _, err = berth("pull", ref, env={"BERTH_CONFIG_DIR": config_dir}, check=False)
    assert rc == 1
    assert err.startswith(f"berth: error: read config {path}: ")


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_loopback_names_are_insecure(berth, registry, pushed_busybox, name):
    ref = f"{name}:{registry.port}/e2e/busybox:1.0"
    _, out, _ = berth("pull", ref)
    assert out.endswith(ref + "\n")

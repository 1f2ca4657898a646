"""Registries that want credentials: htpasswd (Basic) and the Bearer token flow."""

import base64
import json
import os
import stat

import pytest

import imagelib
from conftest import BOB_PASSWORD, USERS
from imagelib import File, Layer

USER, PASSWORD = "alice", USERS["alice"]


@pytest.fixture(scope="module")
def secret_image():
    return imagelib.make_image([imagelib.busybox_layer(),
                                Layer([File("etc/secret", b"only for alice\n")])], fmt="docker")


@pytest.fixture(scope="module", params=["htpasswd", "token"])
def auth_reg(request, secret_image):
    """(registry, image reference) for each kind of authenticating registry."""
    reg = request.getfixturevalue(f"{request.param}_registry")
    reg.pusher("pusher", USERS["pusher"]).push_image("private/app", "1", secret_image)
    reg.kind = request.param
    return reg, f"{reg.host}/private/app:1"


def login(berth, host, password=PASSWORD, check=True):
    return berth("login", "-u", USER, "--password-stdin", host, input=password + "\n",
                 check=check)


def test_pull_without_credentials_asks_for_login(berth, auth_reg):
    reg, ref = auth_reg
    rc, out, err = berth("pull", ref, check=False)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: pull {ref}: GET http://{reg.host}/v2/private/app/manifests/1: "
                   "authentication required (HTTP 401)\n"
                   f"berth: hint: run 'berth login {reg.host}'\n")


def test_login_pull_logout(berth, auth_reg, secret_image):
    reg, ref = auth_reg
    _, out, err = login(berth, reg.host)
    assert (out, err) == ("Login Succeeded\n", "")
    auth_file = os.path.join(berth.home, ".config/berth/auth.json")
    assert stat.S_IMODE(os.stat(auth_file).st_mode) == 0o600
    assert os.stat(auth_file).st_uid == berth.identity.uid

    _, out, _ = berth("pull", ref)
    assert out.splitlines()[0] == f"Digest: {secret_image.manifest.digest}"
    root = berth.path("root")
    berth("unpack", ref, root)
    with open(os.path.join(root, "etc/secret")) as f:
        assert f.read() == "only for alice\n"

    _, out, _ = berth("logout", reg.host)
    assert out == f"Removed login credentials for {reg.host}\n"
    berth("rmi", ref)
    rc, _, err = berth("pull", ref, check=False)
    assert rc == 1 and "authentication required (HTTP 401)" in err
    rc, _, err = berth("logout", reg.host, check=False)
    assert (rc, err) == (1, f"berth: error: logout {reg.host}: not logged in\n")


def test_login_with_wrong_password(berth, auth_reg, token_server):
    reg, _ = auth_reg
    rc, out, err = login(berth, reg.host, "not-the-password", check=False)
    assert (rc, out) == (1, "")
    where = token_server.realm if reg.kind == "token" else f"http://{reg.host}/v2/"
    assert err == (f"berth: error: login {reg.host}: GET {where}: registry {reg.host} "
                   "rejected the credentials (HTTP 401)\n"
                   f"berth: hint: check the credentials given to 'berth login {reg.host}'\n")
    assert not os.path.exists(os.path.join(berth.home, ".config/berth/auth.json"))


def test_login_with_password_flag_and_url_form(berth, auth_reg):
    reg, ref = auth_reg
    _, out, _ = berth("login", "-u", USER, "-p", PASSWORD, f"http://{reg.host}/v2/")
    assert out == "Login Succeeded\n"
    berth("pull", ref)


def test_login_needs_user_and_password(berth, auth_reg):
    reg, _ = auth_reg
    rc, _, err = berth("login", "-u", USER, "--password-stdin", reg.host, input="\n", check=False)
    assert rc == 1
    assert err == f"berth: error: login {reg.host}: a user name and a password are required\n"


def test_credentials_from_docker_config(berth, auth_reg):
    reg, ref = auth_reg
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    berth.identity.write_file(os.path.join(berth.home, ".docker/config.json"),
                              json.dumps({"auths": {reg.host: {"auth": token}}}), 0o600)
    berth("pull", ref)


def test_wrong_credentials_from_docker_config(berth, auth_reg):
    reg, ref = auth_reg
    token = base64.b64encode(f"{USER}:wrong".encode()).decode()
    berth.identity.write_file(os.path.join(berth.home, ".docker/config.json"),
                              json.dumps({"auths": {reg.host: {"auth": token}}}), 0o600)
    rc, _, err = berth("pull", ref, check=False)
    assert rc == 1
    assert f"registry {reg.host} rejected the credentials (HTTP 401)" in err
    assert err.endswith(f"berth: hint: check the credentials given to 'berth login {reg.host}'\n")


def test_malformed_docker_config_is_named(berth, auth_reg):
    reg, ref = auth_reg
    path = berth.identity.write_file(os.path.join(berth.home, ".docker/config.json"), "{oops")
    rc, _, err = berth("pull", ref, check=False)
    assert rc == 1
    assert err.startswith(f"berth: error: read credentials {path}: ")


def test_token_flow_sends_credentials_to_the_realm(berth, token_registry, token_server,
                                                   secret_image):
    token_registry.pusher("pusher", USERS["pusher"]).push_image("private/app", "1", secret_image)
    ref = f"{token_registry.host}/private/app:1"
    login(berth, token_registry.host)
    seen = len(token_server.requests)
    berth("pull", ref)
    asked = token_server.requests[seen:]
    assert asked, "berth fetched no token"
    assert all(r["authorization"] == "Basic" for r in asked)
    assert {s for r in asked for s in r["query"].get("scope", [])} == {
        "repository:private/app:pull"}
    assert all(r["query"]["service"] == [token_server.service] for r in asked)
    # One token serves the whole pull: not one per blob.
    assert len(asked) <= 2


def test_token_without_access_is_denied(berth, token_registry, secret_image):
    """Anonymous tokens carry no access: the registry still says 401."""
    token_registry.pusher("pusher", USERS["pusher"]).push_image("private/app", "1", secret_image)
    ref = f"{token_registry.host}/private/app:1"
    rc, _, err = berth("pull", ref, check=False)
    assert rc == 1
    assert "authentication required" in err and "(HTTP 401)" in err


def test_two_users_of_one_registry_and_the_one_a_pull_takes(berth, acl_registry, secret_image):
    # enroot keeps a login per user and registry (pyxis's USER@ picks one); so does Berth:
    # alice may pull private/app, bob logs in too but may not.
    reg = acl_registry
    reg.pusher("pusher", USERS["pusher"]).push_image("private/app", "1", secret_image)
    ref = f"{reg.host}/private/app:1"
    login(berth, reg.host)
    berth("login", "-u", "bob", "--password-stdin", reg.host, input=BOB_PASSWORD + "\n")
    # The last login is the registry's default (as Docker keeps one): bob's, refused.
    rc, _, err = berth("pull", ref, check=False)
    assert rc == 1 and "(HTTP 401)" in err, err
    # --creds-user (or BERTH_CREDS_USER) takes alice's, kept beside bob's.
    assert berth("pull", "-q", "--creds-user", "alice", ref)[1] == ref + "\n"
    berth("rmi", ref)
    assert berth("pull", "-q", ref, env={"BERTH_CREDS_USER": "alice"})[1] == ref + "\n"
    berth("rmi", ref)
    rc, _, err = berth("pull", "--creds-user", "carol", ref, check=False)
    assert (rc, err) == (1, f"berth: error: pull {ref}: no stored login of user 'carol' for "
                            f"{reg.host}\nberth: hint: berth login -u carol {reg.host}\n")
    # logout -u: bob's login goes; alice's is the default again.
    assert berth("logout", "-u", "bob", reg.host)[1] == (
        f"Removed login credentials of bob for {reg.host}\n")
    assert berth("pull", "-q", ref)[1] == ref + "\n"
    # Docker's "auths" still holds one login per registry: Docker (and Berth before the
    # "users" map) read the file as before.
    with open(os.path.join(berth.home, ".config/berth/auth.json")) as f:
        doc = json.load(f)
    assert base64.b64decode(doc["auths"][reg.host]["auth"]).decode() == f"alice:{PASSWORD}"
    assert sorted(doc["users"][reg.host]) == ["alice"]


def test_credentials_never_go_to_a_plain_http_remote_realm(berth, scratch, secret_image):
    """A token realm on plain HTTP at a host not marked insecure gets no password."""
    import servers
    tokens = servers.TokenServer(scratch, USERS, host="127.0.0.2", name="token-remote").start()
    reg = servers.RegistryServer(scratch, auth=tokens.registry_auth(), name="registry-remote-realm")
    try:
        reg.start()
        reg.pusher("pusher", USERS["pusher"]).push_image("private/app", "1", secret_image)
        seen = len(tokens.requests)
        rc, out, err = login(berth, reg.host, check=False)
        assert (rc, out) == (1, "")
        assert err == (f"berth: error: login {reg.host}: authenticate {tokens.realm}: token "
                       "service uses plain HTTP; refusing to send credentials\n"
                       "berth: hint: add 127.0.0.2:%d to the insecure registries if this is "
                       "intended\n" % tokens.port)
        assert tokens.requests[seen:] == []
        # Marked insecure, it is trusted with them.
        _, out, _ = berth("--insecure-registry", f"127.0.0.2:{tokens.port}", "login", "-u", USER,
                          "--password-stdin", reg.host, input=PASSWORD + "\n")
        assert out == "Login Succeeded\n"
        assert [r["authorization"] for r in tokens.requests[seen:]] == ["Basic"]
    finally:
        reg.stop()
        tokens.stop()

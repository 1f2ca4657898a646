"""berthd, the REST job gateway: its unauthenticated endpoints, OIDC bearer tokens validated
against a real issuer on loopback (discovery, JWKS), every token attack of issue 16 refused,
identities mapped to two local accounts, and the daemon running as an unprivileged user."""

from __future__ import annotations

import http.client
import os
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

from gateway import (ADMIN_GROUP, AUDIENCE_A, AUDIENCE_B, Berthd, berthd,  # noqa: F401
                     berthd_bin, gateway_config, issuers, second_user, start_berthd)
from jwcrypto import jwk
from oidc import b64json

def test_health_needs_no_token(berthd, issuers):
    status, _, body = berthd.request("GET", "/v1/health")
    assert status == 200
    assert body["status"] == "ok"
    assert body["version"]
    # The issuers it trusts, for a broker's prefilter (docs/broker.md); no broker here.
    a, b = issuers.issuers["a"], issuers.issuers["b"]
    assert body["issuers"] == [{"issuer": a.url, "audience": AUDIENCE_A},
                               {"issuer": b.url, "audience": AUDIENCE_B}], body
    assert body["broker"] is False


def test_openapi_document(berthd):
    status, headers, doc = berthd.request("GET", "/v1/openapi.json")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]) >= {"/v1/health", "/v1/openapi.json", "/v1/me", "/v1/jobs",
                                 "/v1/jobs/{id}", "/v1/jobs/{id}/output", "/v1/systems",
                                 "/v1/orphans"}
    # Every schema a path names is defined.
    refs = set()

    def walk(node):
        if isinstance(node, dict):
            refs.update(v.rsplit("/", 1)[1] for k, v in node.items() if k == "$ref")
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)
    assert refs <= set(doc["components"]["schemas"]), refs - set(doc["components"]["schemas"])
    assert "gpus_allocated" in doc["components"]["schemas"]["Job"]["properties"]
    assert doc["components"]["schemas"]["JobRequest"]["required"] == ["image"]
    assert doc["paths"]["/v1/health"]["get"]["security"] == []
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_runs_as_the_unprivileged_user(berthd, identity):
    with open(f"/proc/{berthd.proc.pid}/status") as f:
        uids = next(line for line in f if line.startswith("Uid:")).split()[1:]
    assert {int(u) for u in uids} == {identity.uid}


def test_no_token_is_challenged(berthd):
    status, headers, body = berthd.request("GET", "/v1/me")
    assert status == 401
    assert headers["WWW-Authenticate"] == 'Bearer realm="berthd"'
    assert body == {"error": {"status": 401, "message": "no bearer token"}}


def test_me_as_two_users(berthd, issuers, identity, second_user):
    a, b = issuers.issuers["a"], issuers.issuers["b"]
    user_a = os.popen(f"id -un {identity.uid}").read().strip()
    token = a.sign(a.claims("s-alice", AUDIENCE_A, preferred_username=user_a,
                            groups=["/berth", ADMIN_GROUP]))
    status, _, me = berthd.request("GET", "/v1/me", token)
    assert status == 200, me
    assert me == {"issuer": a.url, "subject": "s-alice", "user": user_a, "uid": identity.uid,
                  "gid": identity.gid, "groups": ["/berth", ADMIN_GROUP], "admin": True}
    # The same account through the EC key, without the admin group.
    token = a.sign(a.claims("s-alice", AUDIENCE_A, preferred_username=user_a), key=a.ec)
    status, _, me = berthd.request("GET", "/v1/me", token)
    assert status == 200, me
    assert me["admin"] is False and me["groups"] == []
    if second_user is None:
        pytest.skip("a second local account needs root to create")
    # AARC entitlements are the group they name (its role dropped), nested groups a path.
    entitlements = ["urn:mace:egi.eu:group:gpu.example.eu:role=member#aai.egi.eu",
                    "urn:geant:example.org:group:gpu-vo:sub:role=manager#aai.example.org"]
    token = b.sign(b.claims("egi-0042@egi.eu", AUDIENCE_B, eduperson_entitlement=entitlements))
    status, _, me = berthd.request("GET", "/v1/me", token)
    assert status == 200, me
    assert me["user"] == second_user and me["uid"] != identity.uid
    assert me["groups"] == ["/gpu.example.eu", "/gpu-vo/sub"] and me["admin"] is False


def _attacks(a, b):
    """(name, token, message) of every forged or unusable token."""
    now = int(time.time())
    good = a.claims("s-alice", AUDIENCE_A, preferred_username="nobody-here")
    signed = a.sign(good)
    head, _, sig = signed.split(".")
    tampered = head + "." + b64json(dict(good, sub="s-root")) + "." + sig
    stranger = jwk.JWK.generate(kty="RSA", size=2048, kid="a-rsa-9")
    return [
        ("alg none", a.forge_none(good),
         'algorithm "none" is not accepted (only RS256 and ES256)'),
        ("HS256 with the RSA public key", a.forge_hs256_with_public_key(good),
         'algorithm "HS256" is not accepted (only RS256 and ES256)'),
        ("expired", a.sign(dict(good, exp=now - 600, iat=now - 900)), "the token has expired"),
        ("not yet valid", a.sign(dict(good, nbf=now + 600)), "the token is not valid yet (nbf)"),
        ("wrong iss", a.sign(dict(good, iss=a.url + "/")),
         f'issuer "{a.url}/" is not trusted'),
        ("wrong aud", a.sign(dict(good, aud="someone-else")),
         f'the token\'s audience does not name "{AUDIENCE_A}"'),
        ("unknown kid", a.sign(good, key=stranger), f'issuer "{a.url}" has no key "a-rsa-9"'),
        ("tampered payload", tampered, 'the signature does not verify with key "a-rsa-1"'),
        ("key of another issuer", a.sign(good, key=b.rsa, kid="a-rsa-1"),
         'the signature does not verify with key "a-rsa-1"'),
        ("key of another issuer, its own kid", a.sign(good, key=b.rsa),
         f'issuer "{a.url}" has no key "b-rsa-1"'),
    ]


ATTACKS = ["alg none", "HS256 with the RSA public key", "expired", "not yet valid", "wrong iss",
           "wrong aud", "unknown kid", "tampered payload", "key of another issuer",
           "key of another issuer, its own kid"]


@pytest.mark.parametrize("attack", ATTACKS)
def test_token_attack_is_refused(berthd, issuers, attack):
    a, b = issuers.issuers["a"], issuers.issuers["b"]
    table = {name: (token, message) for name, token, message in _attacks(a, b)}
    token, message = table[attack]
    status, headers, body = berthd.request("GET", "/v1/me", token)
    assert status == 401, body
    assert body == {"error": {"status": 401, "message": message}}
    # RFC 6750's challenge; a quoted-string cannot hold the message's own quotes.
    assert headers["WWW-Authenticate"] == ('Bearer realm="berthd", error="invalid_token", '
                                           'error_description="' + message.replace('"', "") + '"')


def test_unknown_kids_refetch_the_jwks_at_a_bounded_rate(berthd, issuers):
    a = issuers.issuers["a"]
    user = os.popen("id -un").read().strip()
    # Keys cached by a first valid token.
    assert berthd.request("GET", "/v1/me", a.sign(a.claims("s", AUDIENCE_A,
                                                           preferred_username=user)))[0] in (200, 403)
    before = a.jwks_fetches
    for i in range(5):
        stranger = jwk.JWK.generate(kty="EC", crv="P-256", kid=f"made-up-{i}")
        status, _, _ = berthd.request("GET", "/v1/me", a.sign(a.claims("s", AUDIENCE_A),
                                                             key=stranger))
        assert status == 401
    # At most one new fetch within jwks_min_refresh_s (30 s).
    assert a.jwks_fetches - before <= 1


def test_unmapped_identity_is_forbidden(berthd, issuers):
    a, b = issuers.issuers["a"], issuers.issuers["b"]
    status, headers, body = berthd.request(
        "GET", "/v1/me", a.sign(a.claims("s-x", AUDIENCE_A, preferred_username="no-such-user-x")))
    assert status == 403
    assert "WWW-Authenticate" not in headers
    assert body["error"]["message"] == (f'subject "s-x" of "{a.url}" maps to "no-such-user-x", '
                                        'which is not a local account')
    status, _, body = berthd.request("GET", "/v1/me", b.sign(b.claims("egi-9@egi.eu", AUDIENCE_B)))
    assert status == 403
    assert body["error"]["message"] == f'subject "egi-9@egi.eu" of "{b.url}" has no local account'
    status, _, body = berthd.request(
        "GET", "/v1/me", a.sign(a.claims("s-r", AUDIENCE_A, preferred_username="root")))
    assert status == 403
    assert body["error"]["message"].endswith('maps to "root", which is root: jobs never run as root')


def test_plain_http_off_loopback_is_refused(identity, scratch, berthd_bin, issuers):
    workdir = identity.make_dir(os.path.join(scratch, "berthd-open"))
    conf = identity.write_file(os.path.join(workdir, "berthd.conf"),
                               gateway_config(issuers, None).replace("127.0.0.1:0", "0.0.0.0:0"))
    r = subprocess.run(identity.prefix + [berthd_bin, "--config", conf], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 1
    assert r.stderr.splitlines()[0] == (
        f"berthd: read config {conf}: plain HTTP on 0.0.0.0, which is not loopback: configure "
        "tls_cert and tls_key, or set plain_http_anywhere = true")


def test_tls(identity, scratch, berthd_bin, issuers):
    workdir = identity.make_dir(os.path.join(scratch, "berthd-tls"))
    cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    for p in (cert, key):
        identity.chown(p)
    os.chmod(key, 0o600)
    conf = identity.write_file(
        os.path.join(workdir, "berthd.conf"),
        gateway_config(issuers, None, f'tls_cert = "{cert}"\ntls_key = "{key}"\n'
                       "[connections]\nrequest_timeout_s = 2\n"))
    proc, url = start_berthd(identity, berthd_bin, conf, os.path.join(workdir, "berthd.log"))
    try:
        assert url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=cert)
        with urllib.request.urlopen(url + "/v1/health", context=ctx, timeout=10) as r:
            assert r.status == 200
        # The same port does not speak plain HTTP.
        with pytest.raises(OSError):
            urllib.request.urlopen(url.replace("https", "http") + "/v1/health", timeout=10)
        # A handshake sent a byte a second is cut at request_timeout_s (2 s here): before, each
        # byte restarted a 5 s read timeout and the connection held its worker for ever.
        hello = ssl.MemoryBIO()
        tls = ctx.wrap_bio(ssl.MemoryBIO(), hello, server_hostname="127.0.0.1")
        with pytest.raises(ssl.SSLWantReadError):
            tls.do_handshake()
        client_hello = hello.read()
        u = urllib.parse.urlsplit(url)
        with socket.create_connection((u.hostname, u.port), timeout=60) as s:
            closed = False
            for byte in client_hello[:60]:  # at most a minute
                try:
                    s.sendall(bytes([byte]))
                    s.settimeout(1)
                    if s.recv(1) == b"":
                        closed = True
                        break
                except socket.timeout:
                    continue
                except OSError:
                    closed = True
                    break
            assert closed, "berthd still waits for the handshake"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_system_accounts_and_control_characters_are_refused(berthd, issuers, identity):
    a = issuers.issuers["a"]
    prefix = f'subject "s-x" of "{a.url}" maps to '
    for user in ("daemon", "nobody"):
        uid = int(os.popen(f"id -u {user}").read().strip())
        status, _, body = berthd.request(
            "GET", "/v1/me", a.sign(a.claims("s-x", AUDIENCE_A, preferred_username=user)))
        assert status == 403, body
        assert body["error"]["message"] == (
            prefix + f'"{user}", whose uid {uid} is outside [accounts] uid_min to uid_max '
            "(1000-60000): system accounts never run jobs")
    # A NUL ended the name getpwnam saw: the token ran as the account before it.
    user = os.popen(f"id -un {identity.uid}").read().strip()
    status, _, body = berthd.request(
        "GET", "/v1/me", a.sign(a.claims("s-x", AUDIENCE_A, preferred_username=user + "\0x")))
    assert status == 403, body
    assert body["error"]["message"] == (
        prefix + f'"{user}\\x00x", which has control characters: not an account name')


def _start(identity, scratch, berthd_bin, name: str, text: str) -> Berthd:
    workdir = identity.make_dir(os.path.join(scratch, name))
    conf = identity.write_file(os.path.join(workdir, "berthd.conf"), text)
    log = os.path.join(workdir, "berthd.log")
    proc, url = start_berthd(identity, berthd_bin, conf, log)
    return Berthd(proc, url, log)


def _stop(gw: Berthd):
    gw.proc.terminate()
    try:
        gw.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        gw.proc.kill()
        gw.proc.wait()


def test_own_account_and_slurm_user_are_refused(identity, scratch, berthd_bin, issuers,
                                                 second_user, monkeypatch):
    a, b = issuers.issuers["a"], issuers.issuers["b"]
    # SlurmUser from the slurm.conf berthd's environment names (here the second account).
    slurm_conf = identity.write_file(os.path.join(scratch, "berthd-slurmuser.conf"),
                                     f"ClusterName=x\nSlurmUser={second_user or 'root'}\n")
    monkeypatch.setenv("SLURM_CONF", slurm_conf)
    gw = _start(identity, scratch, berthd_bin, "berthd-accounts",
                gateway_config(issuers, second_user, own_account=False))
    try:
        user = os.popen(f"id -un {identity.uid}").read().strip()
        status, _, body = gw.request(
            "GET", "/v1/me", a.sign(a.claims("s-alice", AUDIENCE_A, preferred_username=user)))
        assert status == 403, body
        assert body["error"]["message"] == (
            f'subject "s-alice" of "{a.url}" maps to "{user}", which is berthd\'s own account: '
            "jobs never run as the gateway")
        if second_user is None:
            pytest.skip("a second local account (as SlurmUser) needs root to create")
        status, _, body = gw.request("GET", "/v1/me",
                                     b.sign(b.claims("egi-0042@egi.eu", AUDIENCE_B)))
        assert status == 403, body
        assert body["error"]["message"] == (
            f'subject "egi-0042@egi.eu" of "{b.url}" maps to "{second_user}", which is Slurm\'s '
            f'SlurmUser ("{second_user}" in slurm.conf): jobs never run as Slurm\'s administrator')
    finally:
        _stop(gw)


def _alice(issuers, identity, admin: bool = False) -> str:
    a = issuers.issuers["a"]
    user = os.popen(f"id -un {identity.uid}").read().strip()
    return a.sign(a.claims("s-alice", AUDIENCE_A, preferred_username=user,
                           groups=[ADMIN_GROUP] if admin else None))


def _read_all(s: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except OSError:  # reset: the server closed with the client's bytes unread
        pass
    return data


def _trickle(slow: list, stop: threading.Event) -> None:
    """Sends each of the `slow` sockets one more header line a second until `stop`."""
    while not stop.wait(1):
        for s in slow:
            try:
                s.send(b"X-Slow: 1\r\n")
            except OSError:
                pass


def test_slow_clients_leave_workers_for_others(identity, scratch, berthd_bin, issuers):
    """300 connections sending their headers a line a second (more than berthd's 128 workers)
    do not keep an authenticated request from another address from being answered; those
    over max_per_address (32) are answered 503 and closed at once."""
    gw = _start(identity, scratch, berthd_bin, "berthd-slow", gateway_config(issuers, None))
    u = urllib.parse.urlsplit(gw.url)
    slow = []
    stop = threading.Event()
    t = threading.Thread(target=_trickle, args=(slow, stop))
    try:
        for _ in range(300):
            s = socket.create_connection((u.hostname, u.port), timeout=60)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: berthd\r\n")
            slow.append(s)
        t.start()
        # Another client (loopback has all of 127/8), with a token, while they are open.
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60,
                                          source_address=("127.0.0.2", 0))
        conn.request("GET", "/v1/me", headers={"Authorization": "Bearer " + _alice(issuers,
                                                                                    identity)})
        r = conn.getresponse()
        assert r.status == 200, r.read()
        conn.close()
        stop.set()
        t.join()
        # Once the trickle stops, every slow connection ends; those over the cap had a 503.
        answers = [_read_all(s) for s in slow]
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503 ")]
        assert len(refused) == 300 - 32, [a[:40] for a in answers if a not in refused][:5]
        assert b"too many connections from 127.0.0.1 ([connections] max_per_address)" in refused[0]
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60,
                                          source_address=("127.0.0.2", 0))
        conn.request("GET", "/metrics",
                     headers={"Authorization": "Bearer " + _alice(issuers, identity, True)})
        metrics = conn.getresponse().read().decode()
        assert 'berthd_connections_refused_total{reason="per_address"} 268' in metrics
    finally:
        stop.set()
        if t.is_alive():
            t.join()
        for s in slow:
            s.close()
        _stop(gw)


def test_connections_over_the_queue_are_refused(identity, scratch, berthd_bin, issuers):
    """With every worker held and max_queued waiting, a new connection is answered 503 at once
    rather than waiting its turn without bound."""
    gw = _start(identity, scratch, berthd_bin, "berthd-queue",
                gateway_config(issuers, None,
                               "[connections]\nmax_per_address = 1000\nmax_queued = 1\n"))
    u = urllib.parse.urlsplit(gw.url)
    slow = []
    stop = threading.Event()
    t = threading.Thread(target=_trickle, args=(slow, stop))
    try:
        for _ in range(128 + 1 + 20):  # the workers, the queue, and 20 more
            s = socket.create_connection((u.hostname, u.port), timeout=60)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: berthd\r\n")
            slow.append(s)
        t.start()
        stop.set()
        t.join()
        answers = [_read_all(s) for s in slow]
        refused = [a for a in answers if a.startswith(b"HTTP/1.1 503 ")]
        # At least the 20 (more when workers had not taken their connections yet).
        assert len(refused) >= 20, [a[:40] for a in answers][-25:]
        assert all(b"berthd is busy: try again later ([connections] max_queued)" in a
                   for a in refused)
    finally:
        stop.set()
        if t.is_alive():
            t.join()
        for s in slow:
            s.close()
        _stop(gw)


def test_a_request_past_its_deadline_is_answered_408(identity, scratch, berthd_bin, issuers):
    """A client that keeps sending header lines, never ending them, is cut at request_timeout_s
    (without the deadline it held its worker for as long as it kept sending)."""
    gw = _start(identity, scratch, berthd_bin, "berthd-deadline",
                gateway_config(issuers, None, "[connections]\nrequest_timeout_s = 2\n"))
    u = urllib.parse.urlsplit(gw.url)
    try:
        with socket.create_connection((u.hostname, u.port), timeout=60) as s:
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: berthd\r\n")
            answer = b""
            for _ in range(60):  # at most a minute of header lines
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    break
                s.settimeout(1)
                try:
                    answer += s.recv(4096)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if answer:
                    break
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
        assert b"request_timeout_s" in answer
    finally:
        _stop(gw)
    with open(gw.log) as f:
        assert re.search(r"^berthd: access GET /v1/health 408 [0-9.]+ms -$", f.read(), re.M)


def test_a_request_refused_before_routing_is_nobody_s(berthd, issuers, identity):
    """A request cpp-httplib refuses before routing (its URI too long: 414) on the worker that
    served an authenticated one is logged as no one's, not as the previous request's user."""
    u = urllib.parse.urlsplit(berthd.url)
    user = os.popen(f"id -un {identity.uid}").read().strip()
    with socket.create_connection((u.hostname, u.port), timeout=60) as s:
        s.sendall(b"GET /v1/me HTTP/1.1\r\nHost: berthd\r\nAuthorization: Bearer " +
                  _alice(issuers, identity).encode() + b"\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            answer += s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 "), answer
        # The same connection, so the same worker thread.
        s.sendall(b"GET /" + b"x" * 9000 + b" HTTP/1.1\r\nHost: berthd\r\n\r\n")
        assert _read_all(s).startswith(b"HTTP/1.1 414 ")
    with open(berthd.log) as f:
        lines = [line for line in f if line.startswith("berthd: access ") and " 414 " in line]
    assert lines, "no access line for the 414"
    assert lines[-1].rstrip().endswith(" -"), lines[-1]
    assert not lines[-1].rstrip().endswith(" " + user)

"""An OpenID Connect issuer for the gateway tests, on 127.0.0.1.

One http.server serves any number of issuers, each under /realms/NAME: its discovery document
(/.well-known/openid-configuration) and its JWKS, and counts the JWKS fetches. Each issuer holds
an RSA (RS256) and a P-256 (ES256) key made with Debian's python3-jwcrypto, and signs tokens
with them. Its token endpoint (/token) does OAuth 2.0 Token Exchange (RFC 8693) for the clients
in `exchange_clients`: a valid access token of its own becomes one of the same subject for the
audience asked, living EXCHANGED_LIFE_S. Forged tokens (alg none, HS256 with the public key, a
key nobody published) are built by hand here too, for the attack tests.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import json
import threading
import time
import urllib.parse

from jwcrypto import jwk, jwt

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
EXCHANGED_LIFE_S = 120


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64json(obj) -> str:
    return b64url(json.dumps(obj).encode())


class Issuer:
    """One realm: its URL, keys and token helpers."""

    def __init__(self, url: str, name: str):
        self.url, self.name = url, name
        self.rsa = jwk.JWK.generate(kty="RSA", size=2048, kid=f"{name}-rsa-1", use="sig", alg="RS256")
        self.ec = jwk.JWK.generate(kty="EC", crv="P-256", kid=f"{name}-ec-1", use="sig", alg="ES256")
        self.published = [self.rsa, self.ec]
        self.jwks_fetches = 0
        self.exchange_clients: dict[str, str] = {}  # client_id -> secret
        self.exchange_refused: set[str] = set()  # audiences refused (invalid_target)
        self.exchanges: list[dict] = []  # each request's form, and its client

    def jwks(self) -> dict:
        return {"keys": [json.loads(k.export_public()) for k in self.published]}

    def claims(self, sub: str, audience: str, **extra) -> dict:
        now = int(time.time())
        c = {"iss": self.url, "sub": sub, "aud": audience, "iat": now, "exp": now + 300,
             "scope": "openid berth"}
        c.update(extra)
        return {k: v for k, v in c.items() if v is not None}

    def sign(self, claims: dict, key: jwk.JWK | None = None, alg: str | None = None,
             kid: str | None = None) -> str:
        """A token of `claims` signed by `key` (the RSA key by default)."""
        key = key or self.rsa
        alg = alg or ("ES256" if key.get("kty") == "EC" else "RS256")
        header = {"alg": alg, "typ": "JWT", "kid": kid or key.get("kid")}
        token = jwt.JWT(header=header, claims=claims)
        token.make_signed_token(key)
        return token.serialize()

    def exchange(self, authorization: str, body: str):
        """(answer, status) of an RFC 8693 request to the token endpoint."""
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}
        client = None
        if authorization.lower().startswith("basic "):
            raw = base64.b64decode(authorization[6:]).decode()
            cid, _, secret = raw.partition(":")
            cid, secret = urllib.parse.unquote_plus(cid), urllib.parse.unquote_plus(secret)
            if self.exchange_clients.get(cid) == secret:
                client = cid
        self.exchanges.append({"client": client, **form})
        if client is None:
            return {"error": "invalid_client", "error_description": "unknown client"}, 401
        if form.get("grant_type") != TOKEN_EXCHANGE:
            return {"error": "unsupported_grant_type"}, 400
        if form.get("subject_token_type") != ACCESS_TOKEN or \
                form.get("requested_token_type", ACCESS_TOKEN) != ACCESS_TOKEN:
            return {"error": "invalid_request", "error_description": "access tokens only"}, 400
        try:
            keys = jwk.JWKSet()
            for k in self.published:
                keys.add(k)
            subject = json.loads(jwt.JWT(jwt=form.get("subject_token", ""), key=keys).claims)
        except Exception as e:  # noqa: BLE001 (any failure of the token is the caller's)
            return {"error": "invalid_grant", "error_description": f"bad subject_token: {e}"}, 400
        if subject.get("iss") != self.url or subject.get("exp", 0) < time.time():
            return {"error": "invalid_grant", "error_description": "subject_token expired"}, 400
        audience = form.get("audience", "")
        if not audience or audience in self.exchange_refused:
            return {"error": "invalid_target",
                    "error_description": f"audience {audience!r} is not allowed"}, 400
        now = int(time.time())
        claims = {**subject, "aud": audience, "iat": now, "exp": now + EXCHANGED_LIFE_S,
                  "azp": client}
        return {"access_token": self.sign(claims), "issued_token_type": ACCESS_TOKEN,
                "token_type": "Bearer", "expires_in": EXCHANGED_LIFE_S}, 200

    def forge_none(self, claims: dict) -> str:
        return b64json({"alg": "none", "typ": "JWT", "kid": self.rsa.get("kid")}) + "." + \
            b64json(claims) + "."

    def forge_hs256_with_public_key(self, claims: dict) -> str:
        """The key-confusion attack: HMAC-SHA256 keyed with the issuer's RSA public key (PEM)."""
        secret = self.rsa.export_to_pem(private_key=False)
        head = b64json({"alg": "HS256", "typ": "JWT", "kid": self.rsa.get("kid")}) + "." + \
            b64json(claims)
        mac = hmac.new(secret, head.encode(), hashlib.sha256).digest()
        return head + "." + b64url(mac)


class IssuerServer:
    """The HTTP server of several issuers."""

    def __init__(self, names=("a", "b")):
        self.names = names
        self.issuers: dict[str, Issuer] = {}
        self.httpd = None

    def start(self) -> "IssuerServer":
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                body, status = server._answer(self.path)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                form = self.rfile.read(length).decode()
                body, status = {"error": "not found"}, 404
                for iss in server.issuers.values():
                    if self.path == "/realms/" + iss.name + "/token":
                        body, status = iss.exchange(self.headers.get("Authorization", ""), form)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self.httpd.server_address[1]
        for n in self.names:
            self.issuers[n] = Issuer(f"http://127.0.0.1:{port}/realms/{n}", n)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def _answer(self, path: str):
        for iss in self.issuers.values():
            prefix = "/realms/" + iss.name
            if path == prefix + "/.well-known/openid-configuration":
                return {"issuer": iss.url, "jwks_uri": iss.url + "/jwks",
                        "token_endpoint": iss.url + "/token",
                        "grant_types_supported": [TOKEN_EXCHANGE],
                        "id_token_signing_alg_values_supported": ["RS256", "ES256"]}, 200
            if path == prefix + "/jwks":
                iss.jwks_fetches += 1
                return iss.jwks(), 200
        return {"error": "not found"}, 404

    def stop(self) -> None:
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()

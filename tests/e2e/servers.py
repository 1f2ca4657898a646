"""Services the end-to-end tests talk to, all on the loopback interface.

- RegistryServer: Debian's `docker-registry serve CONFIG.yml` (distribution 2.8)
  on a free port with its storage in a temporary folder, optionally behind
  htpasswd (bcrypt) or token authentication.
- TokenServer: the Docker token flow (realm/service/scope, Basic credentials),
  issuing RS256 JWTs whose header carries the signing certificate in `x5c`;
  the registry trusts it through `rootcertbundle`. Signed with the openssl CLI.
- ThrottleProxy: a TCP proxy that can slow the registry's answers down (to kill
  a pull halfway) and records what clients sent first (to tell TLS from HTTP).
- FakeRegistry: a tiny http.server that answers manifests from a table, for
  bodies a real registry would refuse to store; optionally behind Basic
  credentials and redirecting blob downloads elsewhere.
- BlobStorage: another host's object storage that blob downloads are redirected
  to; records every request's headers and can ask for credentials itself.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import imagelib


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 20.0, proc: subprocess.Popen | None = None) -> None:
    """Waits until `url` answers with any HTTP status."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # 401 from an authenticating registry is an answer too
        except OSError:
            pass
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server for {url} exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")
        time.sleep(0.1)


class RegistryServer:
    """docker-registry on 127.0.0.1:<free port>.

    auth: None, ("htpasswd", FILE) or ("token", {"realm", "service", "issuer", "rootcertbundle"}).
    """

    def __init__(self, workdir: str, auth=None, name: str = "registry"):
        self.workdir = os.path.join(workdir, name)
        self.storage = os.path.join(self.workdir, "storage")
        os.makedirs(self.storage, exist_ok=True)
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}"
        self.auth = auth
        self.proc: subprocess.Popen | None = None

    def _config(self) -> str:
        lines = [
            "version: 0.1",
            "log:",
            "  level: error",
            "  accesslog:",
            "    disabled: true",
            "storage:",
            "  filesystem:",
            f"    rootdirectory: {self.storage}",
            "  delete:",
            "    enabled: true",
            "  maintenance:",
            "    uploadpurging:",
            "      enabled: false",
            "http:",
            f"  addr: {self.host}",
            f"  secret: {uuid.uuid4().hex}",
        ]
        if self.auth and self.auth[0] == "htpasswd":
            lines += ["auth:", "  htpasswd:", "    realm: berth-test", f"    path: {self.auth[1]}"]
        elif self.auth and self.auth[0] == "token":
            t = self.auth[1]
            lines += ["auth:", "  token:"] + [f"    {k}: {t[k]}" for k in
                                              ("realm", "service", "issuer", "rootcertbundle")]
        return "\n".join(lines) + "\n"

    def start(self) -> "RegistryServer":
        # The free port may be taken by someone else before the registry binds
        # it: then the registry exits at once, and another port is tried.
        for attempt in range(3):
            config = os.path.join(self.workdir, "config.yml")
            with open(config, "w") as f:
                f.write(self._config())
            self.log = open(os.path.join(self.workdir, "registry.log"), "wb")
            self.proc = subprocess.Popen(["docker-registry", "serve", config], stdout=self.log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                wait_http(self.url + "/v2/", proc=self.proc)
                return self
            except RuntimeError:
                self.stop()
                if attempt == 2:
                    with open(os.path.join(self.workdir, "registry.log")) as f:
                        raise RuntimeError("docker-registry did not start:\n" + f.read()) from None
                self.port = free_port()
                self.host = f"127.0.0.1:{self.port}"
                self.url = f"http://{self.host}"
        raise AssertionError("unreachable")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()

    def blob_data_path(self, digest: str) -> str:
        """Where the filesystem driver keeps a blob's bytes."""
        hexd = digest.split(":", 1)[1]
        return os.path.join(self.storage, "docker/registry/v2/blobs/sha256", hexd[:2], hexd, "data")

    def pusher(self, username: str = "", password: str = "") -> imagelib.RegistryPusher:
        return imagelib.RegistryPusher(self.url, username, password)


def htpasswd_file(path: str, users: dict[str, str]) -> str:
    """Writes an htpasswd file with bcrypt hashes (`htpasswd -Bbn`)."""
    with open(path, "w") as f:
        for user, password in users.items():
            out = subprocess.run(["htpasswd", "-Bbn", user, password], check=True,
                                 stdout=subprocess.PIPE, text=True).stdout
            f.write(out.strip() + "\n")
    return path


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class _HttpServer:
    """A threaded http.server on 127.0.0.1 (or `listen_host`) answering GET and HEAD through
    `_answer(handler, head)`; start() and stop() for the fixtures."""

    listen_host = "127.0.0.1"
    httpd: http.server.ThreadingHTTPServer | None = None

    def _answer(self, handler: http.server.BaseHTTPRequestHandler, head: bool) -> None:
        raise NotImplementedError

    def start(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                server._answer(self, head=False)

            def do_HEAD(self):  # noqa: N802
                server._answer(self, head=True)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer((self.listen_host, self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()


class TokenServer(_HttpServer):
    """The Docker registry token flow: GET /token?service=S&scope=repository:R:A
    with optional Basic credentials. Known users get the actions they ask for;
    anonymous requests and unknown scopes get a token with no access, as
    public token services do, and so do the users in `no_access`. Wrong credentials get 401."""

    def __init__(self, workdir: str, users: dict[str, str], service: str = "berth-test-registry",
                 issuer: str = "berth-test-token-issuer", host: str = "127.0.0.1",
                 name: str = "token", no_access: tuple = ()):
        self.workdir = os.path.join(workdir, name)
        self.listen_host = host
        os.makedirs(self.workdir, exist_ok=True)
        self.users, self.service, self.issuer = users, service, issuer
        self.no_access = set(no_access)  # users who log in but get no repository access
        self.key = os.path.join(self.workdir, "key.pem")
        self.cert = os.path.join(self.workdir, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256",
                        "-keyout", self.key, "-out", self.cert, "-days", "2",
                        "-subj", "/CN=berth-test-token-signer"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        der = subprocess.run(["openssl", "x509", "-in", self.cert, "-outform", "DER"], check=True,
                             stdout=subprocess.PIPE).stdout
        self.x5c = base64.b64encode(der).decode()  # x5c is standard base64, not base64url
        self.requests: list[dict] = []  # what clients asked for, for assertions
        self.port = free_port(host)
        self.realm = f"http://{host}:{self.port}/token"
        self._lock = threading.Lock()

    def registry_auth(self) -> tuple:
        return ("token", {"realm": self.realm, "service": self.service, "issuer": self.issuer,
                          "rootcertbundle": self.cert})

    def sign(self, claims: dict) -> str:
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}
        signing_input = (_b64url(json.dumps(header).encode()) + "." +
                         _b64url(json.dumps(claims).encode()))
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", self.key], check=True,
                             input=signing_input.encode(), stdout=subprocess.PIPE).stdout
        return signing_input + "." + _b64url(sig)

    def _answer(self, handler: http.server.BaseHTTPRequestHandler, head: bool = False) -> None:
        url = urllib.parse.urlsplit(handler.path)
        query = urllib.parse.parse_qs(url.query)
        user = ""
        authz = handler.headers.get("Authorization", "")
        record = {"path": url.path, "query": query, "authorization": authz.split(" ")[0]}
        with self._lock:
            self.requests.append(record)
        if url.path != "/token":
            handler.send_error(404)
            return
        if authz:
            scheme, _, value = authz.partition(" ")
            try:
                user, _, password = base64.b64decode(value).decode().partition(":")
            except ValueError:
                user, password = "", None
            if scheme.lower() != "basic" or self.users.get(user) != password:
                body = json.dumps({"details": "incorrect username or password"}).encode()
                handler.send_response(401)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)
                return
        access = []
        for scope in query.get("scope", []):
            for one in scope.split(" "):
                parts = one.split(":")
                if (len(parts) >= 3 and parts[0] == "repository" and user
                        and user not in self.no_access):
                    access.append({"type": "repository", "name": ":".join(parts[1:-1]),
                                   "actions": parts[-1].split(",")})
        now = int(time.time())
        token = self.sign({"iss": self.issuer, "sub": user, "aud": self.service,
                           "exp": now + 300, "nbf": now - 30, "iat": now,
                           "jti": uuid.uuid4().hex, "access": access})
        body = json.dumps({"token": token, "access_token": token, "expires_in": 300,
                           "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))})
        data = body.encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


class ThrottleProxy:
    """Forwards TCP connections from listen_host:<free port> to 127.0.0.1:upstream_port.

    `rate` (bytes per second, None for full speed) limits what flows back to
    the client and may be changed while it runs. `bytes_down` counts bytes sent
    to clients; `first_bytes` keeps the first bytes of each client connection."""

    def __init__(self, upstream_port: int, listen_host: str = "127.0.0.1",
                 rate: int | None = None):
        self.upstream_port = upstream_port
        self.rate = rate
        self.bytes_down = 0
        self.first_bytes: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((listen_host, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.host = f"{listen_host}:{self.port}"

    def start(self) -> "ThrottleProxy":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.sock.close()

    def reset_counters(self) -> None:
        with self._lock:
            self.bytes_down = 0
            self.first_bytes = []

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, down: bool) -> None:
        first = True
        try:
            while True:
                rate = self.rate if down else None
                data = src.recv(min(16384, max(1024, rate // 20)) if rate else 65536)
                if not data:
                    break
                if not down and first:
                    with self._lock:
                        self.first_bytes.append(data[:16])
                first = False
                dst.sendall(data)
                if down:
                    with self._lock:
                        self.bytes_down += len(data)
                    if rate:
                        time.sleep(len(data) / rate)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed by the other direction: nothing left to flush
                s.close()


class FakeRegistry(_HttpServer):
    """Answers GET/HEAD /v2/ and /v2/<repo>/manifests/<ref> from `manifests`:
    {(repo, ref): (content_type, body_bytes)}; blobs from `blobs`: {digest: bytes}.
    Offers no /v2/_catalog unless `catalog_pages` (a list of (repositories, Link header or
    None)) is set: page i answers /v2/_catalog?page=i, the first page any other query; offers
    Docker Hub's /v1/search?q= while `search_results` (a list of result objects, filtered by q
    in their names) is set. While `token_body` (bytes) is set, every /v2/ request without
    "Authorization: Bearer ok" is challenged with a Bearer realm of this server's /token,
    which answers `token_body`."""

    def __init__(self):
        self.manifests: dict[tuple[str, str], tuple[str, bytes]] = {}
        self.digest_header: dict[tuple[str, str], str] = {}  # a lying Docker-Content-Digest
        self.blobs: dict[str, bytes] = {}
        self.search_results: list[dict] | None = None
        self.basic_auth: tuple[str, str] | None = None  # (user, password) every request needs
        self.blob_redirect: str | None = None  # base URL blob GETs are redirected to (307)
        self.not_found_message = "manifest unknown"  # the words of every 404
        self.catalog_pages: list[tuple[list[str], str | None]] | None = None
        self.token_body: bytes | None = None
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"

    def _answer(self, h: http.server.BaseHTTPRequestHandler, head: bool) -> None:
        split = urllib.parse.urlsplit(h.path)
        path = split.path
        status, ctype, body, extra = 404, "application/json", b"", {}
        if self.basic_auth and h.headers.get("Authorization") != "Basic " + base64.b64encode(
                ":".join(self.basic_auth).encode()).decode():
            status, body = 401, json.dumps({"errors": [{"code": "UNAUTHORIZED",
                                                        "message": "authentication required"}]})
            extra["WWW-Authenticate"] = 'Basic realm="fake"'
            body = body.encode()
        elif path == "/token" and self.token_body is not None:
            status, body = 200, self.token_body
        elif (self.token_body is not None and path.startswith("/v2/")
              and h.headers.get("Authorization") != "Bearer ok"):
            status, body = 401, b'{"errors": [{"code": "UNAUTHORIZED", "message": "token"}]}'
            extra["WWW-Authenticate"] = (f'Bearer realm="http://{self.host}/token",'
                                         'service="fake"')
        elif path == "/v2/_catalog" and self.catalog_pages is not None:
            page = int(urllib.parse.parse_qs(split.query).get("page", ["0"])[0])
            repos, link = self.catalog_pages[page]
            status, body = 200, json.dumps({"repositories": repos}).encode()
            if link:
                extra["Link"] = link
        elif path == "/v2/":
            status, body = 200, b"{}"
        elif path == "/v1/search" and self.search_results is not None:
            query = urllib.parse.parse_qs(split.query)
            q = query.get("q", [""])[0]
            n = int(query.get("n", ["25"])[0])
            hits = [r for r in self.search_results if q in r["name"]][:n]
            status = 200
            body = json.dumps({"num_results": len(hits), "query": q, "results": hits}).encode()
        elif "/manifests/" in path:
            repo, _, ref = path[len("/v2/"):].rpartition("/manifests/")
            if (repo, ref) in self.manifests:
                ctype, body = self.manifests[(repo, ref)]
                status = 200
                extra["Docker-Content-Digest"] = self.digest_header.get(
                    (repo, ref), imagelib.digest_of(body))
        elif "/blobs/" in path and self.blob_redirect:
            status, extra["Location"] = 307, self.blob_redirect + path
        elif "/blobs/" in path:
            digest = path.rpartition("/blobs/")[2]
            if digest in self.blobs:
                status, ctype, body = 200, "application/octet-stream", self.blobs[digest]
        if status == 404:
            body = json.dumps({"errors": [{"code": "MANIFEST_UNKNOWN",
                                           "message": self.not_found_message}]}).encode()
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for k, v in extra.items():
            h.send_header(k, v)
        h.end_headers()
        if not head:
            h.wfile.write(body)


class BlobStorage(_HttpServer):
    """Object storage on another origin (its own port) that a registry redirects blob
    downloads to. Serves `blobs` by the digest at the end of the path; with `challenge` set
    (a WWW-Authenticate value) it answers 401 instead. Its /token path is a token realm that
    records the credentials sent to it. `seen` lists (path, Authorization header or None)."""

    def __init__(self, blobs: dict[str, bytes]):
        self.blobs = blobs
        self.challenge: str | None = None
        self.seen: list[tuple[str, str | None]] = []
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}"

    def _answer(self, h: http.server.BaseHTTPRequestHandler, head: bool) -> None:
        self.seen.append((h.path, h.headers.get("Authorization")))
        digest = urllib.parse.urlsplit(h.path).path.rpartition("/")[2]
        status, body, extra = 404, b"not found", {}
        if self.challenge and not h.path.startswith("/token"):
            status, body, extra = 401, b"{}", {"WWW-Authenticate": self.challenge}
        elif h.path.startswith("/token"):
            status, body = 200, json.dumps({"token": "stolen"}).encode()
        elif digest in self.blobs:
            status, body = 200, self.blobs[digest]
        h.send_response(status)
        h.send_header("Content-Length", str(len(body)))
        for k, v in extra.items():
            h.send_header(k, v)
        h.end_headers()
        if not head:
            h.wfile.write(body)

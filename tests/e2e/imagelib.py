#!/usr/bin/env python3
"""Builds container images in Python and pushes them through the registry HTTP API.

Nothing comes from Docker Hub: layers are tar archives made here from files
the caller names (busybox-static's /bin/busybox is the usual payload).

Library use (from the tests):
    layer = Layer([File("etc/hello", b"hi\\n"), Symlink("bin/sh", "busybox")])
    img = make_image([layer], fmt="oci", platform="linux/arm64/v8")
    RegistryPusher("http://127.0.0.1:5000").push_image("demo/app", "1", img)

Command-line use (from scripts/demo.sh):
    imagelib.py push-busybox --registry 127.0.0.1:5000 --repo demo/busybox --tag 1
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

# Media types, as the OCI image spec and Docker's schema 2 name them.
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"

BUSYBOX = "/bin/busybox"
FIXED_MTIME = 1_700_000_000  # deterministic archives: same input, same digest


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------
# Layer entries


@dataclass
class File:
    name: str
    data: bytes = b""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0


@dataclass
class Dir:
    name: str
    mode: int = 0o755


@dataclass
class Symlink:
    name: str
    target: str


@dataclass
class Hardlink:
    name: str
    target: str  # a name inside the archive (or, for hostile layers, anything)


@dataclass
class Whiteout:
    """Deletes `name` of the layers below: written as .wh.<basename>."""

    name: str


@dataclass
class Opaque:
    """Hides everything lower layers put in directory `name`: .wh..wh..opq."""

    name: str


def _tarinfo(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.mtime = FIXED_MTIME
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = "root"
    return ti


def tar_bytes(entries) -> bytes:
    """An uncompressed tar (GNU format, so long names work) of `entries`, in order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for e in entries:
            if isinstance(e, File):
                ti = _tarinfo(e.name, tarfile.REGTYPE, e.mode)
                ti.uid, ti.gid = e.uid, e.gid
                ti.size = len(e.data)
                tf.addfile(ti, io.BytesIO(e.data))
            elif isinstance(e, Dir):
                tf.addfile(_tarinfo(e.name, tarfile.DIRTYPE, e.mode))
            elif isinstance(e, Symlink):
                ti = _tarinfo(e.name, tarfile.SYMTYPE, 0o777)
                ti.linkname = e.target
                tf.addfile(ti)
            elif isinstance(e, Hardlink):
                ti = _tarinfo(e.name, tarfile.LNKTYPE, 0o644)
                ti.linkname = e.target
                tf.addfile(ti)
            elif isinstance(e, Whiteout):
                head, _, base = e.name.rstrip("/").rpartition("/")
                wh = (head + "/" if head else "") + ".wh." + base
                tf.addfile(_tarinfo(wh, tarfile.REGTYPE, 0o600))
            elif isinstance(e, Opaque):
                tf.addfile(_tarinfo(e.name.rstrip("/") + "/.wh..wh..opq", tarfile.REGTYPE, 0o600))
            else:
                raise TypeError(f"unknown layer entry {e!r}")
    return buf.getvalue()


def compress(data: bytes, compression: str) -> bytes:
    if compression == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    if compression == "zstd":
        return subprocess.run(["zstd", "-q", "-c", "-3"], input=data, stdout=subprocess.PIPE,
                              check=True).stdout
    if compression == "none":
        return data
    raise ValueError(f"unknown compression {compression!r}")


@dataclass
class Layer:
    entries: list
    compression: str = "gzip"  # gzip, zstd or none


@dataclass
class Blob:
    data: bytes
    media_type: str

    @property
    def digest(self) -> str:
        return digest_of(self.data)

    @property
    def size(self) -> int:
        return len(self.data)

    def descriptor(self, **extra) -> dict:
        d = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        d.update(extra)
        return d


@dataclass
class Image:
    """One image: config, layers and the manifest that ties them."""

    config: Blob
    layers: list[Blob]
    manifest: Blob
    platform: dict
    diff_ids: list[str] = field(default_factory=list)

    def blobs(self) -> list[Blob]:
        return [self.config, *self.layers]


def parse_platform(text: str) -> dict:
    parts = text.split("/")
    p = {"os": parts[0], "architecture": parts[1]}
    if len(parts) > 2:
        p["variant"] = parts[2]
    return p


def _layer_media_type(fmt: str, compression: str) -> str:
    if fmt == "docker":
        if compression != "gzip":
            raise ValueError("Docker schema 2 layers here are gzip only")
        return DOCKER_LAYER_GZIP
    return {"gzip": OCI_LAYER_GZIP, "zstd": OCI_LAYER_ZSTD, "none": OCI_LAYER_TAR}[compression]


def make_image(layers: list[Layer], fmt: str = "oci", platform: str = "linux/amd64",
               cmd: list[str] | None = None, label: str = "",
               config: dict | None = None) -> Image:
    """Builds an image: fmt is "docker" (schema 2) or "oci". `config` adds to or replaces
    fields of the image config's "config" object (Env, Entrypoint, WorkingDir, User...)."""
    plat = parse_platform(platform)
    layer_blobs, diff_ids = [], []
    for layer in layers:
        raw = tar_bytes(layer.entries)
        diff_ids.append(digest_of(raw))
        layer_blobs.append(Blob(compress(raw, layer.compression),
                                _layer_media_type(fmt, layer.compression)))
    config = {
        **plat,
        "created": "2024-01-01T00:00:00Z",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                   "Cmd": cmd or ["/bin/sh"],
                   "Labels": {"berth.test": label} if label else {},
                   **(config or {})},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created": "2024-01-01T00:00:00Z", "created_by": "berth e2e imagelib"}
                    for _ in layers],
    }
    config_blob = Blob(json.dumps(config, sort_keys=True).encode(),
                       DOCKER_CONFIG if fmt == "docker" else OCI_CONFIG)
    manifest = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST if fmt == "docker" else OCI_MANIFEST,
        "config": config_blob.descriptor(),
        "layers": [b.descriptor() for b in layer_blobs],
    }
    manifest_blob = Blob(json.dumps(manifest, indent=2).encode(), manifest["mediaType"])
    return Image(config_blob, layer_blobs, manifest_blob, plat, diff_ids)


def make_index(images: list[Image], fmt: str = "oci") -> Blob:
    """A Docker manifest list (fmt "docker") or an OCI image index over `images`."""
    media_type = DOCKER_LIST if fmt == "docker" else OCI_INDEX
    index = {
        "schemaVersion": 2,
        "mediaType": media_type,
        "manifests": [img.manifest.descriptor(platform=img.platform) for img in images],
    }
    return Blob(json.dumps(index, indent=2).encode(), media_type)


def busybox_layer(compression: str = "gzip", extra: list | None = None) -> Layer:
    """A small root filesystem: busybox-static, a few applet links, /etc files."""
    with open(BUSYBOX, "rb") as f:
        busybox = f.read()
    entries = [Dir("bin"), File("bin/busybox", busybox, 0o755)]
    entries += [Symlink(f"bin/{a}", "busybox") for a in ("sh", "ls", "cat", "echo", "true")]
    entries += [Dir("etc"), File("etc/hostname", b"berth-demo\n"),
                File("etc/os-release", b'NAME="berth test image"\nID=berth-test\n')]
    return Layer(entries + (extra or []), compression)


# ---------------------------------------------------------------------------
# Pushing


class PushError(RuntimeError):
    pass


class RegistryPusher:
    """Pushes blobs and manifests with the distribution API, authenticating as
    the registry asks (Basic, or a Bearer token fetched from its realm)."""

    def __init__(self, base_url: str, username: str = "", password: str = ""):
        self.base = base_url.rstrip("/")
        self.username, self.password = username, password
        self._auth = ""  # the Authorization header that last worked

    def _basic(self) -> str:
        pair = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(pair).decode()

    def _authenticate(self, challenge: str) -> None:
        scheme, _, rest = challenge.partition(" ")
        if scheme.lower() == "basic":
            self._auth = self._basic()
            return
        params = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        realm = params.pop("realm")
        query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
        req = urllib.request.Request(realm + "?" + query)
        if self.username:
            req.add_header("Authorization", self._basic())
        with urllib.request.urlopen(req, timeout=30) as r:
            body = json.load(r)
        self._auth = "Bearer " + (body.get("token") or body["access_token"])

    def request(self, method: str, url: str, data: bytes | None = None,
                headers: dict | None = None):
        """Returns (status, headers, body); follows one authentication challenge."""
        if not url.startswith("http"):
            url = urllib.parse.urljoin(self.base + "/", url.lstrip("/"))
        for attempt in range(2):
            req = urllib.request.Request(url, data=data, method=method)
            for k, v in (headers or {}).items():
                req.add_header(k, v)
            if self._auth:
                req.add_header("Authorization", self._auth)
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    return r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                body = e.read()
                if e.code == 401 and attempt == 0 and e.headers.get("WWW-Authenticate"):
                    self._authenticate(e.headers["WWW-Authenticate"])
                    continue
                if method == "HEAD" and e.code == 404:
                    return 404, e.headers, body
                raise PushError(f"{method} {url}: HTTP {e.code}: {body[:300]!r}") from None
        raise AssertionError("unreachable")

    def push_blob(self, repo: str, blob: Blob, chunk_size: int = 0) -> None:
        """Monolithic upload, or chunked (PATCH per chunk) when chunk_size > 0."""
        status, _, _ = self.request("HEAD", f"/v2/{repo}/blobs/{blob.digest}")
        if status == 200:
            return
        status, hdrs, _ = self.request("POST", f"/v2/{repo}/blobs/uploads/", b"")
        location = urllib.parse.urljoin(self.base + "/", hdrs["Location"])
        if chunk_size > 0:
            for start in range(0, blob.size, chunk_size):
                chunk = blob.data[start:start + chunk_size]
                _, hdrs, _ = self.request(
                    "PATCH", location, chunk,
                    {"Content-Type": "application/octet-stream",
                     "Content-Range": f"{start}-{start + len(chunk) - 1}"})
                location = urllib.parse.urljoin(self.base + "/", hdrs["Location"])
            data = b""
        else:
            data = blob.data
        sep = "&" if "?" in location else "?"
        self.request("PUT", f"{location}{sep}digest={urllib.parse.quote(blob.digest)}", data,
                     {"Content-Type": "application/octet-stream"})

    def put_manifest(self, repo: str, ref: str, manifest: Blob) -> None:
        self.request("PUT", f"/v2/{repo}/manifests/{ref}", manifest.data,
                     {"Content-Type": manifest.media_type})

    def push_image(self, repo: str, tag: str, image: Image, chunk_size: int = 0) -> None:
        for blob in image.blobs():
            self.push_blob(repo, blob, chunk_size)
        self.put_manifest(repo, tag, image.manifest)

    def push_index(self, repo: str, tag: str, images: list[Image], fmt: str = "oci") -> Blob:
        for img in images:
            for blob in img.blobs():
                self.push_blob(repo, blob)
            self.put_manifest(repo, img.manifest.digest, img.manifest)
        index = make_index(images, fmt)
        self.put_manifest(repo, tag, index)
        return index


# ---------------------------------------------------------------------------
# Command line (scripts/demo.sh)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("push-busybox", help="build a busybox-static image and push it")
    p.add_argument("--registry", required=True, help="host:port (plain HTTP)")
    p.add_argument("--repo", required=True)
    p.add_argument("--tag", default="latest")
    p.add_argument("--format", choices=("oci", "docker"), default="oci")
    args = ap.parse_args(argv)

    note = Layer([File("etc/motd", b"Pulled by berth from a local registry.\n")])
    img = make_image([busybox_layer(), note], fmt=args.format, cmd=["/bin/sh"])
    RegistryPusher("http://" + args.registry).push_image(args.repo, args.tag, img)
    print(f"pushed {args.registry}/{args.repo}:{args.tag} ({args.format}, "
          f"{len(img.layers)} layers, manifest {img.manifest.digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

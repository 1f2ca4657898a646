"""udocker-parity commands, end to end: import, load, save, export, tag, clone, rename,
search, manifest inspect, protect/unprotect, version and info; with the bad inputs each
must refuse in one line, leaving the store as it was."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import signal
import subprocess
import tarfile
import time

import pytest

import imagelib

MOTD = b"imported by berth\n"


def rootfs_entries(extra=None):
    # /etc/shadow as CentOS ships it: mode 0000, which a rootless owner must still copy.
    return imagelib.busybox_layer().entries + [imagelib.File("etc/motd", MOTD),
                                               imagelib.File("etc/shadow", b"root:*::\n", 0)
                                               ] + (extra or [])


def write_bytes(berth, name: str, data: bytes) -> str:
    path = berth.path(name)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o644)
    berth.identity.chown(path)
    return path


def run_binary(berth, *args, stdin=None, stdout=None):
    """Runs berth with binary stdin/stdout files; returns (rc, stderr)."""
    cmd, env = berth.command(args)
    r = subprocess.run(cmd, env=env, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                       stdout=stdout if stdout is not None else subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=berth.workdir, timeout=120)
    return r.returncode, r.stderr.decode()


def userns_works(identity) -> bool:
    r = subprocess.run(identity.prefix + ["unshare", "-Ur", "true"], capture_output=True)
    return r.returncode == 0


def image_names(berth) -> list[str]:
    return [i["name"] for i in berth.json("images", "--json")]


def stage_dirs(berth) -> list[str]:
    tmp = os.path.join(berth.berth_home, "tmp")
    return [n for n in os.listdir(tmp) if n.startswith("stage-")] if os.path.isdir(tmp) else []


def tar_members(path: str) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path) as tf:
        return {m.name.rstrip("/"): m for m in tf.getmembers()}


@pytest.fixture
def imported(berth):
    """A busybox root filesystem imported as local/busybox:1."""
    path = write_bytes(berth, "rootfs.tar", imagelib.tar_bytes(rootfs_entries()))
    berth("import", path, "local/busybox:1")
    return "local/busybox:1"


# ---------------------------------------------------------------------------
# import


def test_import_file_and_gzip_stdin_with_changes(berth, identity):
    raw = imagelib.tar_bytes(rootfs_entries())
    path = write_bytes(berth, "rootfs.tar", raw)
    rc, out, err = berth("import", path, "local/plain:1")
    assert re.fullmatch(r"sha256:[0-9a-f]{64}\n", out), out
    info = berth.json("inspect", "local/plain:1")
    assert info["name"] == "docker.io/local/plain:1"
    assert info["config"]["rootfs"] == {"type": "layers",
                                        "diff_ids": [imagelib.digest_of(raw)]}
    assert info["config"]["history"][0]["created_by"] == "berth import"
    assert info["id"] == out.strip()

    gz = write_bytes(berth, "rootfs.tar.gz", gzip.compress(raw))
    with open(gz, "rb") as f:
        rc, err = run_binary(berth, "import", "-c", "ENV GREETING=hello", "--change",
                             "CMD [\"/bin/cat\", \"/etc/motd\"]", "-", "local/gz:2", stdin=f)
    assert (rc, err) == (0, "")
    info = berth.json("inspect", "local/gz:2")
    assert info["layers"][0]["media_type"] == imagelib.OCI_LAYER_GZIP
    assert info["config"]["rootfs"]["diff_ids"] == [imagelib.digest_of(raw)]
    assert info["config"]["config"]["Env"] == ["GREETING=hello"]
    assert info["config"]["config"]["Cmd"] == ["/bin/cat", "/etc/motd"]
    assert sorted(image_names(berth)) == ["docker.io/local/gz:2", "docker.io/local/plain:1"]
    berth("verify", "local/gz:2")
    if userns_works(identity):
        _, out, _ = berth("run", "--rm", "local/gz:2")
        assert out == MOTD.decode()


BAD_IMPORTS = {
    "truncated-tar": (lambda: imagelib.tar_bytes(rootfs_entries())[:3000],
                      "berth: error: import: unpack {file}: entry \"bin/busybox\": "
                      "Truncated tar archive\n"),
    "truncated-gzip": (lambda: gzip.compress(imagelib.tar_bytes(rootfs_entries()))[:4000],
                       None),
    "not-a-tar": (lambda: b"hello, this is not an archive\n" * 40,
                  None),
    "dotdot": (lambda: imagelib.tar_bytes([imagelib.File("../x", b"x")]),
               "berth: error: import: unpack {file}: entry \"../x\" escapes the root\n"),
    "absolute": (lambda: imagelib.tar_bytes([imagelib.File("/etc/x", b"x")]),
                 "berth: error: import: unpack {file}: entry \"/etc/x\" escapes the root\n"),
    "symlink-escape": (lambda: imagelib.tar_bytes([imagelib.Symlink("out", "/tmp"),
                                                   imagelib.File("out/x", b"x")]),
                       "berth: error: import: unpack {file}: entry \"out/x\" escapes the root: "
                       "it goes through a symlink outside\n"),
    "empty": (lambda: b"", "berth: error: import {file}: empty input: not a tar archive\n"),
}


@pytest.mark.parametrize("case", sorted(BAD_IMPORTS))
def test_import_refuses_bad_tarballs(berth, imported, case):
    make, expected = BAD_IMPORTS[case]
    path = write_bytes(berth, f"{case}.tar", make())
    before = berth.json("images", "--json")
    blobs = berth.blobs()
    rc, out, err = berth("import", path, "local/bad:1", check=False)
    assert (rc, out) == (1, "")
    if expected:
        assert err == expected.format(file=path)
    else:
        assert err.startswith("berth: error: import: ") and path in err, err
        assert len(err.splitlines()) == 1, err
    assert berth.json("images", "--json") == before
    assert berth.blobs() == blobs
    assert stage_dirs(berth) == []


def test_import_errors_name_the_input(berth):
    rc, _, err = berth("import", berth.path("missing.tar"), "x:1", check=False)
    assert (rc, err) == (1, f"berth: error: open {berth.path('missing.tar')}: "
                            "No such file or directory\n")
    path = write_bytes(berth, "ok.tar", imagelib.tar_bytes(rootfs_entries()))
    rc, _, err = berth("import", path, "Not A Name", check=False)
    assert rc == 1 and err.startswith(f"berth: error: import {path}: ") and "Not A Name" in err
    rc, _, err = berth("import", "-c", "RUN make", path, "x:1", check=False)
    assert err == ("berth: error: change RUN make: unknown or unsupported instruction 'RUN'\n"
                   "berth: hint: use ENV, CMD, ENTRYPOINT, WORKDIR, USER, LABEL, EXPOSE, "
                   "VOLUME or STOPSIGNAL\n")
    assert berth.json("images", "--json") == []


def _kill_mid_stream(berth, args: list[str], data: bytes):
    """Feeds `data` to berth's stdin slowly and kills it (-9) half-way."""
    cmd, env = berth.command(args)
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=berth.workdir)
    half = len(data) // 2
    for i in range(0, half, 64 * 1024):
        proc.stdin.write(data[i:min(i + 64 * 1024, half)])
        proc.stdin.flush()
        time.sleep(0.02)
    deadline = time.time() + 10
    while not stage_dirs(berth) and time.time() < deadline:
        time.sleep(0.05)
    assert stage_dirs(berth), "berth never started staging"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdin.close()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def test_interrupted_import_leaves_nothing_visible(berth, imported):
    before = berth.json("images", "--json")
    blobs = berth.blobs()
    data = gzip.compress(imagelib.tar_bytes(rootfs_entries([imagelib.File(
        "big", os.urandom(4 << 20))])), compresslevel=1)
    _kill_mid_stream(berth, ["import", "-", "local/killed:1"], data)
    assert berth.json("images", "--json") == before
    assert berth.blobs() == blobs
    # A later import works, and sweeps what the killed one left in tmp/.
    path = write_bytes(berth, "again.tar.gz", data)
    berth("import", path, "local/killed:1")
    assert "docker.io/local/killed:1" in image_names(berth)
    assert stage_dirs(berth) == []
    berth.assert_blobs_verified()


# ---------------------------------------------------------------------------
# save and load


def test_save_load_round_trip(berth, pushed_busybox, registry):
    berth("pull", pushed_busybox)
    berth("tag", pushed_busybox, "mine/busybox:latest")
    out = berth.path("saved.tar")
    rc, stdout, err = berth("save", "-o", out, pushed_busybox, "mine/busybox")
    assert (stdout, err) == ("", "")
    members = tar_members(out)
    assert {"oci-layout", "index.json", "manifest.json"} <= set(members)
    with tarfile.open(out) as tf:
        index = json.load(tf.extractfile("index.json"))
        docker = json.load(tf.extractfile("manifest.json"))
    annotations = [m["annotations"] for m in index["manifests"]]
    assert annotations == [
        {"io.containerd.image.name": pushed_busybox, "org.opencontainers.image.ref.name": "1.0"},
        {"io.containerd.image.name": "docker.io/mine/busybox:latest",
         "org.opencontainers.image.ref.name": "latest"}]
    assert docker[0]["RepoTags"] == [pushed_busybox, "mine/busybox:latest"]
    for m in index["manifests"]:
        assert "blobs/sha256/" + m["digest"].split(":")[1] in members
    original = berth.json("inspect", pushed_busybox)

    berth("rmi", pushed_busybox)
    berth("rmi", "mine/busybox")
    assert berth.blobs() == set()
    _, stdout, err = berth("load", "-i", out)
    assert stdout == f"Loaded image: {pushed_busybox}\nLoaded image: mine/busybox:latest\n"
    loaded = berth.json("inspect", pushed_busybox)
    for key in ("manifest_digest", "id", "layers", "config"):
        assert loaded[key] == original[key]
    berth("verify", pushed_busybox)

    # To stdout and back from stdin.
    with open(berth.path("stdout.tar"), "wb") as f:
        assert run_binary(berth, "save", pushed_busybox, stdout=f) == (0, "")
    berth("rmi", pushed_busybox)
    with open(berth.path("stdout.tar"), "rb") as f:
        rc, err = run_binary(berth, "load", stdin=f)
    assert (rc, err) == (0, "")
    assert pushed_busybox in image_names(berth)


@pytest.mark.parametrize("transport", ["docker-archive", "oci-archive"])
def test_load_skopeo_archives(berth, pushed_busybox, registry, transport):
    path = berth.path(f"{transport}.tar")
    dest = f"{transport}:{path}:" + ("e2e/busybox:1.0" if transport == "docker-archive" else "1.0")
    subprocess.run(["skopeo", "copy", "-q", "--src-tls-verify=false",
                    f"docker://{pushed_busybox}", dest], check=True)
    os.chmod(path, 0o644)
    _, out, _ = berth("load", "-i", path)
    if transport == "docker-archive":
        assert out == "Loaded image: e2e/busybox:1.0\n"
        name = "e2e/busybox:1.0"
    else:  # a bare ref.name is only a tag: the image is named by its ID
        m = re.fullmatch(r"Loaded image: (localhost/[0-9a-f]{12}:1\.0)\n", out)
        assert m, out
        name = m.group(1)
    berth("verify", name)
    berth("create", "--name", "from-archive", name)


def test_load_takes_an_oci_layout_directory(berth, pushed_busybox, registry):
    """skopeo's oci:DIR (a layout as a folder, not a tar) loads as its tar does, with the same
    checks: a tampered blob in the folder is refused in one line and nothing is stored."""
    layout = berth.path("oci-dir")
    subprocess.run(["skopeo", "copy", "-q", "--src-tls-verify=false",
                    f"docker://{pushed_busybox}", f"oci:{layout}:e2e/busybox:dir"], check=True)
    for top, dirs, files in os.walk(layout):
        for n in dirs:
            os.chmod(os.path.join(top, n), 0o755)
        for n in files:
            os.chmod(os.path.join(top, n), 0o644)
    os.chmod(layout, 0o755)
    before = berth.json("images", "--json")
    stored = berth.blobs()
    # A layer's bytes changed in place: the folder is refused, the store unchanged.
    index = json.load(open(os.path.join(layout, "index.json")))
    manifest_digest = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.load(open(os.path.join(layout, "blobs", "sha256", manifest_digest)))
    layer = os.path.join(layout, "blobs", "sha256", manifest["layers"][0]["digest"].split(":")[1])
    good = open(layer, "rb").read()
    with open(layer, "wb") as f:
        f.write(good[:-4] + b"0000")
    rc, out, err = berth("load", "-i", layout, check=False)
    assert (rc, out) == (1, "") and len(err.splitlines()) == 1, err
    assert err.startswith(f"berth: error: load {layout}: blob {manifest['layers'][0]['digest']}: "
                          "digest mismatch: the archive holds sha256:"), err
    assert berth.json("images", "--json") == before and berth.blobs() == stored
    with open(layer, "wb") as f:
        f.write(good)
    _, out, _ = berth("load", "-i", layout)
    assert out == "Loaded image: e2e/busybox:dir\n", out
    berth("verify", "e2e/busybox:dir")
    assert berth("run", "--rm", "e2e/busybox:dir", "echo", "from a folder")[1] == "from a folder\n"


def _oci_layout_tar(blobs: dict[str, bytes], index: dict, extra: dict | None = None) -> bytes:
    entries = [imagelib.File("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')]
    entries += [imagelib.File("blobs/sha256/" + d.split(":")[1], data) for d, data in blobs.items()]
    entries += [imagelib.File("index.json", json.dumps(index).encode())]
    entries += [imagelib.File(k, v) for k, v in (extra or {}).items()]
    return imagelib.tar_bytes(entries)


def _layout_of(image: imagelib.Image, name: str = "example.org/x/app:1") -> tuple[dict, dict]:
    blobs = {b.digest: b.data for b in image.blobs() + [image.manifest]}
    index = {"schemaVersion": 2, "mediaType": imagelib.OCI_INDEX,
             "manifests": [image.manifest.descriptor(
                 annotations={"org.opencontainers.image.ref.name": name})]}
    return blobs, index


def test_load_refuses_bad_archives(berth, imported):
    image = imagelib.make_image([imagelib.busybox_layer()])
    blobs, index = _layout_of(image)
    good = write_bytes(berth, "good.tar", _oci_layout_tar(blobs, index))
    before = berth.json("images", "--json")
    stored = berth.blobs()

    def refused(name: str, data: bytes) -> str:
        path = write_bytes(berth, name, data)
        rc, out, err = berth("load", "-i", path, check=False)
        assert (rc, out) == (1, ""), err
        assert len(err.splitlines()) == 1, err
        assert berth.json("images", "--json") == before
        assert berth.blobs() == stored
        assert stage_dirs(berth) == []
        return err.replace(path, "FILE")

    layer = image.layers[0]
    tampered = dict(blobs)
    tampered[layer.digest] = layer.data[:-10] + b"0123456789"
    actual = imagelib.digest_of(tampered[layer.digest])
    assert refused("tampered.tar", _oci_layout_tar(tampered, index)) == (
        f"berth: error: load FILE: blob {layer.digest}: digest mismatch: "
        f"the archive holds {actual}\n")
    missing = {d: b for d, b in blobs.items() if d != layer.digest}
    assert refused("missing.tar", _oci_layout_tar(missing, index)) == (
        f"berth: error: load FILE: blob {layer.digest} is missing from the archive\n")
    with open(good, "rb") as f:
        whole = f.read()
    assert refused("truncated.tar", whole[:len(whole) // 2]).startswith("berth: error: load FILE: ")
    assert refused("garbage.tar", b"garbage " * 200).startswith("berth: error: load FILE: ")
    assert refused("empty-tar.tar", imagelib.tar_bytes([imagelib.File("README", b"hi")])) == (
        "berth: error: load FILE: not an image archive: it has neither index.json (OCI layout) "
        "nor manifest.json (docker save)\n")

    escaping = imagelib.make_image([imagelib.busybox_layer(),
                                    imagelib.Layer([imagelib.Symlink("up", "../../.."),
                                                    imagelib.File("up/pwned", b"x")])])
    assert refused("escape.tar", _oci_layout_tar(*_layout_of(escaping))) == (
        "berth: error: load: unpack FILE (layer 2): entry \"up/pwned\" escapes the root: "
        "it goes through a symlink outside\n")

    # A docker save archive whose layer is not what the config's diff_ids say.
    cfg = json.loads(image.config.data)
    cfg["rootfs"]["diff_ids"] = [imagelib.digest_of(b"another layer")]
    cfg_bytes = json.dumps(cfg).encode()
    cfg_name = imagelib.digest_of(cfg_bytes).split(":")[1] + ".json"
    docker = imagelib.tar_bytes([
        imagelib.File(cfg_name, cfg_bytes),
        imagelib.File("abc/layer.tar", imagelib.tar_bytes(imagelib.busybox_layer().entries)),
        imagelib.File("manifest.json", json.dumps([{"Config": cfg_name, "RepoTags": ["x:1"],
                                                    "Layers": ["abc/layer.tar"]}]).encode())])
    err = refused("diffid.tar", docker)
    assert err.startswith("berth: error: load FILE: layer 1: digest mismatch: the config says "
                          f"{cfg['rootfs']['diff_ids'][0]}, the archive holds sha256:"), err

    assert berth("load", "-i", good)[1] == "Loaded image: example.org/x/app:1\n"


def test_load_docker_save_with_a_linked_layer(berth):
    """Legacy `docker save` stores a layer two images share once and links the other copy."""
    layer = imagelib.tar_bytes(rootfs_entries())
    entries = [imagelib.File("aaa/layer.tar", layer),
               imagelib.Symlink("bbb/layer.tar", "../aaa/layer.tar")]
    manifest = []
    for tag, layer_path in (("one:1", "aaa/layer.tar"), ("two:1", "bbb/layer.tar")):
        cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": [tag]},
                          "rootfs": {"type": "layers",
                                     "diff_ids": [imagelib.digest_of(layer)]}}).encode()
        name = imagelib.digest_of(cfg).split(":")[1] + ".json"
        entries.append(imagelib.File(name, cfg))
        manifest.append({"Config": name, "RepoTags": [tag], "Layers": [layer_path]})
    entries.append(imagelib.File("manifest.json", json.dumps(manifest).encode()))
    path = write_bytes(berth, "legacy.tar", imagelib.tar_bytes(entries))
    assert berth("load", "-i", path)[1] == "Loaded image: one:1\nLoaded image: two:1\n"
    images = berth.json("images", "--json")
    assert [i["layers"] for i in images] == [[imagelib.digest_of(layer)]] * 2
    berth("verify", "two:1")


def test_interrupted_load_leaves_nothing_visible(berth, imported):
    image = imagelib.make_image([imagelib.busybox_layer(),
                                 imagelib.Layer([imagelib.File("big", os.urandom(4 << 20))],
                                                compression="none")])
    data = _oci_layout_tar(*_layout_of(image))
    before = berth.json("images", "--json")
    blobs = berth.blobs()
    _kill_mid_stream(berth, ["load"], data)
    assert berth.json("images", "--json") == before
    assert berth.blobs() == blobs
    path = write_bytes(berth, "whole.tar", data)
    assert berth("load", "-i", path)[1] == "Loaded image: example.org/x/app:1\n"
    assert stage_dirs(berth) == []


# ---------------------------------------------------------------------------
# tag, export, clone, rename, protect


def test_tag(berth, imported):
    _, out, err = berth("tag", imported, "example.org/team/tool:2")
    assert (out, err) == ("", "")
    names = image_names(berth)
    assert names == ["docker.io/local/busybox:1", "example.org/team/tool:2"]
    images = berth.json("images", "--json")
    assert images[0]["id"] == images[1]["id"]
    rc, out, err = berth("tag", "nope:1", "x:1", check=False)
    assert (rc, out) == (1, "")
    assert err == "berth: error: find image nope:1: no such image\nberth: hint: see 'berth images'\n"
    rc, _, err = berth("tag", imported, "UPPER/case", check=False)
    assert rc == 1 and err.startswith("berth: error: tag UPPER/case: ")
    assert image_names(berth) == names


def test_export_clone_rename(berth, imported):
    _, cid, _ = berth("create", "--name", "web", imported)
    cid = cid.strip()
    out = berth.path("web.tar")
    berth("export", "-o", out, "web")
    members = tar_members(out)
    assert members["etc/motd"].isfile() and members["bin/sh"].issym()
    assert members["bin/sh"].linkname == "busybox"
    # Ownership as the container sees it, as docker export writes it: the rootless user's files
    # are root's inside (before: the host uid as stored).
    assert (members["etc/motd"].uid, members["etc/motd"].gid) == (0, 0)
    assert members["etc/shadow"].mode == 0
    with tarfile.open(out) as tf:
        assert tf.extractfile("etc/motd").read() == MOTD
    with open(berth.path("stdout.tar"), "wb") as f:
        assert run_binary(berth, "export", cid[:12], stdout=f) == (0, "")
    assert set(tar_members(berth.path("stdout.tar"))) == set(members)
    rc, _, err = berth("export", "nope", check=False)
    assert (rc, err) == (1, "berth: error: find container nope: no such container\n")
    bad = berth.path("no-such-dir", "web.tar")
    rc, _, err = berth("export", "-o", bad, "web", check=False)
    assert (rc, err) == (1, f"berth: error: create {bad}: No such file or directory\n")

    # An export imports again.
    berth("import", out, "local/again:1")
    assert "docker.io/local/again:1" in image_names(berth)

    _, copy_id, _ = berth("clone", "--name", "copy", "web")
    copy_id = copy_id.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", copy_id) and copy_id != cid
    ps = {c["id"]: c for c in berth.json("ps", "--json")}
    assert ps[copy_id]["names"] == ["copy"] and ps[copy_id]["image"] == ps[cid]["image"]
    with open(os.path.join(ps[copy_id]["rootfs"], "etc/motd"), "rb") as f:
        assert f.read() == MOTD
    assert os.stat(os.path.join(ps[copy_id]["rootfs"], "etc/shadow")).st_mode & 0o7777 == 0

    berth("rename", "copy", "renamed")
    ps = {c["id"]: c for c in berth.json("ps", "--json")}
    assert ps[copy_id]["names"] == ["renamed"]
    rc, out, err = berth("rename", "renamed", "web", check=False)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: name web: the container name \"web\" is already in use by "
                   f"container {cid}\n")
    rc, _, err = berth("clone", "--name", "web", "renamed", check=False)
    assert err == (f"berth: error: clone web: the container name \"web\" is already in use by "
                   f"container {cid}\nberth: hint: remove or rename that container, or choose "
                   "another name\n")
    assert len(berth.json("ps", "--json")) == 2
    rc, _, err = berth("rename", "nope", "x", check=False)
    assert (rc, err) == (1, "berth: error: find container nope: no such container\n")


def test_protect_and_unprotect(berth, imported):
    _, cid, _ = berth("create", "--name", "keep", imported)
    berth("protect", imported, "keep")
    rc, out, err = berth("rmi", imported, check=False)
    assert (rc, out) == (1, "")
    assert err == ("berth: error: rmi local/busybox:1: image docker.io/local/busybox:1 is "
                   "protected\nberth: hint: run 'berth unprotect docker.io/local/busybox:1' first\n")
    rc, out, err = berth("rm", "-f", "keep", check=False)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: rm keep: container {cid[:12]} is protected\n"
                   "berth: hint: run 'berth unprotect keep' first\n")
    assert berth.json("inspect", "keep")["protected"] is True
    assert berth.json("images", "--json")[0]["protected"] is True
    rc, _, err = berth("protect", "nothing-here", check=False)
    assert (rc, err) == (1, "berth: error: protect nothing-here: no such image or container\n")
    berth("unprotect", imported, "keep")
    berth("rm", "keep")
    berth("rmi", imported)
    assert berth.json("images", "--json") == []


# ---------------------------------------------------------------------------
# search and manifest inspect


def test_search_registry_catalog(berth, registry, busybox_image):
    pusher = registry.pusher()
    for repo in ("search/busybox-one", "search/busybox-two", "search/alpine"):
        pusher.push_image(repo, "1", busybox_image)
    _, out, _ = berth("search", f"{registry.host}/busybox-")
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "DESCRIPTION", "STARS", "OFFICIAL"]
    assert [l.split()[0] for l in lines[1:]] == [f"{registry.host}/search/busybox-one",
                                                 f"{registry.host}/search/busybox-two"]
    hits = berth.json("search", "--limit", "1", "--json", f"{registry.host}/busybox-")
    assert hits == [{"name": f"{registry.host}/search/busybox-one", "description": "",
                     "stars": None, "official": False}]
    assert berth.json("search", "--json", f"{registry.host}/nothing-like-this") == []


def test_search_v1_and_unsupported(berth, fake_registry):
    rc, out, err = berth("search", f"{fake_registry.host}/busybox", check=False)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: search {fake_registry.host}: the registry offers no search: "
                   "neither /v2/_catalog nor /v1/search\n")
    fake_registry.search_results = [
        {"name": "library/busybox", "description": "Busybox base image.", "star_count": 3000,
         "is_official": True},
        {"name": "someone/busybox-tools", "description": "Tools", "star_count": 2,
         "is_official": False},
        {"name": "other/alpine", "description": "", "star_count": 1, "is_official": False}]
    try:
        _, out, _ = berth("search", "--limit", "5", f"{fake_registry.host}/busybox")
        rows = [l.split(None, 1)[0] for l in out.splitlines()[1:]]
        assert rows == ["library/busybox", "someone/busybox-tools"]
        assert "[OK]" in out.splitlines()[1] and "3000" in out.splitlines()[1]
    finally:
        fake_registry.search_results = None


def test_manifest_inspect(berth, registry, pushed_busybox, busybox_image):
    _, out, _ = berth("manifest", "inspect", pushed_busybox)
    assert out.encode() == busybox_image.manifest.data + b"\n"
    _, out, _ = berth("manifest", "inspect", "--json", pushed_busybox)
    parsed = json.loads(out)
    assert parsed == json.loads(busybox_image.manifest.data)
    assert out.startswith('{\n   "schemaVersion": 2,\n')  # docker's three-space indent
    assert berth.json("images", "--json") == []  # nothing was pulled
    rc, out, err = berth("manifest", "inspect", f"{registry.host}/no/such:1", check=False)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: manifest inspect {registry.host}/no/such:1: GET "
                   f"http://{registry.host}/v2/no/such/manifests/1: manifest unknown (HTTP 404)\n")


# ---------------------------------------------------------------------------
# version and info


def test_version(berth):
    _, out, _ = berth("version")
    assert re.match(r"berth \d+\.\d+\.\d+\n", out)
    assert "Compiler:" in out and "OS/Arch:" in out
    v = berth.json("version", "--json")
    assert set(v) >= {"version", "compiler", "build_type", "platform"}
    _, out, _ = berth("--version")
    assert out == f"berth {v['version']}\n"


def test_info(berth, imported, identity):
    berth("create", imported)
    info = berth.json("info", "--json")
    assert info["store"] == berth.berth_home
    assert (info["images"], info["containers"]) == (1, 1)
    assert info["store_bytes"] > 100_000
    assert info["kernel"] == os.uname().release
    assert info["user_namespaces"] == userns_works(identity)
    engines = {e["name"]: e for e in info["engines"]}
    # The engine table's order (of preference), each engine's tools in its row.
    assert list(engines) == ["userns", "runc", "crun", "proot", "fakechroot", "apptainer",
                             "singularity"]
    for name in ("proot", "runc", "crun"):
        found = any(os.access(os.path.join(d, name), os.X_OK)
                    for d in berth.env["PATH"].split(":"))
        assert engines[name]["found"] == found, name
    assert ("userns" in info["engines_available"]) == info["user_namespaces"]
    assert ("proot" in info["engines_available"]) == engines["proot"]["found"]
    _, out, _ = berth("info")
    assert "Engines available: " in out
    assert "Store:" in out and berth.berth_home in out and "Engines:" in out
    assert re.search(r"^\s+proot\s+(yes|no)", out, re.M)


# ---------------------------------------------------------------------------
# Options before the image, the command after it


def test_options_before_image_command_after(berth, imported, identity):
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    _, out, _ = berth("run", "--rm", "-e", "A=1", "-w", "/etc", imported,
                      "/bin/sh", "-c", "echo $A $(pwd)")
    assert out == "1 /etc\n"
    _, out, _ = berth("run", "--rm", imported, "/bin/sh", "-c", 'printf "%s," "$@"', "sh",
                      "-e", "--rm", "-w", "x")
    assert out == "-e,--rm,-w,x,"
    # create as well: the command after the image is the container's own.
    berth("create", "--name", "greeter", imported, "/bin/echo", "--name", "x")
    assert berth("run", "greeter")[1] == "--name x\n"
    rc, _, err = berth("create", "--bogus", imported, check=False)
    assert (rc, err) == (125, "berth: error: create --bogus: unknown flag\n"
                              "berth: hint: see 'berth create --help'\n")

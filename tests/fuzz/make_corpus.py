#!/usr/bin/env python3
"""Writes the seed corpora under tests/fuzz/corpus/<target>/ with the tests' own builders
(tests/e2e/imagelib.py for layers, manifests and configs; the unit tests' fake GPU host for
/proc/driver/nvidia and ld.so.cache; tests/fake_gpu's libraries for ELF; docs/site.md's TOML
examples for the policy). Nothing is downloaded.
Usage: tests/fuzz/make_corpus.py [BUILD_DIR]   (BUILD_DIR/tests/fake_gpu_libs: ELF seeds)"""

import json
import os
import shutil
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "e2e"))
import imagelib  # noqa: E402
from imagelib import Dir, File, Hardlink, Layer, Opaque, Symlink, Whiteout  # noqa: E402

corpus = os.path.join(here, "corpus")


def put(target: str, name: str, data) -> None:
    os.makedirs(os.path.join(corpus, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(data)


# Reference parsing: the forms the unit tests use.
for i, ref in enumerate(["alpine", "alpine:3.19", "library/alpine:latest",
                         "127.0.0.1:5000/e2e/busybox:1",
                         "ghcr.io/org/team/app@sha256:" + "a" * 64,
                         "[::1]:5000/x/y:tag@sha256:" + "b" * 64, "linux/arm64/v8"]):
    put("fuzz_reference", f"seed{i}", ref)

# Manifests, indexes, configs.
small = Layer([Dir("etc"), File("etc/hello", b"hi\n")])
oci = imagelib.make_image([small], "oci", "linux/arm64/v8")
docker = imagelib.make_image([small], "docker", "linux/amd64")
put("fuzz_manifest", "oci-manifest", oci.manifest.data)
put("fuzz_manifest", "docker-manifest", docker.manifest.data)
put("fuzz_manifest", "oci-index", imagelib.make_index([oci, docker]).data)
put("fuzz_manifest", "docker-list", imagelib.make_index([oci, docker], "docker").data)
put("fuzz_manifest", "config", oci.config.data)

# WWW-Authenticate challenges.
for i, ch in enumerate([
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
        'scope="repository:library/alpine:pull"',
        'Basic realm="Registry Realm"',
        'Bearer realm="http://127.0.0.1:5001/token",service="fake",error="insufficient_scope"',
        'bearer  realm=x, service="a\\"b"']):
    put("fuzz_www_authenticate", f"seed{i}", ch)

# Layer tars: every entry kind imagelib writes, hostile names included.
layers = {
    "plain": [Dir("bin"), File("bin/tool", b"#!/bin/sh\n", 0o755), Symlink("bin/sh", "tool"),
              Hardlink("bin/again", "bin/tool")],
    "whiteouts": [Dir("etc"), Whiteout("etc/old"), Opaque("var/cache")],
    "escapes": [Symlink("up", "../../.."), File("../evil", b"x"), Hardlink("h", "/etc/passwd"),
                File("up/through", b"y")],
    "root-entries": [Dir("."), Dir("./"), File("./a", b"a")],
}
for name, entries in layers.items():
    put("fuzz_unpack", name + ".tar", imagelib.tar_bytes(entries))
put("fuzz_unpack", "plain.tar.gz", imagelib.compress(imagelib.tar_bytes(layers["plain"]), "gzip"))

# CDI specs: the first byte picks JSON (even) or YAML (odd), as fuzz_cdi.cc reads them.
spec = {"cdiVersion": "0.6.0", "kind": "vendor.com/dev",
        "containerEdits": {"env": ["COMMON=1"]},
        "devices": [{"name": "a", "containerEdits": {
            "env": ["WHICH=a"], "deviceNodes": [{"path": "/dev/null"}],
            "mounts": [{"hostPath": "/etc/hostname", "containerPath": "/etc/x", "options": ["ro"]}],
            "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk",
                       "args": ["nvidia-ctk", "hook", "update-ldcache", "--folder", "/usr/lib64"]},
                      {"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk",
                       "args": ["nvidia-ctk", "hook", "create-symlinks", "--link",
                                "libfoo.so.1::/usr/lib64/libfoo.so"]}]}}]}
put("fuzz_cdi", "spec.json", b"\0" + json.dumps(spec).encode())
put("fuzz_cdi", "spec.yaml", b"\1" + (
    "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n  containerEdits:\n"
    "    deviceNodes:\n    - path: /dev/null\n    env: [A=1, 'B=two']\ncontainerEdits:\n"
    "  mounts:\n  - {hostPath: /etc/hostname, containerPath: /opt/x, options: [ro, nosuid]}\n"
    "  hooks:\n  - hookName: createContainer\n    path: /usr/bin/nvidia-cdi-hook\n"
    "    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]\n").encode())


# ld.so.cache in glibc's layouts, as tests/unit/gpu_fixture.h writes them.
def new_format_cache(entries):
    strings = b""
    offsets = []
    header = 48
    table = header + 24 * len(entries)
    for name, path, _ in entries:
        offsets.append((table + len(strings), table + len(strings) + len(name) + 1))
        strings += name.encode() + b"\0" + path.encode() + b"\0"
    out = b"glibc-ld.so.cache1.1" + struct.pack("<I", len(entries)) + struct.pack("<I", len(strings))
    out += b"\0" * (header - len(out))
    for (k, v), (_, _, flags) in zip(offsets, entries):
        out += struct.pack("<iIIIQ", flags, k, v, 0, 0)
    return out + strings


cache_entries = [("libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", 0x0303),
                 ("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", 0x0303),
                 ("libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.1", 0x0003)]
put("fuzz_ld_cache", "new-format", new_format_cache(cache_entries))

# ELF: the fake GPU libraries tests/CMakeLists.txt builds (64- and 32-bit), and a static program.
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "build")
libs = os.path.join(build, "tests", "fake_gpu_libs")
for name in ("libcuda.so.550.54.15", "libcuda32.so"):
    if os.path.exists(os.path.join(libs, name)) and os.path.getsize(os.path.join(libs, name)):
        os.makedirs(os.path.join(corpus, "fuzz_elf"), exist_ok=True)
        shutil.copy(os.path.join(libs, name), os.path.join(corpus, "fuzz_elf", name))

# /proc/driver/nvidia: version, a GPU's information and params, NUL-separated (fuzz_nvidia_proc.cc).
version = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
           "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
info = ("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\n"
        "GPU UUID: \t GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee\nVideo BIOS: \t 92.00.19.00.01\n"
        "Bus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"
        "Bus Location: \t 0000:85:00.0\nDevice Minor: \t 1\nGPU Excluded:\t No\n")
params = "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n"
put("fuzz_nvidia_proc", "h100", "\0".join([version, info, params]))
put("fuzz_nvidia_proc", "open-module", "\0".join([
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build\n",
    info.replace("Device Minor: \t 1", "Device Minor: \t 0"), ""]))

# Site policy files: docs/site.md's TOML examples, alone (as the site's file), and the site's
# example with the user's after a NUL byte (fuzz_policy.cc).
with open(os.path.join(here, "..", "..", "docs", "site.md")) as f:
    doc = f.read()
examples = [block.split("```", 1)[0] for block in doc.split("```toml\n")[1:]]
for i, example in enumerate(examples):
    put("fuzz_policy", f"example{i}", example)
if len(examples) >= 2:
    put("fuzz_policy", "site-and-user", examples[-2] + "\0" + examples[-1])
put("fuzz_policy", "locked-squash", 'squash_options = "-comp zstd -Xcompression-level 3"\n'
    'lock = ["squash_options", "readonly"]\nreadonly = true\n\0squash_options = "-comp gzip"\n'
    'readonly = false\n')

"""Single-file images that users already have, end to end: enroot's default squashfs files
(lzo, which Debian's libsquashfs cannot read: Berth reads it itself), a compressor Berth cannot
read (named, never "corrupt"), and Apptainer/Singularity SIF files. Run in place (berth-squashfs),
inspected, and made into containers (create), as the unprivileged test user."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import tempfile

import pytest

from test_squashfs_run import (bytes_writer, images, make_tree, sq,  # noqa: F401 (fixtures)
                               write_enroot_config)


def _image(scratch: str, name: str, *mksquashfs_args: str, tree_hook=None) -> tuple[str, str]:
    """A squashfs file made by Debian's mksquashfs from an enroot-made tree with a 600 KB file
    /big (full data blocks, not only fragments); returns (file, /big's sha256)."""
    d = tempfile.mkdtemp(prefix=name + "-", dir=scratch)
    os.chmod(d, 0o755)
    tree = os.path.join(d, "tree")
    make_tree(tree, None)
    write_enroot_config(tree)
    big = bytes((i * 7919 + i // 251) % 256 for i in range(600 * 1024))
    with open(os.path.join(tree, "big"), "wb") as f:
        f.write(big)
    if tree_hook:
        tree_hook(tree)
    out = os.path.join(d, name)
    subprocess.run(["mksquashfs", tree, out, "-all-root", *mksquashfs_args, "-noappend", "-quiet",
                    "-no-progress"], check=True, stdout=subprocess.DEVNULL)
    os.chmod(out, 0o644)
    return out, hashlib.sha256(big).hexdigest()


def test_lzo_images_enroot_made_run_inspect_and_create(sq, scratch):
    """`mksquashfs -comp lzo` (enroot's default), with the default options (none stored) and
    with options stored after the superblock (-Xalgorithm lzo1x_1)."""
    plain, digest = _image(scratch, "lzo.sqsh", "-comp", "lzo")
    tuned, _ = _image(scratch, "lzo1x_1.sqsh", "-comp", "lzo", "-Xalgorithm", "lzo1x_1")
    for image, options in ((plain, False), (tuned, True)):
        with open(image, "rb") as f:
            head = f.read(96)
        assert int.from_bytes(head[20:22], "little") == 3  # lzo
        assert bool(int.from_bytes(head[24:26], "little") & 0x0400) == options
        assert sq("run", image) == (0, "hello from enroot\n/srv\n", "")
        rc, out, err = sq("run", image, "/bin/busybox", "sha256sum", "/big", check=False)
        assert (rc, out, err) == (0, f"{digest}  /big\n", "")
        info = sq.json("inspect", "--json", image)
        assert info["compressor"] == "lzo"
        assert info["enroot"]["Env"] == ["PATH=/bin", "GREETING=hello from enroot"]
        assert "Compressor:  lzo\n" in sq("inspect", image)[1]
    rc, _, err = sq("create", "--name", "from-lzo", plain, check=False)
    assert rc == 0, err
    assert sq("run", "from-lzo") == (0, "hello from enroot\n/srv\n", "")
    assert sq("run", "from-lzo", "/bin/busybox", "sha256sum", "/big")[1] == f"{digest}  /big\n"


def test_a_compressor_berth_cannot_read_is_named(sq, images):
    """An id no squashfs release has (9): run, inspect and create each say which compressor,
    in one line, and leave nothing behind."""
    with open(images["plain"], "rb") as f:
        data = bytearray(f.read())
    data[20:22] = (9).to_bytes(2, "little")
    d = sq.make_dir("unsupported")
    path = os.path.join(d, "nine.sqsh")
    with open(path, "wb") as f:
        f.write(bytes(data))
    expected = (f"berth: error: read squashfs {path}: squashfs compressor 9 (unknown) is not "
                f"supported: Berth reads gzip, lzma, lzo, xz, lz4 and zstd\n")
    # inspect fails with 1, as docker inspect does; run and create with 125 (berth failed).
    for status, args in ((125, ("run", path, "/bin/true")), (1, ("inspect", path)),
                         (125, ("create", "--name", "nine", path))):
        rc, out, err = sq(*args, check=False)
        assert (rc, out, err) == (status, "", expected), args
    assert "nine" not in sq("ps", "-a", "--format", "{{.Names}}")[1]


# ---------------------------------------------------------------------------------------------
# SIF (Apptainer/Singularity), assembled here per the published layout (github.com/apptainer/
# sif, pkg/sif: a 128-byte global header, 585-byte descriptors, little-endian, packed).

SIF_ENV_SCRIPT = ('for f in /.singularity.d/env/*.sh; do if [ -f "$f" ]; then . "$f"; fi; done; '
                  'exec "$@"')


def make_sif(path: str, partition: bytes, *, fstype: int = 1, parttype: int = 2,
             data_offset: int = 32768, total: int | None = None) -> str:
    """A SIF file as Apptainer lays it out: the header, 48 descriptor slots (a definition
    file, a JSON labels object, the system partition; the rest free) and the data, from
    `data_offset` (past the descriptors, 28,208 bytes), each object padded to 4 KiB."""
    slots = 48
    deffile = b"Bootstrap: docker\nFrom: busybox\n"
    labels = b'{"org.example": "yes"}'
    objects = []  # (data type, extra, payload)
    objects.append((0x4001, b"", deffile))
    objects.append((0x4003, b"", labels))
    objects.append((0x4004, struct.pack("<ii3s", fstype, parttype, b"02\0"), partition))
    descriptors, data, at = b"", b"", data_offset
    for i, (dtype, extra, payload) in enumerate(objects):
        padded = len(payload) + (-len(payload)) % 4096
        descriptors += struct.pack("<i?IIIqqqqqqq128s384s", dtype, True, i + 1, 0xf0000001, 0,
                                   at, len(payload), padded, 1700000000, 1700000000, 0, 0,
                                   f"object-{i + 1}".encode(), extra)
        data += payload + b"\0" * (padded - len(payload))
        at += padded
    descriptors += b"\0" * 585 * (slots - len(objects))
    launch = b"#!/usr/bin/env run-singularity\n"
    header = struct.pack("<32s10s3s3s16sqqqqqqqq", launch, b"SIF_MAGIC\0", b"01\0", b"02\0",
                         b"\x11" * 16, 1700000000, 1700000000, slots - len(objects),
                         slots if total is None else total, 128, slots * 585,
                         data_offset, len(data))
    assert len(header) == 128 and len(descriptors) == slots * 585
    with open(path, "wb") as f:
        f.write(header + descriptors)
        f.write(b"\0" * (data_offset - len(header) - len(descriptors)))
        f.write(data)
    os.chmod(path, 0o644)
    return path


def _singularity_tree(tree: str) -> None:
    sd = os.path.join(tree, ".singularity.d")
    os.makedirs(os.path.join(sd, "env"))
    with open(os.path.join(sd, "runscript"), "w") as f:
        f.write('#!/bin/sh\necho "runscript: $GREETING $WHO $COMPUTED [$*]"\n')
    os.chmod(os.path.join(sd, "runscript"), 0o755)
    env = {
        # What Apptainer writes for a Docker image's ENV: defaults the host's values override.
        "10-docker2singularity.sh": '#!/bin/sh\nexport PATH="/bin"\n'
                                    'export GREETING="${GREETING:-"hello"}"\n',
        # A definition's %environment: sourced, so it may compute.
        "90-environment.sh": "#!/bin/sh\n# custom environment\nexport WHO=sif\n"
                             'export COMPUTED="$WHO-computed"\n',
        "99-base.sh": '#!/bin/sh\nexport PS1="Apptainer> "\n',
    }
    for name, text in env.items():
        with open(os.path.join(sd, "env", name), "w") as f:
            f.write(text)
    # The image is no enroot one: its /etc/rc is gone.
    for f in ("rc", "rc.local", "environment"):
        os.unlink(os.path.join(tree, "etc", f))


@pytest.fixture(scope="module")
def sif_image(scratch, usable_fuse):
    sqsh, digest = _image(scratch, "part.sqsh", "-comp", "gzip", tree_hook=_singularity_tree)
    with open(sqsh, "rb") as f:
        partition = f.read()
    return make_sif(os.path.join(os.path.dirname(sqsh), "img.sif"), partition), partition, digest


def test_a_sif_file_runs_inspects_and_creates_as_under_apptainer(sq, sif_image):
    sif, partition, digest = sif_image
    # No command: the runscript, after every env script (in order: computed values too).
    assert sq("run", sif) == (0, "runscript: hello sif sif-computed []\n", "")
    # A command replaces the runscript (apptainer exec); the environment is the same.
    rc, out, err = sq("run", sif, "/bin/sh", "-c", "echo $COMPUTED $PS1", check=False)
    assert (rc, out, err) == (0, "sif-computed Apptainer>\n", "")
    # The host's GREETING overrides the image's default, as under Apptainer.
    rc, out, err = sq("run", "-e", "GREETING=hi", sif, check=False)
    assert (rc, out, err) == (0, "runscript: hi sif sif-computed []\n", "")
    assert sq("run", sif, "/bin/busybox", "sha256sum", "/big")[1] == f"{digest}  /big\n"
    doc = sq.json("inspect", "--json", sif)
    assert doc["sif"] == {"offset": 32768 + 8192, "size": len(partition)}, doc
    assert doc["singularity"] == {"Entrypoint": ["/bin/sh", "-c", SIF_ENV_SCRIPT, "sif"],
                                  "Cmd": ["/.singularity.d/runscript"],
                                  "Env": ["PATH=/bin", "GREETING=hello", "WHO=sif"]}, doc
    assert doc["compressor"] == "gzip" and doc["enroot"] is None
    out = sq("inspect", sif)[1]
    assert out.startswith("Image:       made by Apptainer/Singularity (/.singularity.d)\n"), out
    assert "SIF:         squashfs partition of " in out and " at offset 40960\n" in out, out
    rc, _, err = sq("create", "--name", "from-sif", sif, check=False)
    assert rc == 0, err
    assert sq("run", "from-sif") == (0, "runscript: hello sif sif-computed []\n", "")
    rc, out, err = sq("run", "from-sif", "/bin/busybox", "sha256sum", "/big", check=False)
    assert (rc, out) == (0, f"{digest}  /big\n"), err


def test_bad_sif_files_are_refused_in_one_line(sq, sif_image):
    sif, partition, _ = sif_image
    with open(sif, "rb") as f:
        good = f.read()
    d = sq.make_dir("bad-sif")
    write = bytes_writer(d)

    def refused(path: str) -> str:
        """The one line that run, inspect and create each print for `path`."""
        lines = set()
        for status, args in ((125, ("run", path, "/bin/true")), (1, ("inspect", path)),
                             (125, ("create", "--name", "bad", path))):
            rc, out, err = sq(*args, check=False)
            assert (rc, out, len(err.splitlines())) == (status, "", 1), (args, rc, out, err)
            lines.add(err)
        assert len(lines) == 1, lines
        assert "bad" not in sq("ps", "-a", "--format", "{{.Names}}")[1]
        return lines.pop()

    short = write("short.sif", good[:100])
    assert refused(short) == (f"berth: error: read squashfs {short}: SIF file is truncated: 100 "
                              f"bytes, shorter than its global header\n")
    cut = write("cut.sif", good[:40960 + 1000])
    assert refused(cut) == (f"berth: error: read squashfs {cut}: SIF file is truncated: its "
                            f"squashfs system partition ({len(partition)} bytes at offset "
                            f"40960) ends past its 41960 bytes\n")
    garbled = bytearray(good)
    garbled[88:96] = (10 ** 9).to_bytes(8, "little")  # descriptors total
    garbled = write("garbled.sif", bytes(garbled))
    assert refused(garbled) == (
        f"berth: error: read squashfs {garbled}: SIF file is corrupt or truncated: its "
        f"descriptor table (1000000000 at offset 128) does not fit its {len(good)} bytes\n")
    data_only = make_sif(os.path.join(d, "data.sif"), partition, parttype=3)
    assert refused(data_only) == (f"berth: error: read squashfs {data_only}: SIF file has no "
                                  f"squashfs system partition\n")
    ext3 = make_sif(os.path.join(d, "ext3.sif"), partition, fstype=2)
    assert refused(ext3) == (f"berth: error: read squashfs {ext3}: SIF file's system partition "
                             f"is ext3: only squashfs is supported\n")
    junk = make_sif(os.path.join(d, "junk.sif"), b"not squashfs at all\n" * 100)
    assert refused(junk) == (f"berth: error: read squashfs {junk}: SIF file's squashfs "
                             f"partition: not a squashfs image (no squashfs magic number)\n")


def test_create_keeps_a_sparse_file_sparse(sq, scratch):
    """A small image holding a huge sparse file (`truncate -s`, as in the report: 50 GiB there;
    1 GiB here, which mksquashfs reads in full) becomes a container whose file is as sparse."""
    d = tempfile.mkdtemp(prefix="sparse-", dir=scratch)
    os.chmod(d, 0o755)
    tree = os.path.join(d, "tree")
    make_tree(tree, None)
    size = 1 << 30
    subprocess.run(["truncate", "-s", str(size), os.path.join(tree, "huge")], check=True)
    with open(os.path.join(tree, "huge"), "r+b") as f:
        f.seek(size // 2)
        f.write(b"in the middle")
    image = os.path.join(d, "sparse.sqsh")
    subprocess.run(["mksquashfs", tree, image, "-all-root", "-comp", "lzo", "-noappend", "-quiet",
                    "-no-progress"], check=True, stdout=subprocess.DEVNULL)
    os.chmod(image, 0o644)
    assert os.path.getsize(image) < 4 << 20
    rc, _, err = sq("create", "--name", "sparse", image, check=False)
    assert rc == 0, err
    rootfs = sq("inspect", "--format", "{{.rootfs}}", "sparse")[1].strip()
    st = os.stat(os.path.join(rootfs, "huge"))
    assert st.st_size == size
    assert st.st_blocks * 512 <= 1 << 20, st.st_blocks  # the written block only
    with open(os.path.join(rootfs, "huge"), "rb") as f:
        f.seek(size // 2)
        assert f.read(13) == b"in the middle"
        f.seek(size - 4)
        assert f.read() == b"\0" * 4


def test_extract_limit_mb_of_the_users_configuration_bounds_create(sq, scratch):
    """extract_limit_mb (here the user's berth.conf) bounds one extraction below the store's
    free space: past it one line, and no container is left."""
    d = tempfile.mkdtemp(prefix="limit-", dir=scratch)
    os.chmod(d, 0o755)
    tree = os.path.join(d, "tree")
    make_tree(tree, None)
    with open(os.path.join(tree, "noise"), "wb") as f:
        f.write(os.urandom(8 << 20))  # 8 MiB that no compressor shrinks (busybox: under 4)
    image = os.path.join(d, "noise.sqsh")
    subprocess.run(["mksquashfs", tree, image, "-all-root", "-comp", "lz4", "-noappend", "-quiet",
                    "-no-progress"], check=True, stdout=subprocess.DEVNULL)
    os.chmod(image, 0o644)
    config = sq.make_dir("config")
    sq.write_file("config/berth.conf", "extract_limit_mb = 4\n")
    env = {"BERTH_CONFIG_DIR": config}
    rc, _, err = sq("create", "--name", "bounded", image, env=env, check=False)
    assert rc == 125, err
    assert err.splitlines()[0] == (
        f"berth: error: create container from {image}: write {image}:/noise: the extraction "
        f"would write more than 4194304 bytes, the configured extract_limit_mb"), err
    assert sq("ps", "-a", "-q", "--filter", "name=bounded")[1] == ""
    assert sq("create", "--name", "unbounded", image)[0] == 0  # without the setting: made

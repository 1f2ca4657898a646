"""The udocker drop-in, end to end: udocker's command lines, typed as a udocker user types them,
through a link named `udocker` (made by `berth setup --udocker-link DIR`), as the unprivileged
user.

One table: each row is the line as typed, what the store holds first (`setup`, udocker lines
too), and the expected effect (exit status, output, a line run after it and its output). Rows
marked Tnnn are udocker's own CLI test lines (utils/udocker_test.sh, udocker_test-run.sh in
indigo-dc/udocker), with its Docker Hub images replaced by an image on the local registry.
Each row gets a fresh store."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tarfile

import pytest

import imagelib
from test_gpu import UUID0, UUID1, host, images, pulled  # noqa: F401  (fixtures)
from test_run import PATH, userns_works

ID = r"[0-9a-f]{64}"


class Row:
    """A udocker line and its expected effect. `out`/`err`: regexes searched in stdout/stderr;
    `then`: a udocker line run afterwards whose stdout must match `then_out` (and must not
    match `then_not`); `files`: paths (relative to the work directory) that must exist."""

    def __init__(self, name, line, setup=(), rc=0, out=None, err=None, then=None, then_out=None,
                 then_not=None, env=None, input=None, files=(), needs=None):
        self.name, self.line, self.setup, self.rc = name, line, setup, rc
        self.out, self.err, self.then, self.then_out, self.then_not = out, err, then, then_out, then_not
        self.env, self.input, self.files, self.needs = env or {}, input, files, needs

    def __repr__(self):
        return self.name


CREATED = ["pull {img}", "create --name=c {img}"]

ROWS = [
    # --- udocker's own CLI test lines (utils/udocker_test.sh) ---------------------------------
    Row("T001 install", "install", out=r"nothing to install"),
    Row("T002 install --force", "install --force", out=r"nothing to install"),
    Row("T003 no options", "", out=r"Global options"),
    Row("T004 help", "help", out=r"setup \[--execmode"),
    Row("T005 -h", "-h", out=r"Global options"),
    Row("T006 showconf", "showconf", out=r"topdir = .*berth-store"),
    Row("T007 version", "version", out=r"^version: \S+"),
    Row("T008 -D version", "-D version", out=r"^version: "),
    Row("T009 --quiet version", "--quiet version", out=r"^version: "),
    Row("T010 -q version", "-q version", out=r"^version: "),
    Row("T011 --debug version", "--debug version", out=r"^version: "),
    Row("T012 -V", "-V", out=r"^version: "),
    Row("T013 --version", "--version", out=r"^version: "),
    Row("T014 search -a (udocker's columns)", "search -a {host}/e2e/ud",
        out=r"\ANAME {52}OFFICIAL DESCRIPTION {60}STARS\n{host}/e2e/udocker {20,}    ---- +\n"),
    Row("T015 pull", "pull {img}", then="images", then_out=r"e2e/udocker:1\.0    \."),
    Row("T016 --insecure pull", "--insecure pull {img}", then="images",
        then_out=r"e2e/udocker:1\.0"),
    Row("pull --registry=URL (named as typed)", "pull --registry=http://{host} e2e/udocker:1.0",
        then="images", then_out=r"\AREPOSITORY\ne2e/udocker:1\.0    \.\n\Z"),
    Row("create of an image pulled with --registry=URL", "create --name=r e2e/udocker:1.0",
        setup=["pull --registry=http://{host} e2e/udocker:1.0"], out=rf"\A{ID}\n\Z"),
    Row("T017 verify", "verify {img}", setup=["pull {img}"]),
    Row("T018 images", "images", setup=["pull {img}"],
        out=r"\AREPOSITORY\n\S*e2e/udocker:1\.0    \.\n\Z"),
    Row("T019 inspect (image)", "inspect {img}", setup=["pull {img}"], out=r"\"Cmd\""),
    Row("T020 -q create", "-q create {img}", setup=["pull {img}"], out=rf"\A{ID}\n\Z"),
    Row("T021 create --name=", "create --name=c2 {img}", setup=["pull {img}"],
        out=rf"\A{ID}\n\Z", then="ps", then_out=r"\['c2'\]"),
    Row("T022 ps", "ps", setup=CREATED,
        out=r"\ACONTAINER ID {25}P M NAMES {14}IMAGE {15}\n{cid} \. W \['c'\] +\S*e2e/udocker"),
    Row("T023 name", "name {cid} conti", setup=CREATED, then="ps", then_out=r"\['c', 'conti'\]"),
    Row("T024 rmname", "rmname c", setup=CREATED, then="ps", then_out=r"{cid} \. W  +\S*e2e"),
    Row("T025 inspect (container)", "inspect {cid}", setup=CREATED, out=r"\"{cid}\""),
    Row("T026 clone --name=", "clone --name=myclone {cid}", setup=CREATED, out=rf"\A{ID}\n\Z",
        then="ps", then_out=r"\['myclone'\]"),
    Row("T027 export -o", "export -o myexportcont.tar {cid}", setup=CREATED,
        files=["myexportcont.tar"]),
    Row("T028 rm", "rm {cid}", setup=CREATED, then="ps", then_not=r"{cid}"),
    Row("T029 setup", "setup c", setup=CREATED, out=r"\Aexecmode: NS\nnvidiamode: False\n\Z"),
    Row("T030 mkrepo", "mkrepo {work}/repo", then="--repo={work}/repo images",
        then_out=r"\AREPOSITORY\n\Z"),
    Row("T031 --repo= pull", "--repo={work}/repo pull {img}", setup=["mkrepo {work}/repo"],
        then="--repo={work}/repo images", then_out=r"e2e/udocker:1\.0"),
    Row("T032 --repo= verify", "--repo={work}/repo verify {img}",
        setup=["mkrepo {work}/repo", "--repo={work}/repo pull {img}"]),
    Row("T033 UDOCKER_DIR= verify", "verify {img}", env={"UDOCKER_DIR": "{work}/udir"},
        setup=["mkrepo {work}/udir", "--repo={work}/udir pull {img}"]),
    Row("UDOCKER_DIR= of a new directory (made, as udocker makes its own)", "pull {img}",
        env={"UDOCKER_DIR": "{work}/fresh"}, then="--repo={work}/fresh images",
        then_out=r"e2e/udocker:1\.0"),
    Row("T034 load -i", "load -i {work}/saved.tar",
        setup=["pull {img}", "save -o {work}/saved.tar {img}", "rmi {img}"],
        then="images", then_out=r"e2e/udocker:1\.0"),
    Row("T035 protect (container)", "protect c", setup=CREATED, then="ps", then_out=r"{cid} P W"),
    Row("protect (image)", "protect {img}", setup=["pull {img}"], then="images",
        then_out=r"e2e/udocker:1\.0    P"),
    Row("T036 rm of a protected container", "rm c", setup=CREATED + ["protect c"], rc=1,
        err=r"protected"),
    Row("T037 unprotect (container)", "unprotect c", setup=CREATED + ["protect c"], then="ps",
        then_out=r"{cid} \. W"),
    Row("T038 rm of an unprotected container", "rm c",
        setup=CREATED + ["protect c", "unprotect c"], then="ps", then_not=r"{cid}"),
    Row("T039 import", "import {work}/rootfs.tar mycentos1:latest", then="images",
        then_out=r"mycentos1:latest    \."),
    Row("T040 import --tocontainer --name=", "import --tocontainer --name=mycont {work}/rootfs.tar",
        out=rf"\A{ID}\n\Z", then="ps", then_out=r"\['mycont'\] +imported:unknown"),
    Row("T041 import --clone of a plain root filesystem tarball",
        "import --clone --name=clone_cont {work}/rootfs.tar", out=rf"\A{ID}\n\Z",
        then="run clone_cont /bin/cat /etc/motd", then_out=r"\Audocker motd\n\Z"),
    Row("import --clone of a clone without ROOT/ (refused)",
        "import --clone --name=broken {work}/broken-clone.tar", rc=1,
        err=r"\Aberth: error: import .*broken-clone\.tar: a udocker clone without its ROOT/ "
            r"folder\n", then="ps", then_not=r"broken"),
    Row("import --clone of a udocker clone (export --clone's format)",
        "import --clone --name=cl {work}/clone.tar", out=rf"\A{ID}\n\Z",
        then="run cl /bin/cat /etc/motd", then_out=r"\Audocker motd\n\Z"),
    Row("T042 rmi", "rmi {img}", setup=["pull {img}"], then="images", then_not=r"e2e/udocker"),
    Row("T043 ps -m", "ps -m", setup=CREATED, out=r"P M MOD NAMES .*\n{cid} \. W NS \['c'\]"),
    Row("T044 ps -s -m", "ps -s -m", setup=CREATED,
        out=r"P M MOD SIZE NAMES .*\n{cid} \. W NS +\d+ \['c'\]"),
    Row("T045 images -l", "images -l", setup=["pull {img}"],
        out=r"e2e/udocker:1\.0    \.\n /.+/blobs/sha256/\n    sha256:[0-9a-f]{64} \(\d+ MB\)"),
    Row("T047 create --name= (T046-T051: a local image)", "create --name=py3slim {img}",
        setup=["pull {img}"], out=rf"\A{ID}\n\Z"),
    Row("T048 run a created container", "run py3slim /bin/cat /etc/motd",
        setup=["pull {img}", "create --name=py3slim {img}"], out=r"\Audocker motd\n\Z"),
    Row("T052 login", "login --username=alice --password=wonderland-7 --registry=http://{auth}",
        out=r"Login Succeeded", needs="auth"),
    Row("login --password-stdin", "login --username=alice --password-stdin --registry={auth}",
        input="wonderland-7\n", out=r"Login Succeeded", then="pull {auth}/e2e/private:1.0",
        needs="auth"),
    Row("T053 logout -a", "logout -a",
        setup=["login --username=alice --password=wonderland-7 --registry=http://{auth}"],
        then="pull {auth}/e2e/private:1.0", needs="auth"),
    # --- execution modes (utils/udocker_test-run.sh) ------------------------------------------
    Row("run T001 setup (P1 default in udocker: NS in Berth)", "setup c", setup=CREATED,
        out=r"execmode: NS"),
    Row("run T007 setup --execmode=P2", "setup --execmode=P2 c", setup=CREATED,
        err=r"P2 runs as P1", then="setup c", then_out=r"execmode: P2", needs="proot"),
    Row("run T002 run --env= (P1)", "run --env=\"LANG=C\" c /bin/sh -c 'echo $LANG'",
        setup=CREATED + ["setup --execmode=P1 c"], out=r"\AC\n\Z", needs="proot"),
    Row("run T008 run (P2)", "run c /bin/cat /etc/motd", setup=CREATED + ["setup --execmode=P2 c"],
        out=r"udocker motd", needs="proot"),
    Row("run T013 setup --execmode=F1", "setup --execmode=F1 c", setup=CREATED, then="ps -m",
        then_out=r"{cid} \. W F1"),
    Row("run T021 setup --execmode=F3", "setup --execmode=F3 c", setup=CREATED,
        err=r"F3 runs as F1: Berth patches no ELF headers", then="setup c",
        then_out=r"execmode: F3"),
    Row("run T033 setup --execmode=R1", "setup --execmode=r1 c", setup=CREATED, then="ps -m",
        then_out=r"{cid} \. W R1"),
    Row("run T034 run (R1)", "run c /bin/cat /etc/motd", setup=CREATED + ["setup --execmode=R1 c"],
        out=r"udocker motd", needs="runc"),
    Row("run T039 setup --execmode=R2", "setup --execmode=R2 c", setup=CREATED,
        err=r"R2 runs as R1"),
    Row("setup --execmode=S1", "setup --execmode=S1 c", setup=CREATED, then="ps -m",
        then_out=r"{cid} \. W S1"),
    Row("setup --execmode=X9 (refused)", "setup --execmode=X9 c", setup=CREATED, rc=1,
        err=r"\Aberth: error: setup --execmode=X9: not a udocker mode\n"
            r"berth: hint: P1, P2, F1, F2, F3, F4, R1, R2, R3 or S1\n\Z"),
    # --- setup ------------------------------------------------------------------------------
    Row("setup --nvidia", "setup --nvidia c", setup=CREATED, out=r"\A\Z", then="setup c",
        then_out=r"nvidiamode: True"),
    Row("setup --purge", "setup --purge c", setup=CREATED, out=r"\A\Z"),
    Row("setup --fixperm", "setup --fixperm c", setup=CREATED, out=r"\A\Z"),
    # --- run options ------------------------------------------------------------------------
    Row("run IMAGE (its Cmd)", "run {img}", setup=["pull {img}"], out=r"uid=0"),
    Row("run: udocker's environment", "run c /bin/sh -c 'echo $container_uuid $container_names "
        "$container_execmode'", setup=CREATED + ["name c c2"], out=r"\A{cid} c,c2 NS\n\Z"),
    Row("run: the working directory is root's home", "run c /bin/sh -c 'cd -P . && echo $PWD'",
        setup=CREATED, out=r"\A/root\n\Z"),
    Row("run exit status", "run c /bin/sh -c 'exit 3'", setup=CREATED, rc=3),
    Row("run stdin", "run c /bin/cat", setup=CREATED, input="from stdin\n", out=r"\Afrom stdin\n\Z"),
    Row("run --workdir=", "run --workdir=/tmp c /bin/busybox pwd", setup=CREATED, out=r"\A/tmp\n\Z"),
    Row("run -w (short)", "run -w /etc c /bin/busybox pwd", setup=CREATED, out=r"\A/etc\n\Z"),
    Row("run --user=", "run --user=app c /bin/busybox id -u", setup=CREATED, out=r"\A1234\n\Z"),
    Row("run --volume=", "run --volume={work}/data:/mnt c /bin/cat /mnt/f", setup=CREATED,
        out=r"\Adata file\n\Z"),
    Row("run -v (short)", "run -v {work}/data:/mnt c /bin/cat /mnt/f", setup=CREATED,
        out=r"\Adata file\n\Z"),
    Row("run --volume=HOST (the same path inside)", "run --volume={work}/data c /bin/cat {work}/data/f",
        setup=CREATED, out=r"\Adata file\n\Z"),
    Row("run -e (short)", "run -e A=1 -e B=2 c /bin/sh -c 'echo $A$B'", setup=CREATED,
        out=r"\A12\n\Z"),
    Row("run --hostenv", "run --hostenv c /bin/sh -c 'echo $MARK'", setup=CREATED,
        env={"MARK": "from-host"}, out=r"\Afrom-host\n\Z"),
    Row("run --hostenv: HOME is the container user's", "run --hostenv c /bin/sh -c 'echo $HOME'",
        setup=CREATED, env={"HOME": "{home}"}, out=r"\A/root\n\Z"),
    Row("run --user=root starts in root's home", "run --user=root c /bin/sh -c 'cd -P . && "
        "echo $PWD'", setup=CREATED, out=r"\A/root\n\Z"),
    Row("run --user=app starts in app's home", "run --user=app c /bin/sh -c 'cd -P . && "
        "echo $PWD'", setup=CREATED, out=r"\A/\n\Z"),
    Row("run --hostauth", "run --hostauth c /bin/sh -c 'grep -c ^berthtest: /etc/passwd'",
        setup=CREATED, out=r"\A1\n\Z", needs="berthtest"),
    Row("run --containerauth", "run --containerauth c /bin/sh -c 'grep -c ^app: /etc/passwd'",
        setup=CREATED, out=r"\A1\n\Z"),
    Row("run --bindhome: the host's home, bound at its path", "run --bindhome c /bin/sh -c "
        "'cd \"$HOME\" && echo \"$PWD $HOME\"'", setup=CREATED, env={"HOME": "{home}"},
        out=r"\A{home} {home}\n\Z"),
    Row("run --rm", "run --rm {img} /bin/true", setup=["pull {img}"], then="ps",
        then_not=r"e2e/udocker"),
    Row("run --name= (an image)", "run --name=n1 {img} /bin/true", setup=["pull {img}"],
        then="ps", then_out=r"\['n1'\]"),
    Row("run --name= (an existing container)", "run --name=n2 c /bin/true", setup=CREATED,
        then="ps", then_out=r"{cid} \. W \['c', 'n2'\]"),
    Row("run --pull=reuse --name=", "run --pull=reuse --name=r {img} /bin/true",
        setup=["pull {img}", "run --pull=reuse --name=r {img} /bin/true"], then="ps",
        then_out=r"\A[^\n]*\n[^\n]*\['r'\][^\n]*\n\Z"),
    Row("run --pull=never (missing image)", "run --pull=never {img} /bin/true", rc=125,
        err=r"never"),
    Row("run --location=", "run --location={work}/rootfs /bin/cat /etc/motd", out=r"udocker motd"),
    Row("run --cpuset-cpus=", "run --cpuset-cpus=0 c /bin/sh -c 'grep Cpus_allowed_list "
        "/proc/self/status'", setup=CREATED, out=r"Cpus_allowed_list:\s+0\n"),
    Row("run: the image's environment", "run c /bin/sh -c 'echo \"[$FROM_IMAGE]\"'",
        setup=CREATED, out=r"\A\[ud\]\n\Z"),
    Row("run --nometa: no image environment, root's home", "run --nometa c /bin/sh -c "
        "'echo \"[$FROM_IMAGE]\" $PWD'", setup=CREATED, out=r"\A\[\] /root\n\Z"),
    Row("run --nometa without a command (the image's Cmd is dropped)", "run --nometa c",
        setup=CREATED, rc=125, err=r"no command specified"),
    Row("run --nobanner", "run --nobanner c /bin/true", setup=CREATED, out=r"\A\Z"),
    Row("run --kernel= (noted)", "run --kernel=6.0.0 c /bin/true", setup=CREATED,
        err=r"do not fake the kernel version"),
    Row("run --nosysdirs (noted)", "run --nosysdirs c /bin/true", setup=CREATED,
        err=r"--nosysdirs: Berth binds no host system directories"),
    Row("run --dri", "run --dri c /bin/true", setup=CREATED),
    Row("run --platform=", "run --platform=linux/amd64 {img} /bin/true"),
    Row("run --entrypoint=", "run --entrypoint=/bin/echo c hi", setup=CREATED, out=r"\Ahi\n\Z"),
    Row("run --unknown (refused)", "run --unknown c /bin/true", setup=CREATED, rc=1,
        err=r"\Aberth: error: udocker run --unknown: not an option of udocker run\n"
            r"berth: hint: see 'udocker help' and docs/udocker\.md\n\Z"),
    # --- the rest of the commands -----------------------------------------------------------
    Row("rename", "rename c newc", setup=CREATED, then="ps", then_out=r"\['newc'\]"),
    Row("tag", "tag {img} mine/copy:2", setup=["pull {img}"], then="images",
        then_out=r"mine/copy:2    \."),
    Row("save -o", "save -o {work}/out.tar {img}", setup=["pull {img}"], files=["out.tar"]),
    Row("inspect -p", "inspect -p c", setup=CREATED, out=r"\A/.+/containers/{cid}/rootfs\n\Z"),
    Row("manifest inspect", "manifest inspect {img}", out=r"schemaVersion"),
    Row("rmi -f", "rmi -f {img}", setup=["pull {img}"], then="images", then_not=r"e2e/udocker"),
    Row("images -p", "images -p", setup=["pull {img}"], out=r"linux/amd64 +\. \S*e2e/udocker:1\.0"),
    Row("ps -p", "ps -p", setup=CREATED, out=r"PLATFORM .*\n{cid} \. W linux/amd64 +\['c'\]"),
    Row("search --list-tags (refused)", "search --list-tags {img}", rc=1,
        err=r"\Aberth: error: udocker search --list-tags: Berth lists no tags\n"
            r"berth: hint: skopeo list-tags docker://IMAGE lists them\n\Z"),
    Row("export --clone", "export --clone -o {work}/c.tar c", setup=CREATED, out=r"\A\Z",
        files=["c.tar"]),
    Row("import --clone of export --clone's file", "import --clone --name=back {work}/c.tar",
        setup=CREATED + ["export --clone -o {work}/c.tar c"], out=rf"\A{ID}\n\Z",
        then="run back /bin/cat /etc/motd", then_out=r"\Audocker motd\n\Z"),
    Row("--config= (refused)", "--config=udocker.conf images", rc=1,
        err=r"\Aberth: error: udocker --config=udocker\.conf: udocker configuration files are "
            r"not read by Berth\nberth: hint: Berth's settings: ~/\.config/berth/berth\.conf "
            r"\(docs/site\.md\)\n\Z"),
    Row("--repo= of a missing directory (refused)", "--repo={work}/none images", rc=1,
        err=r"\Aberth: error: udocker --repo={work}/none: no such repository\n"
            r"berth: hint: make it with: udocker mkrepo {work}/none\n\Z"),
    Row("UDOCKER_DIR of a real udocker repository (refused)", "images",
        env={"UDOCKER_DIR": "{work}/udocker-repo"}, rc=1,
        err=r"holds a udocker repository .* \(named by UDOCKER_DIR\)"),
    Row("an unknown command", "frobnicate", rc=1,
        err=r"\Aberth: error: udocker frobnicate: not a udocker command\n"
            r"berth: hint: see 'udocker help'\n\Z"),
]

# Rows whose `then` line is expected to fail (logout removed the credentials).
for _row in ROWS:
    _row.then_rc = "T053" in _row.name


@pytest.fixture(scope="module")
def ud_image(registry, identity, berth_bin):
    """busybox with a motd and a user `app` (1234), pushed once."""
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    extra = imagelib.Layer([
        imagelib.File("etc/motd", b"udocker motd\n"),
        imagelib.File("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234::/:/bin/sh\n"),
        imagelib.File("etc/group", b"root:x:0:\napp:x:1234:\n"),
        imagelib.File("probe", b"#!/bin/sh\necho uid=$(id -u)\n", 0o755),
        imagelib.Dir("root"),
    ])
    img = imagelib.make_image([imagelib.busybox_layer(), extra], cmd=["/probe"],
                              config={"Env": [f"PATH={PATH}", "FROM_IMAGE=ud"]})
    registry.pusher().push_image("e2e/udocker", "1.0", img)
    return f"{registry.host}/e2e/udocker:1.0"


class Udocker:
    """Runs `udocker` (a link made by `berth setup --udocker-link`) as the test user."""

    def __init__(self, berth, values):
        self.berth, self.values = berth, values
        bindir = berth.make_dir("bin")
        berth("setup", "--udocker-link", bindir)
        self.link = os.path.join(bindir, "udocker")
        assert os.readlink(self.link) == os.path.realpath(berth.binary)

    def fill(self, text: str, quote=lambda v: v) -> str:
        for k, v in self.values.items():
            text = text.replace("{" + k + "}", quote(v))
        return text

    def pattern(self, regex: str) -> str:
        return self.fill(regex, re.escape)

    def __call__(self, line: str, env=None, input=None):
        args = shlex.split(self.fill(line, shlex.quote))
        full_env = dict(self.berth.env)
        full_env.update({k: self.fill(v) for k, v in (env or {}).items()})
        r = subprocess.run(self.berth.identity.prefix + [self.link, *args], env=full_env,
                           input=input if input is not None else "", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120, cwd=self.berth.workdir)
        return r.returncode, r.stdout, r.stderr


def prepare_work(berth, ud_image):
    """The files rows name: a data directory, a root filesystem (directory and tar), a udocker
    repository's layout."""
    data = berth.make_dir("data")
    berth.write_file("data/f", "data file\n")
    # A root filesystem: the image unpacked (for --location) and tarred (for import).
    berth("pull", ud_image)
    rootfs = berth.path("rootfs")
    berth("unpack", ud_image, rootfs)
    with tarfile.open(berth.path("rootfs.tar"), "w") as t:
        t.add(rootfs, arcname=".")
    berth.identity.chown(berth.path("rootfs.tar"))
    # udocker's clone format (udocker export --clone): the container's folder, ROOT/ and
    # udocker's metadata.
    with tarfile.open(berth.path("clone.tar"), "w") as t:
        t.add(rootfs, arcname="./ROOT")
        for name, text in (("container.json", b"{}"), ("imagerepo.name", b"e2e/udocker:1.0")):
            info = tarfile.TarInfo("./" + name)
            info.size = len(text)
            t.addfile(info, io.BytesIO(text))
    berth.identity.chown(berth.path("clone.tar"))
    # A clone that lost its ROOT/: udocker's metadata alone.
    with tarfile.open(berth.path("broken-clone.tar"), "w") as t:
        info = tarfile.TarInfo("./container.json")
        info.size = 2
        t.addfile(info, io.BytesIO(b"{}"))
    berth.identity.chown(berth.path("broken-clone.tar"))
    berth("rmi", ud_image)
    for d in ("udocker-repo", "udocker-repo/repos", "udocker-repo/layers"):
        berth.make_dir(d)
    return data


def need(row: Row, values) -> str:
    """Why the row cannot run here ("" when it can)."""
    if row.needs == "proot" and not shutil.which("proot"):
        return "proot is not installed"
    if row.needs == "runc" and not shutil.which("runc", path="/usr/sbin:/usr/bin:/sbin:/bin"):
        return "runc is not installed"
    if row.needs == "berthtest" and os.geteuid() != 0:
        return "the host user is not berthtest"
    return ""


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_udocker_line(berth, ud_image, request, row):
    why = need(row, None)
    if why:
        pytest.skip(why)
    host = ud_image.split("/")[0]
    values = {"img": ud_image, "host": host, "work": berth.workdir, "home": berth.home}
    if row.needs == "auth":
        auth = request.getfixturevalue("htpasswd_registry")
        auth.pusher("pusher", "push-it-real-good").push_image(
            "e2e/private", "1.0", imagelib.make_image([imagelib.busybox_layer()]))
        values["auth"] = auth.host
    prepare_work(berth, ud_image)
    ud = Udocker(berth, values)
    for line in row.setup:
        rc, out, err = ud(line, env=row.env if "UDOCKER_DIR" not in row.env else None)
        assert rc == 0, f"setup line `udocker {line}`: {rc}\n{out}\n{err}"
        if line.startswith("create --name=c "):
            values["cid"] = out.strip()
    rc, out, err = ud(row.line, env=row.env, input=row.input)
    assert rc == row.rc, f"udocker {ud.fill(row.line)}: exit {rc}\nstdout:\n{out}\nstderr:\n{err}"
    if row.out is not None:
        assert re.search(ud.pattern(row.out), out, re.M), f"stdout:\n{out}\nstderr:\n{err}"
    if row.err is not None:
        assert re.search(ud.pattern(row.err), err), f"stderr:\n{err}"
    for f in row.files:
        assert os.path.isfile(berth.path(f)), f
    if row.then:
        trc, tout, terr = ud(row.then, env=row.env)
        if row.then_rc:
            assert trc != 0, f"udocker {row.then} still succeeds:\n{tout}\n{terr}"
        else:
            assert trc == 0, f"udocker {row.then}: {trc}\n{tout}\n{terr}"
        if row.then_out is not None and not row.then_rc:
            assert re.search(ud.pattern(row.then_out), tout), f"`udocker {row.then}`:\n{tout}"
        if row.then_not is not None:
            assert not re.search(ud.pattern(row.then_not), tout), f"`udocker {row.then}`:\n{tout}"


def test_udocker_link_is_kept_and_refuses_a_foreign_file(berth):
    bindir = berth.make_dir("bin")
    berth("setup", "--udocker-link", bindir)
    _, out, _ = berth("setup", "--udocker-link", bindir)  # the same link again: nothing to do
    assert out == ""
    other = berth.make_dir("other")
    berth.write_file("other/udocker", "#!/bin/sh\n", 0o755)
    rc, _, err = berth("setup", "--udocker-link", other, check=False)
    assert rc == 1
    assert err == f"berth: error: setup {other}/udocker: exists and is not a link\n"


def test_udocker_link_makes_a_missing_folder(berth):
    bindir = os.path.join(berth.make_dir("new"), "deeper", "bin")
    _, out, _ = berth("setup", "--udocker-link", bindir)
    link = os.path.join(bindir, "udocker")
    assert out == f"{link} -> {os.readlink(link)}\n"
    assert os.path.samefile(link, berth.binary)


def test_setup_gpus_marks_the_container(berth, ud_image):
    berth("pull", ud_image)
    _, out, _ = berth("create", "--name", "g", ud_image)
    record = os.path.join(berth.berth_home, "containers", out.strip(), "container.json")
    berth("setup", "--gpus", "all", "g")
    assert json.load(open(record))["gpus"] == "all"
    berth("setup", "--gpus", "none", "g")
    assert "gpus" not in json.load(open(record))
    rc, _, err = berth("setup", "--gpus", "bogus=1", "g", check=False)
    assert rc == 1 and err.startswith("berth: error: ")


@pytest.mark.skipif(os.geteuid() != 0, reason="policy files must be owned by root")
def test_setup_execmode_obeys_the_site_policy(berth, ud_image, policy):
    path = policy('allowed_engines = ["proot", "userns"]\n')
    ud = Udocker(berth, {"img": ud_image})
    env = {"BERTH_SITE_CONF": path}
    assert ud("pull {img}", env=env)[0] == 0
    assert ud("create --name=c {img}", env=env)[0] == 0
    rc, _, err = ud("setup --execmode=R1 c", env=env)
    assert rc == 1
    assert err == (f"berth: error: engine oci: not allowed by {path} "
                   "(allowed_engines: proot, userns)\n")
    assert ud("setup --execmode=P1 c", env=env)[0] == 0
    assert ud("setup c", env=env)[1] == "execmode: P1\nnvidiamode: False\n"


def test_setup_nvidia_injects_the_gpus_at_every_run(berth, host, pulled):
    """udocker's `setup --nvidia` through the link, on test_gpu's fabricated driver tree: runs
    of that container get the GPUs (Berth's --gpus all), another container's do not."""
    ud = Udocker(berth, {})
    env = host.env()
    berth("create", "--name", "g", pulled["plain"])
    berth("create", "--name", "plain", pulled["plain"])
    assert ud("setup --nvidia g", env=env)[0] == 0
    assert ud("setup g", env=env)[1] == "execmode: NS\nnvidiamode: True\n"
    rc, out, err = ud("run g nvidia-smi", env=env)
    assert (rc, out) == (0, f"fake nvidia-smi {UUID0},{UUID1}\n"), err
    rc, out, err = ud("run plain /probe env", env=env)
    assert rc == 0 and "NVIDIA_VISIBLE_DEVICES" not in out, err


def test_import_mv_removes_the_tarball(berth, ud_image):
    """udocker's import --mv moves the tarball into its repository: it is gone afterwards."""
    prepare_work(berth, ud_image)
    ud = Udocker(berth, {})
    rc, out, err = ud(f"import --mv {berth.path('rootfs.tar')} moved:1")
    assert rc == 0, err
    assert not os.path.exists(berth.path("rootfs.tar"))
    rc, out, err = ud("images")
    assert re.search(r"^moved:1 ", out, re.M), out
    # Without --mv the file stays.
    with tarfile.open(berth.path("again.tar"), "w") as t:
        t.add(berth.path("rootfs"), arcname=".")
    berth.identity.chown(berth.path("again.tar"))
    rc, _, err = ud(f"import {berth.path('again.tar')} kept:1")
    assert rc == 0 and os.path.exists(berth.path("again.tar")), err


def test_login_behind_a_mirror_stores_what_it_cannot_verify(berth, policy, registry):
    """T052 on a site whose mirror answers for docker.io while docker.io itself is out of reach:
    the credentials are stored, and the user is told they could not be verified."""
    try:
        socket.getaddrinfo("registry-1.docker.io", 443)
        pytest.skip("docker.io resolves here: it is not out of reach")
    except OSError:
        pass
    ud = Udocker(berth, {})
    line = "login --username=alice --password=wonderland-7"
    rc, out, err = ud(line)  # no mirror: docker.io's failure is the error
    assert rc == 1 and err.startswith("berth: error: login docker.io: "), err
    path = policy(f'[registry_mirrors]\n"docker.io" = ["{registry.host}"]\n')
    env = {"BERTH_SITE_CONF": path}
    rc, out, err = ud(line, env=env)
    assert rc == 0, err
    assert out == ""
    first = err.splitlines()[0]
    assert first.startswith("berth: warning: login docker.io: could not verify the credentials: "
                            "docker.io is unreachable ("), err
    assert first.endswith(f"); stored for pulls through the mirror {registry.host}"), err
    rc, out, err = ud("logout", env=env)
    assert rc == 0 and out == "Removed login credentials for docker.io\n", (out, err)

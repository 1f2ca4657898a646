"""A fresh Debian 12 root filesystem to install packages into, made with mmdebstrap and cached
as a tarball (keyed by its package list), run in a mount namespace of its own: /proc mounted
afresh, /dev and /sys bound, a host folder as /tmp, then pivot_root into it. Not a chroot: a
chrooted process may not create a user namespace, and berth runs containers in one. The
network namespace is the host's, so servers on 127.0.0.1 are reachable from inside."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile

CACHE = os.environ.get("BERTH_TEST_CACHE", "/var/tmp/berth-test-cache")

# What the namespace does before it runs the command: $1 the root, $2 the host's folder for
# /tmp, then the command. pivot_root moves the old root to /mnt, which is then let go.
ENTER = r"""
set -e
root=$1 tmp=$2
shift 2
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
mount --bind "$tmp" "$root/tmp"
cd "$root"
pivot_root . mnt
umount -l /mnt
cd /
exec "$@"
"""

# Left out when the root's files are compared: what the namespace mounts (and /run, a tmpfs
# on a booted system).
NOT_COMPARED = ("proc/", "sys/", "dev/", "tmp/", "mnt/", "run/")


def tarball(packages: list[str]) -> str:
    """The cached root (mmdebstrap --variant=apt bookworm, with `packages`): built when missing;
    an interrupted build leaves no tarball to trust (written beside and renamed)."""
    key = hashlib.sha256(" ".join(sorted(set(packages))).encode()).hexdigest()[:16]
    path = os.path.join(CACHE, f"bookworm-packages-{key}.tar")
    if os.path.isfile(path):
        return path
    os.makedirs(CACHE, mode=0o755, exist_ok=True)
    partial = path + ".partial"
    if os.path.exists(partial):
        os.remove(partial)
    subprocess.run(["mmdebstrap", "--quiet", "--format=tar", "--variant=apt",
                    "--include=" + ",".join(sorted(set(packages))), "bookworm", partial],
                   check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, timeout=1200)
    os.rename(partial, path)
    return path


class DebRoot:
    """A root unpacked from a tarball into `folder`; `tmp` is the host folder it sees as /tmp."""

    def __init__(self, tar: str, folder: str):
        self.root = os.path.join(folder, "root")
        self.tmp = os.path.join(folder, "tmp")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(self.root)
        os.makedirs(self.tmp)
        os.chmod(self.tmp, 0o1777)
        with tarfile.open(tar) as t:
            t.extractall(self.root, numeric_owner=True)

    def run(self, *cmd: str, user: str | None = None, env: dict | None = None,
            check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        """Runs `cmd` inside, as root or as `user` (setpriv, with the user's groups)."""
        inner = list(cmd)
        if user:
            inner = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"] + inner
        full_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                    "HOME": "/root" if user is None else f"/tmp/home-{user}"}
        full_env.update(env or {})
        inner = ["env", "-i"] + [f"{k}={v}" for k, v in full_env.items()] + inner
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "--",
                            "sh", "-c", ENTER, "enter", self.root, self.tmp, *inner],
                           capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        if check:
            assert r.returncode == 0, (f"{' '.join(cmd)} exited {r.returncode} in the root\n"
                                       f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        return r

    def files(self) -> set[str]:
        """Every path in the root (files, links, folders), but those NOT_COMPARED."""
        found = set()
        for folder, dirs, names in os.walk(self.root):
            rel = os.path.relpath(folder, self.root)
            rel = "" if rel == "." else rel + "/"
            if rel.startswith(NOT_COMPARED):
                dirs[:] = []
                continue
            found.update(rel + n for n in names + dirs)
        return {f for f in found if not (f + "/").startswith(NOT_COMPARED)}

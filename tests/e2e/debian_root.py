"""A Debian 13 root filesystem with Slurm 24.11, for the second one-host cluster of the Slurm
tier (tests/e2e/slurm.py): built with mmdebstrap from Debian's archive, cached between runs
as a tar keyed by its package list and unpacked once beside it, and run in a mount namespace
of its own: the unpacked tree under an overlay whose upper layer is the session's (so that
the cached tree stays as built), with the host's /proc, /dev, /sys, /tmp and /home (and the
folders `binds` names) bound in, entered by pivot_root; the host's network and process IDs
(daemons listen on 127.0.0.1, the tests see the root's processes in /proc).

Not a chroot: the kernel refuses a user namespace to a chrooted process, and every container
Berth starts in a job makes one (FIELD-NOTES "Slurm 24.11 from a Debian 13 root"). Debian
12's Slurm clients cannot talk to a 24.11 controller, so every Slurm command of that cluster
runs inside, through `command()` (nsenter into the namespace's mount namespace).

The root's accounts are its own (munge, slurm) followed by the host's that it lacks, written
again whenever the host's /etc/passwd or /etc/group changes (a test creates its users late):
the job's user must be known to slurmd and slurmstepd on the node.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

SUITE = "trixie"  # Debian 13
RELEASE = "24.11"  # the Slurm release SUITE ships (24.11.5)

# What the root holds beyond mmdebstrap's apt variant (Essential packages and apt; util-linux
# brings setpriv and runuser).
PACKAGES = (
    # Slurm 24.11 on one host: MUNGE, the controller, the node daemon, the clients, slurmrestd
    # with auth/jwt, slurmdbd for a cluster with accounting (its MariaDB is the host's)
    "munge", "slurmctld", "slurmd", "slurm-client", "slurmrestd", "slurm-wlm-jwt-plugin",
    "slurmdbd",
    # the plugin, built inside against 24.11's headers (BERTH_SLURM_PLUGIN_ONLY); its step
    # records and its reading of berth's output are JSON (nlohmann's header)
    "libslurm-dev", "g++", "cmake", "ninja-build", "nlohmann-json3-dev",
    # srun --mpi=pmix: Slurm's mpi_pmix dlopens the unversioned libpmix.so (libpmix-dev)
    "libpmix2t64", "libpmix-dev",
    # berth on the node: the libraries it loads on first use (core/dynlib.h), and fusermount3,
    # through which its squashfs mounts are made and unmade
    "libcurl4t64", "libarchive13t64", "libssl3t64", "libsquashfs1", "fuse3",
)

# How mmdebstrap builds it: no Recommends, dpkg without fsync, and without manuals, info
# pages, translations and documentation other than the copyright files (a smaller tar).
MMDEBSTRAP_OPTIONS = (
    "--variant=apt", "--format=tar", "--aptopt=APT::Install-Recommends \"false\"",
    "--dpkgopt=force-unsafe-io",
    *(f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("man", "info", "locale", "doc")),
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
)

# Made in the unpacked root: the mount points of what is bound in.
MOUNT_POINTS = ("proc", "dev", "sys", "tmp", "home")


def cache_key() -> str:
    """The cached tar's key: the suite, how it is built and the package list."""
    text = "\n".join([SUITE, *MMDEBSTRAP_OPTIONS, *sorted(PACKAGES)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def mirror() -> str:
    """Debian's archive mmdebstrap builds from (BERTH_DEBIAN_MIRROR, else deb.debian.org)."""
    return os.environ.get("BERTH_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def cache_dir() -> str:
    """Where built roots are kept between runs (BERTH_E2E_CACHE, else ~/.cache/berth-e2e)."""
    if os.environ.get("BERTH_E2E_CACHE"):
        return os.environ["BERTH_E2E_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "berth-e2e")


def unavailable() -> str:
    """Why the root cannot be had here ("" when it can): not root, no mmdebstrap, or no cached
    tar and Debian 13's archive out of reach."""
    if os.geteuid() != 0:
        return "the Slurm 24.11 tier unpacks and enters a Debian 13 root: it needs root"
    for tool in ("unshare", "nsenter", "tar"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: util-linux, tar)"
    if os.path.exists(tar_path()):
        return ""
    if shutil.which("mmdebstrap") is None:
        return "mmdebstrap is not installed (scripts/setup.sh installs it)"
    url = f"{mirror()}/dists/{SUITE}/InRelease"
    try:
        with urllib.request.urlopen(url, timeout=20):
            return ""
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return (f"the Slurm 24.11 tier needs Debian 13's archive: mmdebstrap cannot reach "
                f"{url} ({reason})")


def tar_path() -> str:
    return os.path.join(cache_dir(), f"debian13-slurm{RELEASE}-{cache_key()}.tar")


def unpacked_root() -> str:
    """The cached root unpacked (made from root_tar() once, under a lock): the overlay's
    lower layer, never written."""
    path = tar_path()[:-len(".tar")]
    tar = root_tar()
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isdir(path):
            partial = path + ".partial"
            shutil.rmtree(partial, ignore_errors=True)  # a killed unpack's
            os.makedirs(partial)
            subprocess.run(["tar", "-C", partial, "-xf", tar], check=True)
            for d in MOUNT_POINTS:
                os.makedirs(os.path.join(partial, d), exist_ok=True)
            os.rename(partial, path)
    return path


def root_tar() -> str:
    """The cached root's tar, built with mmdebstrap first when there is none (one builder at
    a time: a second session waits for the first's)."""
    path = tar_path()
    os.makedirs(cache_dir(), exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            return path
        partial = path + ".partial"  # a killed build's is overwritten
        log = path + ".log"
        t = time.monotonic()
        with open(log, "w") as out:
            r = subprocess.run(
                ["mmdebstrap", *MMDEBSTRAP_OPTIONS, "--include=" + ",".join(PACKAGES), SUITE,
                 partial, mirror()],
                stdout=out, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            with open(log) as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"mmdebstrap {SUITE} failed (exit {r.returncode}), see {log}:\n"
                               f"{tail}")
        os.rename(partial, path)
        print(f"built the Debian 13 root in {time.monotonic() - t:.0f} s: {path}")
        # What an earlier package list left: its tar and the plugin's build folders.
        for stale in os.listdir(cache_dir()):
            if stale.startswith(("debian13-", "plugin-")) and cache_key() not in stale:
                target = os.path.join(cache_dir(), stale)
                if os.path.isdir(target):
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    os.unlink(target)
    return path


# Run by the host's unshare in the new mount namespace: mounts the overlay, binds what the
# root shares with the host, pivots into it, lets go of the host's root, says so, then holds
# the namespace. /tmp and /home are bound without their submounts (the session's layers may
# lie in /tmp).
HOLDER = r"""
set -e
R="$1"; LOWER="$2"; UPPER="$3"; WORK="$4"; shift 4
mount -t overlay overlay -o "lowerdir=$LOWER,upperdir=$UPPER,workdir=$WORK" "$R"
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
for d in "$@"; do
  if [ -d "$d" ]; then mkdir -p "$R$d"; else mkdir -p "$(dirname "$R$d")"; touch "$R$d"; fi
  mount --bind "$d" "$R$d"
done
mkdir -p "$R/.host"
cd "$R"
pivot_root . .host
cd /
umount -l /.host
rmdir /.host
echo ready
exec sleep infinity
"""


class Root:
    """The root (its session's layer under `folder`) and the namespace holding it (start(),
    stop()). From the host, its files are reached through the holder (path())."""

    release = RELEASE

    def __init__(self, folder: str, binds: tuple[str, ...] = ()):
        self.folder = folder
        # /tmp and /home, the cache (the plugin's build folder), then the callers' (a folder
        # under one of them is already there).
        os.makedirs(cache_dir(), exist_ok=True)
        wanted = ["/tmp", "/home", cache_dir(), *binds]
        self.binds = [b for i, b in enumerate(wanted)
                      if not any(b == a or b.startswith(a.rstrip("/") + "/") for a in wanted[:i])]
        self.holder: subprocess.Popen | None = None
        self._users_seen: tuple = ()
        self.timings: dict[str, float] = {}

    def start(self) -> "Root":
        t = time.monotonic()
        self.lower = unpacked_root()
        self.timings["unpack"] = time.monotonic() - t
        layers = [os.path.join(self.folder, d) for d in ("root", "upper", "work")]
        for d in layers:
            os.makedirs(d, exist_ok=True)
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", HOLDER,
             "holder", layers[0], self.lower, *layers[1:], *self.binds],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.holder.stdout.readline()
        if line.strip() != "ready":
            self.holder.kill()
            err = self.holder.stderr.read()
            self.holder.wait()
            raise RuntimeError(f"entering the Debian 13 root failed: {err.strip() or line}")
        shutil.copy2("/etc/hosts", self.path("/etc/hosts"))  # the node's names are the host's
        self.sync_users()
        return self

    def stop(self) -> None:
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait()

    # What the cluster asks of the machine its daemons run on (slurm.Host is the other one).
    def missing(self) -> str:
        return ""  # the root holds PACKAGES by construction

    def command(self, argv: list[str], cwd: str | None = None) -> list[str]:
        """`argv` as a command run from the host into the root (in `cwd` there, else /)."""
        self.sync_users()
        # nsenter opens the working directory before it enters: named through the holder's
        # root, it is the namespace's folder (a host path would be outside the new root).
        pid = self.holder.pid
        return ["nsenter", f"--target={pid}", "--mount", f"--wd=/proc/{pid}/root{cwd or '/'}",
                "--", *argv]

    def path(self, path: str) -> str:
        """The host's path of `path` inside the root (through the holder's root)."""
        return f"/proc/{self.holder.pid}/root/{path.lstrip('/')}"

    def uid(self, user: str) -> int:
        return self._account("passwd", user)

    def gid(self, group: str) -> int:
        return self._account("group", group)

    def mountinfo(self) -> str:
        """The mount table of the root's namespace (where its jobs' mounts are made)."""
        return f"/proc/{self.holder.pid}/mountinfo"

    def _account(self, table: str, name: str) -> int:
        with open(self.path(f"/etc/{table}")) as f:
            for line in f:
                fields = line.split(":")
                if fields[0] == name:
                    return int(fields[2])
        raise KeyError(f"no {table} entry {name!r} in the Debian 13 root")

    def sync_users(self) -> None:
        """The root's passwd and group: its own entries, then the host's it has no name for;
        written again only when the host's files changed."""
        seen = tuple(os.stat(f"/etc/{n}").st_mtime_ns for n in ("passwd", "group"))
        if seen == self._users_seen:
            return
        for name in ("passwd", "group"):
            with open(os.path.join(self.lower, "etc", name)) as f:  # the root's own, as built
                own = f.read().splitlines()
            with open(f"/etc/{name}") as f:
                host = f.read().splitlines()
            names = {line.split(":", 1)[0] for line in own}
            lines = own + [line for line in host if line and line.split(":", 1)[0] not in names]
            target = self.path(f"/etc/{name}")
            with open(target + ".new", "w") as f:
                f.write("\n".join(lines) + "\n")
            os.chmod(target + ".new", 0o644)
            os.rename(target + ".new", target)
        self._users_seen = seen

    def build_plugin(self, source: str) -> str:
        """spank_berth.so built inside the root against its Slurm headers, from the checkout
        at `source` (bound in); returns the plugin's host path. Its build folder is kept in
        the cache, one per root and checkout, so that a later run compiles only what changed
        (one build at a time in it)."""
        checkout = hashlib.sha256(os.path.realpath(source).encode()).hexdigest()[:12]
        build = os.path.join(cache_dir(), f"plugin-{cache_key()}-{checkout}")
        t = time.monotonic()
        os.makedirs(build, exist_ok=True)
        with open(build + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._build(source, build)
        self.timings["plugin"] = time.monotonic() - t
        return os.path.join(build, "src", "spank_berth.so")

    def install_plugin(self, source: str, destdir: str, prefix: str) -> None:
        """`cmake --install` of the plugin built against the root's Slurm (build_plugin) under
        `prefix`, into `destdir` (a host folder under one the root binds): the plugin where
        Debian's Slurm looks for plugins, and its batch client."""
        build = os.path.dirname(os.path.dirname(self.build_plugin(source)))
        step = ["env", f"DESTDIR={destdir}", "cmake", "--install", build, "--prefix", prefix]
        r = subprocess.run(self.command(step), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(step)} in the Debian 13 root failed:\n"
                               f"{r.stdout[-3000:]}{r.stderr[-3000:]}")

    def _build(self, source: str, build: str) -> None:
        for step in (["cmake", "-S", source, "-B", build, "-G", "Ninja",
                      "-DBERTH_SLURM_PLUGIN_ONLY=ON", "-DBERTH_WERROR=ON",
                      "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                     ["cmake", "--build", build, "--target", "spank_berth"]):
            r = subprocess.run(self.command(step), capture_output=True, text=True,
                               env=dict(os.environ, PATH="/usr/bin:/bin:/usr/sbin:/sbin"))
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(step)} in the Debian 13 root failed:\n"
                                   f"{r.stdout[-3000:]}{r.stderr[-3000:]}")


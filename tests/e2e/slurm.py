"""A one-host Slurm cluster for the plugin's tests: munged on a private socket, slurmctld and
two slurmd ("n1", "n2": distinct names and ports, one address, 127.0.0.1), fake GPUs as GRES,
and a plugstack.conf loading the built spank_berth.so. Started once per test session, from
Debian's packages (slurmctld slurmd slurm-client munge), as root; stopped by the pids it
recorded. See FIELD-NOTES "Slurm on one host" for why each setting is there.

Its daemons and clients run on a node: `Host` (this machine's Debian 12, Slurm 22.05), or a
Debian 13 root with Slurm 24.11 (tests/e2e/debian_root.py's Root), entered for each command.
The same slurm.conf and gres.conf serve both releases; what differs is in RELEASES.
"""

from __future__ import annotations

import base64
import grp
import hashlib
import hmac
import json
import os
import pwd
import random
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

from servers import free_port

NODES = ("n1", "n2")
SHARDS_PER_GPU = 4  # gres/shard on each fake GPU: at most 4 jobs share one
MPS_PER_GPU = 100   # gres/mps on each fake GPU (a cluster made with share="mps")


class Release:
    """What a test needs to know of one Slurm release's cluster."""

    def __init__(self, rest_plugins: str, rest_versions: tuple[str, ...], rest_version: str):
        self.rest_plugins = rest_plugins  # slurmrestd's -s: the OpenAPI plugins to load
        self.rest_versions = rest_versions  # the API versions slurmrestd then serves
        self.rest_version = rest_version  # the one the tests speak


RELEASES = {
    "22.05": Release("openapi/v0.0.38", ("v0.0.38",), "v0.0.38"),
    # 23.11 brought openapi/slurmctld, one plugin for every version its data parsers know, and
    # 24.05 removed openapi/v0.0.38 (fatal to ask for); 24.11's serves v0.0.40 to v0.0.42.
    "24.11": Release("openapi/slurmctld", ("v0.0.40", "v0.0.41", "v0.0.42"), "v0.0.41"),
}


def missing_packages() -> str:
    """Why the cluster cannot start on this machine ("" when it can)."""
    if os.geteuid() != 0:
        return "the Slurm tier starts slurmd and munged: it needs root"
    return Host().missing()


class Host:
    """This machine as the cluster's node: Debian 12's Slurm, run directly. The same methods
    as debian_root.Root's, which runs another release's Slurm inside a root of its own."""

    release = "22.05"

    def missing(self) -> str:
        for tool in ("munged", "slurmctld", "slurmd", "srun", "sbatch", "scancel", "squeue"):
            if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
                return f"{tool} is not installed (Debian: slurmctld slurmd slurm-client munge)"
        try:
            pwd.getpwnam("munge")
        except KeyError:
            return "no munge user (Debian: munge)"
        return ""

    def command(self, argv: list[str], cwd: str | None = None) -> list[str]:
        """`argv` as run from the host on this node (`cwd` is the caller's to set)."""
        return list(argv)

    def path(self, path: str) -> str:
        return path

    def uid(self, user: str) -> int:
        return pwd.getpwnam(user).pw_uid

    def gid(self, group: str) -> int:
        return grp.getgrnam(group).gr_gid

    def mountinfo(self) -> str:
        """The mount table of the namespace the node's jobs mount in."""
        return "/proc/self/mountinfo"


class Cluster:
    """The cluster's files live under `root`; `env()` is what a client (srun) needs."""

    def __init__(self, root: str, plugin: str, berth: str, plugin_args: str = "",
                 accounting: bool | None = None, share: str = "shard", node=None):
        self.root, self.plugin, self.berth = root, plugin, berth
        self.node = node if node is not None else Host()  # where Slurm's programs run
        self.release = RELEASES[self.node.release]
        self.share = share  # the GRES that splits each fake GPU: "shard" or "mps"
        self.share_units = SHARDS_PER_GPU if share == "shard" else MPS_PER_GPU
        self.plugin_args = plugin_args
        # Slurm's accounting (tests/e2e/slurmdbd.py): slurmdbd on a private MariaDB, where
        # Debian's slurmdbd and mariadb-server are installed (accounting None), or as asked.
        # Every cluster has it rather than only the accounting tests' own: it costs each start
        # about 1.5 to 3 s (mariadb-install-db, the cluster's registration; FIELD-NOTES), less
        # than a cluster of their own would (slurmctld, two slurmd, slurmrestd), and every Slurm
        # test then runs against the setup a site with accounting has. AccountingStorageEnforce
        # stays unset: jobs of users and accounts slurmdbd does not know still run.
        import slurmdbd
        if accounting is None:
            accounting = not slurmdbd.missing_packages(self.node)
        self.accounting = slurmdbd.Slurmdbd(root, self.node) if accounting else None
        self.procs: list[subprocess.Popen] = []
        self.conf = os.path.join(root, "etc", "slurm.conf")
        self.runtime = os.path.join(root, "run", "berth")
        self.gpus = all(os.path.exists(f"/dev/tty{i}") for i in (0, 1))

    def env(self) -> dict:
        return {"SLURM_CONF": self.conf}

    def command(self, argv: list[str], cwd: str | None = None) -> list[str]:
        """`argv` (a Slurm client, maybe behind the test user's setpriv) as run from the host
        on the cluster's node, in `cwd` (pass it to subprocess as well)."""
        return self.node.command(argv, cwd)

    def run(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        """Runs `argv` on the node as root with the cluster's SLURM_CONF; text output captured."""
        return subprocess.run(self.node.command(argv, kw.get("cwd")),
                              env=dict(os.environ, **self.env()), capture_output=True,
                              text=True, **kw)

    def _popen(self, argv: list[str], log) -> subprocess.Popen:
        return subprocess.Popen(self.node.command(argv), env=dict(os.environ, **self.env()),
                                stdout=log, stderr=log)

    def _write(self, rel: str, text: str) -> str:
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def _munge(self) -> str:
        d = os.path.join(self.root, "munge")
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o755)  # clients (the test user) reach the socket through it
        munge = (self.node.uid("munge"), self.node.gid("munge"))  # the node's munge account
        os.chown(d, *munge)
        key = os.path.join(d, "munge.key")
        subprocess.run(self.node.command(["/usr/sbin/mungekey", "-c", "-f", "-k", key]),
                       check=True)
        os.chown(key, *munge)
        os.chmod(key, 0o400)
        sock = os.path.join(d, "munge.socket")
        subprocess.run(self.node.command(
            ["runuser", "-u", "munge", "--", "/usr/sbin/munged", f"--socket={sock}",
             f"--key-file={key}", f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log",
             f"--seed-file={d}/munged.seed"]), check=True)
        deadline = time.monotonic() + 10
        while not os.path.exists(sock):
            if time.monotonic() > deadline:
                raise RuntimeError("munged did not create its socket within 10 s")
            time.sleep(0.05)
        return sock

    def _jwt_key(self) -> str:
        """slurm.conf's lines for auth/jwt (slurmrestd's rest_auth/jwt, berthd's tokens) with a
        fresh HS256 key at self.jwt_key, or "" when Debian's slurm-wlm-jwt-plugin is missing."""
        self.jwt_key = os.path.join(self.root, "state", "jwt_hs256.key")
        if not os.path.exists(self.node.path("/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so")):
            return ""
        with open(os.open(self.jwt_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(os.urandom(32))
        return f"AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={self.jwt_key}\n"

    def start(self) -> "Cluster":
        r = self.root
        for sub in ("etc", "state", "spool", "run", "log"):
            os.makedirs(os.path.join(r, sub), exist_ok=True)
        os.chmod(r, 0o755)
        sock = self._munge()
        jwt = self._jwt_key()
        ports = [free_port() for _ in range(1 + len(NODES))]
        host = socket.gethostname().split(".")[0]
        accounting = "AccountingStorageType=accounting_storage/none\n"
        if self.accounting is not None:
            accounting = self.accounting.start(os.path.join(r, "etc"), sock, host, jwt)
            # A folder used again (the gateway's modules, one after the other) keeps the last
            # cluster's state/clustername, whose cluster ID slurmctld 24.11 checks against the
            # fresh slurmdbd's and stops on ("CLUSTER ID MISMATCH"); 22.05 checks the name only.
            clustername = os.path.join(r, "state", "clustername")
            if os.path.exists(clustername):
                os.unlink(clustername)
        # Job ids start at a random number: Slurm's mpi/pmix makes /tmp/spmix_appdir_UID_JOB.STEP
        # and fails the step's launch when it exists, left by another cluster's job of that id
        # (every test session's cluster, and every worktree's, would start at 1).
        # Fake GPUs: Slurm only needs device files to hand out (FIELD-NOTES); each split into
        # share_units of gres/shard (or gres/mps) for GPU-share jobs. Never both: Slurm 22.05
        # with both on a node loses CUDA_VISIBLE_DEVICES in shard jobs (FIELD-NOTES).
        gres = (f" Gres=gpu:fake:2,{self.share}:{2 * self.share_units}" if self.gpus else "")
        nodes = "\n".join(
            f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={ports[i + 1]} "
            f"CPUs=16 RealMemory=16000{gres} State=UNKNOWN"
            for i, n in enumerate(NODES))
        self._write("etc/slurm.conf", f"""\
ClusterName=berthtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
{jwt}StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu,{self.share}
SlurmdParameters=config_overrides
PlugStackConfig={r}/etc/plugstack.conf
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
{accounting}ReturnToService=2
SchedulerType=sched/builtin
KillWait=5
FirstJobId={random.randint(1000, 30_000_000)}
{nodes}
PartitionName=debug Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
        self._write("etc/gres.conf",
                    "Name=gpu Type=fake File=/dev/tty[0-1]\n" +
                    "".join(f"Name={self.share} Count={self.share_units} File=/dev/tty{i}\n"
                            for i in (0, 1))
                    if self.gpus else "")
        self.write_plugstack(self.plugin_args)
        if self.accounting is not None:
            self.sacctmgr("add", "cluster", "berthtest")
        log = open(os.path.join(r, "log", "daemons.out"), "ab")
        self.procs.append(self._popen(["/usr/sbin/slurmctld", "-D", "-i"], log))
        for n in NODES:
            self.procs.append(self._popen(["/usr/sbin/slurmd", "-D", "-N", n], log))
        self._wait_idle()
        return self

    def start_slurmrestd(self, listen: str, log, auth: str = "rest_auth/jwt",
                         prefix: list[str] | None = None) -> subprocess.Popen:
        """slurmrestd in front of this cluster, on `listen` ("127.0.0.1:PORT" or "unix:PATH"),
        with `auth` and the release's OpenAPI plugins; as the user `prefix` makes it (the test
        user's setpriv), else as nobody (slurmrestd refuses root and SlurmUser). With
        rest_auth/jwt it takes tokens signed with jwt_key (see jwt())."""
        argv = ["/usr/sbin/slurmrestd", "-a", auth, "-s", self.release.rest_plugins]
        if prefix is None:
            argv += ["-u", "nobody", "-g", "nogroup"]
        env = dict(os.environ, **self.env())
        if auth == "rest_auth/jwt":
            env["SLURM_JWT"] = "daemon"
        return subprocess.Popen(self.node.command((prefix or []) + argv + [listen]), env=env,
                                stdout=log, stderr=log)

    def start_rest_jwt(self, log_path: str, timeout: float = 20) -> tuple[subprocess.Popen, str]:
        """slurmrestd with rest_auth/jwt on a free loopback port, once it answers: (its
        process, its URL). The URL's API versions are release.rest_versions."""
        if not os.path.exists(self.jwt_key):
            raise RuntimeError("Slurm's auth/jwt plugin is not installed "
                               "(Debian: slurm-wlm-jwt-plugin)")
        port = free_port()
        with open(log_path, "ab") as log:
            proc = self.start_slurmrestd(f"127.0.0.1:{port}", log)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{url}/slurm/{self.release.rest_version}/ping",
                                       timeout=2)
                break
            except urllib.error.HTTPError:
                break  # 401 without a token: it answers
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    raise RuntimeError(f"slurmrestd did not start: see {log_path}")
                time.sleep(0.1)
        return proc, url

    def jwt(self, user: str, seconds: int = 60) -> str:
        """A Slurm token for `user` (HS256 with jwt_key, the claim "sun"), as berthd makes."""
        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
        with open(self.jwt_key, "rb") as f:
            key = f.read()
        now = int(time.time())
        head = (b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." +
                b64(json.dumps({"iat": now, "exp": now + seconds, "sun": user}).encode()))
        return head + "." + b64(hmac.new(key, head.encode(), hashlib.sha256).digest())

    def sacctmgr(self, *args: str) -> str:
        """Runs `sacctmgr -i ARGS...` (as root, Slurm's administrator here) against slurmdbd."""
        r = self.run(["sacctmgr", "-i"] + list(args))
        if r.returncode != 0:
            raise RuntimeError(f"sacctmgr {' '.join(args)}: {r.stdout.strip()} {r.stderr.strip()}")
        return r.stdout

    def add_account(self, account: str, users: list[str]) -> None:
        """Adds Slurm account `account` with `users` as its members (users' default account);
        what is there already is left as it is."""
        for args in (["add", "account", account, "Cluster=berthtest"],
                     ["add", "user", ",".join(users), f"Account={account}", "Cluster=berthtest"]):
            r = self.run(["sacctmgr", "-i"] + args)
            if r.returncode != 0 and "Nothing new added" not in r.stdout + r.stderr:
                raise RuntimeError(f"sacctmgr {' '.join(args)}: {r.stdout.strip()} "
                                   f"{r.stderr.strip()}")

    def write_plugstack(self, extra: str = "") -> None:
        """The plugstack.conf srun and slurmstepd read (each step reads it afresh)."""
        self._write("etc/plugstack.conf",
                    f"required {self.plugin} berth={self.berth} runtime_path={self.runtime} "
                    f"{extra}\n")

    def recover(self, timeout: float = 60) -> None:
        """After a test that broke plugstack.conf: waits until no job is completing (its epilog
        may have read the broken file, and a failed epilog drains the node) and returns drained
        nodes to service, so that the tests after it are not queued forever."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.run(["squeue", "-h", "-t", "CG", "-o", "%i"])
            if r.returncode == 0 and not r.stdout.strip():
                break
            time.sleep(0.2)
        r = self.run(["sinfo", "-h", "-N", "-o", "%N %t"])
        for line in r.stdout.splitlines():
            name, state = line.split()
            if "drain" in state or "drng" in state:
                self.run(["scontrol", "update", f"NodeName={name}", "State=RESUME"], check=True)
        self._wait_idle(timeout)

    def _wait_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        out = ""
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}: "
                                       f"see {self.root}/log")
            out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"]).stdout
            states = dict(line.split() for line in out.splitlines() if line.strip())
            if all(states.get(n) in ("idle", "mix", "alloc") for n in NODES):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the nodes did not come up within {timeout:.0f} s: {out!r}; "
                           f"see {self.root}/log")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.accounting is not None:
            self.accounting.stop()
        pidfile = os.path.join(self.root, "munge", "munged.pid")
        if os.path.exists(pidfile):
            with open(pidfile) as f:
                pid = int(f.read().strip() or 0)
            if pid > 0:
                try:
                    os.kill(pid, 15)
                except ProcessLookupError:
                    pass

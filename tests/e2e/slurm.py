"""A one-host Slurm cluster for the plugin's tests: munged on a private socket, slurmctld and
two slurmd ("n1", "n2": distinct names and ports, one address, 127.0.0.1), fake GPUs as GRES,
and a plugstack.conf loading the built spank_berth.so. Started once per test session, from
Debian's packages (slurmctld slurmd slurm-client munge), as root; stopped by the pids it
recorded. See FIELD-NOTES "Slurm on one host" for why each setting is there.
"""

from __future__ import annotations

import os
import pwd
import random
import shutil
import socket
import subprocess
import time

from servers import free_port

NODES = ("n1", "n2")
SHARDS_PER_GPU = 4  # gres/shard on each fake GPU: at most 4 jobs share one
MPS_PER_GPU = 100   # gres/mps on each fake GPU (a cluster made with share="mps")


def missing_packages() -> str:
    """Why the cluster cannot start here ("" when it can)."""
    if os.geteuid() != 0:
        return "the Slurm tier starts slurmd and munged: it needs root"
    for tool in ("munged", "slurmctld", "slurmd", "srun", "sbatch", "scancel", "squeue"):
        if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
            return f"{tool} is not installed (Debian: slurmctld slurmd slurm-client munge)"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no munge user (Debian: munge)"
    return ""


class Cluster:
    """The cluster's files live under `root`; `env()` is what a client (srun) needs."""

    def __init__(self, root: str, plugin: str, berth: str, plugin_args: str = "",
                 accounting: bool | None = None, share: str = "shard"):
        self.root, self.plugin, self.berth = root, plugin, berth
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
            accounting = not slurmdbd.missing_packages()
        self.accounting = slurmdbd.Slurmdbd(root) if accounting else None
        self.procs: list[subprocess.Popen] = []
        self.conf = os.path.join(root, "etc", "slurm.conf")
        self.runtime = os.path.join(root, "run", "berth")
        self.gpus = all(os.path.exists(f"/dev/tty{i}") for i in (0, 1))

    def env(self) -> dict:
        return {"SLURM_CONF": self.conf}

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
        shutil.chown(d, "munge", "munge")
        key = os.path.join(d, "munge.key")
        subprocess.run(["/usr/sbin/mungekey", "-c", "-f", "-k", key], check=True)
        shutil.chown(key, "munge", "munge")
        os.chmod(key, 0o400)
        sock = os.path.join(d, "munge.socket")
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged", f"--socket={sock}",
                        f"--key-file={key}", f"--pid-file={d}/munged.pid",
                        f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"],
                       check=True)
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
        if not os.path.exists("/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so"):
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
            accounting = self.accounting.start(os.path.join(r, "etc"), sock, host)
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
        env = dict(os.environ, SLURM_CONF=self.conf)
        if self.accounting is not None:
            self.sacctmgr("add", "cluster", "berthtest")
        log = open(os.path.join(r, "log", "daemons.out"), "ab")
        self.procs.append(subprocess.Popen(["/usr/sbin/slurmctld", "-D", "-i"], env=env,
                                           stdout=log, stderr=log))
        for n in NODES:
            self.procs.append(subprocess.Popen(["/usr/sbin/slurmd", "-D", "-N", n], env=env,
                                               stdout=log, stderr=log))
        self._wait_idle()
        return self

    def sacctmgr(self, *args: str) -> str:
        """Runs `sacctmgr -i ARGS...` (as root, Slurm's administrator here) against slurmdbd."""
        r = subprocess.run(["sacctmgr", "-i"] + list(args), env=dict(os.environ, **self.env()),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"sacctmgr {' '.join(args)}: {r.stdout.strip()} {r.stderr.strip()}")
        return r.stdout

    def add_account(self, account: str, users: list[str]) -> None:
        """Adds Slurm account `account` with `users` as its members (users' default account);
        what is there already is left as it is."""
        for args in (["add", "account", account, "Cluster=berthtest"],
                     ["add", "user", ",".join(users), f"Account={account}", "Cluster=berthtest"]):
            r = subprocess.run(["sacctmgr", "-i"] + args, env=dict(os.environ, **self.env()),
                               capture_output=True, text=True)
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
        env = dict(os.environ, SLURM_CONF=self.conf)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = subprocess.run(["squeue", "-h", "-t", "CG", "-o", "%i"], env=env,
                               capture_output=True, text=True)
            if r.returncode == 0 and not r.stdout.strip():
                break
            time.sleep(0.2)
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env, capture_output=True,
                           text=True)
        for line in r.stdout.splitlines():
            name, state = line.split()
            if "drain" in state or "drng" in state:
                subprocess.run(["scontrol", "update", f"NodeName={name}", "State=RESUME"],
                               env=env, capture_output=True, check=True)
        self._wait_idle(timeout)

    def _wait_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        out = ""
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}: "
                                       f"see {self.root}/log")
            r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=dict(
                os.environ, SLURM_CONF=self.conf), capture_output=True, text=True)
            out = r.stdout
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

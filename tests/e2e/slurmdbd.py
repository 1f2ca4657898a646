"""Slurm's accounting for the one-host cluster (tests/e2e/slurm.py): a private MariaDB server
(its own datadir made by mariadb-install-db, its own socket, TCP on a free loopback port, since
slurmdbd's mysql plugin connects by host and port) and slurmdbd on it (StorageType
accounting_storage/mysql, its own slurmdbd.conf beside the cluster's slurm.conf, mode 0600,
owned by SlurmUser), both under the cluster's root folder, from Debian's packages (slurmdbd
mariadb-server). A cluster (slurm.Cluster) has one where the packages are installed and sends
its jobs' records there (AccountingStorageType=accounting_storage/slurmdbd,
AccountingStorageTRES=gres/gpu,gres/gpu:fake).
Stopped by the processes it started. FIELD-NOTES "Slurm accounting on one host" has the facts.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time

from servers import free_port

DB_NAME = "berth_acct_db"


def missing_packages(node) -> str:
    """Why slurmdbd cannot start here ("" when it can): MariaDB runs on this machine, slurmdbd
    and its clients on the cluster's node (slurm.Host or debian_root.Root)."""
    for tool in ("mariadbd", "mariadb-install-db", "mariadb"):
        if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None:
            return f"{tool} is not installed (Debian: mariadb-server)"
    for tool in ("/usr/sbin/slurmdbd", "/usr/bin/sacctmgr", "/usr/bin/sacct",
                 "/usr/lib/x86_64-linux-gnu/slurm-wlm/accounting_storage_mysql.so"):
        if not os.path.exists(node.path(tool)):
            return f"{os.path.basename(tool)} is not installed (Debian: slurmdbd)"
    return ""


class Slurmdbd:
    """mariadbd and slurmdbd for one cluster; `root` is the cluster's root folder, `node` runs
    slurmdbd (slurm.Host or debian_root.Root: its slurmdbd, on this machine's MariaDB)."""

    def __init__(self, root: str, node):
        self.root = root
        self.node = node
        self.dir = os.path.join(root, "mariadb")  # owned by mysql: its socket, pid and log
        self.procs: list[subprocess.Popen] = []
        self.db_port = 0
        self.port = 0  # slurmdbd's DbdPort
        self.timings: dict[str, float] = {}

    def _mariadb(self) -> None:
        # A fresh database each start (the gateway's modules start their clusters in one folder).
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        shutil.chown(self.dir, "mysql", "mysql")
        os.chmod(self.dir, 0o700)
        data = os.path.join(self.dir, "data")
        # A small redo log and buffer pool: the default 96 MiB log makes every datadir 114 MiB.
        small = ["--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M"]
        t = time.monotonic()
        r = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={data}",
                            "--user=mysql", "--auth-root-authentication-method=socket",
                            "--skip-test-db"] + small, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {r.stdout[-2000:]}{r.stderr[-2000:]}")
        self.timings["mariadb-install-db"] = time.monotonic() - t
        self.socket = os.path.join(self.dir, "mysqld.sock")
        self.db_port = free_port()
        t = time.monotonic()
        log = open(os.path.join(self.root, "log", "mariadbd.out"), "ab")
        self.procs.append(subprocess.Popen(
            ["/usr/sbin/mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={self.socket}",
             "--bind-address=127.0.0.1", f"--port={self.db_port}", "--skip-name-resolve",
             "--user=mysql", f"--pid-file={self.dir}/mysqld.pid",
             f"--log-error={self.dir}/mysqld.err"] + small, stdout=log, stderr=log))
        deadline = time.monotonic() + 60
        while not os.path.exists(self.socket):
            if self.procs[-1].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mariadbd did not start: see {self.dir}/mysqld.err")
            time.sleep(0.05)
        self.timings["mariadbd"] = time.monotonic() - t
        # slurmdbd's account in the database, by TCP from loopback only.
        self.password = secrets.token_hex(16)
        self.sql(f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.password}';"
                 f"GRANT ALL ON {DB_NAME}.* TO 'slurm'@'127.0.0.1';")

    def sql(self, statements: str) -> str:
        """Runs SQL as the server's root (socket authentication: this process is root)."""
        r = subprocess.run(["mariadb", "--no-defaults", f"--socket={self.socket}", "-u", "root",
                            "-N", "-e", statements], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"mariadb: {r.stderr.strip()}")
        return r.stdout

    def start(self, etc: str, munge_socket: str, host: str, auth_alt: str = "") -> str:
        """Starts mariadbd and slurmdbd (its configuration in `etc`, beside slurm.conf, where
        slurmdbd looks for it, with slurm.conf's `auth_alt` lines: auth/jwt, so that
        slurmrestd can forward a user's token to it, which 24.11's does for a partition's
        QOS); returns slurm.conf's accounting lines."""
        self._mariadb()
        self.port = free_port()
        conf = os.path.join(etc, "slurmdbd.conf")
        with open(os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(f"""\
AuthType=auth/munge
AuthInfo=socket={munge_socket}
{auth_alt}DbdHost={host}
DbdAddr=127.0.0.1
DbdPort={self.port}
SlurmUser=root
LogFile={self.root}/log/slurmdbd.log
PidFile={self.root}/run/slurmdbd.pid
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.db_port}
StorageUser=slurm
StoragePass={self.password}
StorageLoc={DB_NAME}
""")
        os.chown(conf, 0, 0)  # SlurmUser=root; slurmdbd refuses a file others can read
        t = time.monotonic()
        log = open(os.path.join(self.root, "log", "daemons.out"), "ab")
        env = dict(os.environ, SLURM_CONF=os.path.join(etc, "slurm.conf"))
        self.procs.append(subprocess.Popen(self.node.command(["/usr/sbin/slurmdbd", "-D"]),
                                           env=env, stdout=log, stderr=log))
        import socket
        deadline = time.monotonic() + 120
        while True:
            if self.procs[-1].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"slurmdbd did not start: see {self.root}/log/slurmdbd.log")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        self.timings["slurmdbd"] = time.monotonic() - t
        return (f"AccountingStorageType=accounting_storage/slurmdbd\n"
                f"AccountingStorageHost=127.0.0.1\n"
                f"AccountingStoragePort={self.port}\n"
                f"AccountingStorageTRES=gres/gpu,gres/gpu:fake\n"
                # Whom the persistent connection to slurmdbd asks for its MUNGE credential:
                # without it, the default /run/munge socket (AuthInfo does not apply to it).
                f"AccountingStoragePass={munge_socket}\n")

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

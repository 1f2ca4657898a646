"""A real MPI job's parts, shared by test_mpi.py and test_slurm_mpi.py: bench/mpi's ping-pong
built with Debian's MPICH on the host, and an image that carries its *own* libmpich.so.12: a
small real ELF library built here with MPICH's soname and its own version numbers, which
implements just the MPI calls the ping-pong makes and says "image MPICH" in
MPI_Get_library_version. Without --mpi the ranks report the image's library; with --mpi,
the host's (Debian's MPICH 4, "MPICH Version: ..."), so the two cannot be mistaken."""

from __future__ import annotations

import os
import shutil
import subprocess

IMAGE_MPICH = "image MPICH 12.0.1 (Berth e2e stand-in)"

# Rank and size from the launcher's PMI variables (hydra's and srun --mpi=pmi2's PMI_RANK,
# PMI_SIZE; PMIx launchers' PMIX_RANK); messages go nowhere: the test reads only the version.
FAKE_MPICH = r"""
#include <stdlib.h>
#include <string.h>
#include <time.h>
static int env_int(const char* a, const char* b, int dflt) {
  const char* v = getenv(a);
  if (v == NULL) v = getenv(b);
  return v == NULL ? dflt : atoi(v);
}
int MPI_Init(int* argc, char*** argv) { (void)argc; (void)argv; return 0; }
int MPI_Finalize(void) { return 0; }
int MPI_Comm_rank(int comm, int* rank) { (void)comm; *rank = env_int("PMI_RANK", "PMIX_RANK", 0); return 0; }
int MPI_Comm_size(int comm, int* size) { (void)comm; *size = env_int("PMI_SIZE", "SLURM_NTASKS", 1); return 0; }
int MPI_Get_library_version(char* version, int* len) {
  strcpy(version, "%s");
  *len = (int)strlen(version);
  return 0;
}
int MPI_Barrier(int comm) { (void)comm; return 0; }
double MPI_Wtime(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}
int MPI_Send(const void* b, int n, int t, int d, int g, int c) {
  (void)b; (void)n; (void)t; (void)d; (void)g; (void)c; return 0;
}
int MPI_Recv(void* b, int n, int t, int s, int g, int c, void* st) {
  (void)b; (void)n; (void)t; (void)s; (void)g; (void)c; (void)st; return 0;
}
""" % IMAGE_MPICH

HOST_MPICH_LINK = "/usr/lib/x86_64-linux-gnu/libmpich.so.12"


def missing() -> str:
    """Why the real MPI tests cannot run here ("" when they can)."""
    if not (shutil.which("mpiexec.mpich") and shutil.which("mpicc.mpich")):
        return "Debian's mpich and libmpich-dev are not installed"
    if not (shutil.which("cc") and shutil.which("ldconfig")):
        return "needs a C compiler and ldconfig"
    return ""


def host_mpich() -> str:
    """The host's real libmpich file (libmpich.so.12.2.2 for Debian 12's MPICH 4.0.2)."""
    return os.path.realpath(HOST_MPICH_LINK)


def repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_pingpong(out: str) -> str:
    subprocess.run(["mpicc.mpich", "-O2", "-o", out,
                    os.path.join(repo_root(), "bench", "mpi", "pingpong.c")], check=True)
    os.chmod(out, 0o755)
    return out


def image_tar(work: str, extra_bins: tuple[str, ...] = (), extra_dirs: tuple[str, ...] = ()) -> str:
    """Builds the image's tree under `work` and returns a tar of it (for `berth import`):
    /app/pingpong, the libraries it and the host's MPICH load (so that the host's library,
    bound in by --mpi, finds its dependencies, as it would in an image built with MPICH), the
    stand-in libmpich.so.12.0.1 behind the image's libmpich.so.12 link, UCX's modules, busybox,
    an ld.so.cache. `extra_bins`: more host programs (with their libraries), in /app;
    `extra_dirs`: host folders copied whole (a library's plugins), their libraries' too."""
    tree = os.path.join(work, "tree")
    for d in ("usr/lib", "usr/lib64", "usr/bin", "etc", "tmp", "proc", "sys", "dev", "app"):
        os.makedirs(os.path.join(tree, d))
    for link in ("lib", "lib64", "bin", "sbin"):
        os.symlink(f"usr/{link}", os.path.join(tree, link))

    def copy_deps(binary: str) -> None:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
            if path.startswith("/"):
                dest = tree + path
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copy(path, dest)

    prog = build_pingpong(os.path.join(work, "pingpong"))
    copy_deps(prog)
    for b in extra_bins:
        copy_deps(b)
        shutil.copy(b, os.path.join(tree, "app", os.path.basename(b)))
    for d in ("/usr/lib/x86_64-linux-gnu/ucx", *extra_dirs):
        if not os.path.isdir(d):
            continue
        shutil.copytree(d, tree + d, dirs_exist_ok=True)
        for top, _, files in os.walk(d):
            for m in files:
                if ".so" in m:
                    copy_deps(os.path.join(top, m))
    # The image's own MPICH: the stand-in, with its own version numbers (12.0.1: the same
    # major as the host's 12.2.2 and a lower minor, so the "full" rule binds the host's over).
    libdir = tree + "/usr/lib/x86_64-linux-gnu"
    os.unlink(tree + HOST_MPICH_LINK)
    src = os.path.join(work, "fake_mpich.c")
    with open(src, "w") as f:
        f.write(FAKE_MPICH)
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libmpich.so.12", "-o",
                    os.path.join(libdir, "libmpich.so.12.0.1"), src], check=True)
    os.symlink("libmpich.so.12.0.1", os.path.join(libdir, "libmpich.so.12"))
    shutil.copy("/bin/busybox", os.path.join(tree, "usr/bin/busybox"))
    for applet in ("sh", "sleep", "cat", "grep", "ls"):
        if not os.path.lexists(os.path.join(tree, "usr/bin", applet)):
            os.symlink("busybox", os.path.join(tree, "usr/bin", applet))
    shutil.copy(prog, os.path.join(tree, "app/pingpong"))
    with open(os.path.join(tree, "etc/ld.so.conf"), "w") as f:
        f.write("/usr/lib/x86_64-linux-gnu\n")
    subprocess.run(["ldconfig", "-r", tree], check=True)
    with open(os.path.join(tree, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(os.path.join(tree, "etc/group"), "w") as f:
        f.write("root:x:0:\n")
    tar = os.path.join(work, "image.tar")
    subprocess.run(["tar", "-C", tree, "-cf", tar, "."], check=True)
    os.chmod(tar, 0o644)
    return tar


def site_policy(path: str) -> str:
    """A site policy declaring the host's MPICH as mpi_default (the full ABI rule)."""
    with open(path, "w") as f:
        f.write(f'mpi_default = "mpich"\n[mpi.mpich]\nlibraries = ["{host_mpich()}"]\n'
                'abi = "full"\n')
    os.chmod(path, 0o644)
    return path


def ranks(stdout: str) -> list[str]:
    """The ping-pong's "rank R of N: LIBRARY" lines, sorted."""
    return sorted(line for line in stdout.splitlines() if line.startswith("rank "))

"""Host MPI injection (--mpi[=TYPE], devices/mpi.h) with fake MPI libraries: real ELF shared
objects built here with MPICH's soname (libmpich.so.12), a host "MPI" declared in a site
policy, and images with a compatible, symlinked, minor-incompatible, major-incompatible and
no MPI, each with an ld.so.cache written by the host's ldconfig for the image's tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import pytest

import imagelib
import mpilib

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="policy files must be owned by root: run the tests as root")


def build_lib(out: str, soname: str, marker: str, body: str = "return 0;") -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
        f.write("#include <pthread.h>\n"
                f'const char berth_marker[] = "{marker}";\nint MPI_Init(void) {{ {body} }}\n')
    subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", out, f.name],
                   check=True)
    os.unlink(f.name)


def image_with(libs: dict[str, str], links: dict[str, str],
               old_libc: bool = False) -> imagelib.Image:
    """busybox + /usr/lib files ({name: marker}) + links ({name: target}) + ld.so.cache."""
    tree = tempfile.mkdtemp(prefix="mpi-image-")
    try:
        os.makedirs(os.path.join(tree, "usr/lib"))
        os.makedirs(os.path.join(tree, "etc"))
        entries = []
        for name, marker in libs.items():
            major = name.split(".so.")[1].split(".")[0]
            build_lib(os.path.join(tree, "usr/lib", name), f"libmpich.so.{major}", marker)
            with open(os.path.join(tree, "usr/lib", name), "rb") as f:
                entries.append(imagelib.File(f"usr/lib/{name}", f.read(), 0o755))
        if old_libc:  # a stand-in libc.so.6 that says it is glibc 2.17
            path = os.path.join(tree, "usr/lib/libc.so.6")
            build_lib(path, "libc.so.6", "GLIBC_2.17")
            with open(path, "rb") as f:
                entries.append(imagelib.File("usr/lib/libc.so.6", f.read(), 0o755))
        for name, target in links.items():
            os.symlink(target, os.path.join(tree, "usr/lib", name))
            entries.append(imagelib.Symlink(f"usr/lib/{name}", target))
        open(os.path.join(tree, "etc/ld.so.conf"), "w").close()
        subprocess.run(["ldconfig", "-r", tree], check=True)
        with open(os.path.join(tree, "etc/ld.so.cache"), "rb") as f:
            entries.append(imagelib.File("etc/ld.so.cache", f.read()))
        return imagelib.make_image([imagelib.busybox_layer(), imagelib.Layer(entries)])
    finally:
        shutil.rmtree(tree)


@pytest.fixture(scope="module")
def images(registry):
    if not shutil.which("cc") or not shutil.which("ldconfig"):
        pytest.skip("needs a C compiler and ldconfig")
    cases = {
        # image file(s) and links; the host's library is libmpich.so.12.1.0
        "compatible": ({"libmpich.so.12.1.0": "IMAGE"}, {"libmpich.so.12": "libmpich.so.12.1.0"}),
        "symlinked": ({"libmpich.so.12.0.4": "IMAGE"},
                      {"libmpich.so.12": "libmpich.so.12.0.4", "libmpich.so": "libmpich.so.12"}),
        "minor": ({"libmpich.so.12.2.0": "IMAGE"}, {"libmpich.so.12": "libmpich.so.12.2.0"}),
        "major": ({"libmpich.so.11.1.0": "IMAGE"}, {"libmpich.so.11": "libmpich.so.11.1.0"}),
        "none": ({}, {}),
    }
    for tag, (libs, links) in cases.items():
        registry.pusher().push_image("e2e/mpi", tag, image_with(libs, links))
    registry.pusher().push_image("e2e/mpi", "oldglibc", image_with(
        {"libmpich.so.12.1.0": "IMAGE"}, {"libmpich.so.12": "libmpich.so.12.1.0"}, True))
    return f"{registry.host}/e2e/mpi"


@pytest.fixture
def host_mpi(berth, policy_dir):
    lib_dir = berth.make_dir("hostmpi")
    build_lib(os.path.join(lib_dir, "libmpich.so.12.1.0"), "libmpich.so.12", "HOST-MPICH")
    os.symlink("libmpich.so.12.1.0", os.path.join(lib_dir, "libmpich.so.12"))
    build_lib(os.path.join(lib_dir, "libfabric.so.1.18.0"), "libfabric.so.1", "HOST-FABRIC")
    os.chmod(lib_dir, 0o755)

    # A host MPI that needs glibc 2.34 (pthread_create's version since glibc merged libpthread).
    new_dir = berth.make_dir("newmpi")
    build_lib(os.path.join(new_dir, "libmpich.so.12.1.0"), "libmpich.so.12", "HOST-MPICH",
              "return pthread_create(0, 0, 0, 0);")
    os.chmod(new_dir, 0o755)

    def env(abi: str, new_glibc: bool = False) -> dict:
        path = os.path.join(policy_dir, f"berth-{abi}-{new_glibc}.conf")
        lib = f"{new_dir}/libmpich.so.12.1.0" if new_glibc else f"{lib_dir}/libmpich.so.12"
        with open(path, "w") as f:
            f.write(f'mpi_default = "mpich"\n[mpi.mpich]\n'
                    f'libraries = ["{lib}"]\n'
                    f'dependencies = ["{lib_dir}/libfabric.so.1.18.0"]\nabi = "{abi}"\n')
        os.chmod(path, 0o644)
        return {"BERTH_SITE_CONF": path}
    return env


@pytest.fixture
def policy_dir(scratch):
    d = tempfile.mkdtemp(prefix="mpi-policy-", dir=scratch)
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run(berth, ref, env, *cmd):
    berth("pull", ref)
    return berth("run", "--rm", "--mpi", ref, *cmd, check=False, env=env)


LOOK = ("grep -c HOST-MPICH /usr/lib/libmpich.so.12; "
        "ls /usr/lib/berth/mpi 2>/dev/null | tr '\\n' ' '; echo; echo $LD_LIBRARY_PATH")


@pytest.mark.parametrize("tag", ["compatible", "symlinked"])
def test_compatible_is_bound_over(berth, images, host_mpi, tag):
    rc, out, err = run(berth, f"{images}:{tag}", host_mpi("full"), "sh", "-c", LOOK)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "1"  # the image's libmpich.so.12 now reaches the host's file
    assert lines[1].split() == ["libfabric.so.1", "libfabric.so.1.18.0"]  # dependencies beside
    assert "/usr/lib/berth/mpi" in lines[2]
    # Nothing was written into the image: without --mpi it is the image's library again.
    _, out, _ = berth("run", "--rm", f"{images}:{tag}", "sh", "-c",
                      "grep -c HOST-MPICH /usr/lib/libmpich.so.12", check=False)
    assert out.strip() == "0"


def test_minor_incompatible_full_goes_beside_with_a_warning(berth, images, host_mpi):
    rc, out, err = run(berth, f"{images}:minor", host_mpi("full"), "sh", "-c", LOOK)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "0"  # the image's file is left as it is
    assert "libmpich.so.12.1.0" in lines[1].split()
    assert ("host libmpich.so.12.1.0 (12.1.0) and image libmpich.so.12.2.0 (12.2.0): only the "
            "majors agree") in err


def test_minor_incompatible_strict_is_refused(berth, images, host_mpi):
    rc, _, err = run(berth, f"{images}:minor", host_mpi("strict"), "true")
    assert rc == 125
    assert err.strip() == (
        "berth: error: inject MPI libmpich.so: host libmpich.so.12.1.0 (12.1.0) and image "
        "libmpich.so.12.2.0 (12.2.0) are not ABI-compatible under the strict rule")


def test_major_incompatible_is_refused(berth, images, host_mpi):
    rc, _, err = run(berth, f"{images}:major", host_mpi("major"), "true")
    assert rc == 125
    assert err.strip() == (
        "berth: error: inject MPI libmpich.so: host libmpich.so.12.1.0 (12.1.0) and image "
        "libmpich.so.11.1.0 (11.1.0) are not ABI-compatible under the major rule")


def test_image_without_mpi_is_refused(berth, images, host_mpi):
    rc, _, err = run(berth, f"{images}:none", host_mpi("major"), "true")
    assert rc == 125
    assert err.splitlines()[0] == (
        "berth: error: inject MPI --mpi=mpich: the image has no MPI library to replace (none "
        "of libmpich.so in its ld.so.cache)")


def test_undeclared_type_is_one_line(berth, images, host_mpi):
    berth("pull", f"{images}:compatible")
    rc, _, err = berth("run", "--rm", "--mpi=openmpi", f"{images}:compatible", "true",
                       check=False, env=host_mpi("major"))
    assert rc == 125
    assert err.strip() == ("berth: error: inject MPI --mpi=openmpi: the site policy declares no "
                           "MPI openmpi (declared: mpich)")


def test_host_mpi_needing_a_newer_glibc_is_refused(berth, images, host_mpi, scratch):
    rc, _, err = run(berth, f"{images}:oldglibc", host_mpi("major", new_glibc=True), "true")
    assert rc == 125
    first = err.splitlines()[0]
    assert first.startswith("berth: error: inject MPI ") and first.endswith(
        "/newmpi/libmpich.so.12.1.0: needs glibc 2.34, newer than the image's 2.17 "
        "(/usr/lib/libc.so.6)"), first
    # The same library into an image without any glibc: refused too.
    rc, _, err = run(berth, f"{images}:compatible", host_mpi("major", new_glibc=True), "true")
    assert rc == 125
    assert err.splitlines()[0].endswith(
        "needs glibc 2.34 and the image has none (no libc.so.6 in its ld.so.cache)")


def test_real_mpich_through_mpi_and_exec(berth, policy_dir):
    """Debian's MPICH on the host; an image with its own libmpich.so.12 (mpilib's stand-in,
    which says "image MPICH" and has its own version numbers) and the libraries the host's
    needs; two ranks started by mpiexec with berth exec report the image's library, and the
    host's once --mpi binds it over the image's (the full rule: 12.2.2 over 12.0.1)."""
    why = mpilib.missing()
    if why:
        pytest.skip(why)
    work = berth.make_dir("real")
    berth("import", mpilib.image_tar(work), "realmpi")
    real = mpilib.host_mpich()
    env = {"BERTH_SITE_CONF": mpilib.site_policy(os.path.join(policy_dir, "berth.conf"))}

    def ranks_in(name: str, *run_opts: str) -> list[str]:
        berth("run", "-d", "--name", name, *run_opts, "realmpi", "sh", "-c",
              "echo ready; exec sleep 120", env=env)
        for _ in range(600):
            if "ready" in berth("logs", name)[1]:
                break
            time.sleep(0.05)
        cmd, full_env = berth.command(["exec", name, "/app/pingpong", "8"], env)
        r = subprocess.run(["mpiexec.mpich", "-n", "2", *cmd], env=full_env,
                           capture_output=True, text=True, timeout=120, cwd=berth.workdir)
        assert r.returncode == 0, r.stderr
        ranks = mpilib.ranks(r.stdout)
        assert [line.split(":")[0] for line in ranks] == ["rank 0 of 2", "rank 1 of 2"]
        return ranks

    try:
        # The image's own MPI, as built.
        assert all(mpilib.IMAGE_MPICH in line for line in ranks_in("ownjob"))
        # --mpi: the host's library is what the image's soname link reaches now.
        ranks = ranks_in("realjob", "--mpi")
        _, maps, _ = berth("exec", "realjob", "sh", "-c", "cat /proc/self/mountinfo")
        assert os.path.basename(real) in maps
        assert all("MPICH Version:" in line and "image MPICH" not in line for line in ranks)
        # berth run --mpi, one rank without a launcher: the host's too.
        _, out, _ = berth("run", "--rm", "--mpi", "realmpi", "/app/pingpong", env=env)
        assert mpilib.ranks(out)[0].startswith("rank 0 of 1: MPICH Version:"), out
    finally:
        berth("rm", "-f", "ownjob", "realjob", check=False)


def test_one_container_per_rank_shares_the_hosts_shm(berth, policy_dir):
    """mpiexec -n 2 berth run --mpi: each rank in a container of its own. --mpi shares the
    host's IPC namespace and /dev/shm (as Apptainer does), so MPI_Init's shared memory works;
    without that each rank had a private /dev/shm and MPICH failed ("unable to allocate shared
    memory"). --ipc private and --shm-size still give a /dev/shm of the container's own."""
    why = mpilib.missing()
    if why:
        pytest.skip(why)
    work = berth.make_dir("perrank")
    berth("import", mpilib.image_tar(work), "rankmpi")
    env = {"BERTH_SITE_CONF": mpilib.site_policy(os.path.join(policy_dir, "berth.conf"))}
    cmd, full_env = berth.command(["run", "--rm", "--mpi", "rankmpi", "/app/pingpong", "8"], env)
    r = subprocess.run(["mpiexec.mpich", "-n", "2", *cmd], env=full_env, capture_output=True,
                       text=True, timeout=120, cwd=berth.workdir)
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = mpilib.ranks(r.stdout)
    assert [line.split(":")[0] for line in ranks] == ["rank 0 of 2", "rank 1 of 2"], r.stdout
    assert all("MPICH Version:" in line and "image MPICH" not in line for line in ranks)
    # The host's /dev/shm itself, unless the caller asks for a private one.
    marker = tempfile.NamedTemporaryFile(dir="/dev/shm", prefix="berth-e2e-")
    os.chmod(marker.name, 0o644)
    name = os.path.basename(marker.name)
    try:
        for opts, seen in (([], True), (["--ipc", "private"], False),
                           (["--shm-size", "1m"], False), (["--ipc", "host"], True)):
            _, out, _ = berth("run", "--rm", "--mpi", *opts, "rankmpi", "ls", "/dev/shm",
                              env=env)
            assert (name in out.split()) == seen, (opts, out)
    finally:
        marker.close()

"""GPU injection end to end, on a fabricated host: a driver root with real ELF
libraries carrying NVIDIA's sonames and version suffixes, /proc/driver/nvidia
files, and stand-in device nodes under a device root. An unmodified glibc image
(its own loader and ldconfig, no driver inside) runs `gpucheck`, which dlopens
the driver libraries the way a CUDA application does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

import imagelib
from conftest import REPO_ROOT
from test_run import kv, probe_bytes, userns_works

VERSION = "550.54.15"
COMPAT = "560.28.03"  # a newer driver's libcuda, as CUDA's forward-compatibility package has
UUID0 = "GPU-11111111-2222-3333-4444-555555555555"
UUID1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
LIBDIR = "/usr/lib/berth/nvidia"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def cc(args: list[str]) -> None:
    r = subprocess.run(["cc", *args], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"cc {' '.join(args)}: {r.stderr}")


def information(model: str, uuid: str, bus: str, minor: int) -> str:
    return (f"Model: \t\t {model}\nIRQ:   \t\t 0\nGPU UUID: \t {uuid}\n"
            f"Bus Type: \t PCIe\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n")


def write(path: str, data, mode: int = 0o644) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    os.chmod(path, mode)


class FakeHost:
    """driver root and device root for BERTH_DRIVER_ROOT / BERTH_DEV_ROOT."""

    def __init__(self, base: str):
        self.base = base
        self.root = os.path.join(base, "root")
        self.dev = os.path.join(base, "dev-root")
        lib = os.path.join(self.root, "usr/lib/x86_64-linux-gnu")
        src = os.path.join(REPO_ROOT, "tests", "fake_gpu")
        for name, source, soname in [
            (f"libcuda.so.{VERSION}", "cuda.c", "libcuda.so.1"),
            (f"libnvidia-ml.so.{VERSION}", "nvml.c", "libnvidia-ml.so.1"),
            (f"libnvidia-ptxjitcompiler.so.{VERSION}", "plain.c", "libnvidia-ptxjitcompiler.so.1"),
            (f"libnvidia-encode.so.{VERSION}", "plain.c", "libnvidia-encode.so.1"),
        ]:
            os.makedirs(lib, exist_ok=True)
            cc(["-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", os.path.join(lib, name),
                os.path.join(src, source)])
            os.symlink(name, os.path.join(lib, soname))
        proc = os.path.join(self.root, "proc/driver/nvidia")
        write(f"{proc}/version", f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {VERSION}  "
                                 "Tue Mar  5 22:23:56 UTC 2024\n")
        write(f"{proc}/params", "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n")
        write(f"{proc}/gpus/0000:07:00.0/information",
              information("NVIDIA A100-SXM4-40GB", UUID0, "0000:07:00.0", 0))
        write(f"{proc}/gpus/0000:85:00.0/information",
              information("NVIDIA H100 80GB HBM3", UUID1, "0000:85:00.0", 1))
        write(os.path.join(self.root, "usr/bin/nvidia-smi"),
              "#!/bin/sh\necho \"fake nvidia-smi $NVIDIA_VISIBLE_DEVICES\"\n", 0o755)
        for node in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidia1"):
            path = os.path.join(self.dev, "dev", node)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.mkfifo(path, 0o666)
        subprocess.run(["chmod", "-R", "a+rX", base], check=True)

    def env(self, **extra) -> dict:
        return {"BERTH_DRIVER_ROOT": self.root, "BERTH_DEV_ROOT": self.dev,
                "BERTH_CUDA_PROBE": "always", **extra}


def fake_host_env(base: str) -> dict:
    """The environment of the fabricated GPU host under BASE, made there the first time (the
    Slurm and gateway tiers each keep one for their GPU tests)."""
    if not os.path.exists(base):
        return FakeHost(base).env()
    return {"BERTH_DRIVER_ROOT": os.path.join(base, "root"),
            "BERTH_DEV_ROOT": os.path.join(base, "dev-root"), "BERTH_CUDA_PROBE": "always"}


@pytest.fixture(scope="module")
def host(scratch):
    base = os.path.join(scratch, "gpu-host")
    if os.path.exists(base):
        shutil.rmtree(base)
    return FakeHost(base)


def glibc_layer(workdir: str, with_ldconfig: bool) -> imagelib.Layer:
    """The host's glibc loader and libc, its ldconfig, and gpucheck linked against them."""
    gpucheck = os.path.join(workdir, "gpucheck")
    cc(["-O1", "-o", gpucheck, os.path.join(REPO_ROOT, "tests", "probe", "gpucheck.c")])
    libc_dir = "/lib/x86_64-linux-gnu"
    entries = [imagelib.Dir("lib"), imagelib.Dir("lib/x86_64-linux-gnu"), imagelib.Dir("lib64"),
               imagelib.Dir("usr"), imagelib.Dir("usr/bin"), imagelib.Dir("usr/lib"),
               imagelib.Dir("usr/local"), imagelib.Dir("usr/local/bin"),
               imagelib.Dir("etc/ld.so.conf.d")]
    for name in ("ld-linux-x86-64.so.2", "libc.so.6"):
        with open(os.path.realpath(os.path.join(libc_dir, name)), "rb") as f:
            entries.append(imagelib.File(f"lib/x86_64-linux-gnu/{name}", f.read(), 0o755))
    entries.append(imagelib.Symlink("lib64/ld-linux-x86-64.so.2",
                                    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"))
    with open(gpucheck, "rb") as f:
        entries.append(imagelib.File("usr/local/bin/gpucheck", f.read(), 0o755))
    entries.append(imagelib.File("probe", probe_bytes(), 0o755))
    if with_ldconfig:
        entries.append(imagelib.Dir("sbin"))
        with open("/sbin/ldconfig", "rb") as f:
            entries.append(imagelib.File("sbin/ldconfig", f.read(), 0o755))
        entries.append(imagelib.File("etc/ld.so.conf", b"include /etc/ld.so.conf.d/*.conf\n"))
        conf = b"/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n"
        entries.append(imagelib.File("etc/ld.so.conf.d/x86_64-linux-gnu.conf", conf))
        # The image's own loader cache, as every glibc base image ships one (made from the
        # host's copy of the same libc; entries for host-only libraries are harmless).
        write(os.path.join(workdir, "ld.so.conf"), conf)
        cache = os.path.join(workdir, "ld.so.cache")
        subprocess.run(["/sbin/ldconfig", "-X", "-f", os.path.join(workdir, "ld.so.conf"),
                        "-C", cache], check=True)
        with open(cache, "rb") as f:
            entries.append(imagelib.File("etc/ld.so.cache", f.read()))
    return imagelib.Layer(entries)


@pytest.fixture(scope="module")
def images(registry, identity, berth_bin, scratch):
    if not userns_works(identity):
        pytest.skip("unprivileged user namespaces are not available to the test user here")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the fake driver libraries")
    work = os.path.join(scratch, "gpu-images")
    os.makedirs(work, exist_ok=True)
    base = imagelib.busybox_layer()
    glibc = glibc_layer(work, True)
    pusher = registry.pusher()
    refs = {}
    cuda_env = [f"PATH={PATH}", "NVIDIA_VISIBLE_DEVICES=all",
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility", "CUDA_VERSION=12.2.0",
                "NVIDIA_REQUIRE_CUDA=cuda>=12.2 brand=tesla,driver>=470,driver<471"]
    compat_lib = os.path.join(work, "libcuda-compat.so")
    cc(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", compat_lib,
        os.path.join(REPO_ROOT, "tests", "fake_gpu", "cuda.c")])
    with open(compat_lib, "rb") as f:
        compat = imagelib.Layer([imagelib.Dir("usr/local/cuda"), imagelib.Dir("usr/local/cuda/compat"),
                                 imagelib.File(f"usr/local/cuda/compat/libcuda.so.{COMPAT}", f.read(), 0o755),
                                 imagelib.Symlink("usr/local/cuda/compat/libcuda.so.1",
                                                  f"libcuda.so.{COMPAT}")])
    # An image with its own libcuda.so.1 (a stub, as some ship) in a folder of its ld.so.conf.
    stub_lib = os.path.join(work, "libcuda-stub.so")
    cc(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", stub_lib,
        os.path.join(REPO_ROOT, "tests", "fake_gpu", "plain.c")])
    with open(stub_lib, "rb") as f:
        stub = imagelib.Layer([imagelib.Dir("usr/local/lib"),
                               imagelib.Dir("usr/local/lib/x86_64-linux-gnu"),
                               imagelib.File("usr/local/lib/x86_64-linux-gnu/libcuda.so.1",
                                             f.read(), 0o755)])
    variants = {
        "plain": (glibc, {}),
        "stub": (glibc, {}),
        "cuda": (glibc, {"Env": cuda_env}),
        "future": (glibc, {"Env": [f"PATH={PATH}", "NVIDIA_VISIBLE_DEVICES=all",
                                   "NVIDIA_REQUIRE_CUDA=cuda>=13.0"]}),
        "compat": (glibc, {}),
        "noldconfig": (glibc_layer(work, False), {"Env": [f"PATH={PATH}",
                                                          "LD_LIBRARY_PATH=/opt/app/lib"]}),
    }
    for tag, (layer, config) in variants.items():
        layers = [base, layer] + ([compat] if tag == "compat" else []) + (
            [stub] if tag == "stub" else [])
        img = imagelib.make_image(layers, cmd=["/usr/local/bin/gpucheck", "libcuda.so.1"],
                                  config=config)
        pusher.push_image("e2e/gpu", tag, img)
        refs[tag] = f"{registry.host}/e2e/gpu:{tag}"
    return refs


@pytest.fixture
def pulled(berth, images):
    for ref in images.values():
        berth("pull", ref)
    return images


def run(berth, host, *args, env=None, check=True):
    return berth("run", "--rm", *args, env=host.env(**(env or {})), check=check)


def names(out: str) -> set[str]:
    return {line[len("name="):] for line in out.splitlines() if line.startswith("name=")}


def env_of(out: str) -> dict:
    return dict(line[len("env="):].split("=", 1) for line in out.splitlines()
                if line.startswith("env="))


# --- injection -------------------------------------------------------------------


def test_gpus_all_makes_the_driver_loadable(berth, host, pulled):
    _, out, _ = run(berth, host, "--gpus", "all", pulled["plain"], "gpucheck",
                    "libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1")
    facts = kv(out)
    assert facts["lib.libcuda.so.1"].startswith(LIBDIR + "/"), out
    assert facts["lib.libnvidia-ml.so.1"].startswith(LIBDIR + "/"), out
    assert facts["cuda_driver_version"] == "12040"  # the fake driver answered, through the loader
    _, out, _ = run(berth, host, "--gpus", "all", pulled["plain"], "/probe", "ls", "/dev")
    assert {"nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"} <= names(out)
    _, out, _ = run(berth, host, "--gpus", "all", pulled["plain"], "/probe", "env")
    env = env_of(out)
    assert env["NVIDIA_VISIBLE_DEVICES"] == f"{UUID0},{UUID1}"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "utility,compute"
    assert "LD_LIBRARY_PATH" not in env  # the loader cache did it
    _, out, _ = run(berth, host, "--gpus", "all", pulled["plain"], "nvidia-smi")
    assert out.strip() == f"fake nvidia-smi {UUID0},{UUID1}"


def test_capabilities_limit_the_libraries(berth, host, pulled):
    rc, out, _ = run(berth, host, "--gpus", "all,capabilities=utility", pulled["plain"],
                     "gpucheck", "libnvidia-ml.so.1", "libcuda.so.1", check=False)
    facts = kv(out)
    assert rc == 1 and "missing.libcuda.so.1" in facts and "lib.libnvidia-ml.so.1" in facts
    _, out, _ = run(berth, host, "--gpus", "all,capabilities=utility", pulled["plain"],
                    "/probe", "ls", "/dev")
    assert "nvidia-uvm" not in names(out) and "nvidiactl" in names(out)


def test_device_selection_and_renumbering(berth, host, pulled):
    _, out, _ = run(berth, host, "--gpus", "device=1", pulled["plain"], "/probe", "ls", "/dev")
    assert "nvidia1" in names(out) and "nvidia0" not in names(out)
    _, out, _ = run(berth, host, "--gpus", f'"device={UUID0}"', pulled["plain"], "/probe", "env")
    assert env_of(out)["NVIDIA_VISIBLE_DEVICES"] == UUID0
    # A Slurm job's CUDA_VISIBLE_DEVICES picks the GPUs and is renumbered inside.
    _, out, _ = run(berth, host, "--gpus", "all", "--hostenv", pulled["plain"], "/probe", "env",
                    env={"CUDA_VISIBLE_DEVICES": "1"})
    env = env_of(out)
    assert env["NVIDIA_VISIBLE_DEVICES"] == UUID1 and env["CUDA_VISIBLE_DEVICES"] == "0"


def test_no_request_no_injection(berth, host, pulled):
    rc, out, _ = run(berth, host, pulled["plain"], check=False)
    assert rc == 1 and "missing.libcuda.so.1" in kv(out)
    _, out, _ = run(berth, host, pulled["plain"], "/probe", "ls", "/dev")
    assert not any(n.startswith("nvidia") for n in names(out))


def test_cuda_image_gets_gpus_from_its_environment(berth, host, pulled):
    _, out, _ = run(berth, host, pulled["cuda"])
    assert kv(out)["cuda_driver_version"] == "12040"
    # NVIDIA_VISIBLE_DEVICES=void from the caller turns it off.
    rc, out, _ = run(berth, host, "-e", "NVIDIA_VISIBLE_DEVICES=void", pulled["cuda"], check=False)
    assert rc == 1 and "missing.libcuda.so.1" in kv(out)


def test_cuda_image_without_a_driver_still_runs(berth, host, pulled, scratch):
    empty = os.path.join(scratch, "no-driver")
    os.makedirs(empty, exist_ok=True)
    env = {"BERTH_DRIVER_ROOT": empty, "BERTH_DEV_ROOT": empty}
    _, out, err = run(berth, host, pulled["cuda"], "/probe", "true", env=env)
    assert err == ""
    # Asked for explicitly, the missing driver is an error of one line.
    rc, _, err = run(berth, host, "--gpus", "all", pulled["cuda"], "/probe", "true", env=env,
                     check=False)
    assert rc == 125
    assert err.splitlines()[0] == (f"berth: error: inject GPUs --gpus all: no NVIDIA driver "
                                   f"found under {empty}")


def test_unmet_cuda_requirement_is_one_line(berth, host, pulled):
    rc, _, err = run(berth, host, pulled["future"], check=False)
    assert rc == 125
    first = err.splitlines()[0]
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=13.0"' in first and "12.4" in first, err
    # NVIDIA_DISABLE_REQUIRE skips the check.
    _, out, _ = run(berth, host, "-e", "NVIDIA_DISABLE_REQUIRE=1", pulled["future"])
    assert kv(out)["cuda_driver_version"] == "12040"


def test_cuda_requirement_checked_under_a_driver_root_by_default(berth, host, pulled):
    # BERTH_CUDA_PROBE unset: libcuda under the driver root is probed (in a forked child).
    env = {"BERTH_CUDA_PROBE": "auto"}
    _, out, _ = berth("gpu", "info", env=host.env(**env))
    assert out.startswith(f"NVIDIA driver {VERSION}, CUDA 12.4\n"), out
    rc, _, err = run(berth, host, pulled["future"], env=env, check=False)
    assert rc == 125 and 'NVIDIA_REQUIRE_CUDA="cuda>=13.0"' in err.splitlines()[0], err
    # Not probed: derived from the driver branch, and said so.
    _, out, _ = berth("gpu", "info", env=host.env(BERTH_CUDA_PROBE="never"))
    assert out.startswith(f"NVIDIA driver {VERSION}, CUDA 12.4 (derived from driver branch 550; "
                          "not probed (BERTH_CUDA_PROBE=never))\n"), out


def test_bad_gpus_values_are_refused(berth, host, pulled):
    for value in ("device=7", "lots", "all,capabilities=warp-drive"):
        rc, _, err = run(berth, host, "--gpus", value, pulled["plain"], "/probe", "true",
                         check=False)
        assert rc == 125, value
        assert len(err.splitlines()) <= 2 and err.startswith("berth: error: "), err


def test_forward_compatibility_uses_the_images_newer_libcuda(berth, host, pulled):
    _, out, _ = run(berth, host, "--gpus", "all", pulled["compat"], "gpucheck", "libcuda.so.1",
                    "libnvidia-ptxjitcompiler.so.1")
    facts = kv(out)
    assert facts["real.libcuda.so.1"] == f"/usr/local/cuda/compat/libcuda.so.{COMPAT}", out
    assert facts["real.libnvidia-ptxjitcompiler.so.1"] == f"{LIBDIR}/libnvidia-ptxjitcompiler.so.{VERSION}"
    # Without it (the plain image), the host's own libcuda.
    _, out, _ = run(berth, host, "--gpus", "all", pulled["plain"], "gpucheck", "libcuda.so.1")
    assert kv(out)["real.libcuda.so.1"] == f"{LIBDIR}/libcuda.so.{VERSION}"


def test_host_driver_wins_over_the_images_own_libcuda(berth, host, pulled):
    # The image's ld.so.conf lists a folder with a libcuda.so.1 of its own: the run's loader
    # configuration reads the injected folder first, and ldconfig keeps the first one read.
    _, out, _ = run(berth, host, "--gpus", "all", pulled["stub"], "gpucheck", "libcuda.so.1")
    facts = kv(out)
    assert facts["real.libcuda.so.1"] == f"{LIBDIR}/libcuda.so.{VERSION}", out
    assert facts["cuda_driver_version"] == "12040", out


def test_image_without_ldconfig_gets_ld_library_path(berth, host, pulled):
    _, out, _ = run(berth, host, "--gpus", "all", pulled["noldconfig"], "/probe", "env")
    # Berth's driver folder first, as every engine orders it: a library the image ships (an old
    # libcuda, a stub) must never win over the host driver's, which matches the kernel module.
    assert env_of(out)["LD_LIBRARY_PATH"] == f"{LIBDIR}:/opt/app/lib"
    _, out, _ = run(berth, host, "--gpus", "all", pulled["noldconfig"])
    assert kv(out)["cuda_driver_version"] == "12040"


def test_nothing_is_left_in_the_image(berth, host, pulled):
    """The driver is injected per run: after a GPU run, the same container without GPUs
    sees its own loader cache and no driver file."""
    _, cid, _ = berth("create", pulled["plain"], env=host.env())
    cid = cid.strip()
    cache = os.path.join(berth.berth_home, "containers", cid, "rootfs", "etc", "ld.so.cache")
    with open(cache, "rb") as f:
        image_cache = f.read()
    rc, out, _ = berth("run", cid, "/probe", "ls", "/etc", env=host.env())
    before = names(out)
    _, out, _ = berth("run", "--gpus", "all", cid, "gpucheck", "libcuda.so.1", env=host.env())
    assert kv(out)["cuda_driver_version"] == "12040"
    rc, out, _ = berth("run", cid, "/probe", "ls", "/etc", env=host.env())
    assert names(out) == before  # no ld.so.conf.d drop-in
    with open(cache, "rb") as f:
        assert f.read() == image_cache  # the run's cache was bound over it, not written
    rc, out, _ = berth("run", cid, "gpucheck", "libcuda.so.1", env=host.env(), check=False)
    assert rc == 1, out
    rc, out, _ = berth("run", cid, "/probe", "ls", "/usr/lib/berth", env=host.env())
    assert names(out) == set()


# --- CDI ---------------------------------------------------------------------------


def test_cdi_spec_from_berth_drives_device(berth, host, pulled):
    cdi_dir = berth.make_dir("cdi")
    _, spec, _ = berth("cdi", "generate", env=host.env())
    berth.write_file("cdi/nvidia.json", spec)
    env = host.env(BERTH_CDI_SPEC_DIRS=cdi_dir)
    _, out, _ = run(berth, host, "--device", "nvidia.com/gpu=1", pulled["plain"], "/probe",
                    "ls", "/dev", env=env)
    assert "nvidia1" in names(out) and "nvidia0" not in names(out) and "nvidiactl" in names(out)
    _, out, _ = run(berth, host, "--device", "nvidia.com/gpu=all", pulled["plain"], "gpucheck",
                    "libcuda.so.1", env=env)
    assert kv(out)["cuda_driver_version"] == "12040"
    # YAML by the output file's extension (or --format), read back the same way.
    yaml_dir = berth.make_dir("cdi-yaml")
    berth("cdi", "generate", "-o", os.path.join(yaml_dir, "nvidia.yaml"), env=host.env())
    with open(os.path.join(yaml_dir, "nvidia.yaml")) as f:
        text = f.read()
    assert text.startswith("---\n") and '"cdiVersion": "0.5.0"' in text, text
    _, out, _ = berth("cdi", "generate", "--format", "yaml", env=host.env())
    assert out == text
    _, out, _ = run(berth, host, "--device", "nvidia.com/gpu=0", pulled["plain"], "gpucheck",
                    "libcuda.so.1", env=host.env(BERTH_CDI_SPEC_DIRS=yaml_dir))
    assert kv(out)["cuda_driver_version"] == "12040"


def test_cdi_yaml_spec_of_any_vendor(berth, host, pulled, scratch):
    data = berth.write_file("vendor-data", "calibration 42\n")
    node = berth.path("foo-node")
    os.mkfifo(node, 0o666)
    cdi_dir = berth.make_dir("cdi")
    berth.write_file("cdi/example.yaml", f"""---
cdiVersion: 0.6.0
kind: example.com/device
containerEdits:
  env:
  - EXAMPLE_COMMON=1
devices:
- name: foo
  containerEdits:
    env: ["EXAMPLE_DEVICE=foo"]
    deviceNodes:
    - path: /dev/foo0
      hostPath: {node}
    mounts:
    - hostPath: {data}
      containerPath: /opt/example/calibration
      options: [ro, nosuid, nodev, bind]
    hooks:
    - hookName: createContainer
      path: /usr/bin/example-hook
      args: [example-hook, setup]
""")
    env = host.env(BERTH_CDI_SPEC_DIRS=cdi_dir)
    _, out, err = run(berth, host, "--device", "example.com/device=foo", pulled["plain"],
                      "/probe", "env", env=env)
    assert env_of(out)["EXAMPLE_DEVICE"] == "foo" and env_of(out)["EXAMPLE_COMMON"] == "1"
    assert 'hook "/usr/bin/example-hook setup" skipped' in err
    _, out, _ = run(berth, host, "--device", "example.com/device=foo", pulled["plain"],
                    "/probe", "cat", "/opt/example/calibration", env=env)
    assert "calibration 42" in out
    # The image has no /opt: the file is bound at its containerPath, not linked to elsewhere.
    _, out, _ = run(berth, host, "--device", "example.com/device=foo", pulled["plain"],
                    "/probe", "mounts", env=env)
    assert any(line.split()[4] == "/opt/example/calibration" for line in out.splitlines()
               if len(line.split()) > 5), out
    _, out, _ = run(berth, host, "--device", "example.com/device=foo", pulled["plain"],
                    "/probe", "ls", "/dev", env=env)
    assert "foo0" in names(out)
    rc, _, err = run(berth, host, "--device", "example.com/device=bar", pulled["plain"],
                     "/probe", "true", env=env, check=False)
    assert rc == 125
    assert err.splitlines()[0] == ("berth: error: --device example.com/device=bar: no such "
                                   "device in the CDI specs of example.com/device")
    rc, _, err = run(berth, host, "--device", "nosuch.org/thing=1", pulled["plain"],
                     "/probe", "true", env=env, check=False)
    assert rc == 125 and "no CDI spec for nosuch.org/thing found" in err.splitlines()[0]



def test_cdi_tmpfs_mounts_read_only_nodes_and_refusals(berth, host, pulled):
    node = berth.path("rw-node")
    os.mkfifo(node, 0o666)
    cdi_dir = berth.make_dir("cdi-edits")
    spec = {"cdiVersion": "0.5.0", "kind": "example.com/scratch",
            "devices": [{"name": "s", "containerEdits": {
                "deviceNodes": [{"path": "/dev/ro0", "hostPath": node, "permissions": "r"}],
                "mounts": [{"hostPath": "tmpfs", "containerPath": "/usr/scratch", "type": "tmpfs",
                            "options": ["nosuid", "nodev", "size=1m", "nr_inodes=100"]},
                           {"hostPath": "tmpfs", "containerPath": "/opt/frozen", "type": "tmpfs",
                            "options": ["ro"]}]}},
                        {"name": "net", "containerEdits": {
                            "netDevices": [{"hostInterfaceName": "eth0", "name": "eth9"}]}}]}
    berth.write_file("cdi-edits/example.json", json.dumps(spec))
    env = host.env(BERTH_CDI_SPEC_DIRS=cdi_dir)
    # 0.5.0 is too old for netDevices: the whole spec is refused, in one line.
    rc, _, err = run(berth, host, "--device", "example.com/scratch=s", pulled["plain"], "/probe",
                     "true", env=env, check=False)
    assert rc == 125 and "cdiVersion 0.5.0 is too old for the fields used; they need 1.1.0" in err
    spec["cdiVersion"] = "1.1.0"
    berth.write_file("cdi-edits/example.json", json.dumps(spec))
    _, out, _ = run(berth, host, "--device", "example.com/scratch=s", pulled["plain"], "/probe",
                    "mounts", env=env)
    lines = {line.split()[4]: line for line in out.splitlines() if len(line.split()) > 5}
    # Not in the image: mounted at containerPath itself (its mount point made, as Podman does),
    # with the spec's size and inode count, and read-only where it says ro.
    assert " - tmpfs " in lines["/usr/scratch"], out
    assert {"size=1024k", "nr_inodes=100"} <= set(lines["/usr/scratch"].split()[-1].split(",")), out
    assert lines["/usr/scratch"].split()[5].split(",")[0] == "rw", out
    assert " - tmpfs " in lines["/opt/frozen"] and lines["/opt/frozen"].split()[5].startswith("ro")
    # A real directory, mode 1777 as Podman makes it, that anyone may write to.
    _, out, _ = run(berth, host, "--device", "example.com/scratch=s", pulled["plain"], "/bin/sh",
                    "-c", "/bin/busybox stat -c '%F %a' /usr/scratch && echo x > /usr/scratch/f && cat "
                    "/usr/scratch/f", env=env)
    assert out == "directory 1777\nx\n", out
    assert lines["/dev/ro0"].split()[5].split(",")[0] == "ro", out  # permissions "r"
    rc, out, err = run(berth, host, "--device", "example.com/scratch=net", pulled["plain"],
                       "/probe", "true", env=env, check=False)
    assert rc == 125 and len(err.splitlines()) <= 2, err
    assert err.startswith("berth: error: CDI ") and "netDevices cannot be honoured" in err, err


def test_driver_roots_from_the_config_file(berth, host, pulled):
    # The configuration file ($BERTH_CONFIG_DIR/config.json, site/config.h) gives the roots when
    # the environment does not.
    config_dir = berth.make_dir("config")
    berth.write_file("config/config.json",
                     json.dumps({"driver_root": host.root, "dev_root": host.dev}))
    _, out, _ = berth("gpu", "info", "--json", env={"BERTH_CONFIG_DIR": config_dir})
    info = json.loads(out)
    assert info["driver_root"] == host.root and info["dev_root"] == host.dev
    assert info["nvidia"]["found"] is True
    # A broken file is an error for every run: config.json is part of the user's layer of the
    # policy (docs/site.md), which every run applies (mounts, environment, engine).
    path = berth.write_file("config/config.json", "{broken")
    for gpus in ([], ["--gpus", "all"]):
        rc, _, err = berth("run", "--rm", *gpus, pulled["plain"], "/probe", "true",
                           env={"BERTH_CONFIG_DIR": config_dir}, check=False)
        assert rc == 125
        assert err.startswith(f"berth: error: read config {path}: ")


def nvidia_ctk_spec(host) -> dict:
    """A spec as `nvidia-ctk cdi generate --driver-root R --dev-root D` writes it: libraries
    mounted at their own (versioned) paths only; its update-ldcache hook runs the image's
    ldconfig, which makes the soname links, and create-symlinks adds libcuda.so."""
    libdir = "/usr/lib/x86_64-linux-gnu"
    libs = [f"libcuda.so.{VERSION}", f"libnvidia-ml.so.{VERSION}",
            f"libnvidia-ptxjitcompiler.so.{VERSION}"]
    mounts = [{"hostPath": host.root + f"{libdir}/{lib}", "containerPath": f"{libdir}/{lib}",
               "options": ["ro", "nosuid", "nodev", "bind"]} for lib in libs]
    mounts.append({"hostPath": host.root + "/usr/bin/nvidia-smi", "containerPath": "/usr/bin/nvidia-smi",
                   "options": ["ro", "nosuid", "nodev", "bind"]})
    # Like nvidia-ctk, only the development link: the soname links are ldconfig's to make.
    links = [f"libcuda.so.1::{libdir}/libcuda.so"]
    hooks = [{"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk",
              "args": ["nvidia-ctk", "hook", "enable-cuda-compat",
                       f"--host-driver-version={VERSION}"]},
             {"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk",
              "args": ["nvidia-ctk", "hook", "create-symlinks",
                       *[a for link in links for a in ("--link", link)]]},
             {"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk",
              "args": ["nvidia-ctk", "hook", "update-ldcache", "--folder", libdir]},
             {"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk",
              "args": ["nvidia-ctk", "hook", "disable-device-node-modification"]}]
    node = lambda n: {"path": f"/dev/{n}", "hostPath": os.path.join(host.dev, "dev", n)}
    return {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
            "devices": [{"name": "0", "containerEdits": {"deviceNodes": [node("nvidia0")]}},
                        {"name": UUID1, "containerEdits": {"deviceNodes": [node("nvidia1")]}},
                        {"name": "all", "containerEdits": {"deviceNodes": [node("nvidia0"), node("nvidia1")]}}],
            "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=void"],
                               "deviceNodes": [node("nvidiactl"), node("nvidia-uvm")],
                               "mounts": mounts, "hooks": hooks}}


@pytest.mark.parametrize("image", ["plain", "noldconfig"])
def test_cdi_spec_from_nvidia_ctk_gives_a_working_gpu(berth, host, pulled, image):
    cdi_dir = berth.make_dir("cdi")
    berth.write_file("cdi/nvidia.json", json.dumps(nvidia_ctk_spec(host)))
    env = host.env(BERTH_CDI_SPEC_DIRS=cdi_dir)
    rc, out, err = run(berth, host, "--device", "nvidia.com/gpu=0", pulled[image], "gpucheck",
                       "libcuda.so.1", "libnvidia-ml.so.1", env=env, check=False)
    facts = kv(out)
    assert rc == 0, out + err
    assert facts["cuda_driver_version"] == "12040"
    assert facts["real.libcuda.so.1"].endswith(f"libcuda.so.{VERSION}"), out
    # Every hook it writes is done natively: no warning.
    assert err == "", err
    _, out, _ = run(berth, host, "--device", "nvidia.com/gpu=0", pulled[image], "/probe", "ls",
                    "/dev", env=env)
    assert {"nvidia0", "nvidiactl", "nvidia-uvm"} <= names(out) and "nvidia1" not in names(out)


def test_cdi_spec_from_nvidia_ctk_uses_the_images_newer_compat_libcuda(berth, host, pulled):
    """enable-cuda-compat, done natively: the image's /usr/local/cuda/compat libcuda (a newer
    driver branch than the host's) is the one loaded, as with --gpus all; other hooks that
    cannot run rootless are warned about once for the run, whatever the count of devices."""
    cdi_dir = berth.make_dir("cdi")
    spec = nvidia_ctk_spec(host)
    spec["containerEdits"]["hooks"].append(
        {"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk",
         "args": ["nvidia-ctk", "hook", "chmod", "--mode", "700", "--path", "/dev/dri"]})
    berth.write_file("cdi/nvidia.json", json.dumps(spec))
    env = host.env(BERTH_CDI_SPEC_DIRS=cdi_dir)
    _, out, err = run(berth, host, "--device", "nvidia.com/gpu=0", "--device",
                      f"nvidia.com/gpu={UUID1}", pulled["compat"], "gpucheck", "libcuda.so.1",
                      "libnvidia-ptxjitcompiler.so.1", env=env)
    facts = kv(out)
    assert facts["real.libcuda.so.1"] == f"/usr/local/cuda/compat/libcuda.so.{COMPAT}", out
    assert facts["real.libnvidia-ptxjitcompiler.so.1"] == (
        f"/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.{VERSION}"), out
    assert err == ('berth: warning: CDI: hook "/usr/bin/nvidia-ctk hook chmod --mode 700 '
                   '--path /dev/dri" skipped (hooks need a privileged runtime)\n'), err
    # The plain image has no compat folder: the host's libcuda.
    _, out, _ = run(berth, host, "--device", "nvidia.com/gpu=0", pulled["plain"], "gpucheck",
                    "libcuda.so.1", env=env)
    assert kv(out)["real.libcuda.so.1"] == f"/usr/lib/x86_64-linux-gnu/libcuda.so.{VERSION}", out

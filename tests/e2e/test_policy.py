"""The site policy (docs/site.md), end to end: a real policy file owned by root, the real
binary run as the unprivileged user, two real registries for the mirror.

Policy files must be root's (the file-trust rule), so these tests need to run as root, which
gives the file to root and then runs berth as `berthtest`."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile

import pytest

import imagelib
import servers
from conftest import REPO_ROOT
from test_run import kv, run_image, userns_works  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="policy files must be owned by root: run the tests as root")


def with_policy(path: str, **extra) -> dict:
    return {"BERTH_SITE_CONF": path, **extra}


def user_file(berth, text: str) -> dict:
    """The user's berth.conf; returns the environment that points berth at it."""
    config_dir = berth.make_dir("config")
    berth.write_file("config/berth.conf", text)
    return {"BERTH_CONFIG_DIR": config_dir}


def first_line(err: str) -> str:
    return err.splitlines()[0] if err else ""


# --- the file-trust rule ------------------------------------------------------------


def test_a_policy_owned_by_the_user_is_refused(berth, policy, identity, pushed_busybox):
    path = policy("readonly = true\n", owner=identity.uid)
    for args in (["pull", pushed_busybox], ["info"]):
        rc, out, err = berth(*args, env=with_policy(path), check=False)
        assert rc == 1 and out == ""
        assert first_line(err) == (f"berth: error: read config {path}: refused: owned by uid "
                                   f"{identity.uid}, not root")
        assert err.splitlines()[1].startswith("berth: hint: a policy file and every folder")


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666])
def test_a_policy_others_can_write_is_refused(berth, policy, mode, pushed_busybox):
    path = policy("readonly = true\n", mode=mode)
    rc, _, err = berth("pull", pushed_busybox, env=with_policy(path), check=False)
    assert rc == 1
    assert first_line(err) == f"berth: error: read config {path}: refused: writable by group or others"


def test_a_policy_in_a_folder_the_user_owns_is_refused(berth, identity, pushed_busybox):
    folder = berth.make_dir("etc")  # the test user's
    path = os.path.join(folder, "berth.conf")
    with open(path, "w") as f:
        f.write("readonly = true\n")
    os.chmod(path, 0o644)  # root's file, but the user could rename another over it
    rc, _, err = berth("pull", pushed_busybox, env=with_policy(path), check=False)
    assert rc == 1
    assert first_line(err) == (f"berth: error: read config {path}: refused: folder {folder} is "
                               f"owned by uid {identity.uid}, not root")


def test_a_root_owned_policy_is_read(berth, policy):
    path = policy("readonly = true\n")
    info = berth.json("info", "--json", env=with_policy(path))
    assert info["policy"]["site_file"] == path
    assert info["policy"]["settings"]["readonly"] == {"value": True, "source": path}


def test_a_named_policy_that_is_missing_is_an_error(berth, scratch, pushed_busybox):
    path = os.path.join(scratch, "no-such-policy.conf")
    rc, _, err = berth("pull", pushed_busybox, env=with_policy(path), check=False)
    assert rc == 1
    assert first_line(err) == f"berth: error: read config {path}: no such file (named by BERTH_SITE_CONF)"


def test_a_bad_key_is_named_with_its_file_and_line(berth, policy, pushed_busybox):
    path = policy("insecure_registries = []\nreadonly = \"yes\"\n")
    rc, _, err = berth("pull", pushed_busybox, env=with_policy(path), check=False)
    assert rc == 1
    assert first_line(err) == (f"berth: error: read config {path}: line 2: \"readonly\" is not "
                               "true or false")


# --- registries ---------------------------------------------------------------------


def test_allowed_registries_refuses_others_naming_the_policy(berth, policy, registry, pushed_busybox):
    path = policy('allowed_registries = ["docker.io", "*.example.org"]\n')
    for args in (["pull", pushed_busybox], ["run", "--rm", pushed_busybox, "true"]):
        rc, out, err = berth(*args, env=with_policy(path), check=False)
        assert rc in (1, 125) and out == ""
        assert err.splitlines()[-1].endswith(
            f"registry {registry.host}: registry not allowed by {path} "
            "(allowed_registries: docker.io, *.example.org)"), err
    assert berth.blobs() == set()
    rc, _, err = berth("search", f"{registry.host}/busy", env=with_policy(path), check=False)
    assert rc == 1 and f"not allowed by {path}" in first_line(err)


def test_allowed_registries_lets_the_listed_ones_through(berth, policy, registry, pushed_busybox):
    path = policy('allowed_registries = ["127.0.0.1"]\n')  # a host alone: any port
    _, out, _ = berth("pull", pushed_busybox, env=with_policy(path))
    assert out.endswith(pushed_busybox + "\n")


def test_a_stored_image_from_a_registry_no_longer_allowed_is_refused(berth, policy, registry,
                                                                   pushed_busybox):
    berth("pull", pushed_busybox)  # before the policy
    berth("tag", pushed_busybox, "mine:1")  # a new name does not change where it came from
    path = policy('allowed_registries = ["docker.io"]\n')
    for cmd, name in (("run", pushed_busybox), ("create", pushed_busybox), ("run", "mine:1")):
        rc, out, err = berth(cmd, name, "true", env=with_policy(path), check=False)
        assert rc in (1, 125) and out == ""
        assert first_line(err) == (f"berth: error: {cmd} {name}: registry {registry.host}: registry "
                                   f"not allowed by {path} (allowed_registries: docker.io)")
        assert err.splitlines()[1].startswith(f"berth: hint: the image was pulled from "
                                              f"{registry.host} before the policy said otherwise")
    # An image imported from a tarball came from no registry, whatever its name says.
    tar = berth.path("rootfs.tar")
    with open(tar, "wb") as f:
        f.write(imagelib.tar_bytes([imagelib.File("hello", b"hi\n")]))
    berth("import", tar, f"{registry.host}/local/imported:1")
    berth("create", f"{registry.host}/local/imported:1", env=with_policy(path))


def test_login_to_a_registry_not_allowed_is_refused(berth, policy, registry):
    path = policy('allowed_registries = ["docker.io"]\n')
    rc, out, err = berth("login", "-u", "u", "--password-stdin", registry.host,
                         env=with_policy(path), input="p\n", check=False)
    assert rc == 1 and out == ""
    assert err == (f"berth: error: login {registry.host}: registry {registry.host}: registry not "
                   f"allowed by {path} (allowed_registries: docker.io)\n")


def test_the_user_file_cannot_add_an_allowed_registry(berth, policy, registry, pushed_busybox):
    path = policy('allowed_registries = ["docker.io"]\n')
    env = with_policy(path, **user_file(berth, 'allowed_registries = ["127.0.0.1", "docker.io"]\n'))
    rc, _, err = berth("pull", pushed_busybox, env=env, check=False)
    assert rc == 1
    user = os.path.join(env["BERTH_CONFIG_DIR"], "berth.conf")
    assert err.splitlines()[0] == (f"berth: warning: {user}: allowed_registries: 127.0.0.1: "
                                   f"not allowed by {path} (ignored)")
    assert err.splitlines()[1].endswith(
        f"registry not allowed by {path} + {user} (allowed_registries: docker.io)")


def test_the_user_file_may_narrow_the_allowed_registries(berth, policy, pushed_busybox):
    path = policy('allowed_registries = ["127.0.0.1", "docker.io"]\n')
    env = with_policy(path, **user_file(berth, 'allowed_registries = ["docker.io"]\n'))
    rc, _, err = berth("pull", pushed_busybox, env=env, check=False)
    assert rc == 1 and "registry not allowed by" in err


def test_insecure_registries_from_the_policy(berth, policy, registry, pushed_busybox):
    proxy = servers.ThrottleProxy(registry.port, listen_host="127.0.0.2").start()
    try:
        ref = f"{proxy.host}/e2e/busybox:1.0"
        rc, _, err = berth("pull", ref, check=False)  # HTTPS by default: fails
        assert rc == 1 and "GET https://" in err
        path = policy(f'insecure_registries = ["{proxy.host}"]\n')
        proxy.reset_counters()
        berth("pull", ref, env=with_policy(path))
        assert proxy.first_bytes and all(b.startswith(b"GET ") for b in proxy.first_bytes)
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def mirror(scratch):
    """A second real registry, standing for a site's pull-through mirror."""
    r = servers.RegistryServer(scratch, name="registry-mirror").start()
    yield r
    r.stop()


def test_mirror_serves_what_it_has_and_falls_back_to_the_registry(berth, policy, registry,
                                                                    mirror, busybox_image,
                                                                    pushed_busybox):
    # Only the mirror has e2e/mirrored; only the registry has e2e/busybox.
    only_mirror = imagelib.make_image(
        [imagelib.busybox_layer(), imagelib.Layer([imagelib.File("etc/motd", b"from the mirror\n")])])
    mirror.pusher().push_image("e2e/mirrored", "1.0", only_mirror)
    path = policy(f'[registry_mirrors]\n"{registry.host}" = ["{mirror.host}"]\n')
    env = with_policy(path)
    ref = f"{registry.host}/e2e/mirrored:1.0"
    rc, _, err = berth("pull", ref, check=False)  # without the policy: not there
    assert rc == 1
    _, out, _ = berth("pull", ref, env=env)
    assert out.endswith(ref + "\n")  # recorded under its own name
    _, out, _ = berth("run", "--rm", ref, "cat", "/etc/motd", env=env)
    assert out == "from the mirror\n"
    # Fallback: the mirror lacks e2e/busybox, the registry has it.
    _, out, _ = berth("pull", pushed_busybox, env=env)
    assert out.endswith(pushed_busybox + "\n")


def test_mirror_that_is_down_falls_back(berth, policy, registry, pushed_busybox):
    dead = f"127.0.0.1:{servers.free_port()}"
    path = policy(f'[registry_mirrors]\n"{registry.host}" = ["{dead}"]\n')
    _, out, _ = berth("pull", pushed_busybox, env=with_policy(path))
    assert out.endswith(pushed_busybox + "\n")


def test_mirror_with_a_path_prefix(berth, policy, registry, mirror):
    img = imagelib.make_image(
        [imagelib.busybox_layer(), imagelib.Layer([imagelib.File("etc/motd", b"prefixed\n")])])
    mirror.pusher().push_image("cache/e2e/prefixed", "1.0", img)
    path = policy(f'[registry_mirrors]\n"{registry.host}" = ["http://{mirror.host}/cache"]\n')
    ref = f"{registry.host}/e2e/prefixed:1.0"
    _, out, _ = berth("pull", ref, env=with_policy(path))
    assert out.endswith(ref + "\n")


# --- runs: mounts, env, read-only, engines --------------------------------------------


@pytest.fixture
def img(berth, run_image):
    berth("pull", f"{run_image}:1.0")
    return f"{run_image}:1.0"


def shared_dir(berth, name: str, text: str = "") -> str:
    d = berth.make_dir(name)
    if text:
        berth.write_file(os.path.join(name, "file"), text)
    return d


def test_site_mounts_are_in_every_container(berth, policy, img):
    src = shared_dir(berth, "site-data", "site data\n")
    path = policy(f'site_mounts = ["{src}:/site-data:ro"]\n')
    _, out, _ = berth("run", "--rm", img, "/probe", "cat", "/site-data/file", env=with_policy(path))
    assert out == "site data\n"
    rc, _, _ = berth("run", "--rm", img, "/probe", "write", "/site-data/new", "x",
                     env=with_policy(path), check=False)
    assert rc != 0  # :ro


def test_denied_destinations_refuse_a_volume(berth, policy, img):
    src = shared_dir(berth, "data", "d\n")
    path = policy('deny_mount_destinations = ["/etc", "/opt/site"]\n')
    for dst in ("/etc/x", "/etc", "/opt", "/tmp/../etc/y"):
        rc, out, err = berth("run", "--rm", "-v", f"{src}:{dst}", img, "/probe", "true",
                             env=with_policy(path), check=False)
        assert rc == 125 and out == ""
        assert first_line(err).startswith(f"berth: error: volume {dst}: mounting on ")
        assert first_line(err).endswith(f" is denied by {path} (deny_mount_destinations)")
    _, out, _ = berth("run", "--rm", "-v", f"{src}:/data", img, "/probe", "cat", "/data/file",
                      env=with_policy(path))
    assert out == "d\n"


def test_the_user_file_cannot_remove_a_denied_destination(berth, policy, img):
    src = shared_dir(berth, "data", "d\n")
    path = policy('deny_mount_destinations = ["/etc"]\n')
    env = with_policy(path, **user_file(berth, 'deny_mount_destinations = ["/srv"]\n'))
    rc, _, err = berth("run", "--rm", "-v", f"{src}:/etc/x", img, "/probe", "true", env=env,
                       check=False)
    assert rc == 125 and "is denied by" in err
    rc, _, err = berth("run", "--rm", "-v", f"{src}:/srv/x", img, "/probe", "true", env=env,
                       check=False)
    assert rc == 125 and "is denied by" in err  # the user's own addition holds too


def test_allowed_sources(berth, policy, img):
    allowed = shared_dir(berth, "allowed", "ok\n")
    other = shared_dir(berth, "other", "no\n")
    os.symlink(other, os.path.join(allowed, "escape"))
    path = policy(f'allow_mount_sources = ["{allowed}"]\n')
    _, out, _ = berth("run", "--rm", "-v", f"{allowed}:/a", img, "/probe", "cat", "/a/file",
                      env=with_policy(path))
    assert out == "ok\n"
    for src in (other, os.path.join(allowed, "escape")):
        rc, _, err = berth("run", "--rm", "-v", f"{src}:/a", img, "/probe", "true",
                           env=with_policy(path), check=False)
        assert rc == 125
        assert first_line(err).endswith(
            f"not under a folder allowed by {path} (allow_mount_sources: {allowed})"), err


def test_mount_home_default(berth, policy, img):
    berth.write_file("home/marker", "home\n")
    path = policy("mount_home = true\n")
    _, out, _ = berth("run", "--rm", img, "/probe", "cat", f"{berth.home}/marker",
                      env=with_policy(path))
    assert out == "home\n"
    rc, _, _ = berth("run", "--rm", "--no-bind-home", img, "/probe", "cat",
                     f"{berth.home}/marker", env=with_policy(path), check=False)
    assert rc != 0
    locked = policy("mount_home = true\nlock = [\"mount_home\"]\n", name="locked.conf")
    rc, _, err = berth("run", "--rm", "--no-bind-home", img, "/probe", "true",
                       env=with_policy(locked), check=False)
    assert rc == 125
    assert first_line(err) == f"berth: error: run --no-bind-home: the site policy {locked} locks mount_home"


def test_env_edits_apply_to_every_container(berth, policy, img):
    path = policy('[env]\nset = { SITE = "berth-site", OVERRIDE = "site" }\n'
                  'prepend = { PATH = "/site/bin" }\nappend = { FROM_IMAGE = "more" }\n'
                  'unset = ["DROPPED"]\n')
    env_file = berth.write_file("vars.env", "DROPPED=from-file-is-later\n")
    _, out, _ = berth("run", "--rm", "--hostenv", img, "/probe", "env",
                      env=with_policy(path, DROPPED="host"))
    env = dict(line[len("env="):].split("=", 1) for line in out.splitlines()
               if line.startswith("env="))
    assert env["SITE"] == "berth-site"
    assert env["OVERRIDE"] == "site"
    assert env["PATH"].startswith("/site/bin:")
    assert env["FROM_IMAGE"] == "image:more"
    assert "DROPPED" not in env
    # -e and --env-file still win for the user's own run.
    _, out, _ = berth("run", "--rm", "--env-file", env_file, "-e", "OVERRIDE=cli", img,
                      "/probe", "env", env=with_policy(path))
    env = dict(line[len("env="):].split("=", 1) for line in out.splitlines()
               if line.startswith("env="))
    assert env["OVERRIDE"] == "cli" and env["DROPPED"] == "from-file-is-later"


def test_readonly_default_and_lock(berth, policy, img):
    path = policy("readonly = true\n")
    rc, _, _ = berth("run", "--rm", img, "/probe", "write", "/newfile", "x",
                     env=with_policy(path), check=False)
    assert rc != 0
    berth("run", "--rm", "--read-only=false", img, "/probe", "write", "/newfile", "x",
          env=with_policy(path))
    locked = policy("readonly = true\nlock = [\"readonly\"]\n", name="locked.conf")
    rc, _, err = berth("run", "--rm", "--read-only=false", img, "/probe", "true",
                       env=with_policy(locked), check=False)
    assert rc == 125
    assert first_line(err) == f"berth: error: run --read-only=false: the site policy {locked} locks readonly"
    # The user's file cannot unlock it either: ignored, said, and the root stays read-only.
    env = with_policy(locked, **user_file(berth, "readonly = false\n"))
    rc, _, err = berth("run", "--rm", img, "/probe", "write", "/newfile2", "x", env=env,
                       check=False)
    assert rc != 0
    assert f"readonly: locked by {locked} (ignored)" in err.splitlines()[0]


def test_allowed_engines(berth, policy, img):
    path = policy('allowed_engines = ["proot"]\n')
    rc, _, err = berth("run", "--rm", img, "/probe", "true", env=with_policy(path), check=False)
    assert rc == 125
    assert first_line(err) == (f"berth: error: engine userns: not allowed by {path} "
                               "(allowed_engines: proot)")
    rc, _, err = berth("run", "--rm", "--engine", "oci", img, "/probe", "true",
                       env=with_policy(path), check=False)
    assert rc == 125 and "engine oci: not allowed by" in first_line(err)


def test_locked_driver_root_refuses_the_environment(berth, policy, scratch):
    path = policy(f'driver_root = "{scratch}"\nlock = ["driver_root"]\n')
    rc, _, err = berth("gpu", "info", env=with_policy(path, BERTH_DRIVER_ROOT="/elsewhere"),
                       check=False)
    assert rc == 1
    assert first_line(err) == (f"berth: error: run BERTH_DRIVER_ROOT=/elsewhere: the site policy "
                               f"{path} locks driver_root")


# --- berth info -----------------------------------------------------------------------


def test_info_shows_the_policy_and_where_each_value_came_from(berth, policy):
    path = policy('allowed_registries = ["docker.io"]\ndeny_mount_destinations = ["/etc"]\n'
                  'central_store = "/shared/images"\nsquash_options = "-comp lz4"\n'
                  'runtime_dir = "/dev/shm/berth"\n')
    env = with_policy(path, **user_file(berth, 'deny_mount_destinations = ["/srv"]\n'
                                               'readonly = true\n'))
    user = os.path.join(env["BERTH_CONFIG_DIR"], "berth.conf")
    p = berth.json("info", "--json", env=env)["policy"]
    s = p["settings"]
    assert (p["site_file"], p["user_file"]) == (path, user)
    assert s["allowed_registries"] == {"value": ["docker.io"], "source": path}
    assert s["deny_mount_destinations"] == {"value": ["/etc", "/srv"], "source": f"{path} + {user}"}
    assert s["readonly"] == {"value": True, "source": user}
    assert s["mount_home"] == {"value": False, "source": "default"}
    assert s["central_store"] == {"value": "/shared/images", "source": path}
    assert s["squash_options"]["value"] == "-comp lz4"
    assert s["runtime_dir"]["value"] == "/dev/shm/berth"
    _, out, _ = berth("info", env=env)
    assert f"  Site file:" in out and path in out
    line = next(l for l in out.splitlines() if l.strip().startswith("deny_mount_destinations"))
    assert line.split()[1:] == ["/etc,", "/srv", path, "+", user]


def test_info_without_a_policy(berth):
    p = berth.json("info", "--json")["policy"]
    assert p["site_file"] is None
    assert p["settings"]["allowed_registries"] == {"value": None, "source": "default"}


def documented_keys() -> set[str]:
    """The keys docs/site.md's "Keys" section documents: the first cell of each table row
    (`a`, `b` for two; `[mpi.TYPE]` for mpi) and the [TABLE] headers of its examples ([env])."""
    with open(os.path.join(REPO_ROOT, "docs", "site.md")) as f:
        text = f.read()
    section = text[text.index("\n## Keys\n"):]
    section = section[:section.index("\n## ", 1)]
    keys = set(re.findall(r"^\[([a-z_]+)\]$", section, re.M))
    for line in section.splitlines():
        if line.startswith("| "):
            keys.update(re.findall(r"`\[?([a-z_]+)", line.split("|")[1]))
    return keys


def test_info_lists_every_key_the_docs_document_and_only_those(berth, policy):
    # A key is one row of the policy's table: that row alone lists it in berth info (with its
    # source), lets a file set it and, where it is lockable, lets `lock` name it.
    documented = documented_keys()
    p = berth.json("info", "--json")["policy"]
    assert set(p["settings"]) == documented
    assert {v["source"] for v in p["settings"].values()} == {"default"}
    lockable = ["readonly", "default_engine", "driver_root", "dev_root", "gpus", "ib",
                "mount_home", "squash_options", "store_format", "root_emulation"]
    path = policy(f"lock = {json.dumps(lockable)}\n")
    s = berth.json("info", "--json", env=with_policy(path))["policy"]["settings"]
    assert s["lock"] == {"value": lockable, "source": path}
    rc, _, err = berth("info", env=with_policy(policy('lock = ["env"]\n', name="env.conf")),
                       check=False)
    assert rc == 1
    assert first_line(err).endswith(f'"lock" names "env", which cannot be locked '
                                    f'({", ".join(lockable)})')


# --- device defaults ------------------------------------------------------------------

from test_gpu import host, images, names, pulled  # noqa: E402,F401 (fixtures: a fake GPU host)


def test_device_defaults_come_from_the_policy(berth, policy, host, pulled):
    path = policy(f'driver_root = "{host.root}"\ndev_root = "{host.dev}"\ngpus = "device=1"\n'
                  'lock = ["gpus"]\n')
    env = with_policy(path, BERTH_CUDA_PROBE="always")
    # No --gpus and no BERTH_DRIVER_ROOT: the site's roots and its GPU default.
    _, out, _ = berth("run", "--rm", pulled["plain"], "/probe", "ls", "/dev", env=env)
    assert "nvidia1" in names(out) and "nvidia0" not in names(out)
    rc, _, err = berth("run", "--rm", "--gpus", "all", pulled["plain"], "/probe", "true",
                       env=env, check=False)
    assert rc == 125
    assert first_line(err) == f"berth: error: run --gpus all: the site policy {path} locks gpus"
    # Repeating the site's choice is no change.
    berth("run", "--rm", "--gpus", "device=1", pulled["plain"], "/probe", "true", env=env)


# --- runtime_dir ----------------------------------------------------------------------


def test_runtime_dir_holds_the_oci_engines_state(berth, policy, img, scratch, identity):
    if shutil.which("runc") is None:
        pytest.skip("runc is not installed")
    runtime = tempfile.mkdtemp(prefix="runtime-", dir=scratch)
    os.chmod(runtime, 0o1777)  # a shared tmpfs-like folder, as /dev/shm
    path = policy(f'runtime_dir = "{runtime}"\n')
    rc, _, err = berth("run", "--rm", "--engine", "oci", "-u", "0", img, "/probe", "true",
                       env=with_policy(path), check=False)
    if rc != 0 and "runc" in err and "runtime state" not in err:
        pytest.skip(f"runc cannot run rootless here: {first_line(err)}")
    assert rc == 0, err
    state = os.path.join(runtime, f"berth-{identity.uid}", "runc")
    assert os.path.isdir(state) and os.stat(state).st_uid == identity.uid
    # Another user (root here) took the user's folder name first: the run goes on in the
    # private folder, and says so (before: /tmp/berth-runc-UID made by another user blocked it).
    taken = tempfile.mkdtemp(prefix="runtime-", dir=scratch)
    os.chmod(taken, 0o1777)
    os.mkdir(os.path.join(taken, f"berth-{identity.uid}"), 0o755)
    path = policy(f'runtime_dir = "{taken}"\n', name="taken.conf")
    rc, _, err = berth("run", "--rm", "--engine", "oci", "-u", "0", img, "/probe", "true",
                       env=with_policy(path), check=False)
    assert rc == 0, err
    assert f"berth-{identity.uid} is a folder of user root (uid 0), not yours: using " in err, err


# --- squash_options ---------------------------------------------------------------------


def test_squash_takes_the_policys_options_under_the_command_line(berth, policy, pushed_busybox):
    path = policy('squash_options = "-comp zstd -Xcompression-level 3"\n')
    env = with_policy(path)
    berth("pull", pushed_busybox, env=env)
    out = berth.json("squash", pushed_busybox, "-o", berth.path("p.sqsh"), "--json", env=env)
    assert out["compressor"] == "zstd"
    assert berth.json("inspect", berth.path("p.sqsh"), "--json", env=env)["compressor"] == "zstd"
    # The command line wins when the site does not lock the key.
    out = berth.json("squash", pushed_busybox, "-o", berth.path("c.sqsh"), "--compressor", "lz4",
                     "--json", env=env)
    assert out["compressor"] == "lz4"


def test_locked_squash_options_refuse_another_compressor(berth, policy, pushed_busybox):
    path = policy('squash_options = "-comp gzip"\nlock = ["squash_options"]\n')
    env = with_policy(path)
    berth("pull", pushed_busybox, env=env)
    rc, _, err = berth("squash", pushed_busybox, "-o", berth.path("x.sqsh"), "--compressor", "zstd",
                       env=env, check=False)
    assert rc == 1
    assert err == (f"berth: error: squash --compressor zstd: the site policy {path} locks "
                   f"squash_options\n")
    assert not os.path.exists(berth.path("x.sqsh"))
    out = berth.json("squash", pushed_busybox, "-o", berth.path("g.sqsh"), "--compressor", "gzip",
                     "--json", env=env)
    assert out["compressor"] == "gzip"


def test_bad_squash_options_fail_every_command_naming_the_file(berth, policy):
    path = policy('\nsquash_options = "-comp lzo -noD"\n')
    rc, out, err = berth("info", env=with_policy(path), check=False)
    assert rc == 1 and out == ""
    assert first_line(err) == (f"berth: error: read config {path}: line 2: \"squash_options\" holds "
                               f"\"-comp lzo -noD\": -comp lzo: not a compressor Berth builds with "
                               f"(lz4, zstd or gzip)")

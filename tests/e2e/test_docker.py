"""Docker habits, end to end as an unprivileged user: `run -d` under a monitor, `ps` with
Docker's STATUS, `logs`, `stop`, `start`, `wait`, `kill`, `exec`, `inspect --format`, and the
flags Berth cannot honour rootless."""

from __future__ import annotations

import calendar
import json
import os
import re
import shutil
import signal
import time

import pytest

import imagelib
from test_run import img, on_terminal, run_image, workload_pids  # noqa: F401  (fixtures, helpers)

WAIT = 60  # seconds: generous readiness limits, never asserted as durations


def wait_for(predicate, what: str, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def logs(berth, name: str) -> str:
    return berth("logs", name)[1]


def detach(berth, *args) -> str:
    _, out, err = berth("run", "-d", *args)
    cid = out.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", cid), (out, err)
    return cid


def ps_row(berth, name: str, *flags) -> str:
    _, out, _ = berth("ps", *flags)
    rows = [line for line in out.splitlines()[1:] if line.rstrip().endswith(name)]
    return rows[0] if rows else ""


# --- run -d, logs, wait, ps ---------------------------------------------------------------


def test_detached_run_records_output_and_status(berth, img):
    cid = detach(berth, "--name", "bg", img, "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
    _, out, _ = berth("wait", "bg")
    assert out == "3\n"
    # logs work after the workload exited, and keep the streams apart as docker logs does.
    _, out, err = berth("logs", "bg")
    assert (out, err) == ("out\n", "err\n")
    assert ps_row(berth, "bg") == ""  # ps: running containers only
    row = ps_row(berth, "bg", "-a")
    assert cid[:12] in row and re.search(r"Exited \(3\) .* ago", row), row
    info = {c["name"]: c for c in berth.json("ps", "--json")}["bg"]
    assert info["status"] == "exited" and info["exit_code"] == 3 and info["detached"] is True


def test_ps_shows_up_while_running_and_stop_ends_it(berth, img):
    detach(berth, "--name", "up", img, "/probe", "signals", "600")
    wait_for(lambda: "ready" in logs(berth, "up"), "the workload to start")
    row = ps_row(berth, "up")
    assert re.search(r"\bUp (Less than a second|\d+ seconds?|About a minute)\b", row), row
    _, out, _ = berth("ps", "--format", "{{.Names}} {{.State}} {{.Status}}")
    assert out.startswith("up running Up "), out
    _, out, _ = berth("ps", "--format", "json")
    assert json.loads(out.splitlines()[0])["Names"] == "up"
    _, out, _ = berth("stop", "-t", "30", "up")
    assert out == "up\n"
    assert berth("wait", "up")[1] == "143\n"
    assert "signal=15" in logs(berth, "up")
    assert re.search(r"Exited \(143\)", ps_row(berth, "up", "-a"))
    _, out, _ = berth("ps", "-q")
    assert out == ""


def test_ps_filters_and_the_last_created(berth, img):
    # Creation times are to the second: a second apart, so that "last" is well defined.
    ids = {}
    for name in ("alpha-1", "beta-1", "alpha-2"):
        ids[name] = berth("create", "--name", name, img, "/bin/true")[1].strip()
        time.sleep(1.1)
    detach(berth, "--name", "runner", img, "/bin/sh", "-c", "echo ready; sleep 600")
    wait_for(lambda: "ready" in logs(berth, "runner"), "the workload to start")
    try:
        def names(*flags):
            _, out, _ = berth("ps", "--format", "{{.Names}}", *flags)
            return out.split()

        assert names() == ["runner"]
        assert names("-a") == ["runner", "alpha-2", "beta-1", "alpha-1"]  # newest first
        assert names("-n", "2") == ["runner", "alpha-2"]
        assert names("-l") == ["runner"]
        assert names("-a", "--filter", "name=alpha") == ["alpha-2", "alpha-1"]
        assert names("-f", "status=created") == ["alpha-2", "beta-1", "alpha-1"]  # no -a needed
        assert names("-a", "-f", "status=running") == ["runner"]
        # One key twice: either; two keys: both.
        assert names("-a", "-f", "name=beta", "-f", "name=runner") == ["runner", "beta-1"]
        assert names("-a", "-f", "name=alpha", "-f", "status=running") == []
        assert names("-a", "-f", f"id={ids['beta-1'][:6]}") == ["beta-1"]
        _, out, _ = berth("ps", "-q", "-a", "-f", "name=alpha-1")
        assert out == ids["alpha-1"][:12] + "\n"
        assert [c["name"] for c in berth.json("ps", "--json", "-f", "name=beta")] == ["beta-1"]
        for bad, why in (("colour=red", "unknown filter 'colour': Berth filters on name, id, "
                                        "status and label"),
                         ("status=paused", "status 'paused': a status is created, running or "
                                           "exited (a rootless container is never paused, "
                                           "restarting or dead)"),
                         ("name", "expected KEY=VALUE (name, id, status or label), not 'name'")):
            rc, _, err = berth("ps", "-f", bad, check=False)
            assert (rc, err) == (125, f"berth: error: --filter: {why}\n"
                                      "berth: hint: see 'berth ps --help'\n")
    finally:
        berth("rm", "-f", "runner")


def test_docker_management_commands_are_aliases(berth, img):
    """docker image ls / container ls / container rm ... as Berth's own commands."""
    assert berth("image", "ls")[1] == berth("images")[1]
    assert berth("image", "ls", "-q")[1] == berth("images", "-q")[1]
    berth("container", "create", "--name", "made", img, "/bin/true")
    assert berth("container", "ls", "-a")[1] == berth("ps", "-a")[1]
    assert "made" in berth("container", "list", "-a", "--format", "{{.Names}}")[1]
    assert berth.json("container", "inspect", "made") == berth.json("inspect", "made")
    _, out, _ = berth("container", "rm", "made")
    assert out == "made\n"
    assert berth("ps", "-a", "-q")[1] == ""
    assert berth.json("image", "inspect", img) == berth.json("inspect", "--type=image", img)
    rc, _, err = berth("container", "prune", check=False)
    assert (rc, err) == (125, "berth: error: container prune: not a container command Berth "
                              "has\nberth: hint: see 'berth --help': Docker's container "
                              "commands are Berth's own words\n")


def test_ps_and_inspect_show_the_command_while_it_runs(berth, img):
    detach(berth, "--name", "busy", img, "/bin/sh", "-c", 'echo "ready"; sleep 600')
    wait_for(lambda: "ready" in logs(berth, "busy"), "the workload to start")
    try:
        _, out, _ = berth("ps", "--format", "{{.Command}}")
        # Docker's 20 columns (19 characters and an ellipsis), quoted by Go's strconv.Quote.
        assert out == '"/bin/sh -c echo \\"re\u2026"\n'
        header, row = berth("ps")[1].splitlines()
        assert '"/bin/sh -c echo \\"re\u2026"   ' in row
        assert row.index("busy") == header.index("NAMES")  # "\u2026" is one column, not three
        _, out, _ = berth("inspect", "-f", "{{.Path}} {{json .Args}}", "busy")
        assert out == '/bin/sh ["-c","echo \\"ready\\"; sleep 600"]\n'
    finally:
        berth("rm", "-f", "busy")


def test_inspect_templates_see_docker_zero_values_for_what_the_image_omits(berth):
    """An image config without Labels, User, Entrypoint, WorkingDir (busybox's as
    `berth import` makes it): Docker prints their zero values, so do templates here."""
    tar = os.path.join(berth.make_dir("tar"), "root.tar")
    with open(tar, "wb") as f:
        f.write(imagelib.tar_bytes(imagelib.busybox_layer().entries))
    berth("import", tar, "local/bare:1")
    fields = "{{.Config.Labels}}|{{.Config.User}}|{{.Config.Entrypoint}}|{{.Config.WorkingDir}}"
    _, out, _ = berth("inspect", "-f", fields, "local/bare:1")
    assert out == "map[]||[]|\n"
    # docs/docker.md's example, on an image without that label: Docker's empty line.
    _, out, _ = berth("inspect", "-f", '{{index .Config.Labels "org.opencontainers.image.version"}}',
                      "local/bare:1")
    assert out == "\n"
    berth("create", "--name", "bare", "local/bare:1", "/bin/true")
    _, out, _ = berth("inspect", "-f", fields + "|{{.Config.Cmd}}", "bare")
    assert out == "map[]||[]||[/bin/true]\n"


def test_labels_of_a_new_container_show_in_inspect_and_filter_ps(berth):
    """--label KEY[=VALUE] (-l), as docker create/run: over the image's labels in
    .Config.Labels, and `ps --filter label=KEY[=VALUE]` (each must match); refused for what
    is not a new container."""
    tar = os.path.join(berth.make_dir("tar"), "root.tar")
    with open(tar, "wb") as f:
        f.write(imagelib.tar_bytes(imagelib.busybox_layer().entries))
    berth("import", "-c", "LABEL team=image kind=base", tar, "local/labelled:1")
    berth("create", "--name", "tagged", "--label", "team=hpc", "-l", "gpu", "local/labelled:1",
          "/bin/true")
    berth("run", "--name", "ran", "-l", "team=ml", "local/labelled:1", "/bin/true")
    _, out, _ = berth("inspect", "-f", "{{.Config.Labels}}", "tagged")
    assert out == "map[gpu: kind:base team:hpc]\n", out
    assert berth("inspect", "-f", "{{index .Config.Labels \"team\"}}", "ran")[1] == "ml\n"

    def names(*filters):
        args = [a for f in filters for a in ("--filter", f)]
        return sorted(berth("ps", "-a", *args, "--format", "{{.Names}}")[1].split())

    assert names("label=team=hpc") == ["tagged"]
    assert names("label=kind") == ["ran", "tagged"]
    assert names("label=kind", "label=gpu") == ["tagged"]  # every label filter must match
    assert names("label=team=nobody") == []
    for target, why in (("ran", "an existing one"), (berth.make_dir("tree"), "a directory")):
        rc, _, err = berth("run", "-l", "x=y", target, "/bin/true", check=False)
        assert (rc, err.splitlines()[0]) == (
            125, f"berth: error: run --label: labels belong to a new container, not to {why}"), err
    rc, _, err = berth("create", "-l", "=v", "local/labelled:1", check=False)
    assert rc == 125 and "a label is KEY[=VALUE], with a KEY" in err, err


def test_stop_kills_a_workload_that_ignores_sigterm(berth, img):
    detach(berth, "--name", "stubborn", img, "/bin/sh", "-c",
           "trap '' TERM; echo ready; while true; do sleep 1; done")
    wait_for(lambda: "ready" in logs(berth, "stubborn"), "the workload to start")
    berth("stop", "-t", "1", "stubborn")
    assert berth("wait", "stubborn")[1] == "137\n"
    assert re.search(r"Exited \(137\)", ps_row(berth, "stubborn", "-a"))


@pytest.mark.parametrize("how", ["stop", "rm -f", "exit"])
def test_a_stopped_container_leaves_no_background_process(berth, img, how):
    """Without a PID namespace nothing ends the workload's children with it: the monitor ends
    what the workload left in the container's session, as a Docker container's end does."""
    seconds = {"stop": 603, "rm -f": 604, "exit": 605}[how]
    name = "leftover-" + how.replace(" ", "")
    script = f"/probe signals {seconds} & echo ready; "
    script += "sleep 1; exit 0" if how == "exit" else "while true; do sleep 1; done"
    detach(berth, "--name", name, img, "/bin/sh", "-c", script)
    wait_for(lambda: "ready" in logs(berth, name) and workload_pids(seconds), "the workload")
    if how == "stop":
        berth("stop", "-t", "5", name)
    elif how == "rm -f":
        berth("rm", "-f", name)
    else:
        assert berth("wait", name)[1] == "0\n"
    wait_for(lambda: not workload_pids(seconds), "the background process to end")
    if how != "rm -f":
        berth("rm", name)


def test_ps_stays_true_when_the_monitor_is_killed(berth, img):
    cid = detach(berth, "--name", "orphan", img, "/probe", "signals", "601")
    wait_for(lambda: "ready" in logs(berth, "orphan"), "the workload to start")
    with open(os.path.join(berth.berth_home, "containers", cid, "run.lock")) as f:
        monitor = int(f.read())
    os.kill(monitor, signal.SIGKILL)
    wait_for(lambda: ps_row(berth, "orphan") == "", "ps to stop listing it")
    wait_for(lambda: not workload_pids(601), "the workload to die with its monitor")
    assert re.search(r"Exited \(137\)", ps_row(berth, "orphan", "-a"))
    info = {c["name"]: c for c in berth.json("ps", "--json")}["orphan"]
    assert info["status"] == "exited" and info["exit_code"] == 137
    assert berth("wait", "orphan")[1] == "137\n"
    berth("rm", "orphan")  # nothing runs in it any more


def test_kill_sends_a_signal_to_the_workload(berth, img):
    detach(berth, "--name", "target", img, "/probe", "signals", "602")
    wait_for(lambda: "ready" in logs(berth, "target"), "the workload to start")
    berth("kill", "-s", "USR1", "target")
    wait_for(lambda: "signal=10" in logs(berth, "target"), "the signal to arrive")
    assert ps_row(berth, "target") != ""  # USR1 does not end it
    berth("kill", "target")  # KILL by default
    assert berth("wait", "target")[1] == "137\n"
    rc, _, err = berth("kill", "target", check=False)
    assert rc == 1 and err.splitlines()[0] == (
        "berth: error: kill target: container " + ps_id(berth, "target") + " is not running")
    rc, _, err = berth("kill", "-s", "NOPE", "target", check=False)
    assert rc == 1 and err.splitlines()[0] == "berth: error: kill NOPE: unknown signal"


def ps_id(berth, name: str) -> str:
    return {c["name"]: c for c in berth.json("ps", "--json")}[name]["id"][:12]


def test_start_runs_the_recorded_command_again_detached(berth, img):
    detach(berth, "--name", "again", img, "/bin/sh", "-c", "echo run; exit 4")
    assert berth("wait", "again")[1] == "4\n"
    _, out, _ = berth("start", "again")
    assert out == "again\n"
    assert berth("wait", "again")[1] == "4\n"
    assert logs(berth, "again").count("run\n") == 2


def test_restart_stops_a_running_container_and_starts_it_again(berth, img):
    """docker restart: SIGTERM (SIGKILL after -t), then the last command again, detached; a
    stopped container is started; both by the `container restart` alias too."""
    detach(berth, "--name", "again2", img, "/bin/sh", "-c",
           "echo run; trap 'echo term; exit 3' TERM; while true; do sleep 0.1; done")
    wait_for(lambda: "run" in logs(berth, "again2"), "the workload to start")
    assert berth("restart", "-t", "5", "again2")[1] == "again2\n"
    wait_for(lambda: logs(berth, "again2").count("run\n") == 2, "the second run")
    assert "term\n" in logs(berth, "again2")
    assert "Up" in ps_row(berth, "again2")
    berth("stop", "-t", "5", "again2")
    assert berth("container", "restart", "again2")[1] == "again2\n"
    wait_for(lambda: logs(berth, "again2").count("run\n") == 3, "the third run")
    berth("rm", "-f", "again2")
    rc, _, err = berth("restart", "no-such", check=False)
    assert rc != 0 and len(err.splitlines()) == 1 and "no-such" in err, err


def test_top_lists_the_processes_of_a_running_container(berth, img):
    """docker top: ps -ef's columns for the workload and everything below it (host PIDs), or
    --json; a stopped container and ps options are refused in one line."""
    detach(berth, "--name", "busy-top", img, "/bin/sh", "-c",
           "sleep 300 & echo ready; wait")
    try:
        wait_for(lambda: "ready" in logs(berth, "busy-top"), "the workload to start")
        _, out, _ = berth("top", "busy-top")
        lines = out.splitlines()
        assert lines[0].split() == ["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"]
        cmds = [line.split(None, 7)[7] for line in lines[1:]]
        assert any(c.startswith("/bin/sh -c sleep 300") for c in cmds), out
        assert "sleep 300" in cmds, out
        rows = json.loads(berth("container", "top", "--json", "busy-top")[1])
        by_cmd = {r["command"]: r for r in rows}
        shell = next(r for c, r in by_cmd.items() if c.startswith("/bin/sh"))
        assert by_cmd["sleep 300"]["ppid"] == shell["pid"], rows
        assert by_cmd["sleep 300"]["uid"] == berth.identity.uid, rows
        rc, _, err = berth("top", "busy-top", "aux", check=False)
        assert rc == 1 and err.splitlines()[0] == (
            "berth: error: top aux: Berth prints ps -ef's columns and takes no ps options"), err
    finally:
        berth("rm", "-f", "busy-top")
    berth("create", "--name", "idle-top", img)
    rc, _, err = berth("top", "idle-top", check=False)
    assert (rc, err) == (1, "berth: error: top idle-top: the container is not running\n"), err


def test_cp_copies_both_ways_inside_the_root(berth, img):
    """docker cp, both ways, as the user: a file, a folder into a folder (merged), SRC/. for
    contents, onto a new name; the container's paths resolve inside its root, so an image
    symlink to / cannot lead a copy to the host's files."""
    berth("create", "--name", "cpbox", img, "/bin/true")
    work = berth.make_dir("cp")
    host_file = berth.identity.write_file(os.path.join(work, "note.txt"), "from the host\n")
    tree = os.path.join(work, "tree")
    berth.identity.write_file(os.path.join(tree, "a", "one"), "1\n")
    berth.identity.write_file(os.path.join(tree, "two"), "2\n")
    os.symlink("two", os.path.join(tree, "link"))
    rc, _, err = berth("cp", host_file, "cpbox:/no-such/", check=False)
    assert rc == 1 and "no such folder (a path ending in / names one)" in err, err
    berth("cp", tree, "cpbox:/srv-copy")
    berth("cp", host_file, "cpbox:/srv-copy/")
    berth("cp", tree + "/.", "cpbox:/data")
    berth("cp", tree + "/.", "cpbox:/srv-copy/a")  # merged into the folder there
    run = lambda cmd: berth("run", "cpbox", "/bin/sh", "-c", cmd)[1]  # noqa: E731
    assert run("cat /srv-copy/note.txt /srv-copy/a/one /data/two /srv-copy/a/two; "
               "readlink /srv-copy/link") == "from the host\n1\n2\n2\ntwo\n"
    # Out again: into a folder under its own name, and onto a new name.
    out = berth.make_dir("out")
    berth("cp", "cpbox:/srv-copy", out)
    berth("container", "cp", "cpbox:srv-copy/note.txt", os.path.join(out, "renamed.txt"))
    assert open(os.path.join(out, "srv-copy", "a", "one")).read() == "1\n"
    assert os.readlink(os.path.join(out, "srv-copy", "link")) == "two"
    assert open(os.path.join(out, "renamed.txt")).read() == "from the host\n"
    assert os.stat(os.path.join(out, "renamed.txt")).st_uid == berth.identity.uid
    # A symlink of the image pointing at / stays inside the root.
    run("ln -s / /escape && mkdir -p /etc/berth-cp && echo inside > /etc/berth-cp/f")
    berth("cp", "cpbox:/escape/etc/berth-cp/f", os.path.join(out, "f"))
    assert open(os.path.join(out, "f")).read() == "inside\n"
    rc, _, err = berth("cp", host_file, "cpbox:/escape/nonexistent-dir/x", check=False)
    assert rc == 1 and len(err.splitlines()) == 1 and "No such file" in err, err
    assert not os.path.exists("/nonexistent-dir")
    for args, why in (((host_file, out), "one side must be CONTAINER:PATH and the other a host "
                       "path"),
                      (("cpbox:/srv-copy", host_file), "a folder cannot replace the file")):
        rc, _, err = berth("cp", *args, check=False)
        assert rc == 1 and why in err.splitlines()[0], err
    berth("rm", "cpbox")


def test_platform_picks_the_image_of_that_platform(berth, registry):
    """run/create --platform: the index's image for it (pulled again when the stored one is
    another), Docker's warning when it is not the host's, and refusals in one line for a
    platform the registry lacks, --pull never with another stored, an existing container."""
    if os.uname().machine != "x86_64":
        pytest.skip("the images are amd64's busybox labelled for two platforms")
    def image(arch: str):
        return imagelib.make_image(
            [imagelib.busybox_layer(), imagelib.Layer([imagelib.File("arch", f"{arch}\n".encode())])],
            platform=f"linux/{arch}", label=arch)

    pusher = registry.pusher()
    pusher.push_index("platforms/multi", "v1", [image("arm64"), image("amd64")])
    ref = f"{registry.host}/platforms/multi:v1"
    assert berth("run", "--rm", ref, "/bin/cat", "/arch")[1] == "amd64\n"
    rc, _, err = berth("run", "--rm", "--pull", "never", "--platform", "linux/arm64", ref,
                       "/bin/true", check=False)
    assert rc == 125 and err.splitlines()[0] == (
        f"berth: error: find image {ref}: the stored image is for linux/amd64, not "
        "linux/arm64, and --pull never"), err
    # The amd64 binaries of this "arm64" image run here: what is checked is the choice.
    rc, out, err = berth("run", "--rm", "--platform", "linux/arm64", ref, "/bin/cat", "/arch")
    assert (rc, out) == (0, "arm64\n"), err
    assert ("WARNING: The requested image's platform (linux/arm64) does not match the detected "
            "host platform (linux/amd64)\n") in err, err
    assert berth.json("inspect", ref)["platform"]["architecture"] == "arm64"
    rc, _, err = berth("create", "--platform", "linux/s390x", ref, check=False)
    assert rc != 0 and len(err.splitlines()) == 1 and "linux/s390x" in err, err
    berth("create", "--name", "plat", "--platform", "linux/amd64", ref, "/bin/cat", "/arch")
    assert berth("run", "plat")[1] == "amd64\n"
    rc, _, err = berth("run", "--platform", "linux/amd64", "plat", check=False)
    assert rc == 125 and "not an existing one" in err, err


def test_start_of_a_created_container_runs_its_image_command(berth, img):
    berth("create", "--name", "fresh", img)
    rc, _, err = berth("wait", "fresh", check=False)
    assert rc == 1 and "has not run yet" in err
    berth("start", "fresh")
    assert berth("wait", "fresh")[1] == "0\n"
    assert "uid=0" in logs(berth, "fresh")  # the image's Cmd: /probe id


def test_start_repeats_the_runs_options(berth, img):
    """docker start keeps what run was given: env (KEY alone: its value then), --env-file (read
    then), volumes (relative ones as they resolved then), -w."""
    w = berth.workdir
    berth.identity.write_file(os.path.join(w, "data", "seen"), "")
    berth.identity.write_file(os.path.join(w, "vars"), "FROM_FILE=yes\n")
    script = 'echo "$A $B_ON_HOST $FROM_FILE $(pwd)" >> /data/seen'
    berth("run", "-d", "--name", "opts", "-e", "A=a", "-e", "B_ON_HOST", "--env-file", "vars",
          "-v", "./data:/data", "-w", "/etc", img, "/bin/sh", "-c", script,
          env={"B_ON_HOST": "host-b"})
    assert berth("wait", "opts")[1] == "0\n"
    berth.identity.write_file(os.path.join(w, "vars"), "FROM_FILE=changed\n")
    berth("start", "opts")  # without B_ON_HOST now
    assert berth("wait", "opts")[1] == "0\n"
    with open(os.path.join(w, "data", "seen")) as f:
        assert f.read() == "a host-b yes /etc\n" * 2


def test_create_takes_run_options_for_start(berth, img):
    out = os.path.join(berth.workdir, "out")
    berth.identity.write_file(os.path.join(out, "said"), "")
    berth("create", "--name", "made", "-e", "GREETING=hi", "-v", f"{out}:/out", "-w", "/out",
          img, "/bin/sh", "-c", 'echo "$GREETING from $(pwd)" > said')
    berth("start", "made")
    assert berth("wait", "made")[1] == "0\n"
    with open(os.path.join(out, "said")) as f:
        assert f.read() == "hi from /out\n"
    # A later run with options of its own is what start repeats then.
    berth("run", "-e", "GREETING=bye", "-v", f"{out}:/out", "made", "/bin/sh", "-c",
          'echo "$GREETING" > /out/said')
    berth.identity.write_file(os.path.join(out, "said"), "")
    berth("start", "made")
    assert berth("wait", "made")[1] == "0\n"
    with open(os.path.join(out, "said")) as f:
        assert f.read() == "bye\n"


def test_logs_keep_order_within_each_stream_and_timestamps(berth, img):
    detach(berth, "--name", "both", img, "/bin/sh", "-c",
           "for i in 1 2 3; do echo o$i; echo e$i >&2; done; printf partial")
    berth("wait", "both")
    _, out, err = berth("logs", "both")
    assert (out, err) == ("o1\no2\no3\npartial", "e1\ne2\ne3\n")
    _, out, err = berth("logs", "-t", "both")
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z "
    assert re.fullmatch(f"{stamp}o1\n{stamp}o2\n{stamp}o3\n{stamp}partial", out), out
    assert re.fullmatch(f"({stamp}e\\d\n){{3}}", err), err
    # A second run appends to the same log.
    berth("start", "both")
    berth("wait", "both")
    assert berth("logs", "both")[1].count("o1\n") == 2


def test_logs_tail_shows_the_last_lines(berth, img):
    # Lines count across both streams; the log keeps order within each stream (above), so the
    # stderr line is written well before the rest.
    detach(berth, "--name", "long", img, "/bin/sh", "-c",
           "echo e1 >&2; sleep 1; for i in 1 2 3 4 5 6; do echo o$i; done; printf partial")
    berth("wait", "long")
    assert berth("logs", "--tail", "3", "long")[1:] == ("o5\no6\npartial", "")
    assert berth("logs", "-n", "1", "long")[1:] == ("partial", "")
    assert berth("logs", "--tail", "0", "long")[1:] == ("", "")
    assert berth("logs", "--tail", "8", "long")[1:] == ("o1\no2\no3\no4\no5\no6\npartial",
                                                        "e1\n")
    assert berth("logs", "--tail", "all", "long")[1:] == berth("logs", "long")[1:]
    rc, _, err = berth("logs", "--tail", "-2", "long", check=False)
    assert (rc, err) == (125, "berth: error: --tail: expected a number of lines or all, not -2\n"
                              "berth: hint: see 'berth logs --help'\n")


def test_logs_since_shows_what_was_read_from_then_on(berth, img):
    """docker logs --since TIME: a Unix time (to the nanosecond) or an RFC 3339 one."""
    detach(berth, "--name", "twice", img, "/bin/sh", "-c", "echo run")
    berth("wait", "twice")
    berth("start", "twice")
    berth("wait", "twice")
    _, out, _ = berth("logs", "-t", "twice")
    stamps = [line.split()[0] for line in out.splitlines()]
    assert len(stamps) == 2 and stamps[0] < stamps[1], out
    # The second run's line's time, as a Unix time: that line and what follows.
    day, clock = stamps[1].rstrip("Z").split("T")
    whole, nanos = clock.split(".")
    unix = calendar.timegm(time.strptime(f"{day}T{whole}", "%Y-%m-%dT%H:%M:%S"))
    assert berth("logs", "--since", f"{unix}.{nanos}", "twice")[1] == "run\n"
    assert berth("logs", "--since", stamps[1], "twice")[1] == "run\n"  # as -t printed it
    assert berth("logs", "--since=2000-01-01T00:00:00Z", "twice")[1] == "run\nrun\n"
    assert berth("logs", "--since", "2100-01-01T00:00:00Z", "twice")[1] == ""
    # A Go duration before now, as Docker's: "24h" ago, and "-1h" (an hour from now).
    assert berth("logs", "--since", "24h", "twice")[1] == "run\nrun\n"
    assert berth("logs", "--since", "-1h", "twice")[1] == ""
    for bad in ("yesterday", "1d", "5 m", "1h-2m"):
        rc, _, err = berth("logs", "--since", bad, "twice", check=False)
        assert (rc, err) == (125, "berth: error: --since: expected a Unix time (1700000000.5), an "
                                  f"RFC 3339 time or a duration (42m), not {bad}\n"
                                  "berth: hint: see 'berth logs --help'\n")


def test_logs_follow_returns_when_the_container_stops(berth, img):
    detach(berth, "--name", "chatty", img, "/bin/sh", "-c",
           "echo one; while [ ! -e /go ]; do sleep 1; done; echo two")
    wait_for(lambda: "one" in logs(berth, "chatty"), "the first line")
    p = berth.popen("logs", "-f", "chatty")
    try:
        berth("exec", "chatty", "/bin/sh", "-c", "echo > /go")
        out, _ = p.communicate(timeout=WAIT)
    finally:
        if p.poll() is None:
            p.kill()
    assert out == "one\ntwo\n"


def test_a_foreground_run_shows_exited_with_its_status(berth, img):
    berth("run", "--name", "fg", img, "/probe", "exit", "7", check=False)
    assert re.search(r"Exited \(7\) .* ago", ps_row(berth, "fg", "-a"))
    berth("create", "--name", "never", img)
    assert re.search(r"\bCreated\s+never\s*$", ps_row(berth, "never", "-a"))


# --- exec ------------------------------------------------------------------------------------


def test_exec_joins_a_detached_container(berth, img):
    detach(berth, "--name", "svc", img, "/probe", "signals", "603")
    wait_for(lambda: "ready" in logs(berth, "svc"), "the workload to start")
    # The container's file system, not the host's: a file written by one exec is seen by the next.
    berth("exec", "svc", "/bin/sh", "-c", "echo inside > /made-by-exec")
    assert berth("exec", "svc", "/probe", "cat", "/made-by-exec")[1] == "inside\n"
    assert not os.path.exists("/made-by-exec")
    # The workload's environment, -e added; -w; the run's identity.
    _, out, _ = berth("exec", "-e", "EXTRA=yes", "-w", "/etc", "svc", "/bin/sh", "-c",
                      'echo "$FROM_IMAGE $EXTRA $(pwd) $(id -u)"')
    assert out == "image yes /etc 0\n"
    rc, _, _ = berth("exec", "svc", "/bin/sh", "-c", "exit 5", check=False)
    assert rc == 5
    assert berth("exec", "-i", "svc", "/probe", "cat", "-", input="fed\n")[1] == "fed\n"
    rc, _, err = berth("exec", "svc", "no-such-program", check=False)
    assert rc == 127 and err.splitlines()[0] == (
        'berth: error: exec: "no-such-program": executable file not found in $PATH')
    # -u: a user the rootless container does not map gets a user namespace of its own.
    assert berth("exec", "-u", "1234", "svc", "/probe", "id")[1].splitlines()[:2] == [
        "uid=1234", "gid=1234"]  # its group in the image's /etc/passwd
    _, out, _ = berth("exec", "-u", "1234:99", "svc", "/bin/sh", "-c",
                      'echo "$(id -u):$(id -g) $HOME"; touch /tmp/by-1234 && stat -c %u:%g '
                      '/tmp/by-1234')
    assert out == "1234:99 /home/app\n1234:99\n"  # app: 1234 in the image's /etc/passwd
    # A container that maps one user (no subordinate IDs): the command's own namespace maps
    # 1234 onto the container's root, whose files its are.
    detach(berth, "--name", "one", "--root-emulation", "seccomp", img, "/probe", "signals", "603")
    wait_for(lambda: "ready" in logs(berth, "one"), "the workload to start")
    _, out, _ = berth("exec", "-u", "1234:99", "one", "/bin/sh", "-c",
                      'echo "$(id -u):$(id -g)"; touch /tmp/by-1234 && stat -c %u:%g /tmp/by-1234')
    assert out == "1234:99\n1234:99\n"
    assert berth("exec", "one", "/bin/sh", "-c", "stat -c %u /tmp/by-1234")[1] == "0\n"
    berth("stop", "one")
    rc, _, err = berth("exec", "-u", "nobody-here", "svc", "/probe", "id", check=False)
    assert rc == 125 and err.splitlines()[0] == (
        "berth: error: exec -u nobody-here: user nobody-here: unable to find user nobody-here: "
        "no matching entries in the container's /etc/passwd")
    berth("stop", "svc")
    rc, _, err = berth("exec", "svc", "/probe", "true", check=False)
    assert rc == 125 and err.splitlines()[0].endswith(" is not running")


def test_exec_tty_puts_the_command_in_the_terminals_foreground(berth, img):
    """exec -it, as `run -it` does: the command owns the caller's terminal (before: it ran in
    berth's process group, so ^C and a shell's job control did not reach it)."""
    detach(berth, "--name", "term", img, "/probe", "signals", "603")
    wait_for(lambda: "ready" in logs(berth, "term"), "the workload to start")
    rc, out = on_terminal(berth, ["exec", "-it", "term", "/probe", "tty"])
    assert rc == 0, out
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert (lines["tty"], lines["foreground"]) == ("1", "1"), out
    # The container (run without -t) has a devpts of its own: the command's terminal is a pty of
    # it, which `tty` names (before: "not a tty", the caller's pty being the host's).
    assert re.fullmatch(r"/dev/pts/\d+", lines["ttyname"]), out
    rc, out = on_terminal(berth, ["exec", "-t", "term", "/bin/sh", "-c", "tty; exit 3"])
    assert rc == 3 and re.match(r"/dev/pts/\d+\n", out), out
    # Its own process group (berth's would get ^C too, and pass it on: twice).
    _, out = on_terminal(berth, ["exec", "-it", "term", "/bin/sh", "-c",
                                 'read -r _ _ _ _ pg _ < /proc/$$/stat; echo "pid=$$ pgrp=$pg"'])
    ids = dict(w.split("=") for w in out.split())
    assert ids["pid"] == ids["pgrp"], out
    rc, _, err = berth("exec", "-t", "term", "/probe", "tty", check=False)
    assert rc == 125 and "no terminal" in err.splitlines()[0]
    berth("stop", "term")


def test_exec_is_refused_clearly_for_an_engine_without_namespaces(berth, img):
    berth("create", "--name", "pr", img)
    berth("setup", "--engine=proot", "pr")
    rc, _, err = berth("exec", "pr", "/probe", "true", check=False)
    assert rc == 125
    assert err.splitlines()[0] == (
        "berth: error: exec pr: the proot engine runs containers without namespaces to join")



def test_exec_names_the_engine_a_run_was_given(berth, img):
    """run --engine=proot (not the container's recorded engine): exec names the engine that
    runs it (before: "the engine running it gave it no namespaces to join")."""
    if not shutil.which("proot"):
        pytest.skip("proot is not installed")
    detach(berth, "--name", "traced", "--engine=proot", img, "/probe", "signals", "603")
    wait_for(lambda: "ready" in logs(berth, "traced"), "the workload to start")
    try:
        rc, _, err = berth("exec", "traced", "/probe", "true", check=False)
        assert rc == 125
        assert err.splitlines()[0] == (
            "berth: error: exec traced: the proot engine runs containers without namespaces to join")
    finally:
        berth("rm", "-f", "traced")

# --- inspect --format ------------------------------------------------------------------------


def test_inspect_format_templates(berth, img):
    berth("create", "--name", "tpl", img)
    env = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert berth("inspect", "--format", "{{.Config.Env}}", "tpl")[1] == (
        f"[{env} FROM_IMAGE=image OVERRIDE=image]\n")
    assert json.loads(berth("inspect", "-f", "{{json .Config.Env}}", "tpl")[1])[1] == (
        "FROM_IMAGE=image")
    assert berth("inspect", "-f", "{{index .Config.Env 2}}", "tpl")[1] == "OVERRIDE=image\n"
    assert berth("inspect", "-f", "{{range .Config.Env}}{{println .}}{{end}}", "tpl")[1] == (
        f"{env}\nFROM_IMAGE=image\nOVERRIDE=image\n\n")
    assert berth("inspect", "-f", "{{.State.Status}} {{.Name}} {{.Config.WorkingDir}}",
                 "tpl")[1] == "created /tpl /srv/work\n"
    assert berth("inspect", "-f", "{{.Os}}/{{.Architecture}}", img)[1].startswith("linux/")
    rc, _, err = berth("inspect", "-f", "{{.Nope}}", "tpl", check=False)
    assert rc == 1 and err.splitlines()[0] == (
        "berth: error: template {{.Nope}}: can't evaluate field .Nope: no such field")


# --- run flags: relative volumes, --pull, --network, what rootless cannot honour ------------


def test_relative_volume_is_the_working_directorys(berth, img):
    berth.identity.write_file(os.path.join(berth.workdir, "data", "f"), "from the host\n")
    _, out, _ = berth("run", "--rm", "-v", "./data:/data:ro", img, "/probe", "cat", "/data/f")
    assert out == "from the host\n"
    _, out, _ = berth("run", "--rm", "-v", "./data/../data/:/d2", img, "/probe", "cat", "/d2/f")
    assert out == "from the host\n"


def test_pull_policy(berth, registry, run_image):
    ref = f"{registry.host}/e2e/pullpolicy:1"
    rc, _, err = berth("run", "--pull", "never", ref, "/probe", "true", check=False)
    assert rc == 125 and err.splitlines()[0] == (
        f"berth: error: find image {ref}: not in the store, and --pull never")
    rc, _, err = berth("run", "--pull", "sometimes", ref, check=False)
    assert rc == 125 and err.splitlines()[0] == (
        "berth: error: run --pull sometimes: expected always, missing or never")

    def push(version: str) -> None:
        layer = imagelib.Layer([imagelib.File("version", version.encode())])
        registry.pusher().push_image("e2e/pullpolicy", "1",
                                     imagelib.make_image([imagelib.busybox_layer(), layer]))

    push("one")
    assert berth("run", "--rm", ref, "/bin/cat", "/version")[1] == "one"  # missing: pulled
    push("two")
    assert berth("run", "--rm", ref, "/bin/cat", "/version")[1] == "one"  # present: kept
    assert berth("create", "--pull", "never", ref)[0] == 0
    assert berth("run", "--rm", "--pull", "always", ref, "/bin/cat", "/version")[1] == "two"


@pytest.mark.parametrize("args,first,hint", [
    (["-p", "8080:80"], "berth: error: run -p: ports cannot be published: rootless Berth makes "
     "no virtual network, the container uses the host's",
     "berth: hint: a server in the container listens on the host's own ports: pick a free one"),
    (["--privileged"], "berth: error: run --privileged: a rootless container cannot have more "
     "privilege than your own user", None),
    (["--cap-add=NET_ADMIN"], "berth: error: run --cap-add: capabilities outside the container's "
     "user namespace cannot be granted rootless", None),
    (["--memory", "4g"], "berth: error: run --memory: resource limits are the batch system's, "
     "not the container's, on a shared cluster",
     "berth: hint: ask Slurm (srun --mem=...), or systemd-run --user -p MemoryMax=... berth run ..."),
    (["--cpus=2"], "berth: error: run --cpus: resource limits are the batch system's, not the "
     "container's, on a shared cluster", None),
    (["--network", "bridge"], "berth: error: run --network bridge: rootless Berth makes no "
     "virtual networks: a container shares the host's network (host, the default) or has none "
     "(none)", None),
], ids=["publish", "privileged", "cap-add", "memory", "cpus", "network-bridge"])
def test_flags_rootless_cannot_honour_say_why(berth, img, args, first, hint):
    rc, _, err = berth("run", *args, img, "/probe", "true", check=False)
    lines = err.splitlines()
    assert rc == 125 and lines[0] == first, err
    if hint:
        assert lines[1] == hint
    assert "unknown flag" not in err


def test_network_none_has_only_loopback_and_it_is_up(berth, img):
    _, out, _ = berth("run", "--rm", "--network", "none", img, "/bin/cat", "/proc/net/dev")
    names = {line.split(":")[0].strip() for line in out.splitlines()[2:]}
    assert names == {"lo"}, out
    _, out, _ = berth("run", "--rm", "--network", "none", img, "/bin/sh", "-c", "ifconfig lo")
    assert " UP " in out and "127.0.0.1" in out, out
    _, out, _ = berth("run", "--rm", "--network", "host", img, "/bin/cat", "/proc/net/dev")
    assert len(out.splitlines()) >= 3  # the host's interfaces


def test_network_none_has_a_sysfs_of_its_namespace(berth, img):
    """/sys/class/net lists what the namespace has, as `ip link` does (before: the host's
    interfaces); the rest of /sys, the cgroup tree included, is still there, read-only."""
    def sys_net(*flags):
        _, out, _ = berth("run", "--rm", *flags, img, "/bin/ls", "/sys/class/net")
        return set(out.split())

    assert sys_net("--network", "none") == {"lo"}
    assert sys_net() == set(os.listdir("/sys/class/net"))
    _, out, _ = berth("run", "--rm", "--network", "none", img, "/bin/sh", "-c",
                      "ls /sys/fs/cgroup | wc -l; ls /sys/devices | wc -l; "
                      "touch /sys/x 2>/dev/null && echo writable || echo read-only")
    cgroups, devices, writable = out.split()
    assert int(cgroups) == len(os.listdir("/sys/fs/cgroup")) and int(devices) > 0, out
    assert writable == "read-only"


def test_security_opt_no_new_privileges_and_what_is_refused(berth, img):
    def nnp(*flags):
        _, out, _ = berth("run", "--rm", *flags, img, "/bin/cat", "/proc/self/status")
        return [line.split()[1] for line in out.splitlines() if line.startswith("NoNewPrivs:")]

    assert nnp() == ["0"]
    assert nnp("--security-opt", "no-new-privileges") == ["1"]
    assert nnp("--security-opt", "no-new-privileges:true") == ["1"]
    assert nnp("--security-opt=no-new-privileges=false") == ["0"]
    # Kept for start, as the other run options.
    berth("create", "--name", "nnp", "--security-opt", "no-new-privileges", img, "/bin/sh", "-c",
          "grep NoNewPrivs /proc/self/status")
    berth("start", "nnp")
    berth("wait", "nnp")
    assert "NoNewPrivs:\t1" in logs(berth, "nnp")
    for value, why in (
            ("seccomp=unconfined", "seccomp=: a rootless container runs under your own "
             "session's seccomp filter, which it cannot lift; Berth adds its own only for root "
             "emulation (--root-emulation)"),
            ("apparmor=unconfined", "apparmor=: AppArmor and SELinux profiles are chosen by "
             "the host for your user, not by a rootless container"),
            ("label=disable", "label=: AppArmor and SELinux profiles are chosen by the host "
             "for your user, not by a rootless container"),
            ("no-new-privileges:maybe", "no-new-privileges takes true or false, not 'maybe'")):
        rc, _, err = berth("run", "--rm", "--security-opt", value, img, "/bin/true", check=False)
        assert (rc, err) == (125, f"berth: error: --security-opt: {why}\n"
                                  "berth: hint: see 'berth run --help'\n")


def test_shm_size_sizes_the_private_dev_shm(berth, img):
    def shm(*flags):
        _, out, _ = berth("run", "--rm", *flags, img, "/bin/sh", "-c",
                          "grep ' /dev/shm ' /proc/mounts")
        return out

    assert "size=65536k" in shm()  # Docker's default, 64 MiB
    assert "size=131072k" in shm("--shm-size", "128m")
    assert "size=1048576k" in shm("--shm-size=1GB")
    assert "noexec" in shm("--shm-size", "128m")
    for bad in ("lots", "0", "12x"):
        rc, _, err = berth("run", "--rm", "--shm-size", bad, img, "/bin/true", check=False)
        assert rc == 125 and err.splitlines()[0] == (
            f"berth: error: volume --shm-size {bad}: expected a size such as 64m, 1g or a "
            "number of bytes"), err
    rc, _, err = berth("run", "--rm", "--ipc", "host", "--shm-size", "1g", img, "/bin/true",
                       check=False)
    assert rc == 125 and "the host's /dev/shm, whose size is the host's" in err


def test_ulimit_sets_the_workloads_limits(berth, img):
    """--ulimit NAME=SOFT[:HARD], Docker's syntax: the workload starts with the limits (the
    userns engine and a fallback engine alike), kept for `start`; a hard limit above the
    caller's, an unknown name and a soft limit above the hard one are refused in one line."""
    def limits(*flags, engine="userns"):
        _, out, _ = berth("run", "--rm", f"--engine={engine}", *flags, img, "/bin/sh", "-c",
                          "ulimit -Sn; ulimit -Hn; ulimit -c")
        return out.split()

    assert limits("--ulimit", "nofile=64:128", "--ulimit", "core=0") == ["64", "128", "0"]
    assert limits("--ulimit", "nofile=100")[:2] == ["100", "100"]  # HARD defaults to SOFT
    assert limits("--ulimit", "nofile=64:128", engine="proot")[:2] == ["64", "128"]
    berth("create", "--name", "limited", "--ulimit", "nofile=77:99", img, "/bin/sh", "-c",
          "ulimit -Sn; ulimit -Hn")
    berth("start", "limited")
    assert berth("wait", "limited")[1] == "0\n"
    assert logs(berth, "limited").split() == ["77", "99"]
    hard = berth("run", "--rm", img, "/bin/sh", "-c", "ulimit -Hn")[1].strip()  # berth's own
    rc, _, err = berth("run", "--rm", "--ulimit", f"nofile=64:{int(hard) + 1}", img, "/bin/true",
                       check=False)
    assert (rc, err.splitlines()[0]) == (
        125, f"berth: error: run --ulimit nofile: the hard limit {int(hard) + 1} is above your "
        f"own ({hard}), which only root can raise"), err
    for value, why in (("bogus=1", 'unknown limit "bogus" (known: core, cpu, data, fsize, '
                        "locks, memlock, msgqueue, nice, nofile, nproc, rss, rtprio, rttime, "
                        "sigpending, stack, as)"),
                       ("nofile=128:64", "the soft limit 128 is above the hard limit 64"),
                       ("nofile", "expected NAME=SOFT[:HARD], e.g. nofile=1024:4096"),
                       ("nofile=lots", "limits are whole numbers, -1 or unlimited: "
                        "NAME=SOFT[:HARD]")):
        rc, _, err = berth("run", "--rm", "--ulimit", value, img, "/bin/true", check=False)
        assert (rc, err.splitlines()[0]) == (125, f"berth: error: --ulimit: {why}"), err


def test_add_host_adds_lines_to_etc_hosts(berth, img):
    """--add-host HOST:IP (and HOST=IP, an IPv6 address, host-gateway): the host's /etc/hosts
    with the lines added, for this run, kept for `start`; bad values refused in one line."""
    def hosts(*flags, engine="userns"):
        return berth("run", "--rm", f"--engine={engine}", *flags, img, "/bin/cat",
                     "/etc/hosts")[1]

    plain = hosts()
    with open("/etc/hosts") as f:
        assert plain == f.read()
    out = hosts("--add-host", "db.local:10.1.2.3", "--add-host", "v6=2001:db8::7",
                "--add-host", "gw:host-gateway")
    assert out.startswith(plain.rstrip("\n") + "\n"), out
    assert out.endswith("10.1.2.3\tdb.local\n2001:db8::7\tv6\n127.0.0.1\tgw\n"), out
    assert hosts("--add-host", "p:10.9.9.9", engine="proot").endswith("10.9.9.9\tp\n")
    berth("create", "--name", "hosted", "--add-host", "kept:10.0.0.9", img, "/bin/cat",
          "/etc/hosts")
    berth("start", "hosted")
    assert berth("wait", "hosted")[1] == "0\n"
    assert logs(berth, "hosted").endswith("10.0.0.9\tkept\n")
    with open("/etc/hosts") as f:
        assert "kept" not in f.read()  # the host's file is untouched
    for value, why in (("nocolon", "expected HOST:IP (my-host:10.0.0.7)"),
                       ("h:999.1.1.1", '"999.1.1.1" is not an IPv4 or IPv6 address')):
        rc, _, err = berth("run", "--rm", "--add-host", value, img, "/bin/true", check=False)
        assert (rc, err.splitlines()[0]) == (
            125, f"berth: error: run --add-host {value}: {why}"), err
    rc, _, err = berth("run", "--rm", "--network", "none", "--add-host", "g:host-gateway", img,
                       "/bin/true", check=False)
    assert rc == 125 and "--network none cuts the container off" in err, err


def test_network_none_is_refused_for_an_engine_without_namespaces(berth, img):
    rc, _, err = berth("run", "--rm", "--engine=proot", "--network", "none", img, "/probe", "true",
                       check=False)
    assert rc == 125 and err.splitlines()[0] == (
        "berth: error: run --network none: the proot engine cannot give a container a network "
        "namespace")

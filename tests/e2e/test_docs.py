"""The shape a newcomer relies on (issues 27 and 28): README.md starts with exactly the two
commands for a fresh machine, its layout and docs/architecture.md's diagram name every room
under src/, every page the README's table and the docs link to exists, and the demo's package
list stays the demo's. Reads files only: no build, no privileges."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import REPO_ROOT

FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)


def read(relative: str) -> str:
    with open(os.path.join(REPO_ROOT, relative)) as f:
        return f.read()


def rooms() -> list[str]:
    src = os.path.join(REPO_ROOT, "src")
    return sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))


def section(text: str, heading: str) -> str:
    """The text under `## heading`, up to the next heading of that level."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"no '## {heading}' section"
    return m.group(1)


def commands(block: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in block.splitlines()
            if line.split("#", 1)[0].strip()]


def test_readme_starts_with_the_two_commands_for_a_fresh_machine():
    readme = read("README.md")
    first = FENCE.search(readme)
    assert first, "README.md has no code block"
    assert "\n## " not in readme[:first.start()], "the two commands come before any section"
    assert commands(first.group(1)) == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    # Each says how long it takes, and the demo's figure says how it was measured.
    for line in first.group(1).splitlines():
        assert re.search(r"\b(minutes?|hours?|an hour)\b", line), line
    assert re.search(r"measured \d{4}-\d\d-\d\d by `bench/demo`", readme)


def test_readme_then_says_how_to_install_and_use():
    readme = read("README.md")
    headings = re.findall(r"^## (.+)$", readme, re.M)
    assert headings[:2] == ["Install on a cluster", "Use it"], headings
    assert "systemctl enable --now berthd" in section(readme, "Install on a cluster")
    use = FENCE.search(section(readme, "Use it"))
    assert use and len(commands(use.group(1))) == 5, "Use it: five commands"


def test_the_layout_names_every_room_under_src():
    layout = section(read("README.md"), "Layout")
    named = set(re.findall(r"^src/([a-z_]+)/", layout, re.M))
    assert named == set(rooms())


def test_the_architecture_diagram_names_every_room():
    diagram = FENCE.search(read("docs/architecture.md")).group(1)
    missing = [r for r in rooms() if not re.search(rf"(?<![a-z_]){r}/", diagram)]
    assert missing == []
    table = section(read("docs/architecture.md"), "The rooms")
    assert [r for r in rooms() if f"| `{r}/` |" not in table] == []


def markdown_files() -> list[str]:
    files = ["README.md", "bench/README.md"]
    for folder in ("docs", "docs/man", "bench/results"):
        files += [f"{folder}/{n}" for n in sorted(os.listdir(os.path.join(REPO_ROOT, folder)))
                  if n.endswith(".md")]
    return files


@pytest.mark.parametrize("page", markdown_files())
def test_every_relative_link_names_a_file_that_exists(page):
    text = FENCE.sub("", read(page))
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = os.path.join(REPO_ROOT, os.path.dirname(page), target.split("#", 1)[0])
        if not os.path.exists(path):
            broken.append(target)
    assert broken == []


def test_the_readme_table_links_a_page_per_area():
    table = section(read("README.md"), "What works")
    pages = re.findall(r"\]\(([^)]+\.md)\)", table)
    assert len(pages) >= 10, pages
    for page in pages:
        assert os.path.isfile(os.path.join(REPO_ROOT, page)), page


def package_list(name: str) -> list[str]:
    """A package array of scripts/setup.sh, as bash expands it."""
    script = ("source <(sed -n '/^demo_packages=(/,/^)/p;/^packages=(/,/^)/p' scripts/setup.sh);"
              f' printf "%s\\n" "${{{name}[@]}}"')
    out = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True).stdout
    return out.split()


def test_the_demo_installs_a_part_of_what_the_tests_install():
    demo, full = package_list("demo_packages"), package_list("packages")
    assert 20 < len(demo) < len(set(full)) / 2
    assert set(demo) <= set(full)
    # The heavy parts only the test tiers use.
    assert set(demo).isdisjoint({"clang-14", "clang-tidy-14", "mariadb-server", "prometheus",
                                 "slurmctld", "slurmd", "libslurm-dev", "pandoc", "lintian",
                                 "mpich", "mmdebstrap", "skopeo", "umoci"})
    assert "bash scripts/setup.sh --demo" in read("scripts/demo.sh")

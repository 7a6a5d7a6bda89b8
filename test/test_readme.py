# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The README is the page a user reads in two minutes: short, the fix first,
its links lead somewhere, every figure links to its evidence, and what it
tells a user to run works. Every link of every page under docs/ leads
somewhere, and every evidence folder is linked."""

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from conftest import REPO

README = REPO / "README.md"
# The user-facing pages, each linked from the README.
PAGES = [README] + [
    REPO / "docs" / name
    for name in ("check.md", "apply-and-run.md", "contributing.md", "benchmark.md")
]
# Every Markdown page under docs/.
DOCS = sorted((REPO / "docs").rglob("*.md"))
QUICK_START = [
    "bash scripts/setup.sh && .venv/bin/executorch-device-guard check   # set up "
    "(a few minutes), then check the issue's model (about 30 s)",
    "bash scripts/setup.sh && .venv/bin/python -m pytest -n auto        # set up, "
    "then the whole test suite (about 18 min)",
]
# How far down the README a user finds the fix: the commands that get it.
FIX_WITHIN = 40
FIX = [
    "## Get the fix",
    "executorch-device-guard run -- python export.py",
    "executorch-device-guard apply",
]


def links(page: Path) -> List[str]:
    """The relative targets of the page's Markdown links."""
    targets = re.findall(r"\]\(([^)\s]+)\)", page.read_text())
    return [t for t in targets if not re.match(r"[a-z]+://", t)]


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, len(lines)


def test_the_fix_comes_first() -> None:
    """How to get the fix, within the README's first lines."""
    lines = README.read_text().splitlines()
    for text in FIX:
        where = [i for i, line in enumerate(lines) if line.startswith(text)]
        assert where and where[0] < FIX_WITHIN, (text, where)


def test_each_quick_start_line_is_said_complete_on_its_own() -> None:
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "complete on its own" in quick
    assert "the long one, every test" in quick


@pytest.mark.parametrize("page", PAGES + DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_exists(page: Path) -> None:
    found = links(page)
    missing = [t for t in found if not (page.parent / t.split("#")[0]).exists()]
    assert missing == [], missing


def test_every_evidence_folder_is_linked() -> None:
    """What no page links is gone (git history keeps it), not left in docs/."""
    linked = {
        (page.parent / t.split("#")[0]).resolve()
        for page in [README] + DOCS
        for t in links(page)
    }
    folders = [p for p in (REPO / "docs" / "evidence").iterdir() if p.is_dir()]
    assert folders
    for folder in folders:
        inside = {p for p in linked if p == folder or folder in p.parents}
        assert inside, f"nothing links {folder.relative_to(REPO)}"
    assert not list((REPO / "docs").glob("gpu-run-*"))


def test_the_readme_links_the_user_pages() -> None:
    linked = {(README.parent / t).resolve() for t in links(README)}
    assert set(p.resolve() for p in PAGES[1:]) <= linked


def test_every_measurement_links_its_evidence() -> None:
    text = README.read_text()
    table = text.split("## What was measured", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]
    assert len(rows) >= 8
    for row in rows:
        evidence = row.rstrip(" |").rsplit("|", 1)[1]
        assert re.search(r"\]\([^)]+\)", evidence), row


def test_the_quick_start_is_what_ci_runs() -> None:
    text = README.read_text()
    for line in QUICK_START:
        assert line in text.splitlines(), line
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert "bash scripts/setup.sh" in ci and ".venv/bin/python -m pytest -n auto" in ci


def readme_recipe() -> str:
    """The README's script that shows the fix without a GPU."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (recipe,) = [b for b in blocks if b.startswith("# export_meta.py")]
    return recipe


def emitter_raised(stderr: str) -> Tuple[str, str]:
    """The file named by a traceback's last frame in the emitter, and the
    source line printed under it; asserts that this is the line at that
    number in that file (the changed text, not the stock one)."""
    lines = stderr.splitlines()
    frames = [i for i, line in enumerate(lines) if "/_emitter.py" in line]
    frame, raised = lines[frames[-1]], lines[frames[-1] + 1].strip()
    shown, number = re.fullmatch(r'  File "(.*)", line (\d+), in .*', frame).groups()
    assert Path(shown).read_text().splitlines()[int(number) - 1].strip() == raised
    return shown, raised


def test_the_readme_recipe_shows_the_fix_on_cpu(tmp_path: Path) -> None:
    """The README's example, stock and under ``run`` in one test: stock fails
    without naming the device; under ``run``, with an empty TMPDIR of its own
    (torch's cache elsewhere), the command lists nothing there, the changed
    line of the emitter raises the error that names the constant and
    ``meta``, and TMPDIR is empty after."""
    script = tmp_path / "export_meta.py"
    script.write_text(readme_recipe())
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]),
        TMPDIR=str(tmpdir),
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    env.pop("EXECUTORCH_DEVICE_GUARD", None)
    commands = {
        "stock": ["python", "export_meta.py"],
        "run": ["python", "-m", "executorch_device_guard", "run", "--"]
        + ["sh", "-c", 'ls -A "$TMPDIR"; python export_meta.py'],
    }
    results = {
        name: subprocess.run(
            cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        for name, cmd in commands.items()
    }
    stock, run = results["stock"], results["run"]
    assert stock.returncode == 1, stock.stderr[-3000:]
    assert (
        "executorch.exir.error.InternalError: Failed with error: NULL pointer access"
        in stock.stderr.splitlines()
    ), stock.stderr[-3000:]
    assert run.returncode == 1, run.stderr[-3000:]
    assert run.stdout == ""  # ls -A "$TMPDIR": nothing
    assert (
        "executorch.exir.error.InternalError: Failed with error: Constant tensor "
        "data for '0.weight' is on device meta, " in run.stderr
    ), run.stderr[-3000:]
    shown, raised = emitter_raised(run.stderr)
    assert raised == "raise InternalError(error)"
    assert shown.startswith(str(tmp_path / "cache"))
    assert "executorch-device-guard" not in run.stderr.replace(shown, "")
    assert os.listdir(tmpdir) == []

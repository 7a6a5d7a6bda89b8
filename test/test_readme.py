# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The README is the page a user reads in two minutes: short, its links
lead somewhere, every figure links to its evidence, and what it tells a
user to run works."""

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from conftest import REPO

README = REPO / "README.md"
# The user-facing pages, each linked from the README.
PAGES = [README] + [
    REPO / "docs" / name
    for name in ("check.md", "apply-and-run.md", "contributing.md", "benchmark.md")
]
QUICK_START = [
    "bash scripts/setup.sh && .venv/bin/executorch-device-guard check   # set up "
    "(a few minutes), then the main job (about 20 s)",
    "bash scripts/setup.sh && .venv/bin/python -m pytest                # set up, "
    "then the tests (about 20 min)",
]


def links(page: Path) -> List[str]:
    """The relative targets of the page's Markdown links."""
    targets = re.findall(r"\]\(([^)\s]+)\)", page.read_text())
    return [t for t in targets if not re.match(r"[a-z]+://", t)]


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, len(lines)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_exists(page: Path) -> None:
    found = links(page)
    missing = [t for t in found if not (page.parent / t.split("#")[0]).exists()]
    assert missing == [], missing


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
    assert "bash scripts/setup.sh" in ci and ".venv/bin/python -m pytest" in ci


def readme_recipe() -> str:
    """The README's script that shows the fix without a GPU."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (recipe,) = [b for b in blocks if b.startswith("# export_meta.py")]
    return recipe


def test_the_readme_recipe_shows_the_fix_on_cpu(tmp_path: Path) -> None:
    """Stock ExecuTorch fails without naming the device; under ``run`` the
    same script names the constant and ``meta``."""
    script = tmp_path / "export_meta.py"
    script.write_text(readme_recipe())
    env = dict(os.environ, PYTHONPATH=str(REPO))
    commands = {
        "stock": [sys.executable, str(script)],
        "run": [sys.executable, "-m", "executorch_device_guard", "run", "--"]
        + [sys.executable, str(script)],
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
    assert (
        "InternalError: Failed with error: Constant tensor data for '0.weight' is "
        "on device meta, " in run.stderr
    ), run.stderr[-3000:]
    assert "executorch-device-guard" not in run.stderr  # no note: it was imported

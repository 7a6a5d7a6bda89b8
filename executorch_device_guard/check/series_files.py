# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The Python files the series adds or changes, as ExecuTorch will hold them.

The changed files are the installed ExecuTorch's, with the series applied
(whether the installation is stock or patched), less those the installed
release does not ship; the new files are this
repository's, at their ExecuTorch paths. The lint runs on all of them; the
upstream tests (``upstream_tests``) run from a folder laid out like ExecuTorch's
source tree, against the installed ExecuTorch, stock or with the import hook
serving a series (``write_series``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Dict, List

from executorch_device_guard.installation import installed
from executorch_device_guard.installation.installed import FileState
from executorch_device_guard.patchset import (
    is_test,
    patched_files,
    read_series,
    SeriesEntry,
)


def changed_files(root: Path, installed_root: Path, tests: bool) -> Dict[str, str]:
    """ExecuTorch path -> patched text of each Python file the series edits:
    the guarded sources, and with ``tests`` the test modules too."""
    files = {}
    shipped = installed.shipped(installed_root)
    for rel, patches in patched_files(root, tests=tests).items():
        text = installed.read_text(installed_root / rel)
        if text is None and shipped is not None and rel not in shipped:
            continue  # e.g. the MPS backend, which 1.5.x does not ship
        # The series' own tests go where git am puts them (their code repeats).
        state, other = installed.classify(text, patches, at_line=is_test(rel))
        if state not in (FileState.STOCK, FileState.PATCHED):
            raise installed.GuardError(
                f"{installed_root / rel} is {state.value}: the series does not fit it"
            )
        files[rel] = other if state is FileState.STOCK else text
    return files


def new_files(root: Path) -> Dict[str, str]:
    """ExecuTorch path -> text of each Python file the series adds."""
    return {
        rel: (root / rel).read_text(encoding="utf-8")
        for entry in read_series(root)
        for rel in entry.new_files
        if rel.endswith(".py")
    }


def _is_test_module(rel: str) -> bool:
    return Path(rel).name.startswith("test_")


def upstream_tests(root: Path, installed_root: Path) -> Dict[str, str]:
    """The series' tests: its new test modules, and the existing ones it edits."""
    changed = changed_files(root, installed_root, tests=True)
    return {
        **{rel: text for rel, text in changed.items() if _is_test_module(rel)},
        **new_files(root),
    }


def write_tree(files: Dict[str, str], dest: Path) -> Path:
    """Writes ``files`` under ``dest`` at their ExecuTorch paths."""
    for rel, text in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text, encoding="utf-8")
    return dest


def write_series(entries: List[SeriesEntry], dest: Path) -> Path:
    """Writes under ``dest`` a series of ``entries`` as their pull requests
    land: their patches and ``patches/series``, each line a patch name and
    the files it adds, no ``upstream-only`` flag and no patch of its own.
    Named by ``EXECUTORCH_DEVICE_GUARD_SERIES``, the import hook serves
    those commits (``finder``), and for this release the tool's backport
    forms of them, as ``patchset.forms`` gives."""
    patches = dest / "patches"
    patches.mkdir(parents=True)
    lines = []
    for entry in entries:
        shutil.copyfile(entry.patch_path, patches / entry.patch_path.name)
        lines.append(" ".join([entry.patch_path.name, *entry.new_files]) + "\n")
    (patches / "series").write_text("".join(lines), encoding="utf-8")
    return dest


def write_commit_root(root: Path, entry: SeriesEntry, dest: Path) -> Path:
    """Writes under ``dest`` a series of ``entry`` alone (``write_series``)
    and the files it adds, nothing of the other commits. ``dest`` then
    serves as a ``root`` (an ``Emitters``' or ``upstream_tests``'), to apply
    and test the commit as its pull request lands, on its own."""
    write_series([entry], dest)
    for rel in entry.new_files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, dest / rel)
    return dest


# Upstream's GPU tests: they need CUDA (gpu/ runs them on a GPU).
GPU_TESTS = "backends/cuda/tests/"


def build_test_modules(root: Path) -> List[str]:
    """The new test modules of the commits that edit C++: they pass only
    against a library built from the commit (scripts/build_custom_ops.sh)."""
    return [
        rel
        for entry in read_series(root)
        if any(p.path.endswith((".cpp", ".h")) for p in entry.file_patches)
        for rel in entry.new_files
        if rel.endswith(".py")
    ]


def series_test_modules(root: Path, installed_root: Path, gpu: bool = False) -> List[str]:
    """The series' test modules, new and edited, that the installed release
    can collect (it ships their backend) and that pass patched without a
    build: those that run on CPU, or with ``gpu`` those that need a GPU."""
    built = build_test_modules(root)
    return [
        rel
        for rel in upstream_tests(root, installed_root)
        if (installed_root / Path(rel).parent.parent).is_dir()
        and rel.startswith(GPU_TESTS) == gpu
        and rel not in built
    ]


def pytest_outcomes(stdout: str) -> Dict[str, str]:
    """Node id -> PASSED/FAILED/SKIPPED/ERROR, from ``pytest -v``'s output; a
    test with a failed subtest is FAILED (pytest reports it PASSED, and lists
    each failed subtest as ``SUBFAILED(...) NODE``)."""
    found = re.findall(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR)\b", stdout, re.M)
    result = {node: outcome for node, outcome in found}
    # Under CI (the CI variable set), pytest adds " - MESSAGE" to the line.
    subfailed = r"^SUBFAILED\(.*?\) (\S+::\S+)(?: - .*)?$"
    for node in re.findall(subfailed, stdout, re.M):
        result[node] = "FAILED"
    return result

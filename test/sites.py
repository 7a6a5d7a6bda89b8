# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Throwaway ExecuTorch installations for the apply and revert tests.

A ``site`` folder holds an ``executorch`` package with copies of the stock
target files that the installed ExecuTorch ships (``TARGETS``; 1.5.1 ships no
MPS backend), laid out as the 1.5.1 wheel lays them out (``executorch`` and
``extension`` namespace packages, an empty ``__init__.py`` in each folder on
the way to a target where the installed one has one, so that Python imports
each target from the site and not from the installed ExecuTorch later on the
path), and an ``executorch-1.5.1.dist-info`` whose RECORD lists them. The CLI runs in a child process whose PYTHONPATH puts the site first,
so it finds that installation exactly as it would find a real one. The
environment's own ExecuTorch is only read, never modified.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from conftest import REPO
from executorch_device_guard.installation import installed
from executorch_device_guard.installation.installed import executorch_root, FileState
from executorch_device_guard.patchset import apply_all, patched_files

# Every target of the series, and those the installed ExecuTorch ships and
# that are for its release.
ALL_TARGETS = patched_files(REPO, install=True)
_SHIPPED = installed.shipped(executorch_root())
_RELEASE = installed.release(executorch_root())
TARGETS = {
    rel: target
    for rel, target in ALL_TARGETS.items()
    if (_SHIPPED is None or rel in _SHIPPED) and target[0].for_release(_RELEASE)
}
FAULT = "EXECUTORCH_DEVICE_GUARD_TEST_FAULT"


def stock_text(rel: str) -> str:
    """The stock file, from the installed ExecuTorch (stock or patched)."""
    text = installed.read_text(executorch_root() / rel)
    state, _ = installed.classify(text, TARGETS[rel])
    return text if state is FileState.STOCK else apply_all(TARGETS[rel], text, True)


STOCK = {rel: stock_text(rel).encode() for rel in TARGETS}
# The installed package's __init__.py files on the way to a target.
INITS = sorted(
    {
        str(folder / "__init__.py")
        for rel in TARGETS
        for folder in Path(rel).parents
        if folder != Path(".")
        and (executorch_root() / folder / "__init__.py").is_file()
    }
)
PATCHED = {rel: apply_all(p, stock_text(rel)).encode() for rel, p in TARGETS.items()}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(data: bytes) -> str:
    """A file's hash as a wheel's RECORD gives it."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def make_site(site: Path, version: str = "1.5.1") -> Path:
    """A minimal ExecuTorch 1.5.1 installation holding the series' targets,
    its RECORD as pip writes it (METADATA's hash in it too)."""
    package = site / "executorch"
    record = []
    files = {"version.py": f"__version__ = '{version}'\n".encode(), **STOCK}
    files.update({rel: b"" for rel in INITS})
    for rel, data in files.items():
        path = package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        record.append(f"executorch/{rel},{record_hash(data)},{len(data)}")
    dist = site / f"executorch-{version}.dist-info"
    dist.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: executorch\nVersion: {version}\n"
    (dist / "METADATA").write_text(metadata)
    record += [
        f"{dist.name}/METADATA,{record_hash(metadata.encode())},{len(metadata)}",
        f"{dist.name}/RECORD,,",
    ]
    (dist / "RECORD").write_text("\n".join(record) + "\n")
    return site


def venv_site(venv: Path, version: str = "1.5.1") -> Path:
    """A venv (``python -m venv --without-pip``) whose site-packages holds
    ``make_site``'s ExecuTorch and this tool, importable as an editable
    install has it (a path ``.pth``): where ``apply`` writes its startup
    files. Its site-packages folder."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )
    (site,) = venv.glob("lib/python*/site-packages")
    make_site(site / "_", version=version)
    for entry in (site / "_").iterdir():
        entry.rename(site / entry.name)
    (site / "_").rmdir()
    (site / "a_tool.pth").write_text(f"{REPO}\n")
    return site


def tool(
    site: Path,
    *args: str,
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[Path] = None,
    wrap: List[str] = (),
    stdout=subprocess.PIPE,
):
    """``python -m executorch_device_guard ARGS`` with the Python of
    ``venv_site``'s venv, started as a user starts it: no PYTHONPATH."""
    full_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full_env.pop(FAULT, None)
    full_env.update(env or {})
    return subprocess.run(
        [*wrap, str(venv_python(site)), "-m", "executorch_device_guard", *args],
        env=full_env,
        cwd=cwd or site.parents[3],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


def venv_python(site: Path) -> Path:
    """The Python of ``venv_site``'s venv."""
    return site.parents[2] / "bin" / "python"


def patch_in_place(site: Path, rels: Iterable[str] = ()) -> None:
    """What an earlier version's ``apply`` left: the targets ``rels`` (all,
    if none are given) hold their patched text."""
    for rel in rels or TARGETS:
        (site / "executorch" / rel).write_bytes(PATCHED[rel])


def ship_the_fix(site: Path, rels: Iterable[str] = ()) -> None:
    """What a release that ships the fix installs: the targets ``rels`` (all,
    if none are given) hold their patched text, and RECORD lists it."""
    (record,) = site.glob("executorch-*.dist-info/RECORD")
    fixed = {f"executorch/{rel}": PATCHED[rel] for rel in rels or TARGETS}
    lines = []
    for line in record.read_text().splitlines():
        path = line.split(",")[0]
        if path in fixed:
            (site / path).write_bytes(fixed[path])
            line = f"{path},{record_hash(fixed[path])},{len(fixed[path])}"
        lines.append(line)
    record.write_text("\n".join(lines) + "\n")


def snapshot(top: Path) -> Dict[str, str]:
    """Every entry under ``top``: a file's sha256, a link's target, or 'dir'."""
    result = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(top))
            if path.is_symlink():
                result[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                result[rel] = "dir"
            elif path.is_file():
                result[rel] = sha(path.read_bytes())
            else:
                result[rel] = "special"
    return result


def target_states(site: Path) -> Dict[str, str]:
    """'stock' or 'patched' for each target, by hash; fails on anything else."""
    states = {}
    for rel in TARGETS:
        data = (site / "executorch" / rel).read_bytes()
        assert data in (STOCK[rel], PATCHED[rel]), f"{rel} is torn or foreign"
        states[rel] = "stock" if data == STOCK[rel] else "patched"
    return states


def assert_only_targets_changed(
    top: Path,
    site: Path,
    before: Dict[str, str],
    expect: Optional[str],
    may_vanish: Iterable[str] = (),
    may_appear: str = "",
) -> Dict[str, str]:
    """Checks by hashing that under ``top`` only the targets in ``site`` changed.

    Each target must be whole, stock or patched (``expect`` if given: 'stock'
    or 'patched'). Entries in ``may_vanish`` may be gone; new entries must
    match ``may_appear`` (a regular expression; default: none may appear).
    """
    import re

    after = snapshot(top)
    targets = {str((site / "executorch" / rel).relative_to(top)) for rel in TARGETS}
    for rel in sorted(set(before) | set(after)):
        if rel in targets:
            continue
        if rel not in after:
            assert rel in may_vanish, f"{rel} was removed"
        elif rel not in before:
            assert may_appear and re.search(may_appear, rel), f"{rel} appeared"
        else:
            assert after[rel] == before[rel], f"{rel} changed"
    states = target_states(site)
    if expect:
        assert set(states.values()) == {expect}, states
    return states


def cli(
    site: Path,
    *args: str,
    python_flags: List[str] = (),
    wrap: List[str] = (),
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[Path] = None,
    timeout: float = 120,
    module: bool = True,
) -> subprocess.CompletedProcess:
    """Runs ``python -m executorch_device_guard ARGS`` (or, without ``module``,
    ``python PYTHON_FLAGS``) with ``site`` first on the path."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    full_env.pop(FAULT, None)
    full_env.update(env or {})
    main = ["-m", "executorch_device_guard"] if module else []
    cmd = [*wrap, sys.executable, *python_flags, *main, *args]
    return subprocess.run(
        cmd, env=full_env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2, and stderr is one line naming the problem: no traceback."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("executorch-device-guard: error: ")
    for needle in needles:
        assert needle in result.stderr, result.stderr

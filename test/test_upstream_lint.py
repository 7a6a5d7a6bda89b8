# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The series passes ExecuTorch's own flake8 and ufmt (scripts/lint_upstream.py)."""

import subprocess
import sys
from pathlib import Path

from conftest import REPO
from executorch_device_guard.installation.installed import executorch_root
from executorch_device_guard.patchset import patched_files, read_series

SCRIPT = REPO / "scripts" / "lint_upstream.py"


def lint(*extra: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, extra)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_every_added_or_changed_file_is_clean() -> None:
    result = lint()
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    files = lines[: next(i for i, line in enumerate(lines) if line.startswith("$ "))]
    # Every file the series adds, and every one it edits that this release
    # ships (1.5.1 ships no MPS backend).
    expected = {
        *(
            f
            for f in patched_files(REPO, tests=True)
            if (executorch_root() / f).exists()
        ),
        *(
            f
            for entry in read_series(REPO)
            for f in entry.new_files
            if f.endswith(".py")
        ),
    }
    assert set(files) == expected
    assert "exir/emit/_emitter.py" in files
    assert "backends/cuda/tests/test_cuda_export.py" in files
    assert f"$ flake8 <{len(files)} files>: exit 0" in result.stdout
    assert f"$ ufmt check <{len(files)} files>: exit 0" in result.stdout


def test_a_violation_fails(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f( x ):\n    return x\n")
    result = lint(bad)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "bad.py:1:1: F401 'os' imported but unused" in result.stdout
    assert "Would format" in result.stdout and "bad.py" in result.stdout

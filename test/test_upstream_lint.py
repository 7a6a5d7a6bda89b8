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
    files = result.stdout.splitlines()[:11]
    assert "exir/emit/_emitter.py" in files
    assert "exir/emit/test/test_emit_device_constants.py" in files
    assert "$ flake8 <11 files>: exit 0" in result.stdout
    assert "$ ufmt check <11 files>: exit 0" in result.stdout


def test_a_violation_fails(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f( x ):\n    return x\n")
    result = lint(bad)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "bad.py:1:1: F401 'os' imported but unused" in result.stdout
    assert "Would format" in result.stdout and "bad.py" in result.stdout

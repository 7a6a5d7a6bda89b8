# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The helper scripts explain how to call them instead of dying."""

import subprocess

import pytest

from conftest import REPO


@pytest.mark.parametrize("name", ["apply_roundtrip.sh", "user_checks.sh"])
@pytest.mark.parametrize("args", [[], ["/nonexistent-venv"], ["a", "b"]])
def test_a_venv_script_prints_its_usage(name, args) -> None:
    script = REPO / "scripts" / name
    result = subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert f"usage: bash scripts/{name} VENV" in result.stderr
    assert "unbound variable" not in result.stderr

# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The backport forms (patches/backports) match the series they came from.

scripts/backport.py writes them from a git repository of pytorch/executorch,
which CI does not have; here each form is checked against the series as it
is now: the same added and removed lines, in order. A patch of the series
changed without rerunning the script fails here, naming the command.
"""

import subprocess
import sys

import pytest

from conftest import REPO
from executorch_device_guard.patchset import (
    Hunk,
    patched_files,
    read_backports,
)

sys.path.insert(0, str(REPO / "scripts"))
import backport  # noqa: E402

FORMS = [(rel, form) for rel, forms in read_backports(REPO).items() for form in forms]
RERUN = "rerun: .venv/bin/python scripts/backport.py /path/to/executorch.git"


def test_the_vulkan_builder_has_a_form_for_1_0_0_to_1_1_0() -> None:
    assert [(rel, f.name) for rel, f in FORMS][:1] == [
        ("backends/vulkan/serialization/vulkan_graph_builder.py", "v1.0.0-v1.1.0")
    ]


@pytest.mark.parametrize("rel,form", FORMS, ids=[f.name for _, f in FORMS])
def test_each_form_changes_the_series_lines(rel, form) -> None:
    series = patched_files(REPO)[rel]
    assert backport.changed_lines(form.patches) == backport.changed_lines(series), RERUN


def _hunk(old, new) -> Hunk:
    return Hunk(1, tuple(old), tuple(new))


def test_a_hunk_moves_to_the_one_place_its_trimmed_context_fits() -> None:
    lines = ["import (\n", "    b,\n", "    c,\n", ")\n"]
    # Upstream's context has "a," after the insertion; this release does not.
    hunk = _hunk(
        ["import (\n", "    a,\n", "    b,\n"],
        ["import (\n", "    x,\n", "    a,\n", "    b,\n"],
    )
    moved = backport.move_hunk(lines, hunk, "f.py", 1)
    assert moved == ["import (\n", "    x,\n", "    b,\n", "    c,\n", ")\n"]


def test_a_hunk_that_fits_twice_or_nowhere_is_refused() -> None:
    hunk = _hunk(["a\n", "b\n"], ["a\n", "new\n", "b\n"])
    with pytest.raises(backport.NoPlace, match="fits 2 places"):
        backport.move_hunk(["z\n", "a\n", "q\n", "a\n"], hunk, "f.py", 1)
    with pytest.raises(backport.NoPlace, match="fits nowhere"):
        backport.move_hunk(["z\n"], _hunk(["a\n", "gone\n"], ["a\n"]), "f.py", 1)


def test_a_form_that_changes_other_lines_is_refused() -> None:
    stock = "one\ntwo\nthree\n"
    (series,) = patched_files(REPO)[FORMS[0][0]][:1]
    with pytest.raises(backport.NoPlace):
        backport.backport("f.py", stock, [series])


def test_a_bad_repository_is_one_line() -> None:
    script = REPO / "scripts" / "backport.py"
    result = subprocess.run(
        [sys.executable, str(script), "/nonexistent", "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("backport: cannot read /nonexistent: ")
    assert len(result.stderr.splitlines()) == 1

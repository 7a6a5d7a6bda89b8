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
from executorch_device_guard import patchset
from executorch_device_guard.patchset import (
    FilePatch,
    FileState,
    Form,
    Hunk,
    patched_files,
    read_backports,
)

sys.path.insert(0, str(REPO / "scripts"))
import backport  # noqa: E402

FORMS = [(rel, form) for rel, forms in read_backports(REPO).items() for form in forms]
RERUN = "rerun: .venv/bin/python scripts/backport.py /path/to/executorch.git"


def test_the_vulkan_builder_has_a_form_for_1_0_0_to_1_1_0() -> None:
    vulkan = "backends/vulkan/serialization/vulkan_graph_builder.py"
    assert (vulkan, "v1.0.0-v1.1.0") in [(rel, f.name) for rel, f in FORMS]


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


def _form(name: str, old: str, new: str) -> Form:
    hunk = Hunk(2, tuple(old.splitlines(True)), tuple(new.splitlines(True)))
    return Form(name, (FilePatch("f.py", (hunk,)),))


def test_a_text_that_fits_two_forms_differently_is_unknown() -> None:
    text = "a\nb\nc\n"
    one = _form("one", "b\n", "b\nguard\n")
    other = _form("other", "b\n", "guard\nb\n")
    state, _, why, _ = patchset._classify(text, (one,))
    assert state is FileState.STOCK and why == ""
    state, _, why, name = patchset._classify(text, (one, other))
    assert (state, why, name) == (
        FileState.UNKNOWN,
        "it fits more than one form (one, other)",
        "",
    )


def test_a_text_that_holds_both_under_one_form_is_unknown() -> None:
    # Under ``mixed`` it is stock and patched at once (each side's lines
    # occur once); under ``clean`` it is stock.
    text = "a\nb\nguard\nc\n"
    mixed = _form("upstream", "b\n", "b\nguard\n")
    clean = _form("v1", "a\nb\nguard\nc\n", "a\nb\nguard\nguard\nc\n")
    state, _, why, _ = patchset._classify(text, (mixed, clean))
    assert state is FileState.UNKNOWN
    assert why == "it holds both the stock and the patched code"


def test_a_backport_for_some_releases_is_for_those_alone() -> None:
    """releases=1.0.0-1.4.1: the distribution's version decides; one that
    is not a release's leaves it to the file's text."""
    from executorch_device_guard.patchset import FilePatch

    scoped = FilePatch("x.py", (), ("1.0.0", "1.4.1"))
    assert [scoped.for_release(v) for v in ("1.0.0", "1.4.1", "1.2.0+cpu")] == [
        True
    ] * 3
    assert [scoped.for_release(v) for v in ("0.7.0", "1.5.0", "1.5.0.dev1")] == [
        False
    ] * 3
    assert scoped.for_release("unknown") and scoped.for_release(None)
    assert FilePatch("x.py", ()).for_release("1.5.1")

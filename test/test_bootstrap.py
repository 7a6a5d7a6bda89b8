# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The bootstrap: the folder whose ``sitecustomize`` turns the fix on in any
Python that has it on ``PYTHONPATH``, and then runs the user's own."""

import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from conftest import REPO
from test_finder import fresh_python, interpreter, last_frame, RAISE, site_of
from test_readme import emitter_raised, readme_recipe

BOOTSTRAP = REPO / "executorch_device_guard" / "bootstrap"

USERS_OWN = 'import sys\nsys.stderr.write("the user\'s sitecustomize ran\\n")\n'


READ_META = "import executorch.exir.tiny as t\nprint(t.read('meta'))\n"


def test_the_bootstrap_on_the_path_serves_the_fix(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    proc = fresh_python(tmp_path, [BOOTSTRAP, site], READ_META)
    assert last_frame(proc.stderr)[1:] == (
        RAISE,
        "RuntimeError: data on meta cannot be read here",
    )


def test_the_users_own_sitecustomize_later_on_the_path_still_runs(tmp_path):
    site = site_of(tmp_path, "stock")
    (site / "sitecustomize.py").write_text(USERS_OWN)
    proc = fresh_python(tmp_path, [BOOTSTRAP, site], READ_META)
    assert proc.stderr.splitlines()[0] == "the user's sitecustomize ran"
    assert last_frame(proc.stderr)[1] == RAISE


def test_an_error_in_the_users_sitecustomize_is_reported_as_python_would(tmp_path):
    site = site_of(tmp_path, "fixed")
    (site / "sitecustomize.py").write_text("import a_module_that_is_not_there\n")
    code = "print('ran')\n"
    alone = fresh_python(tmp_path, [site], code)
    bootstrapped = fresh_python(tmp_path, [BOOTSTRAP, site], code)
    assert "No module named 'a_module_that_is_not_there'" in alone.stderr
    assert (bootstrapped.stdout, bootstrapped.stderr) == (alone.stdout, alone.stderr)


def test_the_bootstrap_adds_nothing_to_the_path(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    code = "import sys\nprint(sys.path)\nprint(sorted(sys.modules))\n"
    alone = fresh_python(tmp_path, [site], code).stdout.splitlines()
    bootstrapped = fresh_python(tmp_path, [BOOTSTRAP, site], code).stdout.splitlines()
    assert bootstrapped[0] == alone[0].replace("[''", f"['', '{BOOTSTRAP}'", 1)
    # The tool's package, from the folder around the bootstrap; nothing else.
    added = sorted(set(eval(bootstrapped[1])) - set(eval(alone[1])))
    assert [m for m in added if "executorch" in m] == [
        "executorch_device_guard",
        "executorch_device_guard.finder",
    ]


def test_the_off_switch_keeps_the_fix_off(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    code = (
        READ_META
        + "import sys\nprint(sorted(m for m in sys.modules if 'guard' in m))\n"
    )
    proc = fresh_python(
        tmp_path, [BOOTSTRAP, site], code, EXECUTORCH_DEVICE_GUARD="off"
    )
    assert (proc.stdout, proc.stderr) == ("read on meta\n[]\n", "")


@pytest.mark.parametrize("version", ["2.7", "3.9"])
def test_a_python_older_than_3_10_runs_stock_with_one_line(tmp_path, version):
    old = interpreter(version)
    site = site_of(tmp_path, "stock")
    code = "import sys\nprint(sorted(m for m in sys.modules if 'guard' in m))\n"
    line = (
        f"executorch-device-guard: Python {version} is older than 3.10, which the "
        f"fix needs: {old} runs ExecuTorch without it\n"
    )
    # Python 2 writes its bytecode beside the source, here in the tool.
    no_pyc = {"PYTHONDONTWRITEBYTECODE": "1"}
    alone = fresh_python(tmp_path, [BOOTSTRAP, site], code, executable=old, **no_pyc)
    assert (alone.stdout, alone.stderr) == ("[]\n", line)
    (site / "sitecustomize.py").write_text(USERS_OWN)
    chained = fresh_python(tmp_path, [BOOTSTRAP, site], code, executable=old, **no_pyc)
    assert (chained.stdout, chained.stderr) == (
        "[]\n",
        line + "the user's sitecustomize ran\n",
    )


def test_the_readme_recipe_raises_the_clear_error_and_leaves_tmpdir_empty(tmp_path):
    """The README's script, stock and with the bootstrap on the path, in one
    run: the changed line of the installed emitter raises; nothing is left in
    TMPDIR; the user's own sitecustomize runs too."""
    script = tmp_path / "export_meta.py"
    script.write_text(readme_recipe())
    users = tmp_path / "users"
    users.mkdir()
    (users / "sitecustomize.py").write_text(USERS_OWN)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(
        os.environ,
        TMPDIR=str(tmpdir),
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),  # torch's own
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    env.pop("EXECUTORCH_DEVICE_GUARD", None)
    runs = {
        name: subprocess.run(
            [sys.executable, str(script)],
            env=dict(env, PYTHONPATH=os.pathsep.join(path)),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        for name, path in {
            "stock": [str(users)],
            "bootstrap": [str(BOOTSTRAP), str(users)],
        }.items()
    }
    stock, fixed = runs["stock"], runs["bootstrap"]

    def errors(proc: subprocess.CompletedProcess) -> List[str]:
        lines = proc.stderr.splitlines()
        return [line for line in lines if line.startswith("executorch.exir.error.")]

    assert errors(stock) == [
        "executorch.exir.error.InternalError: Failed with error: NULL pointer access"
    ], stock.stderr[-3000:]
    lines = fixed.stderr.splitlines()
    assert lines[0] == "the user's sitecustomize ran"
    assert errors(fixed) == [
        "executorch.exir.error.InternalError: Failed with error: Constant tensor "
        "data for '0.weight' is on device meta, but ExecuTorch can only serialize "
        "constant data from CPU memory. Export with constants in CPU memory, or "
        "lower them into a delegate for that device."
    ], fixed.stderr[-3000:]
    # The last frame of the emitter, and the line that raised there.
    shown, raised = emitter_raised(fixed.stderr)
    assert raised == "raise InternalError(error)"
    assert shown.startswith(str(tmp_path / "cache"))
    assert os.listdir(tmpdir) == []

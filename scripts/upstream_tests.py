# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The series' upstream test modules, stock versus patched, per module.

    PYTHON scripts/upstream_tests.py [OUT.txt]

Runs with whatever torch and ExecuTorch PYTHON has (give another venv's
python to try another torch): each module whose backend that ExecuTorch
ships under plain ``python -m pytest -v``
against that ExecuTorch, stock and with the import hook serving the series,
and prints a markdown table of passed/failed counts per module. The
installed ExecuTorch is never modified. With OUT.txt, pytest's output of both runs goes there.
"""

import collections
import platform
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from executorch_device_guard.installation.installed import (  # noqa: E402
    executorch_root,
    executorch_version,
)
from executorch_device_guard.check.runner import Emitters  # noqa: E402
from executorch_device_guard.check.series_files import (  # noqa: E402
    pytest_outcomes,
    series_test_modules,
    upstream_tests,
    write_tree,
)

# The series' test modules that run on CPU and whose backend the installed
# release ships; a C++ commit's need its build (docs/custom-ops-build.md).
MODULES = series_test_modules(REPO, executorch_root())


def counts(stdout: str) -> dict:
    found = collections.defaultdict(collections.Counter)
    for node, outcome in pytest_outcomes(stdout).items():
        found[node.split("::")[0]][outcome.lower()] += 1
    return found


def cell(counter: collections.Counter) -> str:
    return ", ".join(f"{n} {what}" for what, n in sorted(counter.items())) or "-"


def main(out: Path = None) -> int:
    import torch

    args = ["-m", "pytest", "-v", "-p", "no:cacheprovider", *MODULES]
    results = {}
    with tempfile.TemporaryDirectory() as tmp, Emitters(REPO, warm=False, upstream=True) as e:
        tree = write_tree(upstream_tests(REPO, executorch_root()), Path(tmp))
        for emitter in ("stock", "patched"):
            results[emitter] = e.run(emitter, args, cwd=tree, timeout=3600)
    print(
        f"torch {torch.__version__}, ExecuTorch {executorch_version()} "
        f"({executorch_root()}), Python {platform.python_version()}\n"
    )
    print("| module | stock | patched |\n|---|---|---|")
    found = {emitter: counts(proc.stdout) for emitter, proc in results.items()}
    for module in MODULES:
        print(
            f"| `{module}` | {cell(found['stock'][module])} | "
            f"{cell(found['patched'][module])} |"
        )
    for emitter, proc in results.items():
        fatal = "Fatal Python error" in proc.stdout + proc.stderr
        summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        print(
            f"\n{emitter}: exit {proc.returncode}, {summary}"
            + (", Fatal Python error" if fatal else "")
        )
    if out is not None:
        out.write_text(
            "".join(
                f"===== {emitter}: python {' '.join(args)}\n{proc.stdout}{proc.stderr}"
                for emitter, proc in results.items()
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else None))

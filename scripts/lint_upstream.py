# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Lint every Python file the series adds or changes, as ExecuTorch does.

    .venv/bin/python scripts/lint_upstream.py [--lint-bin .lintvenv/bin] [FILE...]

Lays the files out at their ExecuTorch paths in a temporary folder (changed
files as the installed ExecuTorch's, with the series applied; new files from
this repository), with ExecuTorch's flake8 and ufmt (black + usort) settings,
and runs ExecuTorch's pinned linters there (scripts/lint-requirements.txt,
installed into .lintvenv by scripts/setup.sh). Extra FILEs are linted as if
they were new files of the series. Exits 0 only if both linters are clean.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from executorch_device_guard.installation import installed  # noqa: E402
from executorch_device_guard.errors import GuardError  # noqa: E402
from executorch_device_guard.check.series_files import (  # noqa: E402
    changed_files,
    new_files,
)

# ExecuTorch's .flake8 and pyproject.toml settings, as of main at cff6f4dd32
# (the same in v1.5.1): flake8's select, ignore, line length and complexity;
# usort's first-party detection; black's target versions.
FLAKE8 = {
    "select": "B,C,E,F,P,W,B9,TOR0,TOR1,TOR2",
    "max-line-length": "80",
    "max-complexity": "12",
    "ignore": ",".join(
        [
            # Black conflicts and overlaps.
            *"B950 E111 E115 E117 E121 E122 E123 E124 E125 E126 E127 E128".split(),
            *"E129 E131 E201 E202 E203 E221 E222 E225 E226 E227 E231 E241".split(),
            *"E251 E252 E261 E262 E265 E271 E272 E301 E302 E303 E305 E306".split(),
            *"E501 E502 E701 E702 E703 E704 W291 W292 W293 W391 W504".split(),
            # Too opinionated.
            *"E265 E266 E402 E722 B001 P207 B003 P208 C403 W503".split(),
            # Bugbear's opinionated warnings.
            *"B904 B905 B906 B907".split(),
        ]
    ),
}
PYPROJECT = """\
[tool.usort]
first_party_detection = false

[tool.black]
target-version = ["py38", "py39", "py310", "py311", "py312", "py313"]
"""


def series_files() -> Dict[str, str]:
    """ExecuTorch path -> text, for every Python file the series adds or changes."""
    root = installed.executorch_root()
    try:
        changed = changed_files(REPO, root, tests=True)
    except GuardError as e:
        raise SystemExit(f"{e}: cannot lint it")
    return {**changed, **new_files(REPO)}


def lint(files: Dict[str, str], lint_bin: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="lint-upstream-") as tmp:
        tree = Path(tmp)
        flake8 = "\n".join(f"{k} = {v}" for k, v in FLAKE8.items())
        (tree / ".flake8").write_text(f"[flake8]\n{flake8}\n")
        (tree / "pyproject.toml").write_text(PYPROJECT)
        for rel, text in files.items():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(text, encoding="utf-8")
        names: List[str] = sorted(files)
        failed = 0
        for tool in (["flake8"], ["ufmt", "check"]):
            proc = subprocess.run(
                [str(lint_bin / tool[0]), *tool[1:], *names],
                cwd=tree,
                capture_output=True,
                text=True,
            )
            print(f"$ {' '.join(tool)} <{len(names)} files>: exit {proc.returncode}")
            output = (proc.stdout + proc.stderr).strip()
            if output:
                print(output)
            failed |= proc.returncode != 0
    return 1 if failed else 0


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lint-bin", type=Path, default=REPO / ".lintvenv" / "bin")
    parser.add_argument("extra", nargs="*", type=Path)
    args = parser.parse_args(argv)
    if not (args.lint_bin / "flake8").exists():
        print(f"no flake8 in {args.lint_bin}: run scripts/setup.sh", file=sys.stderr)
        return 2
    files = series_files()
    for path in args.extra:
        files[path.name] = path.read_text(encoding="utf-8")
    print("\n".join(sorted(files)))
    return lint(files, args.lint_bin)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

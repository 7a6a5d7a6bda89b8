# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``check`` with this checkout's tool and with another's, side by side.

    .venv/bin/python scripts/same_verdicts.py BEFORE [--out FILE]

BEFORE is another checkout of this project (an earlier commit: ``git
worktree add --detach /tmp/before REV``). Runs the default ``check`` and
``check --model KIND`` for each model kind of test/models/
(bench/check_models.py's), each with BEFORE's tool and then this one's, from
test/models/, with the same Python, and compares their exit codes and
their stdout (the table and the verdict). Prints one line per check and
the first difference, if any; with ``--out``, also each check's stdout.
Exits 1 if any check differs.
"""

import argparse
import difflib
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from check_models import KINDS, MODELS  # noqa: E402


def check(tool: Path, args: list) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(tool))
    cmd = [sys.executable, "-m", "executorch_device_guard", "check", *args]
    return subprocess.run(cmd, env=env, cwd=MODELS, capture_output=True, text=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs = {"default check": [], **{k: ["--model", s] for k, s in KINDS.items()}}
    lines, differ = [], 0
    for name, check_args in runs.items():
        found = {}
        for label, tool in (("before", args.before.resolve()), ("now", REPO)):
            start = time.monotonic()
            found[label] = check(tool, check_args), time.monotonic() - start
        (old, old_s), (new, new_s) = found["before"], found["now"]
        same = (old.returncode, old.stdout) == (new.returncode, new.stdout)
        differ += not same
        line = (
            f"{'same' if same else 'DIFFERENT'}: {name} ({' '.join(check_args)}): "
            f"exit {old.returncode} / {new.returncode}, {old_s:.0f} s / {new_s:.0f} s"
        )
        print(line, flush=True)
        lines.append(line)
        if not same:
            diff = difflib.unified_diff(
                old.stdout.splitlines(), new.stdout.splitlines(), "before", "now", n=1
            )
            print("\n".join(diff), flush=True)
        lines += [f"--- {name}: check's stdout ---", new.stdout.rstrip(), ""]
    if args.out:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(runs) - differ} of {len(runs)} checks the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""How long the default ``check`` takes, against one import of torch and ExecuTorch.

    .venv/bin/python bench/bench_check.py [--rounds 3] [-- CHECK ARGS...]

Both are measured in the same run, interleaved, each in a fresh process of
this interpreter: ``python -c "import torch, executorch.exir"`` and
``python -m executorch_device_guard check`` (default matrix unless CHECK ARGS
are given). Prints each time, the medians, their ratio (the target is at
most 5) and the load average before and after, since other work on the
machine slows both.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parent.parent


def timed(cmd: List[str]) -> float:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("check_args", nargs="*", help="after --: arguments for check")
    args = parser.parse_args()
    imports = [sys.executable, "-c", "import torch, executorch.exir"]
    check = [sys.executable, "-m", "executorch_device_guard", "check", *args.check_args]
    load_before = os.getloadavg()
    import_times, check_times = [], []
    for round_ in range(1, args.rounds + 1):
        import_times.append(timed(imports))
        check_times.append(timed(check))
        print(
            f"round {round_}: import {import_times[-1]:.1f} s, "
            f"check {check_times[-1]:.1f} s",
            flush=True,
        )
    load_after = os.getloadavg()
    t_import = statistics.median(import_times)
    t_check = statistics.median(check_times)
    print(
        f"cores: {os.cpu_count()}; load average before {load_before[0]:.2f}, "
        f"after {load_after[0]:.2f} (1 min)"
    )
    print(f"import torch, executorch.exir: {t_import:.1f} s (median of {args.rounds})")
    print(
        f"check {' '.join(args.check_args) or '(default matrix)'}: "
        f"{t_check:.1f} s (median of {args.rounds})"
    )
    print(f"ratio: {t_check / t_import:.2f} (target: at most 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

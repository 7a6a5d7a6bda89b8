# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What ``run`` costs: ``run -- python export_meta.py`` (the README's example)
against the same ``python export_meta.py`` without it.

    .venv/bin/python bench/bench_run.py [--rounds 5]

Both are measured in the same run, each in a fresh process of this
interpreter, in interleaved rounds (the order alternates from round to round),
after one warm-up round that is not counted. Prints each time, the medians,
their ratio (the target is at most 1.1) and the load average before and
after. Wall time is what a user waits; CPU time (user + system, of the
process and everything it waited for) is printed too, as other work on the
machine changes it much less. Each run must end as the README says: exit 1,
stock with ``NULL pointer access``, under ``run`` with the error that names
the device.

Neither writes bytecode into the installed ExecuTorch: ``run`` sets
``PYTHONDONTWRITEBYTECODE=1`` for its command, and the plain import gets the
same, so that both read the bytecode pip installed and neither adds any. The
script checks it: it fingerprints every file and folder of the installed
package (path, size, modification time) before and after, and exits 1 if
anything changed.
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
# How each command must end (exit 1): the last line of its error.
ENDS = {
    "plain": "InternalError: Failed with error: NULL pointer access",
    "run": "Constant tensor data for '0.weight' is on device meta,",
}


def readme_example() -> str:
    """The README's ``export_meta.py``."""
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    (example,) = [b for b in blocks if b.startswith("# export_meta.py")]
    return example


def executorch_folder() -> Path:
    """The installed ExecuTorch, found as the tool finds it."""
    sys.path.insert(0, str(REPO))
    from executorch_device_guard.installation.installed import executorch_root

    return executorch_root()


def fingerprint(root: Path) -> Dict[str, Tuple[int, int]]:
    """Every file and folder under ``root``: (size, mtime_ns), links unfollowed."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            found[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return found


def timed(cmd: List[str], env: Dict[str, str], end: str) -> Tuple[float, float]:
    """Wall and CPU seconds of ``cmd`` and its descendants; it must exit 1
    with ``end`` on stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 1 or end not in proc.stderr:
        sys.exit(
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    folder = tempfile.TemporaryDirectory(prefix="bench-run-")
    script = Path(folder.name) / "export_meta.py"
    script.write_text(readme_example())
    plain = [sys.executable, str(script)]
    run = [sys.executable, "-m", "executorch_device_guard", "run", "--", *plain]
    root = executorch_folder()
    before = fingerprint(root)
    load_before = os.getloadavg()
    times: Dict[str, List[Tuple[float, float]]] = {"plain": [], "run": []}
    commands = {"plain": plain, "run": run}
    for round_ in range(args.rounds + 1):
        order = ["plain", "run"] if round_ % 2 else ["run", "plain"]
        measured = {name: timed(commands[name], env, ENDS[name]) for name in order}
        line = ", ".join(
            f"{name} {measured[name][0]:.2f} s (CPU {measured[name][1]:.2f} s)"
            for name in ("plain", "run")
        )
        if round_ == 0:
            print(f"warm-up: {line} (not counted)", flush=True)
            continue
        for name, seconds in measured.items():
            times[name].append(seconds)
        print(f"round {round_} ({' then '.join(order)}): {line}", flush=True)
    load_after = os.getloadavg()
    after = fingerprint(root)
    wall = {name: statistics.median(t[0] for t in times[name]) for name in times}
    cpu = {name: statistics.median(t[1] for t in times[name]) for name in times}
    ratio = wall["run"] / wall["plain"]
    print(
        f"cores: {os.cpu_count()}; load average before {load_before[0]:.2f}, "
        f"after {load_after[0]:.2f} (1 min)"
    )
    print(
        f'python export_meta.py: {wall["plain"]:.2f} s, CPU {cpu["plain"]:.2f} s '
        f"(medians of {args.rounds})"
    )
    print(
        f"executorch-device-guard run -- python export_meta.py: {wall['run']:.2f} s, "
        f'CPU {cpu["run"]:.2f} s (medians of {args.rounds})'
    )
    folder.cleanup()
    print(f"CPU ratio: {cpu['run'] / cpu['plain']:.3f}")
    verdict = "within" if ratio <= 1.1 else "OVER"
    print(f"ratio: {ratio:.3f} ({verdict} the target of at most 1.1)")
    if after != before:
        changed = sorted(set(after.items()) ^ set(before.items()))
        print(
            f"FAIL: the installed ExecuTorch at {root} changed: "
            f"{changed[0][0]} (and {len(changed) - 1} more entries)"
        )
        return 1
    print(f"the installed ExecuTorch is unchanged: {len(after)} files and folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())

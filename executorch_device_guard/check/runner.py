# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Runs exports in child processes against the stock or the patched emitter.

Both sides import the installed ExecuTorch: the stock side with the import
hook off, the patched side with it on (its bootstrap first on
``PYTHONPATH``, as under ``run``), in every process of each side. No
ExecuTorch file or tree is written anywhere. Each side gets a warm parent
(executorch_device_guard.check.warm) that has imported torch and ExecuTorch
once; each export is a child forked from it,
a real CUDA one too (the parent never starts CUDA; its child does).
Platforms without fork, a parent that cannot fork safely (it has threads),
and ``Emitters(warm=False)`` use a fresh interpreter per export instead.
Either way a crash kills one child only, and the result is the same
``Outcome``.

Each export reports through a result file in its own case folder (see
child.py), never through its stdout, and says which ExecuTorch emitter it
imported and what the import hook served: a child that imported another
emitter than the installed one, a patched child that ran a target without
the fix, or a stock child with the hook on gives no verdict (a tool error),
whatever it printed. Children and warm parents run in sessions of their
own, so a terminal's Ctrl-C reaches this process alone, which ends them all
(``abort``) before it removes its folder. Every Python process started here
writes no bytecode (``run.NO_BYTECODE``).

The case folders lie in a temporary folder of check's own
(``device-guard-XXXXXXXX``), locked while this process uses it. One that a
SIGKILL left is removed by the next ``Emitters`` once no process holds its
lock (``tempdirs.remove_abandoned``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

from executorch_device_guard import data_root, finder, tempdirs
from executorch_device_guard.check import failures, preloaded, warm
from executorch_device_guard.check.child import OUTCOMES
from executorch_device_guard.check.series_files import write_series
from executorch_device_guard.errors import GuardError
from executorch_device_guard.installation import served
from executorch_device_guard.installation.installed import executorch_root
from executorch_device_guard.installation.lock import describe
from executorch_device_guard.installation.run import environment as run_environment
from executorch_device_guard.installation.run import NO_BYTECODE
from executorch_device_guard.patchset import read_series

EMITTERS = ("stock", "patched")

# The emitter, which every export imports, in the package folder.
EMITTER = "exir/emit/_emitter.py"
# What the import hook may serve a patched child: a module changed, or one
# that holds the fix already or whose change is not for this release.
SERVED_FIXED = ("changed", "patched", "not for this release")
# In the environment of every process check starts (and of every process
# those start): check's folder, by which ``close`` finds what outlives it.
MARKER = "EXECUTORCH_DEVICE_GUARD_CHECK"

WARM_UP = "executorch_device_guard.check.warmup:main"
# What an export child needs, imported once by each warm parent, then the
# pattern graphs that every lowering would make again (warmup.py, on one
# thread; a fresh interpreter skips that step, as its export makes them).
EXPORT_PRELOAD = (
    "torch",
    "torch.export",
    "executorch.exir",
    "executorch.backends.xnnpack.partition.xnnpack_partitioner",
    "executorch.backends.xnnpack.xnnpack_preprocess",
    "executorch.backends.vulkan.partitioner.vulkan_partitioner",
    "executorch.backends.vulkan.vulkan_preprocess",
    "executorch.devtools.bundled_program.core",
    "executorch.devtools.bundled_program.serialize",
    "executorch_device_guard.check.child",
    "executorch_device_guard.check.fake_device",
    "executorch_device_guard.check.models",
    "executorch_device_guard.check.probe",
    # Imported by every export on its first run; optional ('?'): private
    # modules that other torch releases may not have.
    "torch.export._trace?",
    "torch.export._unlift?",
    "torch._export.db?",
    "torch._export.passes.replace_set_grad_with_hop_pass?",
    "torch._export.passes.collect_tracepoints_pass?",
    "torch._functorch._aot_autograd.subclass_parametrization?",
    "torch._inductor.fx_passes.dedupe_symint_uses?",
    "torch._higher_order_ops.passes?",
    "torch.fx.experimental.validator?",
    "executorch.extension.flat_tensor?",
    # XNNPACK's and Vulkan's pattern graphs, made once (warmup.py).
    WARM_UP,
)


def export_preload(
    paths: Optional[Sequence[str]] = None, model: bool = False
) -> Tuple[str, ...]:
    """EXPORT_PRELOAD for check's ``paths`` (None: all): without the pattern
    graphs when neither XNNPACK nor Vulkan is among them; with ``model``,
    then the model, loaded once (preloaded.py; Emitters(model=...) names it)."""
    found = EXPORT_PRELOAD
    if paths is not None and not {"xnnpack", "vulkan"} & set(paths):
        found = tuple(name for name in EXPORT_PRELOAD if name != WARM_UP)
    return found + ((preloaded.STEP,) if model else ())


def hash_seed() -> str:
    """The one string-hash seed of every Python process check starts: the
    caller's PYTHONHASHSEED if it fixes one, else 0. Stock's and patched's
    processes then print the same set in the same order."""
    value = os.environ.get("PYTHONHASHSEED", "")
    return value if value.isdigit() else "0"


# A fresh interpreter's ``-c`` for ``Emitters.call``: it imports what a warm
# parent preloads without the current folder on sys.path (as a warm parent,
# started in a folder of its own), puts the folder back, then calls the
# target. A preloaded module that fails to import here fails where it is used.
_FRESH_CALL = """
import importlib, sys
here = None if getattr(sys.flags, "safe_path", False) else sys.path.pop(0)
for name in {preload!r}:
    try:
        importlib.import_module(name.rstrip("?"))
    except ImportError:
        pass
if here is not None:
    sys.path.insert(0, here)
from {module} import {function} as f
r = f(sys.argv[1:])
sys.exit(r if isinstance(r, int) else 0)
"""

# How long one export, or loading the model, may take (``check --timeout``).
DEFAULT_TIMEOUT = 600.0


class Aborted(Exception):
    """The Emitters were aborted (an interrupt): this run was not finished."""


@dataclasses.dataclass
class Outcome:
    returncode: int
    result: Optional[Dict]
    stderr: str
    # Why this outcome is no verdict because of the tool (the child imported
    # another ExecuTorch, it timed out, its result was malformed), if it is.
    tool_error: Optional[str] = None
    timed_out: Optional[float] = None
    # How far the child got (child.py): "export" or "device"; None if it
    # said nothing. For a crash, it says where the crash happened.
    stage: Optional[str] = None
    # The export's last step that started (child.py), e.g. "torch.export".
    step: Optional[str] = None
    # The constants on the guarded path, as the child listed them
    # (inventory.py); None if it said nothing.
    constants: Optional[List[Dict]] = None

    @property
    def crashed(self) -> bool:
        return self.returncode < 0 or self.result is None

    def describe(self) -> str:
        """Exit code or signal name, or the exception's first line."""
        if self.timed_out is not None:
            return f"timed out after {self.timed_out:g} s"
        if self.returncode < 0:
            name = signal.Signals(-self.returncode).name
            return f"{name} (exit {128 - self.returncode})"
        if self.result is None:
            return f"exit {self.returncode}, no result"
        if self.result["outcome"] == "ok":
            return "ok"
        if self.result["outcome"] == "n/a":
            return f"n/a ({self.result['message']})"
        return failures.error_text(self.result)


def _valid_result(result: object) -> bool:
    if not isinstance(result, dict) or result.get("outcome") not in OUTCOMES:
        return False
    if result["outcome"] == "ok":
        return all(
            isinstance(files, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
            for files in (result.get("files"), result.get("host_copy", {}))
        )
    fields = ("message",) if result["outcome"] == "n/a" else ("type", "message")
    return all(isinstance(result.get(f), str) for f in fields)


_STAGES = ("export", "device")


@dataclasses.dataclass
class ResultFile:
    """What a child's result file says: the emitter it imported, what the
    import hook served it (None: the hook was off), its result, why the file
    is unusable (None if it is fine or simply ends early), and the last
    stage and step it reached."""

    emitter: Optional[str] = None
    served: Optional[Dict[str, str]] = None
    result: Optional[Dict] = None
    problem: Optional[str] = None
    stage: Optional[str] = None
    step: Optional[str] = None
    constants: Optional[List[Dict]] = None


def _valid_constants(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(entry, dict) and isinstance(entry.get("name"), str)
        for entry in value
    )


def _valid_served(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def read_result(path: Path) -> ResultFile:
    """Reads a child's result file (child.py)."""
    found = ResultFile()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return found
    except OSError as e:
        found.problem = f"its result file cannot be read ({e.strerror})"
        return found
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict) and isinstance(record.get("emitter"), str):
            found.emitter = record["emitter"]
            if _valid_served(record.get("served")):
                found.served = record["served"]
        elif isinstance(record, dict) and record.get("stage") in _STAGES:
            found.stage = record["stage"]
        elif isinstance(record, dict) and isinstance(record.get("step"), str):
            found.step = record["step"]
        elif isinstance(record, dict) and _valid_constants(record.get("constants")):
            found.constants = record["constants"]
        elif isinstance(record, dict) and _valid_result(record.get("result")):
            found.result = record["result"]
        else:
            found.result, found.problem = None, "its result file is malformed"
            return found
    return found


def _site_dirs() -> Set[str]:
    """The site-packages folders this interpreter has without PYTHONPATH."""
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return {os.path.realpath(d) for d in dirs}


def pythonpath(user: Optional[str]) -> str:
    """The user's PYTHONPATH, then where this package is imported from,
    unless that is a site-packages folder (a wheel install), which is on the
    path anyway and must not come before the standard library or the user's
    path."""
    parts = [user] if user else []
    package_parent = os.path.realpath(Path(__file__).resolve().parents[2])
    if package_parent not in _site_dirs():
        if os.pathsep in package_parent:
            raise GuardError(
                f"this tool is imported from {package_parent}, whose path "
                f"contains {os.pathsep!r}, so PYTHONPATH cannot hold it: install "
                "the tool, or move it to a folder without it."
            )
        parts.append(package_parent)
    return os.pathsep.join(parts)


def _inside(path: str, folder: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([real, top]) == top


def refuse_unserved(installed: Path) -> None:
    """GuardError unless the import hook would serve every target of the
    installed ExecuTorch the fix, and its stock text is what is installed
    (a file that holds the fix, patched in place by an earlier version or
    shipped so, would run on the stock side too)."""
    found = served.targets(installed)
    why = ", so check has no stock ExecuTorch to compare with"
    served.refuse_in_place(installed, found, why, "Nothing was run.")
    served.refuse_fixed(installed, found, why, "Nothing was run.")
    served.refuse_without_fix(installed, found)


class Emitters:
    """The installed ExecuTorch, stock and with the fix, for child processes.

    ``run`` starts a fresh interpreter; ``fork`` and ``call`` use the side's
    warm parent (started on first use, or all at once by ``start``) and fall
    back to a fresh interpreter where fork is not available. With
    ``upstream``, the patched side is served ``root``'s series (the tool's
    own by default) as its pull requests land, in place of what ``apply``
    installs; ``root`` is read only then.
    """

    def __init__(
        self,
        root: Optional[Path] = None,
        warm: Optional[bool] = None,
        preload: Sequence[str] = EXPORT_PRELOAD,
        upstream: bool = False,
        model: Optional[str] = None,
        flows: Sequence[str] = (),
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._installed = executorch_root()
        refuse_unserved(self._installed)
        self._closing = False
        # The model a warm parent loads once (preloaded.py), and from where.
        self._model = (model, os.getcwd()) if model else None
        self._flows = ",".join(flows)
        self._timeout = timeout
        self._parents: Dict[str, Optional[warm.WarmParent]] = {}
        self._failed: Set[warm.WarmParent] = set()
        self._fresh: Set[subprocess.Popen] = set()
        # Why a side fell back to fresh interpreters, if one did.
        self.notes: List[str] = []
        # What the model left running in sessions of its own (``close``).
        self.left_running: List[str] = []
        # The sessions of the processes started here, each its leader's pid.
        self._sessions: Set[int] = set()
        self._lock = threading.Lock()
        tempdirs.remove_abandoned(outside=self._installed)
        self.base = tempdirs.make(tempdirs.CHECK, outside=self._installed, locked=True)
        try:
            with tempdirs.writing(self.base):
                # The series the patched side is served: the tool's own,
                # what apply installs, or root's as its pull requests land.
                self._series: Optional[Path] = None
                if upstream:
                    entries = read_series(root or data_root())
                    self._series = write_series(entries, self.base / "series")
                for name in EMITTERS:
                    self.env(name)  # refuses a path PYTHONPATH cannot hold
                self._cases = self.base / "cases"
                self._cases.mkdir()
                tempdirs.probe(self._cases)
        except BaseException:
            tempdirs.remove(self.base)
            raise
        self.warm = _warm_default() if warm is None else warm and _warm_default()
        self._preload = tuple(preload)

    def env(self, emitter: str) -> Dict[str, str]:
        """The environment of every process of the side ``emitter``."""
        env = dict(os.environ)
        env["PYTHONPATH"] = pythonpath(env.get("PYTHONPATH"))
        env[MARKER] = str(self.base)
        env["PYTHONFAULTHANDLER"] = "1"
        env["PYTHONHASHSEED"] = hash_seed()
        if self._model is not None:
            env[preloaded.MODEL], env[preloaded.MODEL_CWD] = self._model
            env[preloaded.FLOWS] = self._flows
            env[preloaded.TIMEOUT] = f"{self._timeout:g}"
        # The stock side's hook is off, whatever turned it on (`run`, apply's
        # startup file); the patched side's is on as `run` turns it on,
        # serving the series named.
        env.pop(finder.SERIES, None)
        if emitter == "stock":
            env[finder.OFF] = "off"
            env.update(NO_BYTECODE)
            return env
        env = run_environment(env)
        if self._series is not None:
            env[finder.SERIES] = str(self._series)
        return env

    def case_folder(self, name: str) -> Path:
        """A new folder of its own for one child's files."""
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self._cases))

    def shorten(self, text: str) -> str:
        """``text`` without this run's temporary paths (gone on exit)."""
        for path in {str(self.base), os.path.realpath(self.base)}:
            text = text.replace(path, "<tmp>")
        return text

    def start(self) -> None:
        """Starts each side's warm parent now (they import in parallel)."""
        for emitter in EMITTERS:
            self.parent(emitter)

    def parent(self, emitter: str) -> Optional[warm.WarmParent]:
        """The side's warm parent, started if needed; None without fork."""
        if not self.warm:
            return None
        with self._lock:
            if self._closing:
                raise Aborted()
            if emitter not in self._parents:
                self._parents[emitter] = warm.WarmParent(
                    self.env(emitter), self._preload, self.base
                )
                self._sessions.add(self._parents[emitter].pid)
            return self._parents[emitter]

    def run(
        self,
        emitter: str,
        args: List[str],
        timeout: float = 900,
        cwd: Optional[Path] = None,
    ) -> subprocess.CompletedProcess:
        """``python ARGS`` in a fresh interpreter of the side, in a session
        of its own, ended whole (with what the child started in
        it) when the child ends, at ``timeout`` or on ``abort``.

        Its output goes to files, as a warm child's does: a process the
        child started in a session of its own may hold them open for as
        long as it likes, and nothing here waits for it."""
        cmd = [sys.executable, *args]
        folder = self.case_folder("run")
        out, err = folder / "stdout", folder / "stderr"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            with self._lock:
                if self._closing:
                    raise Aborted()
                proc = subprocess.Popen(
                    cmd,
                    env=self.env(emitter),
                    cwd=cwd,
                    stdout=stdout,
                    stderr=stderr,
                    start_new_session=True,
                )
                self._fresh.add(proc)
                self._sessions.add(proc.pid)
        try:
            ended = _wait_then_end_group(proc, timeout)
        finally:
            with self._lock:
                self._fresh.discard(proc)
        texts = [p.read_text(errors="replace") for p in (out, err)]
        shutil.rmtree(folder, ignore_errors=True)
        if not ended:
            raise subprocess.TimeoutExpired(cmd, timeout, *texts)
        if self._closing:
            raise Aborted()
        return subprocess.CompletedProcess(cmd, proc.returncode, *texts)

    def fork(
        self,
        emitter: str,
        args: List[str],
        timeout: float = 900,
        cwd: Optional[Path] = None,
    ) -> subprocess.CompletedProcess:
        """``python ARGS`` in a child of the side's warm parent.

        ARGS is ``-m MODULE ...``, ``-c CODE ...`` or ``SCRIPT ...``, optionally
        after ``-X faulthandler`` (always on). Falls back to ``run`` where
        there is no warm parent.
        """
        parent = self.parent(emitter)
        if parent is not None:
            try:
                return parent.run(args, cwd=cwd, timeout=timeout)
            except warm.WarmError as e:
                self._fall_back(emitter, e)
        return self.run(emitter, args, timeout, cwd)

    def call(
        self,
        emitter: str,
        target: str,
        args: Sequence[str] = (),
        timeout: float = 900,
        cwd: Optional[Path] = None,
        after: Optional[str] = None,
    ) -> subprocess.CompletedProcess:
        """``pkg.module:function(args)`` in a child of the warm parent,
        forked once its preload step ``after`` is done, if given, else once
        it is ready.

        The function's int return value is the exit code. Without a warm
        parent, a fresh interpreter calls it the same way.
        """
        parent = self.parent(emitter)
        if parent is not None:
            try:
                return parent.call(target, args, cwd=cwd, timeout=timeout, after=after)
            except warm.WarmError as e:
                self._fall_back(emitter, e)
        return self.run(emitter, self._fresh_call(target, args), timeout, cwd)

    def _fresh_call(self, target: str, args: Sequence[str]) -> List[str]:
        """``python`` arguments that call ``target(args)`` in a fresh
        interpreter as a warm child would: the preloaded modules are imported
        before the current folder goes on ``sys.path`` (where an
        ``executorch`` folder would come before the installed one)."""
        module, _, function = target.partition(":")
        code = _FRESH_CALL.format(
            preload=[name for name in self._preload if ":" not in name],
            module=module,
            function=function,
        )
        return ["-c", code, *args]

    def _fall_back(self, emitter: str, error: Exception) -> None:
        """From now on, fresh interpreters for this side; says why, once.

        Raises Aborted instead when the parent ended because of ``abort``.
        """
        if self._closing:
            raise Aborted() from error
        with self._lock:
            parent = self._parents.get(emitter)
            if parent is None or parent in self._failed:
                return
            self._failed.add(parent)
            self._parents[emitter] = None
        # Its own words when it ended ("the warm parent exited with ..."),
        # else the exception that ended its imports (the last line).
        lines = str(error).strip().splitlines() or ["unknown"]
        reason = lines[0] if lines[0].startswith("the warm parent") else lines[-1]
        note = (
            f"the {emitter} warm parent failed ({reason}); using a fresh "
            "interpreter per run"
        )
        if preloaded.STEP in reason:
            # The user's model started the thread: every export now loads
            # it again, which the user should know, and can change.
            note = (
                f"loading the model in the {emitter} warm parent started a "
                "thread, so each export imports and builds it again in a fresh "
                "interpreter (the same results, slower; a model file that "
                "starts no thread at import or build is loaded once)"
            )
        self.notes.append(note)
        if "forking it is not safe" not in reason or preloaded.STEP in reason:
            # A broken environment (an import that fails), which the
            # exports will meet too. A parent with threads is no mistake of
            # the user's: the same results, slower; --verbose says why.
            print(f"executorch-device-guard: {note}", file=sys.stderr, flush=True)
        parent.close()

    def export(
        self,
        emitter: str,
        device: str,
        model: str = "issue",
        external_constants: bool = False,
        out: Optional[Path] = None,
        flow: str = "emit",
        threads: Optional[int] = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Outcome:
        """One export in a child; ``threads`` sets torch's intra-op threads.

        A timeout, a result file that says nothing or is malformed, an
        emitter that is not the installed one, or one served otherwise than
        the side's (``_served_wrong``) make a ``tool_error``.
        """
        case = self.case_folder(f"{flow}-{emitter}-{device.replace(':', '_')}")
        out = out or case / "out"
        result_file = case / "result.jsonl"
        args = ["--device", device, "--model", model, "--out", str(out)]
        args += ["--result", str(result_file), "--flow", flow]
        if external_constants:
            args.append("--external-constants")
        if threads:
            args += ["--threads", str(threads)]
        try:
            # A real CUDA row too: the warm parent never starts CUDA (warm.py),
            # its child does.
            proc = self.call(
                emitter, "executorch_device_guard.check.child:main", args, timeout
            )
        except subprocess.TimeoutExpired as e:
            stderr = (
                e.stderr.decode(errors="replace")
                if isinstance(e.stderr, bytes)
                else (e.stderr or "")
            )
            return Outcome(
                -signal.SIGKILL,
                None,
                self.shorten(stderr),
                tool_error=f"timed out after {timeout:g} s (raise --timeout if "
                "the export needs longer)",
                timed_out=timeout,
            )
        found = read_result(result_file)
        imported, result, problem = found.emitter, found.result, found.problem
        if result is not None:
            result = {
                k: self.shorten(v) if isinstance(v, str) else v
                for k, v in result.items()
            }
            # Where the child's emitter came from, and what the hook served
            # (left out of check's output).
            result["emitter"] = imported
            result["served"] = found.served
        tool_error = problem
        if tool_error is None and imported is None and proc.returncode != 0:
            tool_error = (
                "the child ended before it said which ExecuTorch it imported "
                "(see --verbose)"
            )
        elif tool_error is None and imported is not None:
            tool_error = self._imported_wrong(imported) or _served_wrong(
                emitter, found.served
            )
        return Outcome(
            proc.returncode,
            result,
            self.shorten(proc.stderr),
            tool_error=tool_error,
            stage=found.stage,
            step=found.step,
            constants=found.constants,
        )

    def _imported_wrong(self, imported: str) -> Optional[str]:
        """Why the emitter a child imported is not the installed one; None
        where it is."""
        installed = self._installed / EMITTER
        if os.path.realpath(imported) == os.path.realpath(installed):
            return None
        here = os.getcwd()
        why = (
            f"the current folder {here} holds it, and is on its path: "
            "run check from another folder"
            if _inside(imported, Path(here) / "executorch")
            else "something on its path (a sitecustomize, a .pth file) "
            "put another ExecuTorch first"
        )
        return (
            f"it imported ExecuTorch's emitter from {imported}, not the "
            f"installed {installed}: {why}"
        )

    def abort(self) -> None:
        """Kills every warm parent, its children and every fresh child now;
        whatever waits on them raises Aborted."""
        with self._lock:
            self._closing = True
            parents = [p for p in [*self._parents.values(), *self._failed] if p]
            fresh = list(self._fresh)
        for parent in parents:
            parent.kill()
        for proc in fresh:
            _kill_group(proc)

    def close(self) -> None:
        """Ends the warm parents and removes check's folder; a signal
        meanwhile is raised once that is done. What is left of the sessions
        started here is killed; what still runs with check's environment
        then was started by the model in a session of its own:
        ``left_running`` names it, and nothing waits for it."""
        with tempdirs.holding() as held:
            with self._lock:
                self._closing = True
            for parent in [*self._parents.values(), *self._failed]:
                if parent is not None:
                    parent.close()
            self.left_running = [describe(pid) for pid in self._end_sessions()]
        tempdirs.remove(self.base)
        held.raise_first()

    def _end_sessions(self) -> List[int]:
        """Kills what is left of the sessions started here (a process that
        left its child's process group), and returns the other processes
        that still have check's environment: the model started them in
        sessions of their own."""
        others = []
        for pid in _started_under(self.base):
            try:
                if os.getsid(pid) in self._sessions:
                    os.kill(pid, signal.SIGKILL)
                else:
                    others.append(pid)
            except (ProcessLookupError, PermissionError):
                pass  # ended meanwhile
        return others

    def __enter__(self) -> "Emitters":
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is not None:
            # An interrupt or an error: nothing still running is wanted.
            self.abort()
        self.close()


def _started_under(base: Path) -> List[int]:
    """The live processes, other than this one, whose environment says
    they are check's (``MARKER``: every process that check's children
    start inherits it), by process id. On Linux a process's environment at
    start is ``/proc/PID/environ``; another user's is not seen, nor is any
    where there is no ``/proc``."""
    needle = os.fsencode(f"{MARKER}={base}") + b"\0"
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # ended meanwhile, or another user's
            continue
        if environ.startswith(needle) or b"\0" + needle in environ:
            found.append(int(entry))
    return sorted(found)


def _served_wrong(emitter: str, served: Optional[Dict[str, str]]) -> Optional[str]:
    """Why what the import hook served a child of the side ``emitter`` is
    not that side's ExecuTorch; None where it is."""
    if emitter == "stock":
        if served is None:
            return None
        return (
            "the import hook was on in a stock process, though check turned it "
            "off: something on its path (a sitecustomize, a .pth file) turned it "
            "on again"
        )
    if served is None:
        return (
            "the import hook was off in a patched process: something on its path "
            "(a sitecustomize, a .pth file, -S) kept the bootstrap from turning it on"
        )
    lost = {name: state for name, state in served.items() if state not in SERVED_FIXED}
    if not lost:
        return None
    name, state = next(iter(lost.items()))
    if state == finder.MISSED:
        return (
            f"{name} was loaded in a patched process without the import hook, "
            "so it ran without the fix: imported before the hook turned on (a "
            ".pth file that imports ExecuTorch at start-up?), or the hook failed "
            "on it (its stderr says why)"
        )
    return f"the import hook served {name} without the fix ({state})"


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to ``proc``'s session (its process group), started by us."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_then_end_group(proc: subprocess.Popen, timeout: float) -> bool:
    """Waits for ``proc`` to end, at most ``timeout`` seconds, then kills its
    process group (whatever it left there, or itself at the deadline) and
    reaps it. True if it ended by itself.

    Where ``os.waitid`` can, ``proc`` stays unreaped until its group is
    killed, so that its process id, the group's, cannot be another's yet."""
    ended = False
    if hasattr(os, "waitid"):
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while not ended and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
            try:
                flags = os.WEXITED | os.WNOWAIT | os.WNOHANG
                ended = os.waitid(os.P_PID, proc.pid, flags) is not None
            except ChildProcessError:  # reaped already
                ended = True
    else:
        try:
            proc.wait(timeout)
            ended = True
        except subprocess.TimeoutExpired:
            pass
    _kill_group(proc)
    proc.wait()
    return ended


def _warm_default() -> bool:
    return warm.available()

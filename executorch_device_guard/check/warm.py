# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Warm parents: import torch and ExecuTorch once, then fork one child per run.

Starting Python and importing torch and ExecuTorch takes seconds; an export
of a small model takes well under one. A :class:`WarmParent` is one process,
started fresh with a given environment (its side's: the import hook on or off),
that imports the modules it is given and runs no tensor operation. Each
:meth:`WarmParent.run` or :meth:`WarmParent.call` forks a child of it, so a
segfault kills that child alone, exactly as it would kill a fresh process.

The child's stdout and stderr go to files that the caller reads back, and
its exit status comes back as a ``subprocess.CompletedProcess`` whose
``returncode`` is negative for a signal, as ``subprocess`` reports it.

The parent refuses to fork while it has more than one thread (a fork from a
threaded parent can deadlock the child), and says which preload step
started one. It starts with ``OPENBLAS_NUM_THREADS=1``, so that NumPy's BLAS
starts no thread pool, and sees no GPU: ``CUDA_VISIBLE_DEVICES`` empty and
``PYTORCH_NVML_BASED_CUDA_CHECK=1``, so that the ``torch.cuda.is_available()``
that imported modules call (torchao's, at import) answers from that variable
alone. Asking the driver starts CUDA, asking NVML starts NVML, and each
leaves a thread behind (gpu/cuda_start_probe.py, on an H200). Each child
gets the caller's ``CUDA_VISIBLE_DEVICES`` back before it runs, and may
start CUDA itself. ``JE_ARROW_MALLOC_CONF=background_thread:false``
keeps pyarrow's jemalloc, which pandas loads where pyarrow is installed (the
bundled program imports pandas), from starting its background thread. Callers fall back to fresh processes where
:func:`available` is False (Windows) or the parent refuses.

A preload entry ``module:function`` imports the module and calls the
function once, before the parent forks (warmup.py: work every child would
repeat).

The parent runs in a session of its own, and its children in its process
group: a terminal's Ctrl-C reaches the client alone, which ends the parent
and every child at once with :meth:`WarmParent.kill`.

Wire protocol (JSON lines on the parent's stdin and stdout):
  parent -> client  {"ready": true, "threads": N} or {"ready": false, "error": ...}
  client -> parent  {"id": 1, "argv": [...] | "call": "pkg.mod:func", "args": [...],
                     "cwd": ..., "stdout": path, "stderr": path, "after": step?}
                    (with "after", sent before "ready": forked once that
                    preload step is done)
  parent -> client  {"id": 1, "pid": PID}, then {"id": 1, "returncode": N}
                    or {"id": 1, "error": ...} when it could not fork
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

# Interpreter options the warm runner accepts and ignores: faulthandler is
# always on in its children.
_IGNORED_OPTIONS = (("-X", "faulthandler"),)
# How long a run waits for the parent's imports before giving up on it.
READY_TIMEOUT = 900.0


def available() -> bool:
    """Whether this platform can fork a warm parent (not on Windows)."""
    return hasattr(os, "fork") and sys.platform != "win32"


class WarmError(Exception):
    """The warm parent could not run a child; the caller may run it fresh."""


# --------------------------------------------------------------------------
# The parent process (runs in its own interpreter: ``serve``).


def _native_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _send(fd: int, message: Dict) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def serve(preload: Sequence[str]) -> None:
    """The warm parent's main loop; see the module docstring."""
    # Keep the protocol away from fds 0 and 1, which imported code may use.
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    server = _Server(proto_in, proto_out)
    try:
        # A request that names a preload step ("after") is forked as soon
        # as that step is done; a child ending meanwhile is reaped at once.
        signal.signal(signal.SIGCHLD, lambda *_: server.reap())
        server.read(block=False)
        for name in preload:
            _preload(name)
            server.done.add(name.rstrip("?"))
            if server.threaded is None and _native_threads() > 1:
                server.threaded = name.rstrip("?")
            server.read(block=False)
    except BaseException:
        _send(proto_out, {"ready": False, "error": traceback.format_exc()})
        server.kill_children()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    import gc

    # Objects that exist now are never collected in a child: fewer pages to copy.
    gc.freeze()
    server.ready = True
    with server.signals_held():
        _send(proto_out, {"ready": True, "threads": _native_threads()})
    server.loop()


class _Server:
    """The parent's side of the protocol: reads requests, forks a child per
    request, reports each child's exit status."""

    def __init__(self, proto_in: int, proto_out: int) -> None:
        self.proto_in, self.proto_out = proto_in, proto_out
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.children: Dict[int, int] = {}  # pid -> request id
        self.done: set = set()  # the preload steps done so far
        self.ready = False
        # The first preload step after which the parent had more than one thread.
        self.threaded: Optional[str] = None
        self.open = True
        self._pending = b""
        self._waiting: List[Dict] = []  # requests for after the preloads

    @contextlib.contextmanager
    def signals_held(self) -> Iterator[None]:
        """No SIGCHLD handler runs inside: it would write to the protocol too."""
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})

    def reap(self) -> None:
        with self.signals_held():
            _reap(self.children, self.proto_out)

    def read(self, block: bool) -> None:
        """Reads the requests there are (waits for some if ``block``), and
        forks each that may run now."""
        os.set_blocking(self.proto_in, block)
        try:
            chunk = os.read(self.proto_in, 65536)
        except BlockingIOError:
            chunk = None
        if chunk == b"":
            self.open = False
            self.kill_children()
        elif chunk:
            self._pending += chunk
            *lines, self._pending = self._pending.split(b"\n")
            self._waiting += [json.loads(line) for line in lines]
        waiting, self._waiting = self._waiting, []
        for request in waiting:
            if self.ready or request.get("after") in self.done:
                self.fork(request)
            else:
                self._waiting.append(request)

    def fork(self, request: Dict) -> None:
        with self.signals_held():
            threads = _native_threads()
            if threads > 1:
                error = f"the warm parent has {threads} threads; "
                error += "forking it is not safe"
                if self.threaded is not None:
                    error += f" (started by {self.threaded})"
                _send(self.proto_out, {"id": request["id"], "error": error})
                return
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                fds = (self.proto_in, self.proto_out, self.wake_r, self.wake_w)
                _child(request, fds)  # never returns
            self.children[pid] = request["id"]
            _send(self.proto_out, {"id": request["id"], "pid": pid})

    def kill_children(self) -> None:
        for pid in self.children:
            _kill(pid)

    def loop(self) -> None:
        """Serves until the client closes the protocol and every child ended."""
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        if self.open:
            self.read(block=False)
        selector = selectors.DefaultSelector()
        if self.open:
            selector.register(self.proto_in, selectors.EVENT_READ, "request")
        selector.register(self.wake_r, selectors.EVENT_READ, "child")
        try:
            while self.open or self.children:
                self.reap()
                if not (self.open or self.children):
                    break
                for key, _ in selector.select():
                    if key.data == "child":
                        os.read(self.wake_r, 4096)
                    else:
                        self.read(block=True)
                        if not self.open:
                            selector.unregister(self.proto_in)
        except KeyboardInterrupt:
            pass
        finally:
            # Whatever ended the loop, no child outlives its parent's protocol.
            self.kill_children()


def _preload(name: str) -> None:
    """Imports ``module``, or imports it and calls ``module:function()``; a
    name ending in '?' may be missing (ImportError)."""
    import importlib

    module, _, function = name.rstrip("?").partition(":")
    try:
        imported = importlib.import_module(module)
    except ImportError:
        if name.endswith("?"):
            return
        raise
    if function:
        getattr(imported, function)()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(children: Dict[int, int], proto_out: int) -> None:
    """Reports each child that ended. Only the parent's own children are
    waited for: a process that an imported module started is its own."""
    for pid in list(children):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if done == 0:
            continue
        request_id = children.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        _send(proto_out, {"id": request_id, "returncode": code})


def _child(request: Dict, fds: Sequence[int]) -> None:
    """In the forked child: redirect, run the request, exit with its code."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in fds:
            os.close(fd)
        for target, path in ((1, request["stdout"]), (2, request["stderr"])):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, target)
            os.close(fd)
        import faulthandler

        faulthandler.enable(file=sys.stderr, all_threads=True)
        os.chdir(request["cwd"])
        if request.get("visible") is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = request["visible"]
        code = _run_request(request)
    except BaseException:  # noqa: B902 - the child reports everything
        try:
            traceback.print_exc()
        except BaseException:  # noqa: B902
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _run_request(request: Dict) -> int:
    """Runs ``argv`` as ``python ARGV`` would, or calls ``call(args)``."""
    import atexit
    import runpy

    # Only the exit handlers the request registers run at its end.
    atexit._clear()
    cwd = request["cwd"]
    try:
        try:
            if "call" in request:
                module_name, _, function = request["call"].partition(":")
                import importlib

                sys.argv = [request["call"], *request["args"]]
                sys.path[0] = cwd
                func = getattr(importlib.import_module(module_name), function)
                result = func(list(request["args"]))
                return result if isinstance(result, int) else 0
            argv = list(request["argv"])
            if argv[0] == "-m":
                sys.argv = [argv[1], *argv[2:]]
                sys.path[0] = cwd
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            elif argv[0] == "-c":
                sys.argv = ["-c", *argv[2:]]
                sys.path[0] = ""
                code = compile(argv[1], "<string>", "exec")
                exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
            else:
                script = os.path.join(cwd, argv[0])
                sys.argv = list(argv)
                sys.path[0] = os.path.dirname(os.path.abspath(script))
                runpy.run_path(script, run_name="__main__")
            return 0
        except SystemExit as e:
            return _exit_code(e)
        except KeyboardInterrupt:
            _print_exc()
            return 128 + signal.SIGINT
        except BaseException:  # noqa: B902 - as the interpreter does: exit 1
            _print_exc()
            return 1
    finally:
        atexit._run_exitfuncs()


def _print_exc() -> None:
    """The traceback as ``python`` prints it: without this module's frames."""
    kind, value, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    traceback.print_exception(kind, value, tb)


# --------------------------------------------------------------------------
# The client side: start a parent, send it requests.


def split_python_args(args: Sequence[str]) -> List[str]:
    """``args`` for ``python`` without the options the warm runner ignores.

    Raises ValueError for other interpreter options: they need a fresh process.
    """
    args = list(args)
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
        pair = tuple(args[:2])
        if pair in _IGNORED_OPTIONS:
            del args[:2]
            continue
        raise ValueError(f"interpreter option {args[0]!r} needs a fresh process")
    if not args or (args[0] in ("-m", "-c") and len(args) < 2):
        raise ValueError("nothing to run: give -m MODULE, -c CODE or a script")
    return args


@dataclasses.dataclass
class _Pending:
    done: threading.Event
    # Set once the child is forked (or the request failed).
    forked: threading.Event = dataclasses.field(default_factory=threading.Event)
    pid: Optional[int] = None
    returncode: Optional[int] = None
    error: Optional[str] = None


class WarmParent:
    """One warm parent process; safe to use from several threads at once.

    ``env`` is the parent's whole environment (its side's, ``Emitters.env``);
    ``preload`` names the modules it imports before it
    forks (a name ending in '?' may be missing). Children inherit both. :meth:`wait_ready` blocks until the imports
    are done and raises :class:`WarmError` if they failed.
    """

    def __init__(
        self,
        env: Dict[str, str],
        preload: Sequence[str],
        workdir: Path,
        python: str = sys.executable,
    ) -> None:
        if not available():
            raise WarmError("this platform cannot fork")
        self._workdir = Path(tempfile.mkdtemp(prefix="warm-", dir=workdir))
        env = dict(env)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        # The caller's, which each child gets back (see the module docstring).
        self._visible = env.get("CUDA_VISIBLE_DEVICES")
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        env.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
        self._log = open(self._workdir / "parent.log", "w+b")
        code = (
            "import sys; from executorch_device_guard.check.warm import serve; "
            "serve(sys.argv[1:])"
        )
        self._proc = subprocess.Popen(
            [python, "-c", code, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            cwd=self._workdir,
            start_new_session=True,
        )
        self._lock = threading.Lock()
        self._pending: Dict[int, _Pending] = {}
        self._next_id = 0
        self._ready = threading.Event()
        self._ready_error: Optional[str] = None
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            message = json.loads(line)
            if "ready" in message:
                if not message["ready"]:
                    self._ready_error = message["error"]
                self._ready.set()
                continue
            with self._lock:
                pending = self._pending.get(message["id"])
            if pending is None:
                continue
            if "pid" in message:
                pending.pid = message["pid"]
            elif "error" in message:
                pending.error = message["error"]
                pending.done.set()
            else:
                pending.returncode = message["returncode"]
                pending.done.set()
            pending.forked.set()
        # The parent is gone: nothing pending will ever finish.
        if not self._ready.is_set():
            code = self._proc.wait()
            how = f"with exit code {code}"
            if code < 0:
                try:
                    how = f"with {signal.Signals(-code).name}"
                except ValueError:
                    how = f"by signal {-code}"
            self._ready_error = (
                f"the warm parent exited {how} while starting:\n" + self.log()
            )
            self._ready.set()
        with self._lock:
            for pending in self._pending.values():
                if not pending.done.is_set():
                    pending.error = "the warm parent exited:\n" + self.log()
                    pending.done.set()
                    pending.forked.set()

    def log(self) -> str:
        """The parent's own stderr (its imports' warnings, or why it failed)."""
        self._log.flush()
        return (self._workdir / "parent.log").read_text(errors="replace")

    def wait_ready(self, timeout: Optional[float] = None) -> None:
        if not self._ready.wait(timeout):
            raise WarmError(f"the warm parent was not ready after {timeout} s")
        if self._ready_error is not None:
            raise WarmError(self._ready_error)

    def run(
        self,
        args: Sequence[str],
        cwd: Optional[Path] = None,
        timeout: Optional[float] = None,
    ) -> subprocess.CompletedProcess:
        """Runs ``python ARGS`` (``-m MOD ...``, ``-c CODE ...`` or ``SCRIPT ...``)."""
        argv = split_python_args(args)
        return self._submit({"argv": argv}, list(args), cwd, timeout)

    def call(
        self,
        target: str,
        args: Sequence[str] = (),
        cwd: Optional[Path] = None,
        timeout: Optional[float] = None,
        after: Optional[str] = None,
    ) -> subprocess.CompletedProcess:
        """Calls ``pkg.module:function(list_of_args)`` in a child.

        Its return value, if an int, is the exit code; an exception exits 1
        with the traceback on stderr; ``SystemExit`` exits with its code.
        With ``after`` (a preload step, e.g. "torch"), the child is forked
        as soon as that step is done, before the other preloads.
        """
        if ":" not in target:
            raise ValueError(f"{target!r} is not 'pkg.module:function'")
        request = {"call": target, "args": list(args)}
        if after is not None:
            request["after"] = after
        return self._submit(request, [target, *args], cwd, timeout)

    def _submit(
        self,
        request: Dict,
        shown_args: List[str],
        cwd: Optional[Path],
        timeout: Optional[float],
    ) -> subprocess.CompletedProcess:
        if "after" not in request:
            self.wait_ready(READY_TIMEOUT)
        with self._lock:
            if self._closed:
                raise WarmError("the warm parent is closed")
            self._next_id += 1
            request_id = self._next_id
            pending = self._pending[request_id] = _Pending(threading.Event())
            out = self._workdir / f"{request_id}.out"
            err = self._workdir / f"{request_id}.err"
            request = {
                **request,
                "visible": self._visible,
                "id": request_id,
                "cwd": str(Path(cwd or os.getcwd()).resolve()),
                "stdout": str(out),
                "stderr": str(err),
            }
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
                self._proc.stdin.flush()
            except OSError as e:
                del self._pending[request_id]
                raise WarmError(f"the warm parent is gone: {e}\n{self.log()}") from e
        try:
            # The timeout is the child's: an early request ("after") first
            # waits for its preload step.
            if not pending.forked.wait(READY_TIMEOUT):
                raise WarmError(f"the warm parent did not fork after {READY_TIMEOUT} s")
            timed_out = not pending.done.wait(timeout)
            if timed_out and pending.pid is not None:
                _kill(pending.pid)
                pending.done.wait(30)
            if pending.error is not None:
                raise WarmError(pending.error)
            stdout, stderr = (
                p.read_text(errors="replace") if p.exists() else "" for p in (out, err)
            )
            if timed_out:
                raise subprocess.TimeoutExpired(shown_args, timeout, stdout, stderr)
            assert pending.returncode is not None
            return subprocess.CompletedProcess(
                shown_args, pending.returncode, stdout, stderr
            )
        finally:
            with self._lock:
                self._pending.pop(request_id, None)
            for path in (out, err):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass

    @property
    def pid(self) -> int:
        """The parent's process id, its session's and its process group's."""
        return self._proc.pid

    def kill(self) -> None:
        """Kills the parent and every child it forked (its process group) now."""
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        """Ends the parent; children still running are killed, and so is a
        parent still importing (it would finish its imports first)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if not self._ready.is_set():
            self.kill()
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(5)
        self._log.close()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> "WarmParent":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

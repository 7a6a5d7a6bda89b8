# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Command line: check, run, apply, revert, status, export.

Exit codes: 0 success; 1 ``check`` found a problem; 2 a refusal or a usage
error (one line on stderr saying what and the way out; unless it says
otherwise, nothing was modified); 3 ``check`` gives no verdict (an error of
the tool, or no export reached the guarded read); 4 the command finished but
its output could not be written (see ``output``); 128 + N when signal N
interrupted it. ``run`` exits with its command's code, 126 if it cannot be
executed, 127 if it is not found.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import List, NoReturn, Optional, Tuple, TYPE_CHECKING, Union

from executorch_device_guard import __version__, data_root
from executorch_device_guard.check.jobs import default_jobs

if TYPE_CHECKING:
    from executorch_device_guard.check.runner import Emitters


def _check(args: argparse.Namespace) -> int:
    from executorch_device_guard.check import matrix, models
    from executorch_device_guard import output, signals
    from executorch_device_guard.installation.installed import (
        executorch_root,
        executorch_version,
    )

    # What needs no torch is refused at once, before any process starts.
    try:
        os.getcwd()
    except FileNotFoundError:
        return _usage_error(
            "the current directory no longer exists: cd to one that does, "
            "then run check again"
        )
    if args.jobs < 1:
        return _usage_error(f"--jobs must be at least 1, not {args.jobs}")
    try:
        every = matrix.select(args.paths, args.devices, cuda=True)
        models.check_file(args.model)
        if args.log_dir:
            _refuse_protected_log_dir(args.log_dir)
            matrix.prepare_log_dir(args.log_dir, every)
    except (matrix.SelectionError, models.ModelSpecError) as e:
        return _usage_error(str(e))

    # SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM end the run like
    # Ctrl-C: children killed, check's folder removed (the temporary folders are
    # made after this).
    signals.raise_on_terminate(signals.OTHERS)
    found = _check_rows(args)
    if isinstance(found, int):
        return found
    rows, pairs = found
    # Rows that run_matrix left out: torch.export refused the model.
    verdict = matrix.judge(rows, left_out=2 * (len(pairs) - len(rows)))
    # A log that cannot be written (a full disk) loses neither the table nor
    # the verdict: it is named after them.
    log_error = matrix.write_logs(rows, args.log_dir) if args.log_dir else None
    # The verdict stands, but not all its output was written (as for exit 4).
    code = (verdict.exit_code or output.OUTPUT_LOST) if log_error else verdict.exit_code
    if args.verbose:
        matrix.print_constants(rows, sys.stderr)
        matrix.print_stderr(rows, sys.stderr)
    if args.json:
        report = {
            "executorch_version": executorch_version(),
            "executorch_root": str(executorch_root()),
            "model": args.model,
            "ok": verdict.exit_code == 0,
            "exit_code": code,
            "reached": verdict.reached,
            "left_out": verdict.left_out,
            "rows": [row.as_json(stderr=args.verbose) for row in rows],
        }
        print(json.dumps(report, indent=1))
    elif verdict.alike:
        # Every row says the same: say it once.
        print(verdict.alike)
    else:
        print(matrix.format_table(rows))
        note = matrix.constants_note(rows)
        if note:
            print(note)
        print()
        for block in verdict.lines():
            print(block)
    if log_error:
        sys.stdout.flush()
        _error(log_error)
    return code


def _refuse_protected_log_dir(folder: Path) -> None:
    """GuardError when ``--log-dir`` lies in the installed ExecuTorch or the
    site-packages folder that holds it (``protected``), before it is made."""
    from executorch_device_guard.installation import installed
    from executorch_device_guard import protected
    from executorch_device_guard.errors import GuardError

    try:
        package = installed.installed_root()
    except GuardError:
        return  # no ExecuTorch to protect: check says so itself
    where = protected.inside(str(folder.absolute()), package)
    if where is not None:
        raise GuardError(
            f"--log-dir {folder} is inside {where}, where nothing is written: "
            "give a folder outside it. Nothing was run."
        )


def _check_rows(args: argparse.Namespace) -> "Union[int, Tuple[List, List]]":
    """The matrix's rows and the (path, device) pairs selected, or an exit
    code when the model or selection is refused."""
    from executorch_device_guard.check import matrix
    from executorch_device_guard.check.runner import Emitters, export_preload

    # Each warm parent loads the model once, for all its exports (preloaded.py).
    preload = export_preload(args.paths, model=True)
    flows = [matrix.PATHS[p][0] for p in args.paths or matrix.PATHS]
    emitters = Emitters(
        warm=not args.fresh,
        preload=preload,
        model=args.model,
        flows=flows,
        timeout=args.timeout,
    )
    try:
        return _run_rows(args, emitters)
    finally:
        if emitters.left_running:
            # The model's own, never waited for: named, as they outlive check,
            # whether its rows ran or the model or selection was refused.
            shown = ", ".join(emitters.left_running[:3])
            more = len(emitters.left_running) - 3
            _note(
                "the model started processes in sessions of their own, which "
                f"check leaves running: {shown}"
                + (f" and {more} more" if more > 0 else "")
            )


def _run_rows(
    args: argparse.Namespace, emitters: Emitters
) -> Union[int, Tuple[List, List]]:
    """``_check_rows`` inside ``emitters``, which it closes."""
    from executorch_device_guard.check import matrix, probe

    with emitters:
        emitters.start()
        # One child loads the model and asks for CUDA before any export runs.
        # It reports to a file of its own: the model may print anything.
        result = emitters.case_folder("probe") / "probe.jsonl"
        try:
            # Forked as soon as the warm parent has imported torch: a model
            # that cannot be built is told before ExecuTorch is imported.
            proc = emitters.call(
                "stock",
                "executorch_device_guard.check.probe:main",
                [args.model, str(result)],
                timeout=args.timeout,
                after="torch",
            )
        except subprocess.TimeoutExpired:
            stage = probe.Probe(result).stage or "loading it"
            return _usage_error(
                f"--model {args.model}: {stage} did not finish within "
                f"{args.timeout:g} s (give --timeout SECONDS if it needs longer)"
            )
        found = probe.Probe(result)
        if found.answer is None:
            if found.stage is None:
                last = (emitters.shorten(proc.stderr).strip().splitlines() or [""])[-1]
                _error(
                    f"the model probe ended without a result "
                    f"({probe.how_it_ended(proc.returncode)}): {last}"
                )
                return 3
            return _usage_error(
                f"--model {args.model}: {found.stage} "
                f"{probe.how_it_ended(proc.returncode)}"
            )
        if found.answer["model_error"]:
            return _usage_error(found.answer["model_error"])
        if found.answer.get("forks"):
            _note(
                f"--model {args.model}: loading the model forks the process "
                "(os.fork()); a copy that comes back to check is ended, and the "
                "first process goes on"
            )
        try:
            pairs = matrix.select(args.paths, args.devices, found.answer["cuda"])
        except matrix.SelectionError as e:
            return _usage_error(str(e))
        if not emitters.warm:
            _say_model_cost(found.answer, 2 * len(pairs))
        rows = matrix.run_matrix(
            emitters, args.model, pairs, jobs=args.jobs, timeout=args.timeout
        )
        if args.verbose:
            for note in emitters.notes:
                _note(note)
    return rows, pairs


def _say_model_cost(answer: dict, exports: int) -> None:
    """Up front, when every export loads the model again (a fresh
    interpreter each): what that costs, and how to run fewer."""
    seconds = answer.get("seconds")
    if not isinstance(seconds, (int, float)) or seconds < 1:
        return
    print(
        f"executorch-device-guard: each of the {exports} exports imports and "
        f"builds the model again in a fresh interpreter ({seconds:.1f} s here): "
        f"about {exports * seconds:.0f} s of loading; --paths and --devices run "
        "fewer",
        file=sys.stderr,
        flush=True,
    )


def _usage_error(message: str) -> int:
    _error(message)
    return 2


def _run(args: argparse.Namespace) -> int:
    from executorch_device_guard.installation.run import run_command

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        return _usage_error("run: give a command, e.g. run -- python export.py")
    # An interrupt before the command starts ends here (main says so); once
    # it runs, the command's exit code is ours.
    return run_command(command)


def _status(args: argparse.Namespace) -> int:
    from executorch_device_guard import signals
    from executorch_device_guard.installation import installed, served, startup_files
    from executorch_device_guard.installation.startup_files import PTH, State

    signals.raise_on_terminate()  # SIGTERM, SIGHUP: one line, as for Ctrl-C
    root = installed.installed_root()
    found = served.targets(root)
    print(f"ExecuTorch {installed.executorch_version()} at {root}")
    lines = [
        f"  {state.value} {rel}" + (f" ({why})" if why else "")
        for rel, (state, why) in found.items()
    ]
    for line in _aligned(lines):
        print(line)
    folder = startup_files.site_of(root)
    python = sys.executable
    if folder is None:
        print(
            f"apply cannot turn the fix on here: {root.parent} is not a "
            f"site-packages folder of {python} (PYTHONPATH, or a --target "
            "folder), where Python reads no startup file. `run -- COMMAND` "
            "serves the fix to one command."
        )
    else:
        on = startup_files.state(folder)
        if on is State.ON and startup_files.started_with(folder) == "":
            print(
                f"apply's startup files are in {folder}, but {python} does not "
                "start the fix from them: `revert`, then install "
                "executorch-device-guard in that environment and `apply`."
            )
        elif on is State.ON:
            print(
                f"On: every start of {python} serves the files above with the "
                f"fix, at import ({folder / PTH}). `revert` turns it off."
            )
        elif on is State.PARTLY:
            print(
                f"Partly on ({folder / PTH} or its .start is missing or not "
                "this version's), as an interrupted apply or revert leaves it: "
                "`apply` finishes it, `revert` undoes it."
            )
        else:
            print(
                f"Off: {python} runs ExecuTorch as installed. `apply` serves "
                "the fix at every start; `run -- COMMAND` to one command."
            )
    legacy = served.in_place(found)
    if legacy:
        print(
            f"{len(legacy)} file(s) were patched in place by an earlier version "
            "of this tool: `revert` writes their stock text back; `apply` "
            "refuses until then."
        )
    if served.without_fix(found):
        print(
            "Some files load without the fix (above), so apply refuses. Have "
            "Python load the installed files; if they are damaged, reinstall "
            f"ExecuTorch: {installed.reinstall_command()}"
        )
    return 0


def _aligned(lines: List[str]) -> List[str]:
    """``status``'s file lines (``  STATE PATH ...``) with their paths in one
    column, however long the longest state (``not shipped``) is."""
    from executorch_device_guard.patchset import FileState

    states = "|".join(re.escape(s.value) for s in FileState)
    found = [re.fullmatch(rf"  ({states}) +(\S.*)", line) for line in lines]
    width = max((len(m.group(1)) for m in found if m), default=0)
    return [
        f"  {m.group(1):{width}} {m.group(2)}" if m else line
        for m, line in zip(found, lines)
    ]


def _apply(args: argparse.Namespace) -> int:
    from executorch_device_guard import signals
    from executorch_device_guard.errors import GuardError
    from executorch_device_guard.installation import installed, served, startup_files
    from executorch_device_guard.installation.startup_files import PTH, State
    from executorch_device_guard.patchset import FileState

    signals.raise_on_terminate()
    root = installed.installed_root()
    folder = startup_files.site_of(root)
    if folder is None:
        raise GuardError(
            f"ExecuTorch at {root} is found through PYTHONPATH or a --target "
            f"folder, not a site-packages folder of {sys.executable}, and Python "
            "reads no startup file there: use `executorch-device-guard run -- "
            "COMMAND`. Nothing was changed."
        )
    found = served.targets(root)
    served.refuse_in_place(root, found, "", "Nothing was changed.")
    lost = served.without_fix(found)
    if lost:
        state, why = found[lost[0]]
        raise GuardError(
            f"{root / lost[0]} would load without the fix ({state.value}"
            f"{': ' + why if why else ''}), so apply refuses. Nothing was "
            "changed. Have Python load the installed file; if that is damaged, "
            f"reinstall ExecuTorch: {installed.reinstall_command()}"
        )
    was = startup_files.state(folder)
    startup_files.turn_on(folder)
    for rel, (state, _) in found.items():
        if state is FileState.STOCK:
            print(f"served with the fix: {root / rel}")
    if was is State.ON:
        print(f"already on: {folder / PTH}")
    else:
        print(
            f"on: every start of {sys.executable} turns the fix on "
            f"({folder / PTH}); `revert` turns it off"
        )
    return 0


def _revert(args: argparse.Namespace) -> int:
    from executorch_device_guard import signals
    from executorch_device_guard.installation import installed, served, startup_files
    from executorch_device_guard.patchset import patched_files

    signals.raise_on_terminate()
    root = installed.installed_root()
    restored = []
    if served.in_place(served.targets(root)):
        # Files an earlier version patched in place: their stock text back.
        targets = patched_files(data_root(), install=True)
        change = installed.revert(root, targets, wait=args.wait)
        _print_removals(root, change)
        restored = change.written
        for rel in restored:
            print(f"restored {root / rel}")
    folder = startup_files.site_of(root)
    removed = startup_files.turn_off(folder) if folder is not None else []
    for path in removed:
        print(f"removed {path}")
    if removed:
        print(f"off: {sys.executable} runs ExecuTorch as installed")
    elif not restored:
        print(f"nothing to revert in {root}")
    return 0


def _print_removals(root: Path, change) -> None:
    for rel in change.removed:
        print(f"removed leftover {root / rel}")
    for rel in change.stale:
        print(f"removed stale bytecode {root / rel}")
    for rel in change.bytecode:
        print(f"removed bytecode {root / rel}")


def _export(args: argparse.Namespace) -> int:
    from executorch_device_guard.errors import GuardError
    from executorch_device_guard.export import export, git_author

    if not args.dest.is_absolute():
        try:
            os.getcwd()
        except FileNotFoundError:
            return _usage_error(
                f"the current directory no longer exists, so {args.dest} is "
                "nowhere: cd to one that does, or give an absolute path"
            )
    author = args.author or git_author()
    if author is None:
        raise GuardError(
            "export needs an author for the commits: set git config user.name "
            "and user.email, or pass --author 'Name <email>'."
        )
    written = export(data_root(), args.dest, author, force=args.force)
    for path in written:
        print(path)
    # The series goes upstream as one pull request per commit (docs/upstream.md).
    print(
        "\nEach commit is one pull request, its message the PR text. In your "
        "executorch clone, one branch per commit off main:"
    )
    for number, path in enumerate(written, 1):
        print(
            f"  git switch -c device-guard-{number} origin/main && "
            f"git am {shlex.quote(str(path.absolute()))}"
        )
    return 0


# The longest --timeout: a week. Longer ones (inf) overflow the clocks that
# wait on a child.
MAX_TIMEOUT = 7 * 24 * 3600


def _timeout(text: str) -> float:
    """--timeout's value: seconds, more than 0 and at most MAX_TIMEOUT."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid value {text!r}: give a number of seconds"
        ) from None
    if not 0 < seconds <= MAX_TIMEOUT:  # also nan
        raise argparse.ArgumentTypeError(
            f"must be more than 0 and at most {MAX_TIMEOUT} seconds (a week), "
            f"not {text}"
        )
    return seconds


def _path(text: str) -> Path:
    """A path argument; an empty one (an unset shell variable) is refused,
    not taken for the current folder."""
    if not text:
        raise argparse.ArgumentTypeError("give a path, not ''")
    return Path(text)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line on stderr, exit 2 (``--help`` is unchanged)."""

    def error(self, message: str) -> "NoReturn":
        command = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        where = f"{command}: " if command else ""
        from executorch_device_guard.output import one_line

        self.exit(
            2,
            f"executorch-device-guard: error: {one_line(where + message)} (see "
            f"{self.prog} --help)\n",
        )


def _wait_option(command: argparse.ArgumentParser) -> None:
    from executorch_device_guard.installation.lock import DEFAULT_WAIT

    command.add_argument(
        "--wait",
        type=_seconds,
        default=DEFAULT_WAIT,
        metavar="SECONDS",
        help="how long to wait for the installation's lock, held by another "
        "revert (or any process), before giving up with exit 2 (default: "
        "%(default)g)",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(
            f"expected seconds from 0 to {MAX_TIMEOUT}, not {text!r}"
        )
    return value


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="executorch-device-guard",
        description="Guard ExecuTorch's to_executorch() against constant data "
        "in device memory (ExecuTorch issue #21545).",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser(
        "check",
        help="export a model on every reachable device, stock vs patched emitter",
        description="Runs the export on cpu, meta, fake devices and real CUDA "
        "(when present), each against the stock and the patched emitter in a "
        "child process. Exits 0 only if the patched emitter crashes nowhere, "
        "names the device in every error and gives the stock CPU bytes, and "
        "at least one export reached ExecuTorch's host read of device memory; "
        "1 if it does not; 3 for no verdict (a tool error, or nothing "
        "reached the read); 2 for a refusal.",
    )
    c.add_argument(
        "--model",
        default="issue",
        help="'issue' (the #21545 reproducer, default), 'package.module:attr' "
        "or 'path/file.py[:attr]'; attr (default 'model') is a "
        "(module, example_inputs) tuple, an EagerModelBase-style class "
        "(get_eager_model(), get_example_inputs()), or a callable returning one",
    )
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.add_argument(
        "--jobs",
        type=int,
        default=default_jobs(),
        help="exports at a time (default: one per core, as many as the "
        "available memory holds at 2 GiB each: %(default)s here)",
    )
    c.add_argument(
        "--timeout",
        type=_timeout,
        default=600.0,
        metavar="SECONDS",
        help="how long loading the model, and each export, may take; one "
        "that takes longer is killed: a refusal for the model, a tool error "
        f"for an export (default: %(default)g, at most {MAX_TIMEOUT})",
    )
    c.add_argument(
        "--paths",
        nargs="+",
        choices=["emitter", "xnnpack", "vulkan", "bundled"],
        help="export paths to run (default: all)",
    )
    c.add_argument(
        "--devices",
        nargs="+",
        help="only these devices (cpu, meta, fake:cuda:0, fake:mps:0, "
        "fake:xpu:0, cuda)",
    )
    c.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="after the table, print each child's full stderr (and put it in "
        "--json output)",
    )
    c.add_argument(
        "--log-dir",
        type=_path,
        help="write each child's full stderr to LOG_DIR/PATH_DEVICE_EMITTER.log",
    )
    c.add_argument(
        "--fresh",
        action="store_true",
        help="start a fresh interpreter for every export instead of forking "
        "warm ones (slower; the same results)",
    )
    c.set_defaults(func=_check)

    r = sub.add_parser(
        "run",
        help="run a command with the patched ExecuTorch, writing nothing to "
        "site-packages",
        description="Runs COMMAND with the tool's bootstrap folder first on "
        "PYTHONPATH: every Python process of the command and its children "
        "imports ExecuTorch with the fix, served at import; nothing is written "
        "in ExecuTorch, site-packages or TMPDIR. Exits with the command's exit "
        "code (128+N if a signal N ended it). A command line whose Python "
        "would not start the bootstrap (python -I, -E or -S, env -i, env -u "
        "PYTHONPATH) is refused.",
    )
    r.add_argument(
        "cmd",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="e.g. -- python export.py, or -- python -m pkg.export",
    )
    r.set_defaults(func=_run)

    for name, func, text in (
        (
            "apply",
            _apply,
            "turn the fix on at every start of this environment's Python (a "
            "startup file in the site-packages folder that holds ExecuTorch; "
            "no file of ExecuTorch is written)",
        ),
        (
            "revert",
            _revert,
            "turn the fix off: remove apply's startup files (and write back "
            "the stock text of files an earlier version patched in place)",
        ),
        (
            "status",
            _status,
            "for each file, the state in which the fix finds it, and whether "
            "apply is on",
        ),
    ):
        command = sub.add_parser(name, help=text, description=text)
        if func is _revert:
            _wait_option(command)
        command.set_defaults(func=func)

    e = sub.add_parser(
        "export",
        help="write the upstream change as git am-able mbox patches",
    )
    e.add_argument(
        "dest", type=_path, help="a new or empty folder to write the patches into"
    )
    e.add_argument(
        "--author",
        help="'Name <email>' for the commits (default: git config user.name "
        "and user.email)",
    )
    e.add_argument(
        "--force",
        action="store_true",
        help="write into a folder that is not empty (replacing files of the "
        "same names, leaving the others)",
    )
    e.set_defaults(func=_export)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    try:
        from executorch_device_guard import output
    except KeyboardInterrupt:
        _error("interrupted (SIGINT).")
        return 130
    # A write error on stderr (a reader that went away) drops what follows
    # there, silently: it changes no exit code.
    with output.guarded("stderr"), output.guarded() as stdout:
        try:
            args = parser().parse_args(argv)
        except SystemExit as e:  # --help, --version, or a usage error
            code = e.code if isinstance(e.code, int) else 2
            return stdout.finish("this command", code)
        except KeyboardInterrupt:
            _error("interrupted (SIGINT).")
            return 130
        return stdout.finish(args.command, _main(args))


def _main(args: argparse.Namespace) -> int:
    try:
        from executorch_device_guard import tempdirs
        from executorch_device_guard.errors import GuardError
        from executorch_device_guard.signals import Interrupted
    except KeyboardInterrupt:
        _error("interrupted (SIGINT).")
        return 130
    try:
        try:
            return args.func(args)
        finally:
            # Whatever a signal cut short, no folder of check's is left behind.
            tempdirs.remove_all()
    except GuardError as e:
        _error(str(e))
        return 2
    except OSError as e:
        # An environment problem the handlers did not foresee: still one line.
        _error(str(e))
        return 2
    except MemoryError:  # a `ulimit -v` too small for what it read
        _error(f"out of memory{_whole(args)}.")
        return 2
    except (KeyboardInterrupt, Interrupted) as e:
        signum = getattr(e, "signum", signal.SIGINT)
        _error(f"interrupted ({signal.Signals(signum).name}){_whole(args)}.")
        return 128 + signum


def _whole(args: argparse.Namespace) -> str:
    """What a user needs to know after apply or revert stopped half-way."""
    if args.func is not _revert:
        return ""
    return (
        ": every file is whole, stock or patched; `status` shows which, "
        "and `revert` again finishes"
    )


def _error(message: str) -> None:
    _note(f"error: {message}")


def _note(message: str) -> None:
    # One line, whatever the names in it hold (a newline in a folder's name).
    from executorch_device_guard.output import one_line

    print(f"executorch-device-guard: {one_line(message)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``run -- COMMAND``: the patched ExecuTorch for one command, nothing installed.

The script below exports a model whose weight is on a fake device. Run as it
is, stock ExecuTorch kills it with SIGSEGV; under ``run`` it gets the patched
files and exits 1 with the error naming the device. The installed ExecuTorch
hashes the same before and after, and no overlay is left behind, also after
SIGINT.
"""

import concurrent.futures
import hashlib
import os
import pty
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Tuple

import pytest

from conftest import REPO
from executorch_device_guard.installation.installed import executorch_root
from sites import make_site, snapshot
from throwaway import copy_of_installed_executorch, leftovers, survivors

EXPORT_SCRIPT = """
import os, sys, time
import torch
from executorch.exir import to_edge_transform_and_lower
from torch.export import export
from executorch_device_guard.check.fake_device import on_device

print("overlay:", os.environ["PYTHONPATH"].split(os.pathsep)[0], flush=True)
if "--wait" in sys.argv:
    print("waiting", flush=True)
    time.sleep(120)
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
edge = to_edge_transform_and_lower(export(model, (torch.ones(2, 4),)))
state = edge.exported_program().state_dict
state["0.weight"] = on_device(state["0.weight"], "cuda:0")
edge.to_executorch()
print("exported")
"""


def tree_hashes(root: Path) -> Dict[str, str]:
    """Every file of the installation but Python's bytecode caches."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def tmp_env(tmp_path: Path) -> Dict[str, str]:
    """TMPDIR of its own, so that a leftover overlay would show."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    return dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmpdir))


def overlays_in(env: Dict[str, str]) -> list:
    """What the tool left in TMPDIR (torch keeps caches of its own there)."""
    return [
        p for p in Path(env["TMPDIR"]).iterdir() if p.name.startswith("device-guard")
    ]


def guard(
    *args: str, env: Dict[str, str], timeout: float = 600, **kwargs
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "executorch_device_guard", *args]
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout, **kwargs
    )


def test_run_gives_the_patched_executorch(tmp_path: Path, tmp_env) -> None:
    script = tmp_path / "export.py"
    script.write_text(EXPORT_SCRIPT)
    before = tree_hashes(executorch_root())

    plain = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(script)],
        env=tmp_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert plain.returncode == -signal.SIGSEGV, plain.stderr[-3000:]
    assert 'emit/_emitter.py", line 460' in plain.stderr

    result = guard("run", "--", sys.executable, str(script), env=tmp_env)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert "InternalError" in result.stderr
    assert "'0.weight' is on device cuda:0," in result.stderr
    assert "exported" not in result.stdout
    overlay = Path(result.stdout.split("overlay: ", 1)[1].split()[0])
    assert overlay.parent.parent == Path(tmp_env["TMPDIR"])

    assert tree_hashes(executorch_root()) == before
    assert overlays_in(tmp_env) == []


def test_exit_code_is_the_commands(tmp_env) -> None:
    code = "import sys; sys.exit(7)"
    assert guard("run", "--", sys.executable, "-c", code, env=tmp_env).returncode == 7
    killed = guard(
        "run", sys.executable, "-c", "import os; os.kill(os.getpid(), 9)", env=tmp_env
    )
    assert killed.returncode == 128 + 9
    missing = guard("run", "--", "no-such-command-xyz", env=tmp_env)
    assert missing.returncode == 127
    assert "command not found: no-such-command-xyz" in missing.stderr
    nothing = guard("run", "--", env=tmp_env)
    assert nothing.returncode == 2 and "give a command" in nothing.stderr
    assert overlays_in(tmp_env) == []


def test_sigint_removes_the_overlay(tmp_path: Path, tmp_env) -> None:
    script = tmp_path / "export.py"
    script.write_text(EXPORT_SCRIPT)
    cmd = [sys.executable, "-m", "executorch_device_guard", "run", "--"]
    cmd += [sys.executable, str(script), "--wait"]
    # Its own session: the SIGINT goes to the tool and the command, as Ctrl-C does.
    proc = subprocess.Popen(
        cmd,
        env=tmp_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        overlay = Path(first.split("overlay: ", 1)[1].strip())
        assert (overlay / "executorch" / "exir" / "emit" / "_emitter.py").is_file()
        assert proc.stdout.readline() == "waiting\n"
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # Python ends on an uncaught KeyboardInterrupt by SIGINT: 128 + 2.
    assert proc.returncode == 130, stderr
    assert "KeyboardInterrupt" in stderr
    assert not overlay.exists()
    assert overlays_in(tmp_env) == []


def test_sigint_to_the_tool_alone_reaches_the_command(tmp_env) -> None:
    code = "import time; print('ready', flush=True); time.sleep(120)"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "executorch_device_guard",
            "run",
            sys.executable,
            "-c",
            code,
        ],
        env=tmp_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and time.monotonic() - start < 30
    assert overlays_in(tmp_env) == []


def test_refuses_an_unknown_executorch(tmp_path: Path, tmp_env) -> None:
    """A throwaway site whose emitter is locally edited: one line, exit 2."""
    site = make_site(tmp_path / "site")
    emitter = site / "executorch" / "exir" / "emit" / "_emitter.py"
    emitter.write_text(
        emitter.read_text().replace(
            "spec_array_type = (", "spec_array_type = (  # edit"
        )
    )
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    result = guard("run", "--", sys.executable, "-c", "print('ran')", env=env)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("executorch-device-guard: error: ")
    assert "_emitter.py is unknown" in result.stderr
    assert overlays_in(tmp_env) == []


def one_line(result: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("executorch-device-guard: error: "), lines
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_a_tmpdir_with_the_path_separator_is_refused(tmp_path: Path) -> None:
    """The overlay's path would split in PYTHONPATH: the command would get
    the stock ExecuTorch. Refused before anything runs."""
    tmpdir = tmp_path / "a:b"
    tmpdir.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmpdir))
    result = guard("run", "--", sys.executable, "-c", "print('ran')", env=env)
    one_line(result, 2, f"the temporary folder {tmpdir} contains ':'", "TMPDIR")
    assert result.stdout == ""
    assert leftovers(tmpdir) == []


def test_refuses_when_the_command_would_import_another_executorch(
    tmp_path: Path, tmp_env
) -> None:
    """A sitecustomize puts the installed ExecuTorch before the overlay."""
    custom = tmp_path / "custom"
    custom.mkdir()
    site = executorch_root().parent
    (custom / "sitecustomize.py").write_text(
        f"import sys\nsys.path.insert(0, {str(site)!r})\n"
    )
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(custom), str(REPO)]))
    result = guard("run", "--", sys.executable, "-c", "print('ran')", env=env)
    one_line(result, 2, "would import ExecuTorch from", "not from the patched overlay")
    assert result.stdout == ""
    assert overlays_in(tmp_env) == []


def test_refuses_an_executorch_folder_here_and_names_it(
    tmp_path: Path, tmp_env
) -> None:
    """The command's ``python -c`` would import the current folder's
    executorch: refused, naming the folder, not a sitecustomize."""
    from test_check import launcher, shadowed_folder

    here, tool = shadowed_folder(tmp_path), launcher(tmp_path)
    cmd = [sys.executable, str(tool), "run", "--", sys.executable, "-c", "print(1)"]
    result = subprocess.run(
        cmd, cwd=here, env=tmp_env, capture_output=True, text=True, timeout=600
    )
    one_line(
        result,
        2,
        f"the current folder {here} holds an executorch folder",
        "run the command from another folder",
    )
    assert "sitecustomize" not in result.stderr
    assert result.stdout == ""
    assert overlays_in(tmp_env) == []


@pytest.mark.parametrize("kind", ["not-utf8", "fifo", "symlink"])
def test_refuses_what_apply_refuses(tmp_path: Path, tmp_env, kind: str) -> None:
    site = make_site(tmp_path / "site")
    emitter = site / "executorch" / "exir" / "emit" / "_emitter.py"
    if kind == "fifo":
        emitter.unlink()
        os.mkfifo(emitter)
    elif kind == "symlink":
        outside = tmp_path / "outside.py"
        outside.write_bytes(emitter.read_bytes())
        emitter.unlink()
        emitter.symlink_to(outside)
    else:
        emitter.write_bytes(b"\xff\xfe not utf-8\n")
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    result = guard(
        "run", "--", sys.executable, "-c", "print('ran')", env=env, timeout=60
    )
    one_line(result, 2, "_emitter.py is unknown")
    assert result.stdout == ""
    assert overlays_in(tmp_env) == []


def test_exec_failures_are_126_and_127(tmp_path: Path, tmp_env) -> None:
    no_shebang = tmp_path / "no_shebang"
    no_shebang.write_text("echo hi\n")
    no_shebang.chmod(0o755)
    not_executable = tmp_path / "not_executable"
    not_executable.write_text("#!/bin/sh\necho hi\n")
    cases = [
        (str(no_shebang), 126, f"cannot execute {no_shebang}: Exec format error"),
        (
            str(not_executable),
            126,
            f"cannot execute {not_executable}: Permission denied",
        ),
        (str(tmp_path), 126, f"cannot execute {tmp_path}: Permission denied"),
        ("no-such-command-xyz", 127, "command not found: no-such-command-xyz"),
    ]
    for command, code, message in cases:
        result = guard("run", "--", command, env=tmp_env)
        one_line(result, code, message)
    assert overlays_in(tmp_env) == []


COUNT_SIGINTS = """
import signal, sys, time

count = 0


def handler(signum, frame):
    global count
    count += 1


signal.signal(signal.SIGINT, handler)
print("ready", flush=True)
deadline = time.monotonic() + 60
while count == 0 and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(2)  # a second SIGINT, if any, arrives in this time
print(f"SIGINTs: {count}", flush=True)
"""


def test_ctrl_c_in_a_terminal_reaches_the_command_once(tmp_path: Path, tmp_env) -> None:
    """A terminal sends Ctrl-C's SIGINT to the whole foreground group: the
    command has it already, so the tool must not send it a second one."""
    script = tmp_path / "count.py"
    script.write_text(COUNT_SIGINTS)
    cmd = [sys.executable, "-m", "executorch_device_guard", "run", "--"]
    cmd += [sys.executable, str(script)]
    pid, master = pty.fork()
    if pid == 0:  # the child: a session leader with the pty as its terminal
        os.execve(sys.executable, cmd, tmp_env)
    output = b""
    try:
        deadline = time.monotonic() + 120
        while b"ready" not in output:
            assert time.monotonic() < deadline, output
            if select.select([master], [], [], 1)[0]:
                output += os.read(master, 4096)
        os.write(master, b"\x03")  # Ctrl-C
        while True:
            if not select.select([master], [], [], 30)[0]:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's last user is gone
                break
            if not chunk:
                break
            output += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(master)
    assert b"SIGINTs: 1" in output, output
    assert os.waitstatus_to_exitcode(status) == 0, output
    assert overlays_in(tmp_env) == []


def test_sigint_to_the_tool_alone_reaches_the_command_once(tmp_path: Path, tmp_env):
    script = tmp_path / "count.py"
    script.write_text(COUNT_SIGINTS)
    cmd = [sys.executable, "-m", "executorch_device_guard", "run", "--"]
    cmd += [sys.executable, str(script)]
    proc = subprocess.Popen(
        cmd, env=tmp_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)  # `kill -INT <tool pid>`
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert stdout == "SIGINTs: 1\n", stderr
    assert proc.returncode == 0
    assert overlays_in(tmp_env) == []


def test_run_writes_no_bytecode_into_the_installation(tmp_path: Path, tmp_env) -> None:
    """Bytecode writing on (this machine turns it off): importing ExecuTorch
    through the overlay's links must not cache it into the installation,
    also when the command picks its own cache prefix."""
    site = copy_of_installed_executorch(tmp_path / "site")
    before = snapshot(site)
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = (
        "import executorch.exir, executorch.exir.emit._emitter as e; print(e.__file__)"
    )
    result = guard("run", "--", sys.executable, "-c", code, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "/patched/executorch/exir/emit/_emitter.py" in result.stdout
    prefix = tmp_path / "prefix"
    result = guard(
        "run",
        "--",
        "env",
        f"PYTHONPYCACHEPREFIX={prefix}",
        sys.executable,
        "-c",
        code,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    after = snapshot(site)
    assert sorted(set(after) - set(before))[:5] == [] and after == before
    assert overlays_in(tmp_env) == []


def test_sigterm_at_any_time_leaves_no_overlay(tmp_env) -> None:
    """SIGTERM while the tool starts, builds the overlay or starts the command."""
    cmd = [sys.executable, "-m", "executorch_device_guard", "run", "--", "sleep", "30"]
    for i in range(20):
        proc = subprocess.Popen(
            cmd, env=tmp_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        time.sleep(0.05 + 0.02 * i)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert overlays_in(tmp_env) == [], i


TRAP_SIGNAL = """
import signal, sys, time

got = []
signum = getattr(signal, sys.argv[1])
if sys.argv[2] == "trap":
    signal.signal(signum, lambda n, f: got.append(n))
print("ready", flush=True)
deadline = time.monotonic() + 60
while not got and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(1)  # a second one, if any, arrives in this time
print("got", len(got), flush=True)
sys.exit(7)
"""


@pytest.mark.parametrize("name", ["SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM"])
@pytest.mark.parametrize("how", ["trap", "default"])
def test_other_signals_reach_the_command(
    tmp_path: Path, tmp_env, name: str, how: str
) -> None:
    """SIGQUIT (Ctrl-\\), SIGUSR1 and the like, sent to the tool alone, are
    passed on to the command once; the tool waits for it, removes the
    overlay and exits with the command's code (128+N if the signal ended it)."""
    script = tmp_path / "trap.py"
    script.write_text(TRAP_SIGNAL)
    cmd = [sys.executable, "-m", "executorch_device_guard", "run", "--"]
    cmd += [sys.executable, str(script), name, how]
    proc = subprocess.Popen(
        cmd, env=tmp_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(getattr(signal, name))
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == "trap":
        assert stdout == "got 1\n", stderr
        assert proc.returncode == 7, stderr
    else:
        assert stdout == "", stderr
        assert proc.returncode == 128 + getattr(signal, name), stderr
    assert overlays_in(tmp_env) == []


# --------------------------------------------------------------------------
# A command whose Python ignores PYTHONPATH would get the stock ExecuTorch:
# refused where it can be seen, and told after the command where it cannot.

IMPORTS_EXECUTORCH = "import sys\nimport executorch.exir\nsys.exit(3)\n"


@pytest.mark.parametrize(
    "argv,option",
    [
        (["python", "-I", "x.py"], "-I"),
        (["python3", "-E", "x.py"], "-E"),
        (["python3.11", "-IE", "x.py"], "-IE"),
        (["/usr/bin/python", "-sE", "x.py"], "-sE"),
        (["python", "-I", "-c", "import executorch"], "-I"),
        (["python", "-W", "ignore", "-E", "-m", "pkg"], "-E"),
        (["env", "-u", "PYTHONPATH", "python", "x.py"], "-u PYTHONPATH"),
        (["env", "--unset=PYTHONPATH", "python", "x.py"], "--unset=PYTHONPATH"),
        (["env", "-i", "PATH=/bin", "python", "x.py"], "-i"),
        (["env", "PYTHONPATH=/elsewhere", "python", "x.py"], "PYTHONPATH=/elsewhere"),
        (["env", "A=1", "python", "-I", "x.py"], "-I"),
        # env -S splits one string into the words it runs (second attack).
        (["env", "-S", "python -I -c pass"], "-I"),
        (["env", "-Spython -E x.py"], "-E"),
        (["env", "--split-string=-u PYTHONPATH python x.py"], "-u PYTHONPATH"),
        (["env", "-S", "A=1 'python3' -I x.py"], "-I"),
    ],
)
def test_a_command_line_that_drops_pythonpath_is_refused(argv, option) -> None:
    from executorch_device_guard.installation.run import drops_pythonpath

    assert drops_pythonpath(argv) == option


@pytest.mark.parametrize(
    "argv",
    [
        ["python", "x.py", "-I"],  # the script's own argument
        ["python", "-c", "code", "-E"],
        ["python", "-m", "pkg", "-I"],
        ["python", "-W", "-I", "x.py"],  # -W's value
        ["python", "-X", "dev", "-s", "x.py"],
        ["python", "-Wignore", "-u", "x.py"],
        ["python", "-", "-I"],
        ["grep", "-E", "x"],
        ["env", "A=1", "python", "x.py"],
        ["env", "-u", "OTHER", "python", "x.py"],
        ["env", "-S", "python x.py -I"],
    ],
)
def test_a_command_line_that_keeps_pythonpath_runs(argv) -> None:
    from executorch_device_guard.installation.run import drops_pythonpath

    assert drops_pythonpath(argv) is None


def test_python_dash_i_is_refused_up_front(tmp_path: Path, tmp_env) -> None:
    script = tmp_path / "export.py"
    script.write_text("print('ran')\n")
    python = os.path.basename(sys.executable)
    for argv, shown in (
        ([sys.executable, "-I", str(script)], f"run: {python} -I ignores PYTHONPATH"),
        (
            ["env", "-u", "PYTHONPATH", sys.executable, str(script)],
            "run: env -u PYTHONPATH removes PYTHONPATH",
        ),
    ):
        result = guard("run", "--", *argv, env=tmp_env)
        one_line(result, 2, shown, ", where run puts the patched", "Nothing was run")
        assert result.stdout == ""
    assert overlays_in(tmp_env) == []


NOT_IMPORTED = (
    "executorch-device-guard: note: no process of this command imported "
    "ExecuTorch from the patched overlay"
)


def test_a_python_that_ignored_pythonpath_is_told_after_the_command(
    tmp_path: Path, tmp_env
) -> None:
    """Where the command line does not show it (a shell script), run knows
    after the command whether any process of it imported the overlay's
    ExecuTorch, and says so in one line, keeping the command's exit code."""
    script = tmp_path / "export.py"
    script.write_text(IMPORTS_EXECUTORCH)
    python, path = shlex.quote(sys.executable), shlex.quote(str(script))
    shells = {
        "-I": f"{python} -I {path}",
        "-E": f"{python} -E {path}",
        "env -u": f"env -u PYTHONPATH {python} {path}",
        "normal": f"{python} {path}",
    }
    with concurrent.futures.ThreadPoolExecutor(len(shells)) as pool:
        results = dict(
            zip(
                shells,
                pool.map(
                    lambda line: guard("run", "--", "sh", "-c", line, env=tmp_env),
                    shells.values(),
                ),
            )
        )
    for name, result in results.items():
        assert result.returncode == 3, (name, result.stderr[-3000:])
        assert "Traceback" not in result.stderr, result.stderr
        # Importing ExecuTorch prints warnings of its own (torchao's).
        lines = [
            line
            for line in result.stderr.splitlines()
            if line.startswith("executorch-device-guard")
        ]
        if name == "normal":
            assert lines == [], result.stderr
            continue
        assert len(lines) == 1 and lines[0].startswith(NOT_IMPORTED), (name, lines)
        assert "-I" in lines[0] and "env -u PYTHONPATH" in lines[0]
    assert overlays_in(tmp_env) == []


def test_a_command_without_executorch_gets_a_quiet_note(tmp_env) -> None:
    result = guard("run", "--", "sh", "-c", "exit 5", env=tmp_env)
    assert result.returncode == 5
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(NOT_IMPORTED), lines
    assert "If it uses ExecuTorch" in lines[0]


@pytest.mark.parametrize(
    "argv,shown",
    [
        (["env", "--", "python3", "-I", "x.py"], "python3 -I ignores PYTHONPATH"),
        (["env", "A=1", "/usr/bin/python", "-E"], "python -E ignores PYTHONPATH"),
        (["env", "-i", "python", "x.py"], "env -i removes PYTHONPATH"),
        (["env", "PYTHONPATH=", "python"], "env PYTHONPATH= replaces PYTHONPATH"),
    ],
)
def test_a_refusal_names_the_program_that_drops_pythonpath(argv, shown) -> None:
    from executorch_device_guard.errors import GuardError
    from executorch_device_guard.installation.run import refuse_dropped_pythonpath

    with pytest.raises(GuardError) as error:
        refuse_dropped_pythonpath(argv)
    assert str(error.value).startswith(f"run: {shown}, where run puts"), error.value


def test_a_run_inside_a_run_uses_the_outer_overlay(tmp_env) -> None:
    """A script that wraps its export in ``run``, itself run under ``run``:
    the inner command gets the outer overlay, its exit code and no error."""
    code = "import sys, executorch.exir as e; print(e.__file__); sys.exit(3)"
    inner = [sys.executable, "-m", "executorch_device_guard", "run", "--"]
    result = guard("run", "--", *inner, sys.executable, "-c", code, env=tmp_env)
    assert result.returncode == 3, result.stderr
    assert "executorch-device-guard" not in result.stderr, result.stderr
    overlay = Path(result.stdout.strip()).parents[2]
    assert overlay.parent.parent == Path(tmp_env["TMPDIR"])
    assert overlays_in(tmp_env) == []


# Issue 25, cases 6 and 9.


def test_the_overlay_variable_is_no_bypass(tmp_path: Path, tmp_env) -> None:
    """Case 6: ddcd504 took EXECUTORCH_DEVICE_GUARD_OVERLAY, with that folder
    first on PYTHONPATH, for an outer run's overlay and ran the command on
    whatever the folder held. No variable is read now: the folder is refused
    as any other that shadows the installed ExecuTorch."""
    evil = tmp_path / "evil"
    (evil / "executorch" / "exir").mkdir(parents=True)
    (evil / "executorch" / "exir" / "__init__.py").write_text(
        'print("NOT PATCHED: loaded from", __file__)\n'
    )
    env = dict(
        tmp_env,
        EXECUTORCH_DEVICE_GUARD_OVERLAY=str(evil),
        PYTHONPATH=os.pathsep.join([str(evil), str(REPO)]),
    )
    cmd = [sys.executable, "-c", "import executorch.exir"]
    result = guard("run", "--", *cmd, env=env, cwd=tmp_path)
    assert "NOT PATCHED" not in result.stdout
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(
        "executorch-device-guard: error: `import executorch.exir` here loads "
        f"{evil / 'executorch'}/exir, not the installed ExecuTorch"
    ), result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert overlays_in(tmp_env) == []


@pytest.mark.parametrize("what", ["stock", "an-extra-file", "a-file-missing"])
def test_a_run_inside_a_run_takes_only_a_patched_overlay(
    tmp_path: Path, tmp_env, what: str
) -> None:
    """Case 6: what the inner run accepts as the outer overlay is read from
    its files: the patched overlay of the installed ExecuTorch, name for
    name. A stock overlay, or a patched one with a file added or missing,
    is refused."""
    from executorch_device_guard.installation.overlay import (
        build_overlay,
        inspect_targets,
    )
    from executorch_device_guard.patchset import patched_files

    root = executorch_root()
    targets = patched_files(REPO, install=True)
    found = inspect_targets(root, targets)
    folder = build_overlay(
        root, targets, tmp_path / "outer", patched=what != "stock", found=found
    )
    package = folder / "executorch"
    if what == "an-extra-file":
        (package / "exir" / "emit" / "extra.py").write_text("")
    elif what == "a-file-missing":
        # e.g. backends/cadence: a namespace portion later on the path
        # (the installed one) would then give it, stock.
        next(p for p in sorted((package / "backends").iterdir()) if p.is_symlink()).unlink()
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(folder), str(REPO)]))
    cmd = [sys.executable, "-c", "print('ran')"]
    result = guard("run", "--", *cmd, env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "ran" not in result.stdout
    assert "not the installed ExecuTorch" in result.stderr, result.stderr
    # The same overlay, untouched and patched, is taken.
    if what != "stock":
        ok = build_overlay(root, targets, tmp_path / "ok", patched=True, found=found)
        env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(ok), str(REPO)]))
        result = guard("run", "--", *cmd, env=env, cwd=tmp_path)
        assert result.returncode == 0 and result.stdout == "ran\n", result.stderr


@pytest.mark.parametrize("how", ["path", "link"])
def test_tmpdir_inside_the_package_is_refused(tmp_path: Path, how: str) -> None:
    """Case 9: run writes nothing into the installed package, also when
    TMPDIR points into it (or is a link into it)."""
    from sites import cli, one_line_error

    site = make_site(tmp_path / "site")
    inside = site / "executorch" / "exir"
    if how == "link":
        (tmp_path / "tmp").symlink_to(inside)
        inside = tmp_path / "tmp"
    before = snapshot(tmp_path)
    result = cli(
        site,
        "run",
        "--",
        sys.executable,
        "-c",
        "print('ran')",
        env={"TMPDIR": str(inside)},
    )
    one_line_error(
        result, f"the temporary folder {inside} is inside the installed ExecuTorch"
    )
    assert "ran" not in result.stdout
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("how", ["TMPDIR", "relative", "TEMP"])
def test_tmpdir_inside_the_package_is_refused_before_anything_is_written(
    tmp_path: Path, how: str
) -> None:
    """The refusal comes before Python's tempfile looks for a usable folder:
    that look creates and removes a file in it, which would give the
    package's folder a new modification time. Also for TMPDIR=. from inside
    the package, and for TEMP there when TMPDIR is empty; and for check,
    whose overlays go there too."""
    from sites import cli, one_line_error

    site = make_site(tmp_path / "site")
    inside = site / "executorch" / "exir" / "emit"
    env = {"TMPDIR": str(inside)}
    cwd = None
    if how == "relative":
        env, cwd = {"TMPDIR": "."}, inside
    elif how == "TEMP":
        env = {"TMPDIR": "", "TEMP": str(inside)}
    old = 1_000_000_000_123_456_789
    os.utime(inside, ns=(old, old))
    before = snapshot(tmp_path)
    for args in (["run", "--", "true"], ["check", "--paths", "emitter"]):
        result = cli(site, *args, env=env, cwd=cwd)
        one_line_error(
            result, f"the temporary folder {inside} is inside the installed ExecuTorch"
        )
        assert os.stat(inside).st_mtime_ns == old
        assert snapshot(tmp_path) == before


def test_the_next_run_removes_what_a_killed_run_left(tmp_path: Path, tmp_env) -> None:
    """Case 9: kill -9 of run leaves its temporary folder (the command keeps
    running, and keeps its lock). A later run leaves it while the command
    lives, and removes it once it has ended; nothing else of that name."""
    old = time.time() - 3600
    tmpdir = Path(tmp_env["TMPDIR"])
    installed = tree_hashes(executorch_root())
    script = "import os, sys, time; print(os.getpid(), flush=True); time.sleep(600)"
    proc = subprocess.Popen(
        [sys.executable, "-m", "executorch_device_guard", "run", "--"]
        + [sys.executable, "-c", script],
        env=tmp_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    command = int(proc.stdout.readline())
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        (left,) = overlays_in(tmp_env)
        os.utime(left, (old, old))
        # Named like run's folders, but not left by it.
        mine = tmpdir / "device-guard-run-mine1234"
        (mine / "notes").mkdir(parents=True)
        young = tmpdir / "device-guard-run-young123"
        (young / "patched").mkdir(parents=True)
        (tmpdir / "device-guard-run-afile123").write_text("")
        (tmpdir / "device-guard-run-alink123").symlink_to(mine)
        for path in (mine, tmpdir / "device-guard-run-afile123"):
            os.utime(path, (old, old))

        ran = guard("run", "--", "true", env=tmp_env)
        assert ran.returncode == 0, ran.stderr
        assert left.is_dir(), "removed while its command ran"
    finally:
        os.kill(command, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{command}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    ran = guard("run", "--", "true", env=tmp_env)
    assert ran.returncode == 0, ran.stderr
    assert not left.exists()
    assert tree_hashes(executorch_root()) == installed  # links removed, not followed
    assert sorted(p.name for p in overlays_in(tmp_env)) == [
        "device-guard-run-afile123",
        "device-guard-run-alink123",
        "device-guard-run-mine1234",
        "device-guard-run-young123",
    ]


# Issue 34: the fourth attack (hostile-f78d3a2.md).

_WORKER = """
import importlib.util, os, sys, time
go, out = sys.argv[1:]
while not os.path.exists(go):
    time.sleep(0.05)
with open(out + ".tmp", "w") as f:
    f.write(importlib.util.find_spec("executorch.exir").origin)
os.rename(out + ".tmp", out)
"""


def _wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never came"
        time.sleep(0.05)


def _ended(pid: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def _age(path: Path) -> None:
    old = time.time() - 3600
    os.utime(path, (old, old))


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="Linux /proc")
def test_a_worker_that_outlives_the_command_keeps_its_overlay(
    tmp_path: Path, tmp_env
) -> None:
    """D3 (a): a command that starts a background worker and ends. f78d3a2
    removed the overlay when its direct child ended, and the worker's later
    imports found the stock ExecuTorch. The overlay stays while the worker
    lives (run says so in one line), and the next run removes it after."""
    worker = tmp_path / "worker.py"
    worker.write_text(_WORKER)
    go, out = tmp_path / "go", tmp_path / "out"
    line = shlex.join([sys.executable, str(worker), str(go), str(out)])
    result = guard("run", "--", "sh", "-c", f"{line} >/dev/null 2>&1 &", env=tmp_env)
    go.touch()
    _wait_for(out)
    origin = Path(out.read_text())
    assert result.returncode == 0, result.stderr
    (left,) = overlays_in(tmp_env)
    assert origin.is_relative_to(left) and origin.is_file(), origin
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "executorch-device-guard: note: the command ended, but process "
    ), result.stderr
    assert f"so {left} stays; the next `run` removes it" in lines[0]
    time.sleep(0.5)  # the worker ends once it has written
    _age(left)
    assert guard("run", "--", "true", env=tmp_env).returncode == 0
    assert overlays_in(tmp_env) == []


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="Linux /proc")
def test_a_killed_runs_overlay_stays_while_a_command_that_closed_its_fds_lives(
    tmp_path: Path, tmp_env
) -> None:
    """D3 (b): kill -9 of run, its command a daemon that closed the
    descriptors it inherited (the lock among them), as a child of
    subprocess does: f78d3a2's next run removed the live command's overlay.
    It stays while the command lives (its environment names it)."""
    script = (
        "import os, time; os.closerange(3, 65536); "
        "print(os.getpid(), flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "executorch_device_guard", "run", "--"]
        + [sys.executable, "-c", script],
        env=tmp_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    command = int(proc.stdout.readline())
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        (left,) = overlays_in(tmp_env)
        _age(left)
        ran = guard("run", "--", "true", env=tmp_env)
        assert ran.returncode == 0, ran.stderr
        assert left.is_dir(), "removed while its command ran"
    finally:
        os.kill(command, signal.SIGKILL)
    _ended(command)
    assert guard("run", "--", "true", env=tmp_env).returncode == 0
    assert not left.exists()


NOTE_FAILED = (
    "executorch-device-guard: note: a process of this command started importing "
    "ExecuTorch from the patched overlay, but no process finished that import"
)


def test_an_import_of_the_overlay_that_failed_is_not_blamed_on_pythonpath(
    tmp_env,
) -> None:
    """N2: the command imported the overlay's ExecuTorch, and that import
    failed (here torch is missing): f78d3a2's note blamed python -I, env -u
    PYTHONPATH or a venv activation. It says the import failed."""
    code = "import sys; sys.modules['torch'] = None; import executorch.exir"
    result = guard("run", "--", sys.executable, "-c", code, env=tmp_env)
    assert result.returncode == 1, result.stderr
    assert "/patched/executorch/exir/__init__.py" in result.stderr
    notes = [x for x in result.stderr.splitlines() if x.startswith("executorch-device")]
    assert len(notes) == 1 and notes[0].startswith(NOTE_FAILED), result.stderr
    assert "PYTHONPATH" not in notes[0]
    assert overlays_in(tmp_env) == []


def test_the_import_markers_keep_every_line_number() -> None:
    """The start marker takes the place of a blank line after the docstring
    and __future__ imports, outside any statement; the end code is appended."""
    from executorch_device_guard.installation.run import with_markers

    text = (
        b'"""Doc."""\n\nfrom __future__ import annotations\n\nx = (\n\n    1)\n\n'
        b"@dec\n\ndef f():\n    pass\n"
    )
    marked = with_markers(text)
    lines, old = marked.splitlines(), text.splitlines()
    assert lines[3].startswith(b"exec(") and lines[:3] == old[:3], marked
    assert lines[4 : len(old)] == old[4:]
    compile(marked, "x", "exec")
    # No blank line outside a statement after the header: none is taken.
    inside = b'"""Doc."""\nx = (\n\n    1)\n'
    assert with_markers(inside).splitlines()[: len(inside.splitlines())] == (
        inside.splitlines()
    )
    assert with_markers(b"x = 1\n").splitlines()[0] == b"x = 1"  # no blank line


@pytest.mark.parametrize(
    "args", [["run", "--", "true"], ["check", "--paths", "emitter"]]
)
def test_a_tmpdir_that_is_not_utf8_is_refused(tmp_path: Path, args) -> None:
    """N1: torch cannot load ExecuTorch's files from a path that is not
    UTF-8: f78d3a2's run broke the command, and check ran every export to
    end in NO VERDICT. Refused up front, one line naming it."""
    tmpdir = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(tmpdir)
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=os.fsdecode(tmpdir))
    result = guard(*args, env=env, timeout=300)
    one_line(result, 2, "/caf\\xe9 is not a UTF-8 path", "set TMPDIR")
    assert os.listdir(tmpdir) == []


@pytest.fixture
def full_tmpdir(tmp_path: Path):
    """A TMPDIR on a 512 KiB tmpfs, filled (needs root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    full = tmp_path / "full"
    full.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(full)],
        capture_output=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr!r}")
    try:
        with open(full / "fill", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        yield full
    finally:
        subprocess.run(["umount", str(full)], check=True)


@pytest.mark.parametrize(
    "args", [["run", "--", "true"], ["check", "--paths", "emitter", "--devices", "cpu"]]
)
def test_a_full_tmpdir_is_named(full_tmpdir: Path, args) -> None:
    """D6 (a): f78d3a2 said only "[Errno 28] No space left on device". One
    line names the temporary folder and the way out; for check, exit 2 (a
    refusal before any export), as for a TMPDIR it cannot use otherwise."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(full_tmpdir))
    result = guard(*args, env=env, timeout=300)
    one_line(
        result, 2, f"temporary folder {full_tmpdir} (No space left on device)",
        "set TMPDIR to another folder",
    )
    assert os.listdir(full_tmpdir) == ["fill"]


def _start_check(env: Dict[str, str]) -> Tuple[subprocess.Popen, Path]:
    """check, started; and its folder, once its overlays and case folder are
    there."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "executorch_device_guard", "check"]
        + ["--paths", "emitter", "--devices", "cpu"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while True:
        found = overlays_in(env)
        if found and (found[0] / "cases").is_dir():
            return proc, found[0]
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)


@pytest.mark.parametrize("name", ["SIGUSR1", "SIGQUIT"])
def test_check_ended_by_another_signal_removes_its_folder(tmp_env, name: str) -> None:
    """D4: SIGUSR1 (or SIGQUIT, SIGUSR2, SIGALRM) killed f78d3a2's check
    outright, its 2 MB folder left in TMPDIR. It ends as for SIGTERM: one
    line, 128+N, its children ended and the folder removed."""
    proc, folder = _start_check(tmp_env)
    signum = getattr(signal, name)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, (proc.returncode, err[-3000:])
    last = err.splitlines()[-1]
    assert last == f"executorch-device-guard: error: interrupted ({name}).", err
    assert not folder.exists()
    assert survivors(tmp_env["TMPDIR"]) == []


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="Linux /proc")
def test_a_killed_checks_folder_is_removed_once_nothing_uses_it(
    tmp_path: Path, tmp_env
) -> None:
    """D4: kill -9 of check leaves device-guard-XXXXXXXX, which f78d3a2
    never removed. Its folder is locked now, like run's: the next run (or
    check) removes it once no process holds its lock or has it in its
    environment (a warm parent still winding down, here a stand-in)."""
    proc, folder = _start_check(tmp_env)
    user = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env=dict(tmp_env, PYTHONPATH=str(folder / "stock")),
    )
    try:
        proc.kill()
        proc.communicate(timeout=60)
        for pid in survivors(tmp_env["TMPDIR"], wait=0):  # its warm parents
            if pid != user.pid:
                os.kill(pid, signal.SIGKILL)
        assert folder.is_dir()
        _age(folder)
        ran = guard("run", "--", "true", env=tmp_env)
        assert ran.returncode == 0, ran.stderr
        assert folder.is_dir(), "removed while a process used it"
    finally:
        user.kill()
        user.wait()
    for pid in survivors(tmp_env["TMPDIR"], wait=0):
        _ended(pid)
    _age(folder)
    assert guard("run", "--", "true", env=tmp_env).returncode == 0
    assert not folder.exists()
    assert overlays_in(tmp_env) == []


# The fifth attack (docs/hostile.md, "The fifth attack").

LAUNCHER = "import sys\nfrom executorch_device_guard.cli import main\nsys.exit(main())\n"

# A partial executorch/ folder: one guarded subpackage, copied stock as
# `cp -a` copies it (its __init__.py files too), and the subpackage's target.
_PARTIAL = {
    "backends": ("backends/", "backends/xnnpack/operators/node_visitor.py"),
    "devtools": ("devtools/", "devtools/bundled_program/core.py"),
    "custom-ops": (
        "extension/llm/custom_ops/",
        "extension/llm/custom_ops/custom_ops.py",
    ),
}


@pytest.mark.parametrize("where", ["current-folder", "script-folder"])
@pytest.mark.parametrize("partial", sorted(_PARTIAL))
def test_a_partial_executorch_folder_beside_the_command_is_refused(
    tmp_path: Path, tmp_env, partial: str, where: str
) -> None:
    """D1: executorch is a namespace package, so an executorch/ folder that
    Python searches first (the current folder for python -c and -m, the
    script's folder for python FILE) merges in ahead of the overlay,
    subpackage by subpackage. 7f6ba8a looked for exir/ in the current folder
    only, and ran the command on a stock XNNPACK, bundled program or custom
    ops. Every target module is now looked up as Python would: one line,
    exit 2, nothing run."""
    from sites import INITS, STOCK

    site = make_site(tmp_path / "site")
    beside = tmp_path / "beside"
    prefix, target = _PARTIAL[partial]
    for rel in [i for i in INITS if i.startswith(prefix)] + [target]:
        path = beside / "executorch" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(STOCK.get(rel, b""))
    script = beside / "export.py"
    script.write_text("print('ran')\n")
    tool = tmp_path / "edg.py"  # as the console script runs it (not python -m)
    tool.write_text(LAUNCHER)
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    if where == "current-folder":
        cwd, command = beside, [sys.executable, "-c", "print('ran')"]
        needle = f"the current folder {beside} holds an executorch folder"
    else:
        cwd, command = tmp_path, [sys.executable, str(script)]
        needle = f"the script's folder {beside} holds an executorch folder"
    before = snapshot(tmp_path / "site"), snapshot(beside)
    result = subprocess.run(
        [sys.executable, str(tool), "run", "--", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    one_line(result, 2, needle, "not from the patched overlay", "Nothing was run")
    assert result.stdout == ""
    assert (snapshot(tmp_path / "site"), snapshot(beside)) == before
    assert overlays_in(tmp_env) == []


def test_an_exir_init_that_python_cannot_import_is_refused(tmp_path: Path, tmp_env):
    """D11: a FIFO in place of exir/__init__.py: Python imports executorch.exir
    as an empty namespace package, and 7f6ba8a linked it into the overlay and
    ran the command without the import marker, so not even the note came.
    Refused in one line (status too), nothing run."""
    from sites import cli

    site = make_site(tmp_path / "site")
    init = site / "executorch" / "exir" / "__init__.py"
    init.unlink()
    os.mkfifo(init)
    before = snapshot(tmp_path / "site")
    for args in (["status"], ["run", "--", "true"]):
        # -S: no ExecuTorch of this environment behind the site's on the path.
        env = {"TMPDIR": tmp_env["TMPDIR"]}
        result = cli(site, *args, env=env, python_flags=["-S"], timeout=60)
        one_line(
            result,
            2,
            f"`import executorch.exir` here loads {init.parent} as a namespace "
            "package: its __init__.py is not a file that Python imports",
        )
    assert snapshot(tmp_path / "site") == before
    assert overlays_in(tmp_env) == []


def _mtimes(*folders: Path) -> list:
    return [os.stat(folder).st_mtime_ns for folder in folders]


@pytest.mark.parametrize("where", ["site-packages", "dist-info"])
def test_a_tmpdir_in_site_packages_is_refused(tmp_path: Path, where: str) -> None:
    """D5: 7f6ba8a refused a TMPDIR inside the package only: with TMPDIR in
    site-packages itself or in ExecuTorch's dist-info, run made its overlay
    there (their times changed; after kill -9 it stayed in the dist-info,
    which pip uninstall would leave behind). Refused before anything is
    written, for check's overlays too."""
    from sites import cli, one_line_error

    site = make_site(tmp_path / "site")
    dist = site / "executorch-1.5.1.dist-info"
    tmpdir = site if where == "site-packages" else dist
    old = 1_000_000_000_123_456_789
    for folder in (site, dist):
        os.utime(folder, ns=(old, old))
    before = snapshot(tmp_path)
    for args in (["run", "--", "true"], ["check", "--paths", "emitter"]):
        result = cli(site, *args, env={"TMPDIR": str(tmpdir)})
        one_line_error(
            result,
            f"the temporary folder {tmpdir} is inside {site}, the folder that "
            "holds the installed ExecuTorch, where nothing is written",
        )
        assert snapshot(tmp_path) == before
        assert _mtimes(site, dist) == [old, old]


def test_a_log_dir_in_the_package_is_refused(tmp_path: Path) -> None:
    """D5: check --log-dir inside the installed package (or site-packages)
    wrote its logs there. Refused in one line before the folder is made."""
    from sites import cli, one_line_error

    site = make_site(tmp_path / "site")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    before = snapshot(tmp_path)
    for logs in (site / "executorch" / "exir" / "emit" / "logs", site / "logs"):
        args = ["check", "--paths", "emitter", "--devices", "cpu", "--log-dir"]
        result = cli(site, *args, str(logs), env={"TMPDIR": str(tmpdir)})
        one_line_error(result, f"--log-dir {logs} is inside ", "where nothing is written")
        assert snapshot(tmp_path) == before


def test_a_tmpdir_bind_mounted_from_the_package_is_refused(tmp_path: Path) -> None:
    """D5: a bind mount shows a folder of the package under another path:
    7f6ba8a compared paths only and made the overlay inside executorch/exir.
    Folders are compared by device and inode too."""
    import shutil as _shutil

    if os.geteuid() != 0 or not _shutil.which("unshare"):
        pytest.skip("needs root and unshare, for a bind mount of its own")
    site = make_site(tmp_path / "site")
    exir = site / "executorch" / "exir"
    mount = tmp_path / "mnt"
    mount.mkdir()
    before = snapshot(tmp_path / "site")
    logs = mount / "logs"
    script = (
        "mount --make-rprivate / && mount --bind \"$1\" \"$2\" && shift 2 && "
        'TMPDIR="$MNT" "$@" run -- true; echo "run=$?"; '
        '"$@" check --paths emitter --devices cpu --log-dir "$LOGS"; echo "check=$?"'
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
        MNT=str(mount),
        LOGS=str(logs),
        TMPDIR=str(tmp_path),
    )
    probe = subprocess.run(
        ["unshare", "-m", "true"], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.strip()}")
    result = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "-", str(exir), str(mount),
         sys.executable, "-m", "executorch_device_guard"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert "run=2" in result.stdout and "check=2" in result.stdout, (
        result.stdout + result.stderr
    )
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith(
        f"executorch-device-guard: error: the temporary folder {mount} is inside "
        f"{exir}, in the installed ExecuTorch (seen as {mount}: a bind mount)"
    ), lines
    assert lines[1].startswith(
        f"executorch-device-guard: error: --log-dir {logs} is inside {exir}"
    ), lines
    assert snapshot(tmp_path / "site") == before


def test_an_error_naming_a_command_stays_one_line(tmp_env) -> None:
    """D8: a command whose name holds a newline was "command not found: no"
    and "such" on a second line. It is one line, the newline escaped."""
    result = guard("run", "--", "no\nsuch", env=tmp_env)
    one_line(result, 127, "command not found: no\\nsuch")
    assert overlays_in(tmp_env) == []


@pytest.mark.parametrize("first_line", ["#!/bin/sh\r", "#!/nonexistent/interp -x"])
def test_a_script_whose_interpreter_is_missing_is_not_command_not_found(
    tmp_path: Path, tmp_env, first_line: str
) -> None:
    """D8: a script with CRLF line endings (its interpreter "/bin/sh\\r"),
    or a #! line naming a missing program, was "command not found: SCRIPT",
    though the script is there. As bash says: bad interpreter, exit 126."""
    script = tmp_path / "script.sh"
    script.write_bytes(first_line.encode() + b"\necho hi\n")
    script.chmod(0o755)
    result = guard("run", "--", str(script), env=tmp_env)
    interpreter = first_line[2:].split(" ")[0].replace("\r", "\\r")
    one_line(
        result, 126, f"cannot execute {script}: {interpreter}: bad interpreter"
    )
    if first_line.endswith("\r"):
        assert "CRLF line endings" in result.stderr
    assert "command not found" not in result.stderr
    assert overlays_in(tmp_env) == []


def test_a_signal_after_the_command_ended_keeps_its_exit_code(
    tmp_path: Path, tmp_env
) -> None:
    """D11: a Ctrl-C just after the command exited 0 ended run with
    "interrupted (SIGINT)" and 130, though the command had finished. The
    command's exit code stands; the signal only cuts run's note short, and
    the overlay is removed. (The command fills run's stderr up to just under
    a pipe's 64 KiB, so that run's note waits on it: the signal lands then.)"""
    pidfile = tmp_path / "pid"
    script = f"echo $$ > {pidfile}; head -c 65400 /dev/zero | tr '\\0' x >&2; exit 0"
    proc = subprocess.Popen(
        [sys.executable, "-m", "executorch_device_guard", "run", "--", "sh", "-c", script],
        env=tmp_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists() or not pidfile.read_text().strip():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        while Path(f"/proc/{pid}").exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1.0)  # run is writing its note now, and waits on the pipe
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-500:]
    assert b"interrupted" not in err, err[-500:]
    assert overlays_in(tmp_env) == []

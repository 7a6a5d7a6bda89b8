# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``run -- COMMAND``: the fixed ExecuTorch for one command, nothing written.

The script below exports a model whose weight is on a fake device. Run as it
is, stock ExecuTorch kills it with SIGSEGV; under ``run`` its Python starts
the import hook, which serves the changed emitter, and it exits 1 with the
error naming the device. The installed ExecuTorch hashes the same before and
after, and ``TMPDIR`` stays empty, also after Ctrl-C or a SIGKILL of ``run``.
"""

import hashlib
import os
import pty
import re
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
from throwaway import (
    copy_of_installed_executorch,
    survivors,
    venv_over_this_environment,
)

# The folder whose sitecustomize turns the import hook on, in the tool that
# the tests run (this checkout, first on PYTHONPATH).
BOOTSTRAP = REPO / "executorch_device_guard" / "bootstrap"
# Run by a command: the origin of module argv[1], and what the import hook
# did with it (its report, ``Finder.served``). Imports only its packages.
SERVED = """
import importlib.util, sys
name = sys.argv[1]
spec = importlib.util.find_spec(name)
(hook,) = [f for f in sys.meta_path if getattr(f, "executorch_device_guard_finder", 0)]
print(spec.origin, hook.served[name][0])
"""

EXPORT_SCRIPT = """
import os, sys, time
import torch
from executorch.exir import to_edge_transform_and_lower
from torch.export import export
from executorch_device_guard.check.fake_device import on_device

print("first on the path:", os.environ["PYTHONPATH"].split(os.pathsep)[0], flush=True)
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
    """TMPDIR of its own, so that anything written there would show; torch's
    cache and the import hook's elsewhere."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        TMPDIR=str(tmpdir),
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    env.pop("EXECUTORCH_DEVICE_GUARD", None)
    return env


def in_tmpdir(env: Dict[str, str]) -> list:
    """Everything in the TMPDIR of ``env``: run writes nothing there."""
    return sorted(os.listdir(env["TMPDIR"]))


def check_folders_in(env: Dict[str, str]) -> list:
    """What check left in TMPDIR: its folders."""
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


def test_run_gives_the_fixed_executorch(tmp_path: Path, tmp_env) -> None:
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
    first = result.stdout.split("first on the path: ", 1)[1].split()[0]
    assert first == str(BOOTSTRAP)

    assert tree_hashes(executorch_root()) == before
    assert in_tmpdir(tmp_env) == []


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
    assert in_tmpdir(tmp_env) == []


def test_ctrl_c_leaves_nothing(tmp_path: Path, tmp_env) -> None:
    script = tmp_path / "export.py"
    script.write_text(EXPORT_SCRIPT)
    before = tree_hashes(executorch_root())
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
        assert proc.stdout.readline() == f"first on the path: {BOOTSTRAP}\n"
        assert proc.stdout.readline() == "waiting\n"
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # Python ends on an uncaught KeyboardInterrupt by SIGINT: 128 + 2.
    assert proc.returncode == 130, stderr
    assert "KeyboardInterrupt" in stderr
    assert in_tmpdir(tmp_env) == []
    assert tree_hashes(executorch_root()) == before


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
    assert in_tmpdir(tmp_env) == []


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
    assert in_tmpdir(tmp_env) == []


def one_line(result: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("executorch-device-guard: error: "), lines
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("name", ["a:b", "caf\udce9"], ids=["separator", "not-utf8"])
def test_any_tmpdir_serves_check_and_run(tmp_path: Path, name: str) -> None:
    """Nothing of check's goes on PYTHONPATH, and no ExecuTorch file is read
    from TMPDIR: a path with ':' or one that is not UTF-8 serves check (its
    verdict, its folder removed) and run (which writes nothing there)."""
    tmpdir = tmp_path / name
    tmpdir.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmpdir))
    result = guard("check", "--paths", "emitter", "--devices", "fake:cuda:0", env=env)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "SIGSEGV (exit 139)" in result.stdout
    assert check_folders_in(env) == []
    ran = guard("run", "--", sys.executable, "-c", "print('ran')", env=env)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "ran\n", "")
    assert check_folders_in(env) == []


def test_a_tool_installed_under_a_path_with_a_colon_is_refused(tmp_path: Path):
    """PYTHONPATH cannot hold the bootstrap's folder when its path has ':':
    run and check refuse in one line, before anything runs."""
    import shutil

    # venv refuses such a path; a venv moved there works as it did.
    site = venv_over_this_environment(tmp_path / "venv", None)
    (tmp_path / "venv").rename(tmp_path / "v:1")
    site = tmp_path / "v:1" / site.relative_to(tmp_path / "venv")
    package = site / "executorch_device_guard"
    shutil.copytree(
        REPO / "executorch_device_guard",
        package,
        ignore=shutil.ignore_patterns("__pycache__", "_upstream"),
    )
    for data in ("patches", "backends", "extension"):  # as the wheel has them
        shutil.copytree(REPO / data, package / "_upstream" / data)
    python = str(site.parents[2] / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for args in (
        ["run", "--", python, "-c", "print('ran')"],
        ["check", "--paths", "emitter", "--devices", "cpu"],
    ):
        result = subprocess.run(
            [python, "-m", "executorch_device_guard", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        one_line(result, 2, f"the tool's folder {package}/bootstrap contains ':'")
        assert result.stdout == ""


@pytest.mark.parametrize(
    "kind,shown",
    [
        ("not-utf8", "_emitter.py is unknown (it cannot be read (UnicodeDecodeError"),
        ("fifo", "_emitter.py is missing (is not a regular file)"),
    ],
)
def test_refuses_what_apply_refuses(
    tmp_path: Path, tmp_env, kind: str, shown: str
) -> None:
    site = make_site(tmp_path / "site")
    emitter = site / "executorch" / "exir" / "emit" / "_emitter.py"
    if kind == "fifo":
        emitter.unlink()
        os.mkfifo(emitter)
    else:
        emitter.write_bytes(b"\xff\xfe not utf-8\n")
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    result = guard(
        "run", "--", sys.executable, "-c", "print('ran')", env=env, timeout=60
    )
    one_line(result, 2, shown, "it would load without the fix. Nothing was run.")
    assert result.stdout == ""
    assert in_tmpdir(tmp_env) == []


def test_a_symlinked_target_is_served_as_python_loads_it(
    tmp_path: Path, tmp_env
) -> None:
    """The emitter a symbolic link to a stock copy: run writes nothing, and
    the import hook serves the fix to what Python loads through the link."""
    site = make_site(tmp_path / "site")
    emitter = site / "executorch" / "exir" / "emit" / "_emitter.py"
    outside = tmp_path / "outside.py"
    outside.write_bytes(emitter.read_bytes())
    emitter.unlink()
    emitter.symlink_to(outside)
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    name = "executorch.exir.emit._emitter"
    code = (
        f"import importlib.util, sys; importlib.util.find_spec({name!r}); "
        f"print([f.served[{name!r}] for f in sys.meta_path if hasattr(f, 'served')])"
    )
    result = guard("run", "--", sys.executable, "-c", code, env=env, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "[('changed', '')]\n",
        "",
    )
    assert in_tmpdir(tmp_env) == []


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
    assert in_tmpdir(tmp_env) == []


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
    assert in_tmpdir(tmp_env) == []


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
    assert in_tmpdir(tmp_env) == []


def test_run_writes_no_bytecode_into_the_installation(tmp_path: Path, tmp_env) -> None:
    """Bytecode writing on (this machine turns it off): the command imports
    the installed emitter, served changed, and no bytecode is cached into the
    installation, also when the command picks its own cache prefix."""
    site = copy_of_installed_executorch(tmp_path / "site")
    before = snapshot(site)
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    code = (
        "import executorch.exir, executorch.exir.emit._emitter as e; print(e.__file__)"
    )
    result = guard("run", "--", sys.executable, "-c", code, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == f"{site}/executorch/exir/emit/_emitter.py\n"
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
    assert in_tmpdir(tmp_env) == []


def test_sigterm_at_any_time_leaves_nothing(tmp_env) -> None:
    """SIGTERM while the tool starts, reads the installation or starts the
    command."""
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
        assert in_tmpdir(tmp_env) == [], i


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
    passed on to the command once; the tool waits for it and exits with the
    command's code (128+N if the signal ended it)."""
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
    assert in_tmpdir(tmp_env) == []


# --------------------------------------------------------------------------
# A command whose Python ignores PYTHONPATH or skips sitecustomize would get
# the stock ExecuTorch: refused where the command line shows it.


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
        (["python", "-S", "x.py"], "-S"),
        (["python3", "-sS", "-c", "import executorch"], "-sS"),
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
        (
            [sys.executable, "-I", str(script)],
            f"run: {python} -I ignores PYTHONPATH, where run puts the fix, so "
            "the command would get the stock ExecuTorch: drop -I (or use apply "
            "instead of run)",
        ),
        (
            [sys.executable, "-S", str(script)],
            f"run: {python} -S skips sitecustomize, which turns the fix on, so "
            "the command would get the stock ExecuTorch: drop -S, which skips "
            "apply's startup file too",
        ),
        (
            ["env", "-u", "PYTHONPATH", sys.executable, str(script)],
            "run: env -u PYTHONPATH removes PYTHONPATH, where run puts the fix",
        ),
        (
            ["env", "-i", sys.executable, str(script)],
            "run: env -i removes PYTHONPATH, where run puts the fix",
        ),
    ):
        result = guard("run", "--", *argv, env=tmp_env)
        one_line(result, 2, shown, "stock ExecuTorch", "Nothing was run")
        assert result.stdout == ""
    assert in_tmpdir(tmp_env) == []


def test_a_command_without_python_runs_quietly(tmp_env) -> None:
    result = guard("run", "--", "sh", "-c", "exit 5", env=tmp_env)
    assert (result.returncode, result.stdout, result.stderr) == (5, "", "")


@pytest.mark.parametrize(
    "argv,shown",
    [
        (["env", "--", "python3", "-I", "x.py"], "python3 -I ignores PYTHONPATH"),
        (["env", "A=1", "/usr/bin/python", "-E"], "python -E ignores PYTHONPATH"),
        (["env", "-i", "python", "x.py"], "env -i removes PYTHONPATH"),
        (["env", "PYTHONPATH=", "python"], "env PYTHONPATH= replaces PYTHONPATH"),
        (["python3", "-S", "x.py"], "python3 -S skips sitecustomize, which turns"),
    ],
)
def test_a_refusal_names_the_program_that_drops_pythonpath(argv, shown) -> None:
    from executorch_device_guard.errors import GuardError
    from executorch_device_guard.installation.run import refuse_dropped_pythonpath

    with pytest.raises(GuardError) as error:
        refuse_dropped_pythonpath(argv)
    assert str(error.value).startswith(f"run: {shown}"), error.value
    assert "so the command would get the stock ExecuTorch" in str(error.value)


@pytest.mark.parametrize(
    "given,expected",
    [
        (None, ["B"]),
        ("", ["B"]),
        ("a", ["B", "a"]),
        (":a", ["B", "", "a"]),  # the empty entry (the current folder) stays
        ("B:a", ["B", "a"]),
        ("a:B", ["B", "a"]),
    ],
)
def test_the_bootstrap_goes_first_on_pythonpath_once(given, expected) -> None:
    from executorch_device_guard.installation.run import BOOTSTRAP, environment

    def path(text: str) -> str:
        return os.pathsep.join(
            str(BOOTSTRAP) if p == "B" else p for p in text.split(":")
        )

    env = {"EXECUTORCH_DEVICE_GUARD": "off"}
    if given is not None:
        env["PYTHONPATH"] = path(given)
    got = environment(env)
    assert got["PYTHONPATH"] == path(":".join(expected))
    assert got["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "EXECUTORCH_DEVICE_GUARD" not in got


def test_a_run_inside_a_run_is_one_finder(tmp_env) -> None:
    """A script that wraps its export in ``run``, itself run under ``run``:
    the inner command has the bootstrap once on its path, one import hook,
    its exit code and no error."""
    code = (
        "import os, sys\n"
        "hook = [f for f in sys.meta_path if getattr(f, MARK, 0)]\n"
        "print(len(hook), os.environ['PYTHONPATH'].split(os.pathsep).count(sys.argv[1]))\n"
        "sys.exit(3)\n"
    ).replace("MARK", repr("executorch_device_guard_finder"))
    inner = [sys.executable, "-m", "executorch_device_guard", "run", "--"]
    command = [*inner, sys.executable, "-c", code, str(BOOTSTRAP)]
    result = guard("run", "--", *command, env=tmp_env)
    assert (result.returncode, result.stdout, result.stderr) == (3, "1 1\n", "")
    assert in_tmpdir(tmp_env) == []


@pytest.mark.parametrize("how", ["path", "link"])
def test_run_writes_nothing_in_the_package_whatever_tmpdir_says(
    tmp_path: Path, how: str
) -> None:
    """A TMPDIR inside the installed package (or a link into it): run writes
    nothing there, nor anywhere else, and runs the command."""
    from sites import cli

    site = make_site(tmp_path / "site")
    inside = site / "executorch" / "exir"
    if how == "link":
        (tmp_path / "tmp").symlink_to(inside)
        inside = tmp_path / "tmp"
    before = snapshot(tmp_path)
    code = "import tempfile; print('ran')"
    result = cli(
        site, "run", "--", sys.executable, "-c", code, env={"TMPDIR": str(inside)}
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "ran\n", "")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("how", ["TMPDIR", "relative", "TEMP"])
def test_tmpdir_inside_the_package_is_refused_before_anything_is_written(
    tmp_path: Path, how: str
) -> None:
    """The refusal comes before Python's tempfile looks for a usable folder:
    that look creates and removes a file in it, which would give the
    package's folder a new modification time. Also for TMPDIR=. from inside
    the package, and for TEMP there when TMPDIR is empty: check's folder
    would go there."""
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
    result = cli(site, "check", "--paths", "emitter", env=env, cwd=cwd)
    one_line_error(
        result, f"the temporary folder {inside} is inside the installed ExecuTorch"
    )
    assert os.stat(inside).st_mtime_ns == old
    assert snapshot(tmp_path) == before


def test_a_killed_run_leaves_nothing(tmp_path: Path, tmp_env) -> None:
    """kill -9 of run: its command keeps running, and nothing of run's is
    left, in TMPDIR or in the installation."""
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
        os.kill(command, 0)  # the command still runs
        assert in_tmpdir(tmp_env) == []
    finally:
        os.kill(command, signal.SIGKILL)
    assert tree_hashes(executorch_root()) == installed


# A background worker of the command: once told to go, it looks the emitter
# up and writes what the import hook did with it.
_WORKER = """
import importlib.util, os, sys, time
go, out = sys.argv[1:]
while not os.path.exists(go):
    time.sleep(0.05)
name = "executorch.exir.emit._emitter"
importlib.util.find_spec(name)
(hook,) = [f for f in sys.meta_path if getattr(f, "executorch_device_guard_finder", 0)]
with open(out + ".tmp", "w") as f:
    f.write(hook.served[name][0])
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


def test_a_worker_that_outlives_the_command_keeps_the_fix(
    tmp_path: Path, tmp_env
) -> None:
    """A command that starts a background worker and ends: run returns with
    its exit code and nothing to say, and the worker's later imports still
    get the fix."""
    worker = tmp_path / "worker.py"
    worker.write_text(_WORKER)
    go, out = tmp_path / "go", tmp_path / "out"
    line = shlex.join([sys.executable, str(worker), str(go), str(out)])
    result = guard("run", "--", "sh", "-c", f"{line} >/dev/null 2>&1 &", env=tmp_env)
    assert (result.returncode, result.stderr) == (0, "")
    go.touch()
    _wait_for(out)
    assert out.read_text() == "changed"
    assert in_tmpdir(tmp_env) == []


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


def test_a_full_tmpdir_is_named(full_tmpdir: Path) -> None:
    """D6 (a): f78d3a2 said only "[Errno 28] No space left on device". One
    line names the temporary folder and the way out; for check, exit 2 (a
    refusal before any export), as for a TMPDIR it cannot use otherwise."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(full_tmpdir))
    args = ["check", "--paths", "emitter", "--devices", "cpu"]
    result = guard(*args, env=env, timeout=300)
    one_line(
        result,
        2,
        f"temporary folder {full_tmpdir} (No space left on device)",
        "set TMPDIR to another folder",
    )
    assert os.listdir(full_tmpdir) == ["fill"]


_CHECK = ["check", "--paths", "emitter", "--devices", "cpu", "meta"]


def _start_check(env: Dict[str, str]) -> Tuple[subprocess.Popen, Path]:
    """check, started; and its folder, once its case folder is there."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "executorch_device_guard", *_CHECK],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while True:
        found = check_folders_in(env)
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
def test_a_killed_checks_folder_is_removed_once_nothing_holds_its_lock(
    tmp_env,
) -> None:
    """D4: kill -9 of check leaves device-guard-XXXXXXXX, which f78d3a2
    never removed. Its folder is locked while check lives: the next check
    leaves a live check's folder alone, and removes one whose lock nobody
    holds."""
    proc, folder = _start_check(tmp_env)
    try:
        os.kill(proc.pid, signal.SIGSTOP)  # alive, and its lock held
        _age(folder)
        ran = guard(*_CHECK, env=tmp_env)
        assert ran.returncode == 0, ran.stderr
        assert folder.is_dir(), "removed while its check lived"
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    for pid in survivors(tmp_env["TMPDIR"], wait=0):  # its warm parents
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # ended meanwhile
        _ended(pid)
    assert folder.is_dir()
    _age(folder)
    assert guard(*_CHECK, env=tmp_env).returncode == 0
    assert not folder.exists()
    assert check_folders_in(tmp_env) == []


def test_the_folder_an_earlier_versions_killed_check_left_is_removed(
    tmp_env,
) -> None:
    """Before the import hook, check's folder also held a stock and a
    patched tree of links into the installed ExecuTorch, with the changed
    files written out: the next check removes such a folder too, and only
    the links, never what they point to."""
    installed = executorch_root()
    folder = Path(tmp_env["TMPDIR"]) / "device-guard-k1ll3d0x"
    for side in ("stock", "patched"):
        (folder / side).mkdir(parents=True)
        (folder / side / "executorch").symlink_to(installed)
    emit = folder / "patched" / "exir" / "emit"
    emit.mkdir(parents=True)
    (emit / "_emitter.py").write_text("# changed\n")
    (folder / "cases").mkdir()
    before = (installed / "exir" / "emit" / "_emitter.py").read_bytes()
    _age(folder)
    assert guard(*_CHECK, env=tmp_env).returncode == 0
    assert check_folders_in(tmp_env) == []
    assert (installed / "exir" / "emit" / "_emitter.py").read_bytes() == before


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


@pytest.mark.parametrize("where", ["current-folder", "script-folder", "sitecustomize"])
@pytest.mark.parametrize("partial", sorted(_PARTIAL))
def test_a_partial_executorch_folder_that_python_finds_first_gets_the_fix(
    tmp_path: Path, tmp_env, partial: str, where: str
) -> None:
    """executorch is a namespace package, so an executorch/ folder that
    Python searches first (the current folder for python -c and -m, the
    script's folder for python FILE, a folder that a sitecustomize puts
    first) merges in ahead of the installed one, subpackage by subpackage.
    The import hook serves the fix to whatever Python loads: the target
    module comes from that folder, changed; nothing is written there."""
    from sites import INITS, STOCK

    site = make_site(tmp_path / "site")
    beside = tmp_path / "beside"
    prefix, target = _PARTIAL[partial]
    for rel in [i for i in INITS if i.startswith(prefix)] + [target]:
        path = beside / "executorch" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(STOCK.get(rel, b""))
    name = "executorch." + target[: -len(".py")].replace("/", ".")
    path = [str(site), str(REPO)]
    cwd, command = tmp_path, [sys.executable, "-c", SERVED, name]
    if where == "current-folder":
        cwd = beside
    elif where == "script-folder":
        (beside / "served.py").write_text(SERVED)
        command = [sys.executable, str(beside / "served.py"), name]
    else:
        custom = tmp_path / "custom"
        custom.mkdir()
        (custom / "sitecustomize.py").write_text(
            f"import sys\nsys.path.insert(0, {str(beside)!r})\n"
        )
        path.insert(0, str(custom))
    env = dict(tmp_env, PYTHONPATH=os.pathsep.join(path))
    before = snapshot(tmp_path / "site"), snapshot(beside)
    result = guard("run", "--", *command, env=env, cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{beside / 'executorch' / target} changed\n"
    assert result.stderr == ""
    assert (snapshot(tmp_path / "site"), snapshot(beside)) == before
    assert in_tmpdir(tmp_env) == []


def test_an_exir_init_that_is_a_fifo_never_stops_status(tmp_path: Path, tmp_env):
    """A FIFO in place of exir/__init__.py: status reads the target files as
    the import hook finds them, never that FIFO, and answers."""
    from sites import cli

    site = make_site(tmp_path / "site")
    init = site / "executorch" / "exir" / "__init__.py"
    init.unlink()
    os.mkfifo(init)
    before = snapshot(tmp_path / "site")
    # -S: no ExecuTorch of this environment behind the site's on the path.
    env = {"TMPDIR": tmp_env["TMPDIR"]}
    result = cli(site, "status", env=env, python_flags=["-S"], timeout=60)
    assert (result.returncode, result.stderr) == (0, "")
    assert re.search(
        r"^  stock +exir/emit/_emitter\.py \(form: upstream\)$", result.stdout, re.M
    )
    assert snapshot(tmp_path / "site") == before
    assert in_tmpdir(tmp_env) == []


def _mtimes(*folders: Path) -> list:
    return [os.stat(folder).st_mtime_ns for folder in folders]


@pytest.mark.parametrize("where", ["site-packages", "dist-info"])
def test_a_tmpdir_in_site_packages_is_refused(tmp_path: Path, where: str) -> None:
    """D5: 7f6ba8a refused a TMPDIR inside the package only: with TMPDIR in
    site-packages itself or in ExecuTorch's dist-info, run made its overlay
    there (their times changed; after kill -9 it stayed in the dist-info,
    which pip uninstall would leave behind). check's folder: refused before
    anything is written."""
    from sites import cli, one_line_error

    site = make_site(tmp_path / "site")
    dist = site / "executorch-1.5.1.dist-info"
    tmpdir = site if where == "site-packages" else dist
    old = 1_000_000_000_123_456_789
    for folder in (site, dist):
        os.utime(folder, ns=(old, old))
    before = snapshot(tmp_path)
    result = cli(site, "check", "--paths", "emitter", env={"TMPDIR": str(tmpdir)})
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
        one_line_error(
            result, f"--log-dir {logs} is inside ", "where nothing is written"
        )
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
        'mount --make-rprivate / && mount --bind "$1" "$2" && shift 2 && '
        'TMPDIR="$MNT" "$@" check --paths emitter --devices cpu; echo "tmp=$?"; '
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
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            script,
            "-",
            str(exir),
            str(mount),
            sys.executable,
            "-m",
            "executorch_device_guard",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "tmp=2" in result.stdout and "check=2" in result.stdout, (
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
    assert in_tmpdir(tmp_env) == []


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
    one_line(result, 126, f"cannot execute {script}: {interpreter}: bad interpreter")
    if first_line.endswith("\r"):
        assert "CRLF line endings" in result.stderr
    assert "command not found" not in result.stderr
    assert in_tmpdir(tmp_env) == []


def test_a_signal_after_the_command_ended_keeps_its_exit_code(
    tmp_path: Path, tmp_env
) -> None:
    """D11: a Ctrl-C just after the command exited 0 ended run with
    "interrupted (SIGINT)" and 130, though the command had finished. The
    command's exit code stands. (The command fills the stderr it shares with
    run up to just under a pipe's 64 KiB.)"""
    pidfile = tmp_path / "pid"
    script = f"echo $$ > {pidfile}; head -c 65400 /dev/zero | tr '\\0' x >&2; exit 0"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "executorch_device_guard",
            "run",
            "--",
            "sh",
            "-c",
            script,
        ],
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
    assert in_tmpdir(tmp_env) == []

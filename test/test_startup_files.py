# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""apply's startup files: the fix on at every start of an environment's Python.

Each test makes a throwaway venv (``python -m venv --without-pip``) of a
pyenv Python, with this tool importable from its site-packages (a path
``.pth``, as an editable install has it), and turns the startup files on or
off from that venv's own Python. The environment's own ExecuTorch and
site-packages are never touched.
"""

import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest
from conftest import REPO
from executorch_device_guard.installation import startup_files

PYTHONS = {
    version: Path(f"/root/.pyenv/versions/{full}/bin/python{version}")
    for version, full in (
        ("3.10", "3.10.13"),
        ("3.11", "3.11.7"),
        ("3.12", "3.12.1"),
        ("3.13", "3.13.0"),
    )
}

# What a process of the venv says at start: the import hook's module, or ''.
HOOK = (
    "import sys; print(*[type(f).__module__ for f in sys.meta_path "
    "if getattr(f, 'executorch_device_guard_finder', 0)])"
)


def make_venv(where: Path, version: str = "3.11", tool: bool = True) -> Path:
    """A venv of Python ``version``; with ``tool``, this tool importable
    from its site-packages. Its site-packages folder."""
    python = PYTHONS[version]
    if not python.exists():
        pytest.skip(f"needs Python {version} (pyenv)")
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(where)], check=True)
    (site,) = where.glob("lib/python*/site-packages")
    if tool:
        (site / "a_tool.pth").write_text(f"{REPO}\n")
    return site


def python(
    site: Path, *args: str, env: Optional[dict] = None
) -> subprocess.CompletedProcess:
    """The venv's Python, as a user starts it: no PYTHONPATH."""
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full.pop("EXECUTORCH_DEVICE_GUARD", None)
    full.update(env or {})
    return subprocess.run(
        [str(site.parents[2] / "bin" / "python"), *args],
        env=full,
        cwd=site.parents[3],
        capture_output=True,
        text=True,
        timeout=60,
    )


def switch(
    site: Path, on: bool, installed: bool = False
) -> subprocess.CompletedProcess:
    """``startup_files.turn_on`` or ``turn_off`` run by the venv's Python:
    of this tree, or with ``installed`` of the tool installed there."""
    call = "turn_on" if on else "turn_off"
    code = (
        "import sys, pathlib\n"
        "from executorch_device_guard.errors import GuardError\n"
        "from executorch_device_guard.installation import startup_files\n"
        "try:\n"
        f"    startup_files.{call}(pathlib.Path(sys.argv[1]))\n"
        "except GuardError as e:\n"
        "    sys.exit(f'refused: {e}')\n"
    )
    env = {} if installed else {"PYTHONPATH": str(REPO)}
    return python(site, "-c", code, str(site), env=env)


def listing(folder: Path) -> List[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_the_pth_turns_the_fix_on_at_every_start(tmp_path: Path, version: str) -> None:
    site = make_venv(tmp_path / "venv", version)
    assert python(site, "-c", HOOK).stdout == "\n"

    on = switch(site, on=True)
    assert on.returncode == 0, on.stderr
    assert (site / "executorch_device_guard.pth").read_text() == startup_files.PTH_TEXT
    assert startup_files.state(site) is startup_files.State.ON
    for flags in ([], ["-I"], ["-E"]):
        started = python(site, *flags, "-c", HOOK)
        assert (started.stdout, started.stderr) == (
            "executorch_device_guard.finder\n",
            "",
        )
    # -S reads no startup file; the off switch keeps the hook off.
    assert python(site, "-S", "-c", HOOK).stdout == "\n"
    off = python(site, "-c", HOOK, env={"EXECUTORCH_DEVICE_GUARD": "off"})
    assert (off.stdout, off.stderr) == ("\n", "")

    assert switch(site, on=False).returncode == 0
    assert listing(site) == ["a_tool.pth"]
    assert python(site, "-c", HOOK).stdout == "\n"


def test_the_start_file_is_pep_829s_form_of_the_same_call() -> None:
    """PEP 829: ``<name>.start`` beside ``<name>.pth``, UTF-8, one
    ``pkg.mod:callable`` line, called with no arguments; its import line is
    the same call."""
    text = startup_files.START_TEXT
    assert Path(startup_files.START).stem == Path(startup_files.PTH).stem
    assert re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*\n", text)
    text.encode("utf-8")
    from executorch_device_guard.startup import turn_on

    assert pkgutil.resolve_name(text.strip()) is turn_on
    assert startup_files.PTH_TEXT.startswith("import ")
    assert startup_files.PTH_TEXT.count("\n") == 1
    assert "executorch_device_guard.startup" in startup_files.PTH_TEXT
    assert "s.turn_on()" in startup_files.PTH_TEXT


@pytest.mark.parametrize("version", sorted(PYTHONS))
def test_python_before_3_15_ignores_the_start_file(
    tmp_path: Path, version: str
) -> None:
    site = make_venv(tmp_path / "venv", version)
    (site / startup_files.START).write_text(startup_files.START_TEXT)
    started = python(site, "-c", HOOK)
    assert (started.stdout, started.stderr) == ("\n", "")


def test_a_removed_tool_leaves_a_silent_start(tmp_path: Path) -> None:
    site = make_venv(tmp_path / "venv")
    assert switch(site, on=True).returncode == 0
    (site / "a_tool.pth").unlink()
    started = python(site, "-c", "pass")
    assert (started.returncode, started.stderr) == (0, "")


def test_a_site_that_cannot_import_the_tool_is_refused_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    """The tool only on PYTHONPATH: a plain start of that Python would not
    find it, so nothing is left turned on."""
    site = make_venv(tmp_path / "venv", tool=False)
    before = listing(site)
    refused = switch(site, on=True)
    assert refused.returncode == 1
    assert refused.stderr.startswith("refused: ")
    assert "does not start this tool from" in refused.stderr
    assert "Nothing was changed." in refused.stderr
    assert listing(site) == before


def test_a_broken_tool_says_so_in_one_line_and_python_starts(tmp_path: Path) -> None:
    site = make_venv(tmp_path / "venv")
    assert switch(site, on=True).returncode == 0
    started = python(site, "-c", "print('ran')", env={"EXECUTORCH_DEVICE_GUARD": "on"})
    assert started.stdout == "ran\n"
    copy = tmp_path / "copy"
    (copy / "executorch_device_guard").mkdir(parents=True)
    (copy / "executorch_device_guard" / "__init__.py").write_text("")
    (copy / "executorch_device_guard" / "startup.py").write_text(
        (REPO / "executorch_device_guard" / "startup.py").read_text()
    )
    (copy / "executorch_device_guard" / "finder.py").write_text("raise OSError('x')\n")
    (site / "a_tool.pth").write_text(f"{copy}\n")
    started = python(site, "-c", "print('ran')")
    assert started.stdout == "ran\n"
    assert started.stderr == (
        "executorch-device-guard: the fix is off in this process: OSError: x\n"
    )


PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [*PIP, "wheel", "--no-deps", str(REPO), "-w", str(folder)], check=True
    )
    (found,) = folder.glob("executorch_device_guard-*.whl")
    return found


def pip_install(site: Path, wheel: Path) -> Path:
    """The tool installed from ``wheel`` into the venv; its RECORD."""
    venv_python = str(site.parents[2] / "bin" / "python")
    subprocess.run(
        [*PIP, "--python", venv_python, "install", "--no-deps", str(wheel)], check=True
    )
    (record,) = site.glob("executorch_device_guard-*.dist-info/RECORD")
    return record


def test_pip_uninstall_of_the_tool_removes_the_startup_files(
    tmp_path: Path, wheel: Path
) -> None:
    """The startup files are in the tool's RECORD: pip removes them with it,
    and the venv's site-packages is as it was before the tool came."""
    site = make_venv(tmp_path / "venv", tool=False)
    (site / "other.py").write_text("")  # pip removes a folder it empties
    before = listing(site)
    record = pip_install(site, wheel)
    installed = record.read_bytes()

    assert switch(site, on=True, installed=True).returncode == 0
    assert switch(site, on=True, installed=True).returncode == 0
    # As pip writes its rows, paths relative to the dist-info's folder.
    assert record.read_bytes() == installed + (
        b"executorch_device_guard.pth,,\r\nexecutorch_device_guard.start,,\r\n"
    )
    assert python(site, "-c", HOOK).stdout == "executorch_device_guard.finder\n"

    venv_python = str(site.parents[2] / "bin" / "python")
    uninstall = [*PIP, "--python", venv_python, "uninstall", "-y"]
    subprocess.run([*uninstall, "executorch-device-guard"], check=True)
    assert listing(site) == before
    started = python(site, "-c", "pass")
    assert (started.returncode, started.stderr) == (0, "")


def test_turning_off_gives_the_record_back_byte_for_byte(
    tmp_path: Path, wheel: Path
) -> None:
    site = make_venv(tmp_path / "venv", tool=False)
    record = pip_install(site, wheel)
    installed, mode = record.read_bytes(), record.stat().st_mode
    assert switch(site, on=True, installed=True).returncode == 0
    assert switch(site, on=False, installed=True).returncode == 0
    assert (record.read_bytes(), record.stat().st_mode) == (installed, mode)


def test_what_a_kill_during_a_write_leaves_goes_with_the_next_switch(
    tmp_path: Path,
) -> None:
    site = make_venv(tmp_path / "venv")
    left = site / ".executorch_device_guard.pth.device-guard.0123456789abcdef.tmp"
    left.write_text(startup_files.PTH_TEXT[:10])
    assert switch(site, on=True).returncode == 0
    assert not left.exists()
    left.write_text("")
    assert switch(site, on=False).returncode == 0
    assert listing(site) == ["a_tool.pth"]


def test_a_refused_second_turn_on_leaves_the_files_it_found(tmp_path: Path) -> None:
    """apply run again where the tool can no longer be imported: refused,
    and the startup files that were there stay, as status then shows."""
    site = make_venv(tmp_path / "venv")
    assert switch(site, on=True).returncode == 0
    (site / "a_tool.pth").unlink()
    refused = switch(site, on=True)
    assert refused.returncode == 1
    assert "Nothing was changed." in refused.stderr
    assert listing(site) == [startup_files.PTH, startup_files.START]

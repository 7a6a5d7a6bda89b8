# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""apply, revert, status and export, on a throwaway copy of the ExecuTorch files.

See ``sites``: the CLI runs in a child process, with the Python of a
throwaway venv whose site-packages holds a minimal ExecuTorch (``venv_site``,
where apply writes its startup files), or with a minimal ExecuTorch first on
PYTHONPATH (``make_site``). The environment's own ExecuTorch is never
modified. Each test checks by hashing that nothing else changed.
"""

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from conftest import REPO
from sites import (
    ALL_TARGETS,
    assert_only_targets_changed,
    cli,
    make_site,
    one_line_error,
    patch_in_place,
    PATCHED,
    ship_the_fix,
    snapshot,
    STOCK,
    TARGETS,
    tool,
    venv_python,
    venv_site,
)

EMITTER = "exir/emit/_emitter.py"
AUTHOR = "Jane Doe <jane@example.com>"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return make_site(tmp_path / "site")


def state(status: str, rel: str) -> str:
    """The state ``status`` gives ``rel``: its file line is ``  STATE REL ...``."""
    match = re.search(rf"^  (\S+(?: shipped)?) +{re.escape(rel)}\b", status, re.M)
    assert match, status
    return match.group(1)


def hashes(root: Path):
    """Every file, folder and link under ``root`` (see ``sites.snapshot``)."""
    return snapshot(root)


STARTUP_FILES = r"executorch_device_guard\.(pth|start)$"


def changed(tmp_path: Path, site: Path, before, command: str) -> None:
    """Since ``before``, under ``tmp_path``: ``apply`` added its two startup
    files and nothing else; ``revert`` removed them, and every target is
    stock."""
    if command == "apply":
        assert_only_targets_changed(
            tmp_path, site, before, "stock", may_appear=STARTUP_FILES
        )
    else:
        assert_only_targets_changed(
            tmp_path,
            site,
            before,
            "stock",
            may_vanish=[
                str((site / name).relative_to(tmp_path))
                for name in (
                    "executorch_device_guard.pth",
                    "executorch_device_guard.start",
                )
            ],
        )


def in_a_mount_namespace(script: str, what: str) -> list:
    """A command prefix that runs the shell ``script``, which runs the command
    (``"$@"``), in user and mount namespaces of its own; skips without them."""
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"needs user namespaces for {what}")
    return ["unshare", "-rm", "sh", "-c", script, "sh"]


def read_only(path: Path) -> list:
    """A command prefix that runs its command with ``path`` mounted read-only."""
    mount = (
        f'mount --bind "{path}" "{path}" && '
        f'mount -o remount,ro,bind "{path}" && exec "$@"'
    )
    return in_a_mount_namespace(mount, "a read-only bind mount")


def test_status_lines_up_its_paths(site: Path) -> None:
    """One column of paths, also beside the longest state, 'not shipped'."""
    (site / "executorch" / next(iter(TARGETS))).write_text("edited\n")
    lines = cli(site, "status").stdout.splitlines()[1 : 1 + len(ALL_TARGETS)]
    assert len(lines) == len(ALL_TARGETS), lines
    columns = {line.index(rel) for line, rel in zip(lines, ALL_TARGETS)}
    assert len(columns) == 1, lines
    states = {line.split()[0] for line in lines}
    assert {"stock", "unknown"} <= states, lines


def times(top: Path) -> Dict[str, Tuple[int, int]]:
    """Every file's and folder's size and modification time under ``top``."""
    return {
        str(path.relative_to(top)): (path.lstat().st_size, path.lstat().st_mtime_ns)
        for path in [top, *top.rglob("*")]
    }


def test_status_apply_twice_revert(tmp_path: Path) -> None:
    """apply writes two startup files beside ExecuTorch and no file of it."""
    site = venv_site(tmp_path / "venv")
    package, dist = site / "executorch", site / "executorch-1.5.1.dist-info"
    status = tool(site, "status")
    assert status.returncode == 0, status.stderr
    assert f"ExecuTorch 1.5.1 at {package}" in status.stdout
    assert state(status.stdout, EMITTER) == "stock"
    python = venv_python(site)
    assert status.stdout.endswith(
        f"Off: {python} runs ExecuTorch as installed. `apply` serves the fix at "
        "every start; `run -- COMMAND` to one command.\n"
    )
    top, before = listing(site), hashes(tmp_path)
    kept = {folder: times(folder) for folder in (package, dist)}

    applied = tool(site, "apply")
    assert (applied.returncode, applied.stderr) == (0, "")
    assert f"served with the fix: {package / EMITTER}\n" in applied.stdout
    assert applied.stdout.endswith(
        f"on: every start of {python} turns the fix on "
        f"({site / 'executorch_device_guard.pth'}); `revert` turns it off\n"
    )
    assert {folder: times(folder) for folder in (package, dist)} == kept
    changed(tmp_path, site, before, "apply")
    status = tool(site, "status").stdout
    assert state(status, EMITTER) == "stock"
    assert f"On: every start of {python} serves the files above with the fix" in status

    again = tool(site, "apply")
    assert again.returncode == 0, again.stderr
    assert again.stdout.endswith(
        f"already on: {site / 'executorch_device_guard.pth'}\n"
    )

    reverted = tool(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert reverted.stdout == (
        f"removed {site / 'executorch_device_guard.pth'}\n"
        f"removed {site / 'executorch_device_guard.start'}\n"
        f"off: {python} runs ExecuTorch as installed\n"
    )
    assert (listing(site), hashes(tmp_path)) == (top, before)
    assert "nothing to revert" in tool(site, "revert").stdout
    assert hashes(tmp_path) == before


def listing(folder: Path) -> List[str]:
    return sorted(p.name for p in folder.iterdir())


def test_python_dash_m_and_console_script_agree(site: Path) -> None:
    script = shutil.which(
        "executorch-device-guard", path=str(Path(sys.executable).parent)
    )
    assert script, "the project installs the executorch-device-guard script"
    env = dict(os.environ, PYTHONPATH=str(site))
    by_script = subprocess.run(
        [script, "status"], env=env, capture_output=True, text=True
    )
    assert by_script.returncode == 0, by_script.stderr
    assert by_script.stdout == cli(site, "status").stdout


def test_a_file_patched_in_place_is_named_and_reverted_before_apply(
    tmp_path: Path,
) -> None:
    """An earlier version patched the emitter in place: status names it,
    apply refuses until revert has written its stock text back."""
    site = venv_site(tmp_path / "venv")
    patch_in_place(site, [EMITTER])
    before = hashes(tmp_path)
    status = tool(site, "status").stdout
    assert state(status, EMITTER) == "patched"
    assert state(status, "devtools/bundled_program/core.py") == "stock"
    assert (
        "1 file(s) were patched in place by an earlier version of this tool: "
        "`revert` writes their stock text back; `apply` refuses until then."
    ) in status
    one_line_error(
        tool(site, "apply"),
        f"{site / 'executorch' / EMITTER} was patched in place",
        "run `executorch-device-guard revert` first",
        "Nothing was changed",
    )
    assert hashes(tmp_path) == before

    result = tool(site, "revert")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"restored {site / 'executorch' / EMITTER}\n"
    assert_only_targets_changed(tmp_path, site, before, "stock")
    assert "nothing to revert" in tool(site, "revert").stdout
    assert tool(site, "apply").returncode == 0


def test_a_release_that_ships_the_fix_is_never_reverted(tmp_path: Path) -> None:
    """Files that hold the fix as their release installed them (RECORD's
    hashes) are the release's own: status calls them fixed, apply turns the
    hook on, and revert writes back only what an earlier version patched in
    place, here the emitter."""
    site = venv_site(tmp_path / "venv")
    shipped = [rel for rel in TARGETS if rel != EMITTER]
    ship_the_fix(site, shipped)
    patch_in_place(site, [EMITTER])
    status = tool(site, "status").stdout
    assert state(status, EMITTER) == "patched"
    for rel in shipped:
        assert state(status, rel) == "fixed", status
    assert "(this release ships the fix)" in status
    assert "1 file(s) were patched in place by an earlier version" in status

    result = tool(site, "revert")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"restored {site / 'executorch' / EMITTER}\n"
    for rel in shipped:
        assert (site / "executorch" / rel).read_bytes() == PATCHED[rel]
    status = tool(site, "status").stdout
    assert state(status, EMITTER) == "stock"
    assert "patched in place" not in status
    applied = tool(site, "apply")
    assert applied.returncode == 0, applied.stderr
    reverted = tool(site, "revert")
    assert reverted.returncode == 0 and "restored" not in reverted.stdout
    for rel in shipped:
        assert (site / "executorch" / rel).read_bytes() == PATCHED[rel]


def test_refuses_a_locally_edited_file(tmp_path: Path) -> None:
    site = venv_site(tmp_path / "venv")
    path = site / "executorch" / EMITTER
    path.write_text(
        path.read_text().replace(
            "            spec_array_type = (",
            "            spec_array_type = (  # local edit",
        )
    )
    before = hashes(tmp_path)
    one_line_error(
        tool(site, "apply"),
        "_emitter.py would load without the fix (unknown: the change does not fit",
        "Nothing was changed",
        "--force-reinstall --no-deps executorch==1.5.1",
    )
    assert "nothing to revert" in tool(site, "revert").stdout
    status = tool(site, "status").stdout
    assert state(status, "exir/emit/_emitter.py") == "unknown"
    assert "Some files load without the fix (above), so apply refuses." in status
    assert hashes(tmp_path) == before


def _patched_then_edited(site: Path) -> None:
    patch_in_place(site, [EMITTER])
    path = site / "executorch" / EMITTER
    path.write_bytes(path.read_bytes() + b"# changed later\n")


def _shipped_then_edited(site: Path) -> None:
    ship_the_fix(site, [EMITTER])
    path = site / "executorch" / EMITTER
    path.write_bytes(path.read_bytes() + b"# changed later\n")


def _shipped_without_hashes(site: Path) -> None:
    ship_the_fix(site, [EMITTER])
    (record,) = site.glob("executorch-*.dist-info/RECORD")
    record.write_text(re.sub(r",sha256=[^,]*,", ",,", record.read_text()))


@pytest.mark.parametrize(
    "make", [_patched_then_edited, _shipped_then_edited, _shipped_without_hashes]
)
def test_a_file_that_holds_the_fix_without_record_to_bear_it_out_is_left(
    tmp_path: Path, make
) -> None:
    """A file that holds the fix is written back only where RECORD shows that
    an earlier version of this tool made it of the installed file (RECORD's
    hash is its stock text's). Changed since, or with no hash to compare, it
    may be the release's own fix: status calls it fixed and says why, apply
    takes it, revert leaves it."""
    site = venv_site(tmp_path / "venv")
    make(site)
    path = site / "executorch" / EMITTER
    held = path.read_bytes()
    status = tool(site, "status").stdout
    assert state(status, EMITTER) == "fixed", status
    assert "but not as an earlier version of this tool patched files" in status
    assert "patched in place" not in status
    reverted = tool(site, "revert")
    assert reverted.returncode == 0 and "restored" not in reverted.stdout
    assert tool(site, "apply").returncode == 0
    assert tool(site, "revert").returncode == 0
    assert path.read_bytes() == held


def _non_utf8(path: Path) -> None:
    path.write_bytes(STOCK[EMITTER].replace(b"# ", b"# \xff", 1))


def _folder(path: Path) -> None:
    path.unlink()
    (path / "inside.py").parent.mkdir()
    (path / "inside.py").write_text("")


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize(
    "make_bad, reason",
    [
        (_non_utf8, "unknown: it cannot be read (UnicodeDecodeError"),
        (_folder, "missing: is a folder"),
        (_fifo, "missing: is not a regular file"),
        (Path.unlink, "missing)"),
    ],
    ids=["non-utf8", "folder", "fifo", "missing"],
)
def test_refuses_a_bad_target_file(tmp_path: Path, make_bad, reason: str) -> None:
    site = venv_site(tmp_path / "venv")
    make_bad(site / "executorch" / EMITTER)
    before = hashes(tmp_path)
    one_line_error(
        tool(site, "apply"),
        f"{EMITTER} would load without the fix ({reason}",
        "Nothing was changed",
    )
    assert "nothing to revert" in tool(site, "revert").stdout
    status = tool(site, "status")
    assert status.returncode == 0, status.stderr
    state_, _, why = reason.partition(": ")
    assert state(status.stdout, EMITTER) == state_.rstrip(")")
    assert f" {EMITTER} ({why}" in status.stdout or not why
    assert hashes(tmp_path) == before


def test_a_missing_subpackage_is_reported_not_taken_for_shadowing(
    tmp_path: Path,
) -> None:
    site = venv_site(tmp_path / "venv")
    shutil.rmtree(site / "executorch" / "devtools")
    before = hashes(tmp_path)
    status = tool(site, "status")
    assert status.returncode == 0, status.stderr
    assert state(status.stdout, "devtools/bundled_program/core.py") == "missing"
    one_line_error(
        tool(site, "apply"),
        "core.py would load without the fix (missing)",
        "Nothing was changed",
    )
    assert hashes(tmp_path) == before


def test_refuses_without_executorch(tmp_path: Path) -> None:
    # -S: no site-packages, so the only ExecuTorch would be on PYTHONPATH.
    result = cli(tmp_path, "apply", python_flags=["-S"])
    one_line_error(result, "ExecuTorch is not installed in this environment")


def test_refuses_an_editable_install(tmp_path: Path, site: Path) -> None:
    record = site / "executorch-1.5.1.dist-info" / "RECORD"
    record.write_text("__editable__.executorch-1.5.1.pth,,\n")
    before = hashes(tmp_path)
    one_line_error(cli(site, "apply"), "editable or source install", "git am")
    assert hashes(tmp_path) == before


# What the import hook did with the emitter, in the process that imports it.
SERVED = (
    "import sys, importlib.util as u\n"
    "spec = u.find_spec('executorch.exir.emit._emitter')\n"
    "(hook,) = [f for f in sys.meta_path if getattr(f, 'executorch_device_guard_finder', 0)]\n"
    "print(spec.origin, hook.served['executorch.exir.emit._emitter'][0])\n"
)


@pytest.mark.parametrize("shadow", ["namespace", "regular", "with-dist-info"])
def test_an_executorch_folder_in_the_current_folder_gets_the_fix_too(
    tmp_path: Path, shadow: str
) -> None:
    """`python -c` and `-m` put the current folder first on sys.path: the
    copy of ExecuTorch there is what Python imports, and the import hook
    serves it changed, as it serves the installed one."""
    from sites import INITS

    site = venv_site(tmp_path / "venv")
    work = tmp_path / "work"
    if shadow == "with-dist-info":
        make_site(work)
    # A copy of the package: its regular packages' __init__.py files too.
    for rel, data in {**STOCK, **{rel: b"" for rel in INITS}}.items():
        (work / "executorch" / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / "executorch" / rel).write_bytes(data)
    if shadow == "regular":
        (work / "executorch" / "__init__.py").write_text("")
    before = hashes(tmp_path)
    applied = tool(site, "apply", cwd=work)
    assert applied.returncode == 0, applied.stderr
    assert f"served with the fix: {site / 'executorch' / EMITTER}" in applied.stdout
    changed(tmp_path, site, before, "apply")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    served = subprocess.run(
        [str(venv_python(site)), "-c", SERVED],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (served.stdout, served.stderr) == (
        f"{work / 'executorch' / EMITTER} changed\n",
        "",
    )


def test_refuses_an_executorch_on_pythonpath_and_names_run(
    tmp_path: Path, site: Path
) -> None:
    """Python reads no startup file in a PYTHONPATH or --target folder."""
    before = hashes(tmp_path)
    one_line_error(
        cli(site, "apply"),
        f"ExecuTorch at {site / 'executorch'} is found through PYTHONPATH or a "
        "--target folder",
        "use `executorch-device-guard run -- COMMAND`",
        "Nothing was changed",
    )
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    assert "apply cannot turn the fix on here:" in status.stdout
    assert hashes(tmp_path) == before


def test_refuses_a_read_only_site_packages(tmp_path: Path) -> None:
    site = venv_site(tmp_path / "venv")
    before = hashes(tmp_path)
    result = tool(site, "apply", wrap=read_only(site))
    one_line_error(
        result,
        f"cannot write {site / 'executorch_device_guard.pth'}: Read-only file system",
        "Nothing was changed",
    )
    assert hashes(tmp_path) == before


def test_the_package_stays_what_its_record_lists(tmp_path: Path) -> None:
    """apply writes nothing into ExecuTorch's folders: pip uninstall of
    ExecuTorch removes every file of it."""
    site = venv_site(tmp_path / "venv")
    record = (site / "executorch-1.5.1.dist-info" / "RECORD").read_text()
    listed = {line.split(",")[0] for line in record.splitlines()}
    for command in ("apply", "revert", "apply"):
        assert tool(site, command).returncode == 0
        present = {
            str(p.relative_to(site))
            for p in site.rglob("*")
            if not p.is_dir() and p.name != "a_tool.pth"
        }
        assert present - listed == (
            {"executorch_device_guard.pth", "executorch_device_guard.start"}
            if command == "apply"
            else set()
        )


@pytest.mark.parametrize(
    "where, needle",
    [
        ("a_file", "is a file, not a folder"),
        ("missing/out", "missing is not an existing folder"),
        ("full", "is not empty (1 entries, e.g. notes.txt)"),
    ],
)
def test_export_refuses_a_bad_destination(
    tmp_path: Path, site: Path, where: str, needle: str
) -> None:
    (tmp_path / "a_file").write_text("mine")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    before = hashes(tmp_path)
    one_line_error(
        cli(site, "export", "--author", AUTHOR, str(tmp_path / where)), needle
    )
    assert hashes(tmp_path) == before


@pytest.mark.parametrize(
    "args, needle",
    [
        (["export", "--author", AUTHOR, "--force", ""], "export: argument dest: "),
        (
            ["check", "--paths", "emitter", "--devices", "cpu", "--log-dir", ""],
            "check: argument --log-dir: ",
        ),
    ],
)
def test_an_empty_path_is_refused_not_taken_for_here(
    tmp_path: Path, site: Path, args, needle: str
) -> None:
    """``--log-dir "$LOGS"`` with LOGS unset: nothing is written into the
    current folder."""
    here = tmp_path / "here"
    here.mkdir()
    (here / "notes.txt").write_text("mine")
    before = hashes(here)
    one_line_error(cli(site, *args, cwd=here), needle + "give a path, not ''")
    assert hashes(here) == before


def test_export_from_a_deleted_directory(tmp_path: Path, site: Path) -> None:
    """A relative folder has nowhere to go: one line that says why."""
    gone = tmp_path / "gone"
    gone.mkdir()
    wrap = ["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$@"', "sh"]
    result = cli(site, "export", "--author", AUTHOR, "out", wrap=wrap)
    one_line_error(result, "the current directory no longer exists")
    gone.mkdir()
    there = cli(site, "export", "--author", AUTHOR, str(tmp_path / "out"), wrap=wrap)
    assert there.returncode == 0, there.stderr


def test_export_force_writes_into_a_non_empty_folder(tmp_path: Path, site: Path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    result = cli(site, "export", "--author", AUTHOR, "--force", str(full))
    assert result.returncode == 0, result.stderr
    assert (full / "notes.txt").read_text() == "mine"
    assert len(list(full.glob("*.patch"))) == len(list(REPO.glob("patches/*.patch")))
    # Again: the patches are replaced, not merged into.
    assert (
        cli(site, "export", "--author", AUTHOR, "--force", str(full)).stdout
        == result.stdout
    )


def test_export_refuses_an_unwritable_folder(tmp_path: Path, site: Path) -> None:
    dest = tmp_path / "locked"
    dest.mkdir()
    before = hashes(tmp_path)
    if os.geteuid() != 0:
        dest.chmod(0o555)
        one_line_error(
            cli(site, "export", "--author", AUTHOR, str(dest)), "Permission denied"
        )
        dest.chmod(0o755)
    result = cli(site, "export", "--author", AUTHOR, str(dest), wrap=read_only(dest))
    one_line_error(result, f"Cannot write to {dest} (Read-only file system)")
    assert hashes(tmp_path) == before


def small_disk(folder: Path, size: int, listing: Path, setup: str = "") -> list:
    """A command prefix that runs its command with a ``size``-byte tmpfs on
    ``folder`` (after the shell command ``setup``), then lists what the
    tmpfs holds into ``listing``: the tmpfs ends with the command."""
    script = (
        f'mount -t tmpfs -o size={size} tmpfs "{folder}" && {setup or ":"} && '
        f'{{ "$@"; rc=$?; find "{folder}" -mindepth 1 > "{listing}"; exit $rc; }}'
    )
    return in_a_mount_namespace(script, "a tmpfs of its own")


@pytest.mark.parametrize("existing", [False, True], ids=["new", "empty"])
def test_export_onto_a_disk_that_fills_up_writes_nothing(
    tmp_path: Path, site: Path, existing: bool
) -> None:
    """A disk with room for two patches: one line naming the third, and the
    folder as it was (missing, or empty), so the same command writes all of
    them once there is room."""
    reference = tmp_path / "reference"
    assert cli(site, "export", "--author", AUTHOR, str(reference)).returncode == 0
    patches = sorted(reference.iterdir())
    room = sum(-(-p.stat().st_size // 4096) * 4096 for p in patches[:2])
    disk, listing = tmp_path / "disk", tmp_path / "listing.txt"
    disk.mkdir()
    dest = disk / "out"
    setup = f'mkdir "{dest}"' if existing else ""
    result = cli(
        site,
        "export",
        "--author",
        AUTHOR,
        str(dest),
        wrap=small_disk(disk, room, listing, setup),
    )
    one_line_error(
        result,
        f"Cannot write {dest / patches[2].name} (No space left on device). "
        "Nothing was written.",
    )
    assert listing.read_text().splitlines() == ([str(dest)] if existing else [])
    # The same command with room writes every patch.
    again = cli(site, "export", "--author", AUTHOR, str(dest))
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in dest.iterdir()) == [p.name for p in patches]


def test_the_wheel_requires_nothing_and_carries_the_series(tmp_path: Path) -> None:
    # Installing the tool must never add, upgrade or downgrade torch or ExecuTorch.
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", str(REPO), "-w", str(tmp_path)], check=True
    )
    (wheel,) = tmp_path.glob("executorch_device_guard-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(
            next(n for n in archive.namelist() if n.endswith("dist-info/METADATA"))
        ).decode()
    requires = [
        line for line in metadata.splitlines() if line.startswith("Requires-Dist")
    ]
    assert [r.replace('"', "'") for r in requires] == [
        "Requires-Dist: pytest; extra == 'test'"
    ]

    target = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    code = "import executorch_device_guard as g; print(g.__file__, g.data_root())"
    where = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert where.stdout.split() == [
        str(target / "executorch_device_guard/__init__.py"),
        str(target / "executorch_device_guard/_upstream"),
    ]
    status = subprocess.run(
        [sys.executable, "-m", "executorch_device_guard", "status"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert status.returncode == 0, status.stderr
    # One line per target of the series, shipped by this release or not.
    assert len(status.stdout.splitlines()) == 1 + len(ALL_TARGETS) + 1


def _to(site: Path, command: str, stdout) -> subprocess.CompletedProcess:
    """``command`` with its stdout going to ``stdout`` (a file or a pipe end),
    in ``changeable``'s environment."""
    return tool(site, command, stdout=stdout)


def _closed_pipe(site: Path, command: str) -> subprocess.CompletedProcess:
    """As in ``command | head -0``: the reader is gone before anything is written."""
    read, write = os.pipe()
    os.close(read)
    try:
        return _to(site, command, write)
    finally:
        os.close(write)


def changeable(tmp_path: Path, command: str) -> Path:
    """A venv where ``command`` changes something: for revert, apply is on
    and the emitter was patched in place by an earlier version."""
    site = venv_site(tmp_path / "venv")
    if command == "revert":
        assert tool(site, "apply").returncode == 0
        patch_in_place(site, [EMITTER])
    return site


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_a_full_stdout_after_a_change_is_not_exit_2(
    tmp_path: Path, command: str
) -> None:
    """Exit 2 says nothing was changed: not so when only the report was lost."""
    site = changeable(tmp_path, command)
    before = hashes(tmp_path)
    with open("/dev/full", "w") as full:
        result = _to(site, command, full)
    changed(tmp_path, site, before, command)
    assert result.returncode == 4, result.stderr
    assert result.stderr == (
        f"executorch-device-guard: error: {command} finished, but its output "
        "could not be written (No space left on device); without that it would "
        "have exited 0.\n"
    )


@pytest.mark.parametrize("command", ["apply", "revert", "status"])
def test_a_closed_stdout_is_output_lost(tmp_path: Path, command: str) -> None:
    """``apply >&-``: the report cannot be written, so it is the same as a
    full stdout (exit 4, one line), never a silent exit 0."""
    site = changeable(tmp_path, command)
    before = hashes(tmp_path)
    result = tool(site, command, wrap=["sh", "-c", 'exec "$@" >&-', "sh"])
    if command != "status":
        changed(tmp_path, site, before, command)
    assert result.returncode == 4, result.stderr
    assert result.stderr == (
        f"executorch-device-guard: error: {command} finished, but its output "
        "could not be written (it is closed); without that it would have "
        "exited 0.\n"
    )


@pytest.mark.parametrize("command", ["apply", "status"])
def test_a_reader_that_went_away_is_no_error(tmp_path: Path, command: str) -> None:
    """``status | head -1``: the reader has what it wanted; no message, the
    command's own exit code."""
    site = changeable(tmp_path, command)
    before = hashes(tmp_path)
    result = _closed_pipe(site, command)
    assert (result.returncode, result.stderr) == (0, "")
    if command == "apply":
        changed(tmp_path, site, before, command)
    else:
        assert hashes(tmp_path) == before
    with open("/dev/full", "w") as full:
        result = _to(site, "status", full)
    assert result.returncode == 4, result.stderr
    assert "status finished, but its output could not be written" in result.stderr


@pytest.mark.parametrize(
    "planted, reason",
    [
        ("link", "is a symbolic link"),
        ("dangling link", "is a symbolic link"),
        ("folder", "is a folder"),
        ("fifo", "is not a regular file"),
        ("hard link", None),
    ],
)
def test_export_force_never_writes_through_what_is_planted(
    tmp_path: Path, site: Path, planted: str, reason: str
) -> None:
    """``ln -s /tmp/precious DEST/0001-....patch; export DEST --force``."""
    from executorch_device_guard.patchset import read_series

    dest = tmp_path / "out"
    dest.mkdir()
    precious = tmp_path / "precious"
    precious.write_text("keep me\n")
    entry = dest / read_series(REPO)[0].patch_path.name
    if planted == "link":
        entry.symlink_to(precious)
    elif planted == "dangling link":
        entry.symlink_to(tmp_path / "created-through-the-link")
    elif planted == "folder":
        entry.mkdir()
    elif planted == "fifo":
        os.mkfifo(entry)
    else:
        os.link(precious, entry)
    before = hashes(tmp_path)
    result = cli(site, "export", "--author", AUTHOR, "--force", str(dest), timeout=20)
    if reason:
        one_line_error(result, f"{entry} {reason}", "Nothing was written")
        assert hashes(tmp_path) == before
    else:  # a regular file of that name is replaced, not written into
        assert result.returncode == 0, result.stderr
        assert precious.read_text() == "keep me\n"
        assert "executorch-device-guard" in entry.read_text()
    assert not list(dest.glob(".*.tmp"))


def _edited(text: bytes) -> bytes:
    """A local edit inside the emitter's hunk (stock or patched alike)."""
    return text.replace(
        b"            # if it's a weight with an associated gradient.",
        b"            # if it's a weight with an associated gradient. (local edit)",
    )


@pytest.mark.parametrize(
    "make, reason",
    [
        (
            lambda: STOCK[EMITTER].replace(b"\n", b"\r\n"),
            "its line endings are CRLF; with LF it is the stock text",
        ),
        (
            lambda: PATCHED[EMITTER].replace(b"\n", b"\r\n"),
            "its line endings are CRLF; with LF it is the patched text",
        ),
        (
            lambda: _edited(STOCK[EMITTER]),
            "edited: differs from the stock text in lines 452-471 (hunk 2)",
        ),
        (
            lambda: _edited(PATCHED[EMITTER]),
            "edited: differs from the patched text in lines 456-483 (hunk 2)",
        ),
    ],
    ids=["crlf-stock", "crlf-patched", "edited-stock", "edited-patched"],
)
def test_unknown_says_why(tmp_path: Path, make, reason: str) -> None:
    site = venv_site(tmp_path / "venv")
    (site / "executorch" / EMITTER).write_bytes(make())
    before = hashes(tmp_path)
    status = tool(site, "status").stdout
    assert state(status, EMITTER) == "unknown"
    assert f" {EMITTER} (the change does not fit it ({reason}" in status, status
    one_line_error(
        tool(site, "apply"),
        f"{EMITTER} would load without the fix (unknown: the change does not "
        f"fit it ({reason}",
    )
    assert hashes(tmp_path) == before


@pytest.fixture
def non_utf8_site(tmp_path: Path) -> Path:
    """A throwaway installation under a folder whose name is not UTF-8 (no
    venv can be made there: on PYTHONPATH)."""
    try:
        top = tmp_path / os.fsdecode(b"bad\xffdir")
        top.mkdir()
    except (OSError, UnicodeError) as e:
        pytest.skip(f"the filesystem refuses a name that is not UTF-8: {e}")
    return make_site(top / "site")


def test_a_path_that_is_not_utf8_is_printed_escaped(
    tmp_path: Path, non_utf8_site: Path
) -> None:
    """With a strict stdout, each byte that is not UTF-8 prints as ``\\xNN``:
    the report never turns finished work into a traceback."""
    site = non_utf8_site
    strict = {"PYTHONIOENCODING": "utf-8"}
    shown = str(site / "executorch").replace("\udcff", "\\xff")
    status = cli(site, "status", env=strict)
    assert (status.returncode, status.stderr) == (0, ""), status.stderr
    assert status.stdout.startswith(f"ExecuTorch 1.5.1 at {shown}\n")
    one_line_error(cli(site, "apply", env=strict), f"ExecuTorch at {shown} is found")
    patch_in_place(site)
    before = hashes(tmp_path)
    result = cli(site, "revert", env=strict)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert f"restored {shown}/{EMITTER}\n" in result.stdout
    assert_only_targets_changed(tmp_path, site, before, "stock")


def test_output_that_cannot_be_encoded_at_all_is_exit_4() -> None:
    """Whatever a write raises, the command says so in one line: no traceback."""
    from executorch_device_guard import output

    class Hopeless(io.TextIOBase):
        encoding = "utf-8"

        def write(self, text: str) -> int:
            raise UnicodeEncodeError("utf-8", text, 0, 1, "refused")

    stream = output.Guarded(Hopeless())
    stream.write("patched \udcff\n")
    stream.write("more\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert stream.finish("apply", 0) == output.OUTPUT_LOST
    assert err.getvalue().count("\n") == 1
    assert "apply finished, but its output could not be written" in err.getvalue()


# The fifth attack (docs/hostile.md, "The fifth attack").


@pytest.mark.parametrize(
    "args",
    [["check", "--model", "{tmp}/no\nsuch.py:make"], ["status", "no\nsuch"]],
    ids=["check-model", "usage"],
)
def test_a_refusal_naming_what_was_given_stays_one_line(
    tmp_path: Path, args: list
) -> None:
    """D8: `check --model $'/tmp/no\\nsuch.py:make'` was a three-line error,
    and a usage error (`status $'no\\nsuch'`) two lines: check's refusals and
    argparse's did not escape a newline, as the other errors do."""
    args = [a.format(tmp=tmp_path) for a in args]
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-m", "executorch_device_guard", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "no\\nsuch" in result.stderr


EXPORT_META = """
import torch
from executorch.exir import to_edge_transform_and_lower

model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().to("meta")
inputs = (torch.ones(2, 4, device="meta"),)
to_edge_transform_and_lower(torch.export.export(model, inputs)).to_executorch()
"""


def test_after_apply_a_plain_python_export_gets_the_clear_error(tmp_path: Path) -> None:
    """The README's export on meta, with a whole copy of the installed
    ExecuTorch in a venv's site-packages (torch from this environment):
    stock before apply, the clear error after it, stock again after revert;
    ExecuTorch's files keep their bytes, sizes and times throughout."""
    import importlib.util
    import py_compile

    from throwaway import venv_with_installed_executorch

    venv = tmp_path / "venv"
    site = venv_with_installed_executorch(venv, REPO)
    script = tmp_path / "export_meta.py"
    script.write_text(EXPORT_META)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=str(tmp_path / "cache"))

    def export() -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(venv / "bin" / "python"), str(script)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )

    # Bytecode of the stock emitter that Python runs without checking it
    # against its source (an image layer, a backup): the hook never reads it.
    py_compile.compile(
        str(site / "executorch" / EMITTER),
        cfile=importlib.util.cache_from_source(str(site / "executorch" / EMITTER)),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    kept = {f: times(site / f) for f in ("executorch", "executorch-1.5.1.dist-info")}
    top = listing(site)
    stock = export()
    assert stock.returncode == 1 and "NULL pointer access" in stock.stderr, stock.stderr
    assert tool(site, "apply").returncode == 0
    fixed = export()
    assert fixed.returncode == 1
    assert (
        "Constant tensor data for '0.weight' is on device meta, but ExecuTorch "
        "can only serialize constant data from CPU memory." in fixed.stderr
    ), fixed.stderr
    assert tool(site, "revert").returncode == 0
    assert listing(site) == top
    again = export()
    assert again.returncode == 1 and "NULL pointer access" in again.stderr
    assert {f: times(site / f) for f in kept} == kept


def test_status_and_apply_inside_run_see_the_installed_executorch(
    tmp_path: Path,
) -> None:
    """Under run, the bootstrap is first on PYTHONPATH: status and apply
    read the same installation, and refuse nothing for it."""
    site = venv_site(tmp_path / "venv")
    plain = tool(site, "status")
    python = str(venv_python(site))
    inside = tool(site, "run", "--", python, "-m", "executorch_device_guard", "status")
    assert (inside.returncode, inside.stdout, inside.stderr) == (0, plain.stdout, "")
    applied = tool(site, "run", "--", python, "-m", "executorch_device_guard", "apply")
    assert (applied.returncode, applied.stderr) == (0, "")
    assert "On: every start of" in tool(site, "status").stdout

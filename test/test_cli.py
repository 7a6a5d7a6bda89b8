# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""apply, revert, status and export, on a copy of the installed ExecuTorch files.

The CLI runs in a child process whose PYTHONPATH puts a temporary ``site``
first, so it finds the ``executorch`` package there exactly as it would find
a real installation. The environment's own ExecuTorch is never modified.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import REPO
from executorch_device_guard import installed
from executorch_device_guard.installed import executorch_root, FileState
from executorch_device_guard.patchset import apply_all, patched_files

TARGETS = patched_files(REPO)


def stock_text(rel: str) -> str:
    """The stock file, from the installed ExecuTorch (stock or patched)."""
    text = installed.read_text(executorch_root() / rel)
    state, _ = installed.classify(text, TARGETS[rel])
    return text if state is FileState.STOCK else apply_all(TARGETS[rel], text, True)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A minimal ExecuTorch 1.5.1 installation holding the series' targets."""
    site = tmp_path / "site"
    (site / "executorch").mkdir(parents=True)
    (site / "executorch" / "__init__.py").write_text("")
    for rel in TARGETS:
        path = site / "executorch" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(stock_text(rel))
    dist = site / "executorch-1.5.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: executorch\nVersion: 1.5.1\n"
    )
    return site


def hashes(root: Path) -> Dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def cli(site: Path, *args: str, python_flags: List[str] = (), wrap: List[str] = ()):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    cmd = [*wrap, sys.executable, *python_flags, "-m", "executorch_device_guard", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_status_apply_twice_revert(site: Path) -> None:
    before = hashes(site)
    status = cli(site, "status")
    assert status.returncode == 0, status.stderr
    assert f"ExecuTorch 1.5.1 at {site / 'executorch'}" in status.stdout
    assert "stock    exir/emit/_emitter.py" in status.stdout

    applied = cli(site, "apply")
    assert applied.returncode == 0, applied.stderr
    assert f"patched {site / 'executorch' / 'exir/emit/_emitter.py'}" in applied.stdout
    emitter = (site / "executorch/exir/emit/_emitter.py").read_text()
    assert 'device.type != "cpu"' in emitter
    assert "patched  exir/emit/_emitter.py" in cli(site, "status").stdout

    again = cli(site, "apply")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("already applied to ExecuTorch 1.5.1")

    reverted = cli(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert hashes(site) == before
    assert "nothing to revert" in cli(site, "revert").stdout


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


def test_refuses_a_locally_edited_file(site: Path) -> None:
    path = site / "executorch/exir/emit/_emitter.py"
    path.write_text(
        path.read_text().replace(
            "            spec_array_type = (",
            "            # local edit\n            spec_array_type = (",
        )
    )
    before = hashes(site)
    result = cli(site, "apply")
    assert result.returncode == 2
    assert "is unknown" in result.stderr and "Nothing was changed" in result.stderr
    assert "unknown  exir/emit/_emitter.py" in cli(site, "status").stdout
    assert hashes(site) == before


def test_refuses_without_executorch(tmp_path: Path) -> None:
    # -S: no site-packages, so the only ExecuTorch would be on PYTHONPATH.
    result = cli(tmp_path, "apply", python_flags=["-S"])
    assert result.returncode == 2
    assert "ExecuTorch is not installed in this environment" in result.stderr


def test_refuses_a_read_only_site_packages(site: Path) -> None:
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("needs user namespaces for a read-only bind mount")
    before = hashes(site)
    mount = (
        f'mount --bind "{site}" "{site}" && '
        f'mount -o remount,ro,bind "{site}" && exec "$@"'
    )
    result = cli(site, "apply", wrap=["unshare", "-rm", "sh", "-c", mount, "sh"])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Read-only file system" in result.stderr
    assert hashes(site) == before


def test_revert_refuses_a_file_changed_after_apply(site: Path) -> None:
    assert cli(site, "apply").returncode == 0
    path = site / "executorch/exir/emit/_emitter.py"
    path.write_text(path.read_text() + "# changed later\n")
    before = hashes(site)
    result = cli(site, "revert")
    assert result.returncode == 2
    assert "changed after it was patched" in result.stderr
    assert hashes(site) == before


def test_interrupted_apply_leaves_the_originals(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = hashes(site)
    real_replace = os.replace

    def interrupted(src, dst):
        if str(dst).endswith("_emitter.py"):
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        installed.apply(site / "executorch", TARGETS)
    monkeypatch.undo()
    assert hashes(site) == before


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
    assert len(status.stdout.splitlines()) == 1 + len(TARGETS)

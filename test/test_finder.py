# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The import hook, on fixture packages (``test/finder``).

``series`` changes ``exir/tiny.py`` of a tiny ``executorch`` package, and
backports a change to ``exir/old.py`` for releases 1.0.0 to 1.4.1. ``stock``,
``fixed`` and ``unfit`` are that package as released, with the change in it,
and edited by its user. Each test imports a module in a fresh Python with the
finder on, and states what runs and what is said.
"""

import glob
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import REPO
from sites import snapshot

FIXTURES = Path(__file__).resolve().parent / "finder"
TINY = "executorch/exir/tiny.py"
RAISE = 'raise RuntimeError(f"data on {device} cannot be read here")'
PRELUDE = "from executorch_device_guard.finder import install\nfinder = install()\n"


def site_of(tmp_path: Path, package: str, release: Optional[str] = None) -> Path:
    """A copy of the fixture ``package``; with ``release``, installed as
    that release (its dist-info and version.py say so)."""
    site = tmp_path / "site"
    shutil.copytree(FIXTURES / package, site)
    if release is not None:
        info = site / f"executorch-{release}.dist-info"
        info.mkdir()
        meta = f"Metadata-Version: 2.1\nName: executorch\nVersion: {release}\n\n"
        (info / "METADATA").write_text(meta)
        (site / "executorch" / "version.py").write_text(f'__version__ = "{release}"\n')
    return site


def fresh_python(
    tmp_path: Path,
    path: List[Path],
    code: str,
    executable: str = sys.executable,
    **env: str,
) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python whose ``PYTHONPATH`` is ``path``, serving
    the fixture series, with its cache folder in ``tmp_path`` and nothing else
    of this project's in its environment; bytecode written as by default."""
    full: Dict[str, str] = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("EXECUTORCH_DEVICE_GUARD")
        and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")
    }
    full.update(
        PYTHONPATH=os.pathsep.join(map(str, path)),
        EXECUTORCH_DEVICE_GUARD_SERIES=str(FIXTURES / "series"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    full.update(env)
    return subprocess.run(
        [executable, "-c", code],
        env=full,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def python(
    tmp_path: Path, path: Path, code: str, prelude: str = PRELUDE, **env: str
) -> subprocess.CompletedProcess:
    """``code`` after ``prelude`` (the finder turned on) in a fresh Python,
    ``path`` first on its path, then this checkout's tool."""
    return fresh_python(tmp_path, [path, REPO], prelude + code, **env)


def interpreter(version: str) -> str:
    """A Python of that version (pyenv's), or this test's own."""
    if sys.version_info[:2] == tuple(map(int, version.split("."))):
        return sys.executable
    home = os.path.expanduser("~/.pyenv/versions")
    found = sorted(glob.glob(f"{home}/{version}.*/bin/python{version}"))
    if not found:
        pytest.skip(f"no Python {version} here (pyenv install {version})")
    return found[-1]


def last_frame(stderr: str) -> Tuple[str, str, str]:
    """A traceback's last frame, its source line, and the exception."""
    *_, frame, line, error = stderr.splitlines()
    return frame.strip(), line.strip(), error


def test_a_target_runs_the_changed_text_and_its_traceback_shows_it(tmp_path):
    site = site_of(tmp_path, "stock")
    code = "import executorch.exir.tiny as t\nprint(t.read('cpu'))\nt.read('meta')\n"
    proc = python(tmp_path, site, code)
    assert proc.stdout == "read on cpu\n"
    frame, line, error = last_frame(proc.stderr)
    assert frame.endswith(f'/{TINY}", line 6, in read'), proc.stderr
    assert line == RAISE
    assert error == "RuntimeError: data on meta cannot be read here"


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13"])
def test_the_traceback_shows_the_changed_line_on_every_python(tmp_path, version):
    site = site_of(tmp_path, "stock")
    code = PRELUDE + "import executorch.exir.tiny as t\nt.read('meta')\n"
    proc = fresh_python(tmp_path, [site, REPO], code, interpreter(version))
    frame, line, error = last_frame(proc.stderr)
    assert frame.endswith(f'/{TINY}", line 6, in read'), proc.stderr
    assert (line, error) == (RAISE, "RuntimeError: data on meta cannot be read here")


def test_a_changed_module_is_the_installed_file_with_the_changed_source(tmp_path):
    site = site_of(tmp_path, "stock")
    code = (
        "import inspect, linecache\n"
        "import executorch.exir.tiny as t\n"
        "print(t.__file__, t.__spec__.origin)\n"
        "print(inspect.getsource(t.read), end='')\n"
        "print(linecache.getline(t.__file__, 6), end='')\n"
        "print(finder.served)\n"
    )
    proc = python(tmp_path, site, code)
    assert (proc.returncode, proc.stderr) == (0, "")
    changed = (FIXTURES / "fixed" / TINY).read_text().splitlines(keepends=True)
    assert proc.stdout == "".join(
        [
            f"{site / TINY} {site / TINY}\n",
            *changed[3:],
            changed[5],
            "{'executorch.exir.tiny': ('changed', '')}\n",
        ]
    )


def test_no_bytecode_of_a_changed_module_is_written(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    before = snapshot(site)
    proc = python(tmp_path, site, "import executorch.exir.tiny\n")
    assert (proc.returncode, proc.stderr) == (0, "")
    # Python writes the bytecode of the packages' __init__.py, as always.
    tag = sys.implementation.cache_tag
    assert sorted(p for p in snapshot(site) if p not in before) == [
        "executorch/__pycache__",
        f"executorch/__pycache__/__init__.{tag}.pyc",
        "executorch/exir/__pycache__",
        f"executorch/exir/__pycache__/__init__.{tag}.pyc",
    ]
    # What tracebacks show is one copy of the changed text, in the cache.
    copies = [p for p in snapshot(tmp_path / "cache") if p.endswith(".py")]
    assert len(copies) == 1, copies
    assert copies[0].startswith("executorch-device-guard/")
    assert copies[0].endswith(f"/{TINY}")


def test_without_a_cache_folder_the_fix_runs_and_no_stock_line_is_shown(tmp_path):
    site = site_of(tmp_path, "stock")
    with open(site / TINY, "a") as f:
        f.write("\nSTOCK_LINE_7 = 'a stock line'\n")
    (tmp_path / "cache").write_text("a file, not a folder")
    proc = python(tmp_path, site, "import executorch.exir.tiny as t\nt.read('meta')\n")
    *_, frame, error = proc.stderr.splitlines()
    name = f"<{site / TINY}, changed by executorch-device-guard>"
    assert frame == f'  File "{name}", line 6, in read'
    assert error == "RuntimeError: data on meta cannot be read here"


def test_a_text_that_holds_the_fix_loads_as_it_is_silently(tmp_path: Path) -> None:
    site = site_of(tmp_path, "fixed")
    code = "import executorch.exir.tiny as t\nprint(finder.served)\nt.read('meta')\n"
    proc = python(tmp_path, site, code)
    assert proc.stdout == "{'executorch.exir.tiny': ('patched', '')}\n"
    assert proc.stderr.splitlines()[-3:] == [
        f'  File "{site / TINY}", line 6, in read',
        f"    {RAISE}",
        "RuntimeError: data on meta cannot be read here",
    ]


def test_a_text_the_change_does_not_fit_loads_as_it_is_with_one_line(tmp_path):
    site = site_of(tmp_path, "unfit")
    code = (
        "import importlib\n"
        "import executorch.exir.tiny as t\n"
        "importlib.reload(t)\n"
        "print(t.read('meta'))\n"
    )
    proc = python(tmp_path, site, code)
    assert proc.stdout == "meta read\n"
    assert proc.stderr == (
        f"executorch-device-guard: {site / TINY} loads as installed, without the "
        "fix: the change does not fit it (edited: differs from the stock text "
        "in lines 2-5 (hunk 1))\n"
    )


def test_a_module_in_a_zip_loads_as_it_is_with_one_line(tmp_path: Path) -> None:
    archive = tmp_path / "executorch.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted((FIXTURES / "stock").rglob("*.py")):
            z.write(path, path.relative_to(FIXTURES / "stock"))
    code = "import executorch.exir.tiny as t\nprint(t.read('meta'))\n"
    proc = python(tmp_path, archive, code)
    assert proc.stdout == "read on meta\n"
    assert proc.stderr == (
        f"executorch-device-guard: {archive / TINY} loads as installed, without "
        "the fix: it is inside a zip file\n"
    )


def test_a_backport_for_other_releases_leaves_the_module_alone(tmp_path):
    site = site_of(tmp_path, "stock", release="1.5.1")
    old = site / "executorch" / "exir" / "old.py"
    old.write_text(old.read_text().replace("old read", "1.5.1's read"))
    code = (
        "import executorch.exir.old as o\nprint(o.read('meta'))\nprint(finder.served)\n"
    )
    proc = python(tmp_path, site, code)
    assert proc.stderr == ""
    why = "its backport is for ExecuTorch 1.0.0 to 1.4.1: left alone"
    assert proc.stdout.splitlines() == [
        "1.5.1's read on meta",
        str({"executorch.exir.old": ("not for this release", why)}),
    ]


def test_a_backport_for_this_release_is_served(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock", release="1.4.1")
    proc = python(tmp_path, site, "import executorch.exir.old as o\no.read('meta')\n")
    error = "RuntimeError: old data on meta cannot be read here"
    assert last_frame(proc.stderr)[2] == error, proc.stderr


def test_a_release_whose_labels_disagree_loads_as_it_is_with_one_line(tmp_path):
    site = site_of(tmp_path, "stock", release="1.4.1")
    (site / "executorch" / "version.py").write_text('__version__ = "1.5.1"\n')
    proc = python(
        tmp_path, site, "import executorch.exir.old as o\nprint(o.read('meta'))\n"
    )
    assert proc.stdout == "old read on meta\n"
    assert proc.stderr == (
        f"executorch-device-guard: {site / 'executorch/exir/old.py'} loads as "
        f"installed, without the fix: {site / 'executorch'}/version.py says "
        f"'1.5.1', but {site / 'executorch-1.4.1.dist-info/METADATA'} says "
        "'1.4.1': which release it is cannot be told; reinstall ExecuTorch\n"
    )


WRAPPING_FINDER = """
import importlib.util, sys

class Wrapping:
    \"\"\"Looks each module up again and wraps its loader, as ddtrace's
    ModuleWatchdog does.\"\"\"
    finding = set()
    def find_spec(self, name, path=None, target=None):
        if name in self.finding:
            return None
        self.finding.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.finding.discard(name)
        if spec is not None and name == "executorch.exir.tiny":
            spec.loader = Wrapped(spec.loader)
        return spec

class Wrapped:
    def __init__(self, loader):
        self.loader = loader
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        self.loader.exec_module(module)
        print("the wrapping hook saw", module.__name__)

sys.meta_path.insert(1, Wrapping())  # after the finder, which asks it
"""


def test_a_hook_that_wraps_loaders_keeps_the_fix_silently(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    code = WRAPPING_FINDER + (
        "import executorch.exir.tiny as t\n" "print(finder.served)\n" "t.read('meta')\n"
    )
    proc = python(tmp_path, site, code)
    assert proc.stdout.splitlines() == [
        "the wrapping hook saw executorch.exir.tiny",
        "{'executorch.exir.tiny': ('changed', '')}",
    ]
    assert last_frame(proc.stderr)[1:] == (
        RAISE,
        "RuntimeError: data on meta cannot be read here",
    )


def test_a_changed_modules_spec_and_loader_copy_and_pickle(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    code = (
        "import copy, pickle\n"
        "import executorch.exir.tiny as t\n"
        "spec = copy.deepcopy(t.__spec__)\n"
        "loader = pickle.loads(pickle.dumps(t.__loader__))\n"
        "print(spec.origin == t.__file__, loader.get_source(t.__name__) == loader.text)\n"
    )
    proc = python(tmp_path, site, code)
    assert (proc.stdout, proc.stderr) == ("True True\n", "")


def test_a_reload_after_the_file_changed_shows_the_new_text(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    code = (
        "import importlib, inspect, pathlib\n"
        "import executorch.exir.tiny as t\n"
        "path = pathlib.Path(t.__file__)\n"
        "path.write_text(path.read_text().replace('read on', 'edited read on'))\n"
        "importlib.reload(t)\n"
        "print(inspect.getsource(t.read), end='')\n"
    )
    proc = python(tmp_path, site, code)
    assert proc.stdout == 'def read(device):\n    return f"edited read on {device}"\n'
    assert proc.stderr == (
        f"executorch-device-guard: {site / TINY} loads as installed, without the "
        "fix: the change does not fit it (edited: differs from the stock text "
        "in lines 2-5 (hunk 1))\n"
    )


OTHER_FINDER = """
import importlib.util, sys

class Other:
    def find_spec(self, name, path=None, target=None):
        if name == "executorch.exir.tiny":
            return importlib.util.spec_from_loader(name, self)
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        module.read = lambda device: "the other finder's read on " + device

"""


def test_another_finder_earlier_on_the_path_is_respected(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    code = OTHER_FINDER + (
        "sys.meta_path.insert(0, Other())\n"
        "install()\n"
        "import executorch.exir.tiny as t\n"
        "print(t.read('meta'), finder.served)\n"
    )
    proc = python(tmp_path, site, code)
    assert (proc.stdout, proc.stderr) == ("the other finder's read on meta {}\n", "")


def test_a_later_finder_is_asked_and_its_loader_kept_with_one_line(tmp_path):
    site = site_of(tmp_path, "stock")
    code = OTHER_FINDER + (
        "sys.meta_path.insert(1, Other())\n"
        "import executorch.exir.tiny as t\n"
        "print(t.read('meta'))\n"
    )
    proc = python(tmp_path, site, code)
    assert proc.stdout == "the other finder's read on meta\n"
    assert proc.stderr == (
        "executorch-device-guard: executorch.exir.tiny loads as installed, "
        "without the fix: it is not a source file (Other loads it)\n"
    )


def test_the_off_switch_keeps_the_finder_off(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    code = "import executorch.exir.tiny as t\nprint(finder, t.read('meta'))\n"
    proc = python(tmp_path, site, code, EXECUTORCH_DEVICE_GUARD="off")
    assert (proc.stdout, proc.stderr) == ("None read on meta\n", "")


def test_install_twice_is_one_finder_whichever_copy_installs(tmp_path):
    site = site_of(tmp_path, "stock")
    code = (
        "import importlib, sys\n"
        "import executorch_device_guard.finder as first\n"
        "second = importlib.reload(first)\n"
        "print(install() is finder is second.install())\n"
        "print(sum(hasattr(f, second.MARKER) for f in sys.meta_path))\n"
    )
    proc = python(tmp_path, site, code)
    assert (proc.stdout, proc.stderr) == ("True\n1\n", "")


def test_another_series_folder_is_served_as_the_install_series(tmp_path):
    site = site_of(tmp_path, "stock")
    empty = tmp_path / "empty-series"
    (empty / "patches").mkdir(parents=True)
    (empty / "patches" / "series").write_text("")
    code = "import executorch.exir.tiny as t\nprint(t.read('meta'), finder.served)\n"
    proc = python(tmp_path, site, code, EXECUTORCH_DEVICE_GUARD_SERIES=str(empty))
    assert (proc.stdout, proc.stderr) == ("read on meta {}\n", "")


def test_until_a_target_is_imported_nothing_heavy_is(tmp_path: Path) -> None:
    site = site_of(tmp_path, "stock")
    code = (
        "import executorch\n"
        "heavy = ('pathlib', 'executorch_device_guard.patchset', 'typing', 're')\n"
        "print([m for m in heavy if m in sys.modules])\n"
        "import executorch.exir.tiny\n"
        "print('executorch_device_guard.patchset' in sys.modules)\n"
    )
    proc = python(tmp_path, site, code, prelude="import sys\n" + PRELUDE)
    assert (proc.stdout, proc.stderr) == ("[]\nTrue\n", "")

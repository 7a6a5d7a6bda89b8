# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The command that puts ExecuTorch's own files back where they are installed.

It is read from the distribution's files, not from the tool's environment:
the folder that holds its dist-info says where to reinstall, and its
``INSTALLER`` with what.

* This interpreter's site-packages (or its user site): ``PYTHON -m pip
  install --force-reinstall --no-deps executorch==V``.
* The site-packages of the interpreter it was made from (a venv with the
  system's packages): that interpreter's ``-m pip``.
* Another virtual environment's site-packages (reached through a ``.pth``
  file): that environment's Python, found from its ``pyvenv.cfg``.
* Any other folder (``pip install --target DIR`` with ``PYTHONPATH=DIR``):
  ``--target DIR --upgrade``, without which pip leaves the old folder there.
* Installed by uv (``INSTALLER`` says ``uv``; such a venv has no pip):
  ``uv pip install --python PYTHON --reinstall --no-deps executorch==V`` (or
  ``--target DIR``).

``V`` is given whenever the release is known: ``--no-deps`` would otherwise
install the newest ExecuTorch, whatever torch it needs. Every word is quoted
for a shell, whatever a path or a version holds.
"""

from __future__ import annotations

import os
import shlex
import site
import sys
import sysconfig
from pathlib import Path
from typing import List, Optional, Set, Tuple

from executorch_device_guard.installation.confined import read_file, Unsafe


def command(dist_info: Optional[Path], version: Optional[str]) -> str:
    """The shell command that reinstalls ExecuTorch (``version`` if known)
    where the distribution whose metadata folder is ``dist_info`` lies."""
    pin = f"executorch=={version}" if version else "executorch"
    python, target = _where(dist_info.parent if dist_info is not None else None)
    if _installer(dist_info) == "uv":
        place = ["--target", str(target)] if target else ["--python", python]
        words = ["uv", "pip", "install", *place, "--reinstall", "--no-deps", pin]
    else:
        place = ["--target", str(target), "--upgrade"] if target else []
        words = [python, "-m", "pip", "install", *place, "--force-reinstall"]
        words += ["--no-deps", pin]
    return shlex.join(words)


def _installer(dist_info: Optional[Path]) -> str:
    """What the dist-info's INSTALLER names (``pip``, ``uv``), lower case;
    '' where there is none or it cannot be read."""
    if dist_info is None:
        return ""
    try:
        data = read_file(dist_info / "INSTALLER", limit=1024)
    except Unsafe:
        return ""
    return (data or b"").decode("utf-8", "replace").strip().lower()


def _real(paths: List[str]) -> Set[str]:
    return {os.path.realpath(p) for p in paths if p}


def _own_sites() -> Set[str]:
    paths = sysconfig.get_paths()
    found = [paths.get("purelib", ""), paths.get("platlib", "")]
    try:
        found += list(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    user = getattr(site, "getusersitepackages", lambda: "")()
    return _real(found + [user])


def _base_sites() -> Set[str]:
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    paths = sysconfig.get_paths(vars=base)
    return _real([paths.get("purelib", ""), paths.get("platlib", "")])


def _where(folder: Optional[Path]) -> Tuple[str, Optional[Path]]:
    """The Python whose pip installs into ``folder``, and None; or this
    Python and ``folder`` itself, for ``--target``."""
    if folder is None:
        return sys.executable, None
    real = os.path.realpath(folder)
    if real in _own_sites():
        return sys.executable, None
    if real in _base_sites():
        return getattr(sys, "_base_executable", "") or sys.executable, None
    # lib/pythonX.Y/site-packages (POSIX) or Lib/site-packages (Windows).
    for up in list(Path(real).parents)[:3]:
        if (up / "pyvenv.cfg").is_file():
            for python in (up / "bin" / "python", up / "Scripts" / "python.exe"):
                if python.exists():
                    return str(python), None
    return sys.executable, folder

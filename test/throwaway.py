# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Helpers for the hostile-input tests of ``check`` and ``run``.

``copy_of_installed_executorch`` makes a whole, importable copy of the
installed ExecuTorch (without its bytecode caches) with its dist-info, so a
test can put it first on PYTHONPATH and see by hashing whether anything wrote
into it; ``venv_with_installed_executorch`` puts such a copy in a venv's
site-packages, where ``apply`` writes its startup files. The environment's
own ExecuTorch is only read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

from executorch_device_guard.installation.installed import executorch_root


def copy_of_installed_executorch(site: Path) -> Path:
    """``site/executorch`` and its dist-info, copied from the installed one."""
    root = executorch_root()
    site.mkdir(parents=True)
    shutil.copytree(
        root, site / "executorch", ignore=shutil.ignore_patterns("__pycache__")
    )
    for dist in root.parent.glob("executorch-*.dist-info"):
        shutil.copytree(dist, site / dist.name)
    return site


def venv_over_this_environment(venv: Path, tool: Optional[Path]) -> Path:
    """A venv (``python -m venv --without-pip``) that imports the tool from
    the folder ``tool`` (if given) and the rest (torch, ExecuTorch) from this
    environment's site-packages, each through a path ``.pth``. Its
    site-packages folder."""
    import torch

    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )
    (site,) = venv.glob("lib/python*/site-packages")
    if tool is not None:
        (site / "a_tool.pth").write_text(f"{tool}\n")
    (site / "b_deps.pth").write_text(f"{Path(torch.__file__).parent.parent}\n")
    return site


def venv_with_installed_executorch(venv: Path, tool: Path) -> Path:
    """``venv_over_this_environment``, with a copy of the installed
    ExecuTorch in its site-packages. Its site-packages folder."""
    site = venv_over_this_environment(venv, tool)
    copy_of_installed_executorch(site / "_")
    for entry in (site / "_").iterdir():
        entry.rename(site / entry.name)
    (site / "_").rmdir()
    return site


def leftovers(tmpdir: Path) -> List[str]:
    """What the tool left in a TMPDIR of its own (torch keeps caches there too)."""
    return sorted(p.name for p in tmpdir.iterdir() if p.name.startswith("device-guard"))


def survivors(marker: str, wait: float = 5.0) -> List[int]:
    """Processes whose environment holds ``marker`` (a unique TMPDIR), after
    giving them ``wait`` seconds to go."""
    deadline = time.monotonic() + wait
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)

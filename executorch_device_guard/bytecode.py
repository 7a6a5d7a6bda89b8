# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A module's cached bytecode: which files hold it, and which Python would
run although it no longer matches the source.

Python caches the compiled code of ``NAME.py`` as
``__pycache__/NAME.TAG.pyc`` (``NAME.TAG.opt-N.pyc`` under ``-O``), and a
legacy ``NAME.pyc`` beside the source is only loaded when the source is
missing. A *timestamp* or *checked-hash* file is checked against the source
at every import, so a changed source is recompiled. An *unchecked-hash* file
(``python -m compileall --invalidation-mode unchecked-hash``, as Docker
images and Bazel's rules_python build them) is trusted as it is: after the
source changes, Python keeps running the old code. ``apply`` and ``revert``
therefore remove a module's cached bytecode before they replace its source,
and ``status`` flags stale unchecked-hash files. This module only names and
judges the files; ``confined`` reads and removes them.
"""

from __future__ import annotations

import importlib.util
import re
from typing import Tuple

PYCACHE = "__pycache__"

# The flags word of a PEP 552 header: bit 0 hash-based, bit 1 check the source.
_HASH_BASED, _CHECK_SOURCE = 0b01, 0b10


def locations(rel: str) -> Tuple[str, re.Pattern, str]:
    """For the source ``rel`` (``a/b/name.py``): its ``__pycache__`` folder,
    a pattern for the names there that hold its bytecode, and the legacy
    ``a/b/name.pyc`` beside it."""
    folder, _, name = rel.rpartition("/")
    stem = name[: -len(".py")] if name.endswith(".py") else name
    prefix = f"{folder}/" if folder else ""
    # A module name has no dot, so NAME.anything.pyc belongs to NAME alone.
    pattern = re.compile(re.escape(stem) + r"\.[A-Za-z0-9_.-]+\.pyc")
    return f"{prefix}{PYCACHE}", pattern, f"{prefix}{stem}.pyc"


def is_stale(pyc: bytes, source: bytes) -> bool:
    """Whether Python would run ``pyc`` without checking it against ``source``
    although it was not compiled from it.

    Only unchecked-hash files are trusted blindly. One written for another
    Python version (another magic number) cannot be checked here, so it
    counts as stale: that interpreter would trust it just the same.
    """
    if len(pyc) < 16:
        return False  # Python rejects a truncated header and recompiles
    flags = int.from_bytes(pyc[4:8], "little")
    if flags != _HASH_BASED:  # timestamp, checked-hash, or invalid
        return False
    if pyc[:4] != importlib.util.MAGIC_NUMBER:
        return True
    return pyc[8:16] != importlib.util.source_hash(source)

# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""A module's cached bytecode: which files hold it, and which of them Python
would run although they were not compiled from the source.

Python caches the compiled code of ``NAME.py`` as
``__pycache__/NAME.TAG.pyc`` (``NAME.TAG.opt-N.pyc`` under ``-O``), and a
legacy ``NAME.pyc`` beside the source is only loaded when the source is
missing. Its 16-byte header (PEP 552) says how Python checks it:

* *timestamp* (pip's default): against the source's modification time and
  size;
* *checked-hash*: against a hash of the source's bytes;
* *unchecked-hash* (``python -m compileall --invalidation-mode
  unchecked-hash``, as Docker images and Bazel's rules_python build them):
  not at all, so after the source changes Python keeps running the old code.

``apply`` and ``revert`` give a replaced file the old one's modification
time (``confined``), so that ``revert`` gives the tree back as it was, its
bytecode included. The bytecode then stays where Python rejects it for the
new text (a timestamp file records the old size, a checked-hash file the old
hash) and goes where Python would run it instead (``runs_instead``).
``status`` flags unchecked-hash files that do not match their source
(``is_stale``). This module only names and judges the files; ``confined``
reads and removes them.
"""

from __future__ import annotations

import _imp
import importlib.util
import re
from typing import Optional, Tuple

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


# What Python imports as module NAME before NAME.py in the same folder
# (importlib's FileFinder): a package NAME/ with an __init__ file, then an
# extension module (NAME.cpython-311-x86_64-linux-gnu.so, NAME.abi3.so, ...).
INIT = re.compile(r"__init__(\.[A-Za-z0-9_-]+)*\.(py|pyc|so|pyd)")


def extension(stem: str) -> re.Pattern:
    """The names of an extension module ``stem``, for any Python."""
    return re.compile(re.escape(stem) + r"(\.[A-Za-z0-9_-]+)*\.(so|pyd)")


HEADER = 16

# CPython 3.11 (magic number 3495) changed the keyed hash that hash-based
# .pyc files keep (SipHash-1-3 for SipHash-2-4): a file of a Python on the
# other side of that change cannot be checked with this one's.
_NEW_HASH = 3495


def _checkable(pyc: bytes) -> bool:
    theirs = int.from_bytes(pyc[:2], "little")
    ours = int.from_bytes(importlib.util.MAGIC_NUMBER[:2], "little")
    return pyc[2:4] == b"\r\n" and (theirs >= _NEW_HASH) == (ours >= _NEW_HASH)


def _source_hash(pyc: bytes, source: bytes) -> bytes:
    """The hash that the Python which wrote ``pyc`` keeps for ``source``: its
    key is that Python's magic number (CPython's ``_imp.source_hash``)."""
    return _imp.source_hash(int.from_bytes(pyc[:4], "little"), source)


def is_stale(pyc: bytes, source: bytes) -> Optional[bool]:
    """Whether Python would run the bytecode whose header is ``pyc`` without
    checking it against ``source``, although it was not compiled from it:
    True, False, or None where that cannot be told here.

    Only unchecked-hash files are trusted blindly. One written for another
    Python version (another magic number) is checked with that version's key;
    one of a Python on the other side of 3.11's change of the hash function
    cannot be checked here: None.
    """
    if len(pyc) < HEADER:
        return False  # Python rejects a truncated header and recompiles
    flags = int.from_bytes(pyc[4:8], "little")
    if flags != _HASH_BASED:  # timestamp, checked-hash, or invalid
        return False
    if not _checkable(pyc):
        return None
    return pyc[8:16] != _source_hash(pyc, source)


def trusts_a_flag(pyc: bytes, source: bytes) -> bool:
    """Whether the bytecode whose header is ``pyc`` is a checked-hash file
    compiled from other text than ``source``: Python recompiles it, unless it
    runs with ``--check-hash-based-pycs never``, which runs it as it is."""
    if len(pyc) < HEADER or int.from_bytes(pyc[4:8], "little") != 0b11:
        return False
    return _checkable(pyc) and pyc[8:16] != _source_hash(pyc, source)


def runs_instead(pyc: bytes, source: bytes, mtime_ns: int, replaced: bytes) -> bool:
    """Whether Python, importing ``source`` (modification time ``mtime_ns``)
    where ``replaced`` was, could run the bytecode whose header is ``pyc``
    although it was not compiled from ``source``: an unchecked-hash file of
    other bytes (or one that cannot be checked here), or a timestamp file
    that records this time and size while ``replaced`` had that size too
    (then it may be ``replaced``'s; otherwise it was compiled from a text of
    the new size at that time, ``source`` as an earlier run left it)."""
    if len(pyc) < HEADER:
        return False
    flags = int.from_bytes(pyc[4:8], "little")
    if flags == 0:
        mtime = (mtime_ns // 1_000_000_000) & 0xFFFFFFFF
        return (
            int.from_bytes(pyc[8:12], "little") == mtime
            and int.from_bytes(pyc[12:16], "little") == len(source) & 0xFFFFFFFF
            and len(replaced) & 0xFFFFFFFF == len(source) & 0xFFFFFFFF
        )
    return is_stale(pyc, source) is not False

# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Files the tool writes into folders the user names (`export`, `check
--log-dir`): never through a link or anything else planted in their place."""

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import Optional


def not_a_file(path: Path) -> Optional[str]:
    """Why the entry at ``path`` may not be replaced ("is a symbolic link",
    "is a folder", "is not a regular file"), or None: missing or a file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    return None


def replace(path: Path, data: bytes) -> None:
    """Writes ``path`` as a new file renamed over the old entry: a link or a
    hard link in its place is replaced, never written through."""
    temp = path.with_name(f".{path.name}.device-guard.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temp, flags | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise

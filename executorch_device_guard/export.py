# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Write the upstream change as ``git am``-able mbox patches.

Each series entry becomes one commit: its format-patch file (message and
edits to existing files) plus the new files it adds, taken from this
repository at their ExecuTorch paths.
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import re
import subprocess
from pathlib import Path
from typing import List, Optional

from executorch_device_guard import userfiles
from executorch_device_guard.errors import GuardError
from executorch_device_guard.patchset import read_series


def _new_file_diff(path: str, data: bytes) -> str:
    text = data.decode("utf-8")
    lines = text.splitlines(keepends=True)
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    body = "".join("+" + line for line in lines)
    if not text.endswith("\n"):
        body += "\n\\ No newline at end of file\n"
    return (
        f"diff --git a/{path} b/{path}\n"
        "new file mode 100644\n"
        f"index 0000000..{blob[:10]}\n"
        "--- /dev/null\n"
        f"+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n" + body
    )


AUTHOR = re.compile(r"^[^<>\n]+ <[^<>\s]+@[^<>\s]+>$")


def _shown(text: str) -> str:
    """``text`` as its bytes, escaped: ``N\\xff`` for a byte that is not UTF-8."""
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = text.encode("utf-8", "backslashreplace")
    return repr(data)[2:-1]


def git_author() -> Optional[str]:
    """``Name <email>`` from ``git config``, or None when either is unset;
    raises GuardError when one is not UTF-8 text."""
    values = []
    for key in ("user.name", "user.email"):
        try:
            proc = subprocess.run(
                ["git", "config", key], capture_output=True, timeout=30
            )
        except OSError:
            return None
        try:
            values.append(proc.stdout.decode("utf-8").strip())
        except UnicodeDecodeError:
            shown = _shown(proc.stdout.strip().decode("utf-8", "surrogateescape"))
            raise GuardError(
                f"git config {key} is not UTF-8 text ({shown}). Set it again in "
                f"UTF-8 (git config --global {key} ...), or pass --author "
                "'Name <email>'."
            ) from None
    return f"{values[0]} <{values[1]}>" if all(values) else None


def check_author(author: str) -> None:
    """Refuses an author that is not ``Name <email>`` in UTF-8 text."""
    try:
        author.encode("utf-8")
    except UnicodeEncodeError:
        raise GuardError(
            f"--author is not UTF-8 text ({_shown(author)}). Give the name and "
            "email in UTF-8: --author 'Name <email>'."
        ) from None
    if not AUTHOR.match(author):
        raise GuardError(f"--author must look like 'Name <email>', not {author!r}.")


def _with_author(text: str, author: str, date: str) -> str:
    """The patch with a From: and a Date: header after its mbox line."""
    # formataddr encodes a non-ASCII name as RFC 2047, as format-patch does.
    sender = email.utils.formataddr(email.utils.parseaddr(author))
    first, rest = text.split("\n", 1)
    return f"{first}\nFrom: {sender}\nDate: {date}\n{rest}"


def prepare_destination(dest: Path, force: bool = False) -> None:
    """Creates ``dest``, or checks that it is an empty (or, with ``force``, any)
    writable folder; raises GuardError naming the problem otherwise."""
    if dest.exists() and not dest.is_dir():
        raise GuardError(
            f"{dest} is a file, not a folder. Give a new or empty folder for "
            "the patches."
        )
    if not dest.exists():
        parent = dest.absolute().parent
        if not parent.is_dir():
            raise GuardError(
                f"{parent} is not an existing folder. Create it first, or give "
                "a folder whose parent exists."
            )
        try:
            dest.mkdir()
        except OSError as e:
            raise GuardError(
                f"Cannot create {dest} ({e.strerror}). Give a folder you can "
                "write to."
            ) from e
        return
    if not os.access(dest, os.W_OK | os.X_OK):
        reason = "Permission denied"
        if hasattr(os, "statvfs") and os.statvfs(dest).f_flag & os.ST_RDONLY:
            reason = "Read-only file system"
        raise GuardError(
            f"Cannot write to {dest} ({reason}). Give a folder you can write to."
        )
    entries = sorted(os.listdir(dest))
    if entries and not force:
        raise GuardError(
            f"{dest} is not empty ({len(entries)} entries, e.g. {entries[0]}). "
            "Give a new or empty folder, or add --force to write into it "
            "(files of the same names are replaced)."
        )


def _check_entry(out: Path) -> None:
    """Refuses an entry named ``out`` that is not a regular file of its own:
    ``export`` replaces files, it never writes through a link."""
    why = userfiles.not_a_file(out)
    if why is not None:
        raise GuardError(
            f"{out} {why}; export only replaces regular files. Nothing was "
            "written. Remove it, or give another folder."
        )


def export(root: Path, dest: Path, author: str, force: bool = False) -> List[Path]:
    """Writes one mbox per series entry into ``dest``, authored by ``author``."""
    check_author(author)
    series = read_series(root)
    if dest.is_dir():
        for entry in series:
            _check_entry(dest / entry.patch_path.name)
    prepare_destination(dest, force)
    date = email.utils.formatdate(localtime=True)
    written = []
    for entry in series:
        text = _with_author(entry.patch_path.read_text(encoding="utf-8"), author, date)
        split = text.find("\ndiff --git ")
        header, diff = text[: split + 1], entry.diff
        if not header.rstrip("\n").endswith("\n---"):
            header = header.rstrip("\n") + "\n---\n"
        for new_file in entry.new_files:
            diff += _new_file_diff(new_file, (root / new_file).read_bytes())
        out = dest / entry.patch_path.name
        try:
            userfiles.replace(
                out,
                (header + diff + "-- \nexecutorch-device-guard\n\n").encode("utf-8"),
            )
        except OSError as e:
            raise GuardError(
                f"Cannot write {out} ({e.strerror}). Give a folder you can " "write to."
            ) from e
        written.append(out)
    return written

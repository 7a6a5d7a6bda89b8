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

import email.header
import email.utils
import hashlib
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

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


AUTHOR = re.compile(r"^([^<>\n]+) <([^<>\s]+@[^<>\s]+)>$")
# A character that a name in a mail header cannot carry as it is.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# The longest name that git mailinfo keeps (in bytes).
_NAME_BYTES = 60
# RFC 5322's specials: a name holding one is written as a quoted string.
_SPECIALS = re.compile(r'[][\\()<>@,:;".]')


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


def check_author(author: str) -> Tuple[str, str]:
    """The name and the address of ``Name <email>`` in UTF-8 text, as a
    patch's From: header can carry them (``sender``); GuardError, one line,
    for anything else."""
    try:
        author.encode("utf-8")
    except UnicodeEncodeError:
        raise GuardError(
            f"--author is not UTF-8 text ({_shown(author)}). Give the name and "
            "email in UTF-8: --author 'Name <email>'."
        ) from None
    found = AUTHOR.match(author)
    if not found or not found.group(1).strip():
        raise GuardError(f"--author must look like 'Name <email>', not {author!r}.")
    name, address = found.group(1).strip(), found.group(2)
    if _CONTROL.search(author):
        raise GuardError(
            f"--author {author!r} holds a control character, which a patch's "
            "From: header cannot carry. Give the name and email as plain text."
        )
    if not address.isascii():
        raise GuardError(
            f"--author's address {address!r} is not ASCII, which a patch's "
            "From: header cannot carry for git am. Give an ASCII address (a "
            "domain in its xn-- form)."
        )
    # What git am (git mailinfo) reads back as it is, and nothing else: it
    # takes the address for a name over 60 bytes or holding '@', drops the
    # double quotes of an encoded one, and joins runs of spaces.
    name = " ".join(name.split())
    size = len(name.encode("utf-8"))
    why = None
    if size > _NAME_BYTES:
        why = f"is {size} bytes in UTF-8, more than {_NAME_BYTES}: git am would "
        why += "take the address for it"
    elif "@" in name:
        why = "holds '@': git am would take the address for it"
    elif '"' in name and not name.isascii():
        why = "holds '\"' and is not ASCII: git am would drop those quotes"
    if why is not None:
        raise GuardError(
            f"--author's name {name!r} {why}. Give a name that git am reads "
            "back as it is."
        )
    return name, address


def sender(name: str, address: str) -> str:
    """``Name <address>`` for a From: header, as git format-patch writes it:
    a name with RFC 5322's specials (``Smith, John``) quoted, a name that
    is not ASCII RFC 2047-encoded; ``git am`` reads back exactly ``name``
    and ``address``."""
    if not name.isascii():
        shown = email.header.Header(name, "utf-8", header_name="From").encode()
    elif _SPECIALS.search(name):
        shown = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    else:
        shown = name
    return f"{shown} <{address}>"


def _with_author(text: str, sender: str, date: str) -> str:
    """The patch with a From: and a Date: header after its mbox line."""
    first, rest = text.split("\n", 1)
    return f"{first}\nFrom: {sender}\nDate: {date}\n{rest}"


def prepare_destination(dest: Path, force: bool = False) -> None:
    """Checks that ``dest`` is missing with an existing parent, or an empty
    (or, with ``force``, any) writable folder; raises GuardError naming the
    problem otherwise. Creates nothing: ``export`` makes the folder only
    once every patch is written."""
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
    author_line = sender(*check_author(author))
    series = read_series(root)
    if dest.is_dir():
        for entry in series:
            _check_entry(dest / entry.patch_path.name)
    prepare_destination(dest, force)
    date = email.utils.formatdate(localtime=True)
    patches = {}
    for entry in series:
        text = _with_author(
            entry.patch_path.read_text(encoding="utf-8"), author_line, date
        )
        split = text.find("\ndiff --git ")
        header, diff = text[: split + 1], entry.diff
        if not header.rstrip("\n").endswith("\n---"):
            header = header.rstrip("\n") + "\n---\n"
        for new_file in entry.new_files:
            diff += _new_file_diff(new_file, (root / new_file).read_bytes())
        text = header + diff + "-- \nexecutorch-device-guard\n\n"
        patches[dest / entry.patch_path.name] = text.encode("utf-8")
    _write_all(dest, patches)
    return list(patches)


def _write_all(dest: Path, files: Dict[Path, bytes]) -> None:
    """Writes every file of ``files`` (all in ``dest``) or none.

    They are written into a staging folder first, beside ``dest`` when it is
    new (then renamed to it) or inside it (then each file is renamed over
    its entry), so that every rename stays on one file system. A write that
    fails (a full disk) removes the staging folder, and ``dest`` is as it
    was."""
    new = not dest.exists()
    where = dest.absolute().parent if new else dest
    staging = where / f".{dest.name}.device-guard-{secrets.token_hex(8)}"
    current = dest
    try:
        os.mkdir(staging)  # the mode a new folder gets (umask)
        try:
            for current, data in files.items():
                with open(staging / current.name, "xb") as f:
                    f.write(data)
            current = dest
            if new:
                os.rename(staging, dest)
            else:
                for current in files:
                    os.replace(staging / current.name, current)
                os.rmdir(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    except OSError as e:
        raise GuardError(
            f"Cannot write {current} ({e.strerror}). Nothing was written. Give "
            "a folder you can write to, with room for the patches."
        ) from e

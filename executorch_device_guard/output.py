# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Standard output that cannot turn finished work into a refusal.

``apply`` and ``revert`` print their report once the change is made, so a
failing stdout must not end them with exit 2, which says that nothing was
changed. A reader that went away (EPIPE, as in ``status | head -1``) is no
error at all: the command exits with its own code, silently. Any other
failure (``apply > /dev/full``) is one line on stderr saying the command
finished and what it would have exited with, and exit 4 (or the command's
own code, if that was not 0). Output after the failure is discarded.

Text that the stream cannot encode (a path that is not UTF-8 reaches Python
as surrogate escapes, and ``PYTHONIOENCODING=utf-8`` is strict) is written
escaped instead: each such byte as ``\\xNN``, any other character as
``\\uNNNN``. A write that fails even so is a failed output, as above. On
standard error, which Python writes with ``backslashreplace``, such a byte
is written as ``\\xNN`` too.

A control character other than a newline or a tab (a terminal escape in a
file's name) is written escaped too, as ``\\xNN``.

Standard error is guarded the same way, and silently: once a write to it
fails (``check 2>&1 | head -1`` closes it), what follows on it, such as
``check``'s progress lines, is dropped, and the command still finishes with
its own exit code.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import sys
from typing import Iterator, Optional

OUTPUT_LOST = 4


# A byte that is not valid in its encoding, as ``os.fsdecode`` passes it on.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


# A control character other than a newline or a tab: a name on disk (a path,
# a dist-info folder) can carry terminal escapes, which are printed escaped.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def controls_escaped(text: str) -> str:
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], text)


def one_line(text: str) -> str:
    """``text`` as one line: a newline in it (a name can hold one) as
    ``\\n``; other control characters are escaped where it is written."""
    return text.replace("\n", "\\n")


def escaped(text: str, encoding: str) -> str:
    """``text`` as ``encoding`` can write it: a surrogate-escaped byte as
    ``\\xNN``, any other character it cannot encode as ``\\uNNNN``."""
    text = _ESCAPED_BYTE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text)
    return text.encode(encoding, "backslashreplace").decode(encoding)


class Guarded(io.TextIOBase):
    """Wraps ``sys.stdout``: remembers the first write error instead of raising."""

    def __init__(self, stream: io.TextIOBase) -> None:
        super().__init__()
        self.stream = stream
        self.error: Optional[Exception] = None

    def write(self, text: str) -> int:
        if self.error is None:
            try:
                text = controls_escaped(text)
                if getattr(self.stream, "errors", "") == "backslashreplace":
                    # stderr: a byte of a name that is not UTF-8 as \xNN, as
                    # on stdout, not as the surrogate that carries it.
                    text = _ESCAPED_BYTE.sub(
                        lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text
                    )
                try:
                    self.stream.write(text)
                except UnicodeEncodeError:
                    self.stream.write(escaped(text, self.stream.encoding or "utf-8"))
            except (OSError, ValueError) as e:  # ValueError: UnicodeError too
                self._failed(e)
        return len(text)

    def flush(self) -> None:
        if self.error is None:
            try:
                self.stream.flush()
            except (OSError, ValueError) as e:
                self._failed(e)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding

    def _failed(self, error: Exception) -> None:
        self.error = error
        # What is still buffered goes nowhere rather than failing again at exit.
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)

    def finish(self, command: str, code: int) -> int:
        """The exit code once everything is written; says so if it could not be."""
        self.flush()
        if self.error is None or getattr(self.error, "errno", None) == errno.EPIPE:
            return code
        why = getattr(self.error, "strerror", None) or str(self.error)
        print(
            f"executorch-device-guard: error: {command} finished, but its output "
            f"could not be written ({why}); without that it would have exited "
            f"{code}.",
            file=sys.stderr,
        )
        return code or OUTPUT_LOST


class _Closed(io.StringIO):
    """What a stream that the shell closed (``apply >&-``) writes to: nothing."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "it is closed")


@contextlib.contextmanager
def guarded(name: str = "stdout") -> Iterator[Guarded]:
    """``sys.stdout`` (or ``sys.stderr``) guarded for the block.

    Python leaves ``sys.stdout`` None when file descriptor 1 was closed; it
    then gets /dev/null, so that no file the tool opens takes its place (and
    reaches a child as its output), and a write to it is a failed output."""
    original = getattr(sys, name)
    if original is None:
        fd = 1 if name == "stdout" else 2
        with contextlib.suppress(OSError):
            os.fstat(fd)
            fd = -1  # open after all
        if fd >= 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
    stream = Guarded(original if original is not None else _Closed())
    setattr(sys, name, stream)
    try:
        yield stream
    finally:
        stream.flush()
        setattr(sys, name, original)

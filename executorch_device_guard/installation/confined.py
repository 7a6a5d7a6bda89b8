# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Files inside one package folder, reached without following symbolic links.

A path is relative to the package root and is walked one folder at a time
from the root's own descriptor with ``O_NOFOLLOW``: a symbolic link anywhere
below the root, to a folder or in place of the file, is refused, never
followed, and a folder swapped for a link after the walk changes nothing,
because the descriptors still name the real folders. So nothing outside the
package is read or written, whatever the files on disk say.

A file is replaced atomically: a temporary file beside it, named
``.NAME.device-guard.HEX.tmp``, written, given everything of the old file but
its bytes (owner, group, mode, extended attributes, access and modification
times), fsynced, then, once the bytecode that Python would run instead of it
is removed (see ``bytecode``), renamed over it. Right before the rename the
old file is compared again, through the descriptor opened when it was read:
the same file at that name, not written since (size, times) and holding the
bytes expected; a program that wrote it meanwhile makes the replacement stop
(``Changed``), and a write that lands between that comparison and the rename
is seen on the old file afterwards and put back. The folder keeps its
modification time when it holds the same names as before: once the file is
replaced, and once a failed write's temporary file is removed again.
Interrupting signals wait until the rename is done (see ``signals``); a
SIGKILL can leave the temporary file, and ``leftovers`` finds it for the
next run to remove. Its name records the folder's modification time and
names from before it was made (``.NAME.device-guard.HEX.MTIME.NAMES.tmp``),
so the run that removes it gives the folder that time back when it holds
those names again; only a SIGKILL in the instant between a rename and the
folder's ``utime`` leaves the folder a new time.
Where the OS has no ``dir_fd`` support (Windows), paths are checked with
``lstat`` before use instead.

Every read is of a regular file, never blocks (a FIFO) and stops at a limit
(a sparse file of gigabytes): ``read`` for the package, ``read_file`` for the
distribution's metadata beside it.

A folder or file flagged append-only or immutable (``chattr +a``, ``+i``)
lets a file be created in it but never renamed over or removed, so a
replacement would fail half-way and leave its temporary file; ``pinned``
finds the flag first (Linux's ``FS_IOC_GETFLAGS``, BSD's ``st_flags``).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import stat
import struct
import sys
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from executorch_device_guard.installation import faults
from executorch_device_guard import signals
from executorch_device_guard.errors import GuardError

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted as a target must not hang
_O_BINARY = getattr(os, "O_BINARY", 0)
_DIR_FD = (
    {os.open, os.stat, os.unlink, os.rename} <= os.supports_dir_fd
    and os.listdir in os.supports_fd
)
_UTIME_FD = os.utime in os.supports_fd

# Linux's FS_IOC_GETFLAGS (_IOR('f', 1, long)) and the flags it reads.
_FS_IOC_GETFLAGS = (2 << 30) | (struct.calcsize("l") << 16) | (ord("f") << 8) | 1
_FS_FLAGS = {0x10: ("immutable", "i"), 0x20: ("append-only", "a")}
# BSD's and macOS's st_flags.
_ST_FLAGS = {
    getattr(stat, "UF_IMMUTABLE", 0) | getattr(stat, "SF_IMMUTABLE", 0): (
        "immutable",
        "schg",
    ),
    getattr(stat, "UF_APPEND", 0) | getattr(stat, "SF_APPEND", 0): (
        "append-only",
        "sappnd",
    ),
}

# Temporary files: ours, and those of earlier versions (tempfile.mkstemp
# names; ".device_guard_probe." was their writability probe). A leftover is
# only ever looked for in a folder holding a target (or the root), and only
# when NAME is one of the targets there. Only ours are ever removed: an
# earlier version's names are those of any mkstemp file, which a user's file
# can have too (``._emitter.py.20261130.tmp``).
# Ours: ``.NAME.device-guard.HEX.MTIME.NAMES.tmp``, where MTIME (hex ns) and
# NAMES (a digest of its names) are the folder's before the file was made
# (``.NAME.device-guard.HEX.tmp`` before they were recorded).
_TEMP = re.compile(
    r"\.(?P<name>.+)\.device-guard\.[0-9a-f]{16}"
    r"(?:\.(?P<mtime>-?[0-9a-f]{1,16})\.(?P<names>[0-9a-f]{16}))?\.tmp"
)
_OLD_TEMP = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")
_OLD_PROBE = re.compile(r"\.device_guard_probe\.[a-z0-9_]{8}")

# The largest file read whole: ExecuTorch's largest source file is under
# 1 MB, its RECORD about 1 MB. A larger file is refused, never read.
MAX_READ = 64 << 20


class Leftover(NamedTuple):
    """A regular file named as a temporary file of this tool (``kind``
    'temp'), of an earlier version ('old-temp', beside the target ``target``),
    or an earlier version's writability probe ('old-probe')."""

    path: str
    kind: str
    target: str = ""


class Unsafe(Exception):
    """A path the tool will not touch; the message says why."""


class Changed(Unsafe):
    """Another program wrote the file while the tool was replacing it; what
    it wrote is kept."""


def _parts(rel: str) -> Tuple[str, ...]:
    parts = tuple(rel.split("/"))
    if rel.startswith("/") or any(p in ("", ".", "..") or "\\" in p for p in parts):
        raise Unsafe(f"{rel!r} is not a path inside the package")
    return parts


class _Folder:
    """One real folder of the package: a descriptor (POSIX) or a checked path."""

    def __init__(self, fd: Optional[int], path: Path) -> None:
        self.fd = fd
        self.path = path

    def at(self, name: str) -> str:
        return name if self.fd is not None else str(self.path / name)

    def lstat(self, name: str) -> Optional[os.stat_result]:
        try:
            return os.stat(self.at(name), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def names(self) -> List[str]:
        return os.listdir(self.fd if self.fd is not None else self.path)

    def rename(self, temp: str, name: str) -> None:
        """Puts the file ``temp`` in place of ``name``, in one step."""
        os.replace(
            self.at(temp), self.at(name), src_dir_fd=self.fd, dst_dir_fd=self.fd
        )

    def discard(self, temp: str) -> None:
        """Removes the temporary file ``temp``, if it is still there."""
        with contextlib.suppress(OSError):
            os.unlink(self.at(temp), dir_fd=self.fd)

    def times(self) -> Tuple[int, int]:
        """The folder's access and modification times (ns)."""
        st = os.stat(self.fd if self.fd is not None else self.path)
        return st.st_atime_ns, st.st_mtime_ns

    def set_times(self, times: Tuple[int, int]) -> None:
        """Gives the folder back its modification time, where the tool may."""
        target = self.fd if self.fd is not None and _UTIME_FD else self.path
        with contextlib.suppress(OSError):
            os.utime(target, ns=(self.times()[0], times[1]))


def _digest(names: Sequence[str]) -> str:
    """A folder's names, sorted, in 16 hex digits."""
    joined = b"\0".join(os.fsencode(n) for n in sorted(names))
    return hashlib.sha256(joined).hexdigest()[:16]


def _temp_name(name: str, names: Sequence[str], times: Tuple[int, int]) -> str:
    """A new temporary file's name beside ``name``, recording the folder's
    modification time and names before it is made (``_TEMP``), so that the
    run that removes it after a SIGKILL can give the folder its time back."""
    token = secrets.token_hex(8)
    return f".{name}.device-guard.{token}.{times[1]:x}.{_digest(names)}.tmp"


def _keep_folder_time(
    folder: _Folder, names: Sequence[str], times: Tuple[int, int]
) -> None:
    """Gives ``folder`` back its modification time ``times`` if it holds the
    names ``names`` again (a file replaced, or a temporary file removed)."""
    with contextlib.suppress(OSError):
        if sorted(folder.names()) == sorted(names):
            folder.set_times(times)


class Package:
    """The installed package folder; use as a context manager."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._folders: Dict[Tuple[str, ...], Optional[_Folder]] = {}
        self._fds: List[int] = []

    def __enter__(self) -> "Package":
        if os.path.islink(self.root):
            raise GuardError(
                f"{self.root} is a symbolic link; the tool only edits a package "
                "folder installed in place. Reinstall ExecuTorch."
            )
        fd = None
        if _DIR_FD:
            try:
                fd = os.open(
                    self.root, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
                )
            except OSError as e:
                raise GuardError(f"Cannot open {self.root} ({e.strerror}).") from e
            self._fds.append(fd)
        self._folders[()] = _Folder(fd, self.root)
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in reversed(self._fds):
            os.close(fd)
        self._fds.clear()
        self._folders.clear()

    def moved(self) -> bool:
        """Whether ``root`` now names another folder than the one opened (a
        pip reinstall moves the old one aside and installs a new one)."""
        if self.fd is None:
            return False
        try:
            now = os.stat(self.root, follow_symlinks=False)
        except OSError:
            return True
        opened = os.fstat(self.fd)
        return (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino)

    @property
    def fd(self) -> Optional[int]:
        """The root folder's descriptor (None without dir_fd support)."""
        return self._folders[()].fd  # type: ignore[union-attr]

    def _folder(self, parts: Tuple[str, ...]) -> Optional[_Folder]:
        """The folder ``parts`` (None if missing), walked without following links."""
        if parts in self._folders:
            return self._folders[parts]
        parent = self._folder(parts[:-1])
        if parent is None:
            return None
        name = parts[-1]
        shown = "/".join(parts)
        st = parent.lstat(name)
        if st is None:
            self._folders[parts] = None
            return None
        if stat.S_ISLNK(st.st_mode):
            raise Unsafe(f"folder {shown} is a symbolic link")
        if not stat.S_ISDIR(st.st_mode):
            raise Unsafe(f"{shown} is not a folder")
        fd = None
        if parent.fd is not None:
            try:
                fd = os.open(
                    name,
                    os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC,
                    dir_fd=parent.fd,
                )
            except OSError as e:
                # Swapped between the lstat and the open: refuse, do not follow.
                raise Unsafe(f"folder {shown} cannot be opened ({e.strerror})") from e
            self._fds.append(fd)
        folder = _Folder(fd, parent.path / name)
        self._folders[parts] = folder
        return folder

    def _locate(self, rel: str) -> Tuple[Optional[_Folder], str]:
        parts = _parts(rel)
        return self._folder(parts[:-1]), parts[-1]

    @contextlib.contextmanager
    def _opened(self, rel: str) -> Iterator[Optional[Tuple[int, os.stat_result]]]:
        """The regular file ``rel`` opened for reading, and its status; None
        if it is missing. Raises Unsafe for a symbolic link, a folder or
        anything not a regular file (a FIFO is opened without blocking)."""
        folder, name = self._locate(rel)
        st = folder.lstat(name) if folder is not None else None
        if folder is None or st is None:
            yield None
            return
        if stat.S_ISLNK(st.st_mode):
            raise Unsafe(f"{rel} is a symbolic link")
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise Unsafe(f"{rel} is {kind}")
        flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY
        try:
            fd = os.open(folder.at(name), flags, dir_fd=folder.fd)
        except FileNotFoundError:
            yield None
            return
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise Unsafe(f"{rel} is a symbolic link") from e
            raise Unsafe(f"{rel} cannot be read ({e.strerror})") from e
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                raise Unsafe(f"{rel} is not a regular file")
            yield fd, opened
        finally:
            os.close(fd)

    def read(self, rel: str) -> Optional[bytes]:
        """The bytes of the regular file ``rel``, None if it is missing.

        Raises Unsafe for a symbolic link, a folder, anything not a regular
        file, or a file larger than ``MAX_READ``.
        """
        with self._opened(rel) as opened:
            return None if opened is None else _read_whole(opened[0], rel)

    def lstat(self, rel: str) -> Optional[os.stat_result]:
        """The entry ``rel`` itself (never what a link points to), None if
        missing; Unsafe if a folder above it is a symbolic link."""
        folder, name = self._locate(rel)
        return folder.lstat(name) if folder is not None else None

    def head(self, rel: str, size: int) -> Optional[bytes]:
        """The first ``size`` bytes of the regular file ``rel`` (fewer if it
        is shorter), None if it is missing; Unsafe as for ``read``."""
        with self._opened(rel) as opened:
            return None if opened is None else _pread(opened[0], size, 0)

    def listing(self, rel: str) -> List[str]:
        """The names in the folder ``rel``, sorted; empty if it is missing.

        Raises Unsafe if it, or a folder above it, is a symbolic link.
        """
        folder = self._folder(_parts(rel))
        return sorted(folder.names()) if folder is not None else []

    def unwritable(self, rel: str) -> Optional[str]:
        """Why the folder of ``rel`` cannot be written, or None if it can."""
        folder, _ = self._locate(rel)
        assert folder is not None
        if os.access(folder.path, os.W_OK | os.X_OK):
            return None
        reason = "Permission denied"
        if hasattr(os, "statvfs") and os.statvfs(folder.path).f_flag & os.ST_RDONLY:
            reason = "Read-only file system"
        return f"{folder.path} ({reason})"

    def replace(
        self, rel: str, data: bytes, expected: bytes, first: Sequence[str] = ()
    ) -> None:
        """Atomically replaces ``rel``, which must still hold ``expected``, by
        ``data``, keeping everything else of the old file (``_keep``).

        The regular files ``first`` (bytecode that Python would run instead
        of ``data``) are removed once the new text is complete and before it
        takes the old one's place: a process killed in between leaves the
        old text without them, never the new text with them. Raises Changed
        if another program writes the file before the rename, or in the
        instant of it (then what it wrote is put back).
        """
        folder, name = self._locate(rel)
        assert folder is not None
        with self._opened(rel) as opened:
            if opened is None or _read_whole(opened[0], rel) != expected:
                raise Changed(_changed(rel))
            old_fd, old = opened
            names, times = sorted(folder.names()), folder.times()
            temp = _temp_name(name, names, times)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
            with signals.deferred():
                fd = os.open(
                    folder.at(temp), flags | _O_BINARY, 0o600, dir_fd=folder.fd
                )
                try:
                    try:
                        faults.step()  # the temporary file exists, empty
                        _write(fd, data)
                        _keep(fd, folder.at(temp), old, old_fd)
                        os.fsync(fd)
                        new = os.fstat(fd)
                    finally:
                        os.close(fd)
                    faults.step()  # the temporary file is complete
                    for stale in first:
                        self.remove(stale)  # a step each
                    # The last look, right before the rename.
                    now = folder.lstat(name)
                    if (
                        now is None
                        or (now.st_dev, now.st_ino) != (old.st_dev, old.st_ino)
                        or _written(old_fd, old, expected, ctime=True)
                    ):
                        raise Changed(_changed(rel))
                    folder.rename(temp, name)
                except BaseException:
                    folder.discard(temp)
                    raise
                finally:
                    # Replaced, or the temporary file removed again: the
                    # folder holds the same names, and keeps its time.
                    _keep_folder_time(folder, names, times)
                if _written(old_fd, old, expected, ctime=False):
                    # Written in the instant between the last look and the
                    # rename: its text goes back in place of the new one.
                    try:
                        self._put_back(folder, name, old_fd, new)
                    finally:
                        _keep_folder_time(folder, names, times)
                    raise Changed(_changed(rel))
                faults.step()  # replaced
                if folder.fd is not None:
                    with contextlib.suppress(OSError):
                        os.fsync(folder.fd)

    def _put_back(
        self, folder: "_Folder", name: str, old_fd: int, new: os.stat_result
    ) -> None:
        """Puts what the old file holds now back at ``name``, if ``name`` is
        still the new file (``new``)."""
        now = folder.lstat(name)
        if now is None or (now.st_dev, now.st_ino) != (new.st_dev, new.st_ino):
            return
        temp = _temp_name(name, folder.names(), folder.times())
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
        fd = os.open(folder.at(temp), flags | _O_BINARY, 0o600, dir_fd=folder.fd)
        try:
            try:
                _write(fd, _read_whole(old_fd, name))
                _keep(fd, folder.at(temp), os.fstat(old_fd), old_fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            folder.rename(temp, name)
        except BaseException:
            folder.discard(temp)
            raise

    def pinned(self, rel: str) -> Optional[Tuple[str, str]]:
        """Why the file ``rel`` cannot be replaced or removed although its
        folder can be written (it, or its folder, is flagged append-only or
        immutable), and the way out; None if neither is (or the flags
        cannot be read)."""
        folder, name = self._locate(rel)
        if folder is None or folder.fd is None:
            return None
        found = _flag(folder.fd)
        path, what = folder.path, "files in it"
        st = folder.lstat(name)
        if found is None and st is not None and stat.S_ISREG(st.st_mode):
            flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
            try:
                fd = os.open(name, flags, dir_fd=folder.fd)
            except OSError:
                return None
            try:
                found = _flag(fd)
            finally:
                os.close(fd)
            path, what = folder.path / name, "it"
        if found is None:
            return None
        kind, clear = found
        return (
            f"{path} is {kind}, so this tool cannot replace or remove {what}",
            f"clear that flag ({clear} {path}, as root)",
        )

    def leftovers(self, rels: List[str]) -> List[Leftover]:
        """Files named as this tool's temporary files beside ``rels`` (or
        probes in the root)."""
        targets: Dict[Tuple[str, ...], set] = {}
        for rel in rels:
            parts = _parts(rel)
            targets.setdefault(parts[:-1], set()).add(parts[-1])
        targets.setdefault((), set())
        found = []
        for parts, names in sorted(targets.items()):
            try:
                folder = self._folder(parts)
            except Unsafe:
                continue
            if folder is None:
                continue
            for entry in sorted(folder.names()):
                path = "/".join(parts + (entry,))
                ours, old = _TEMP.fullmatch(entry), _OLD_TEMP.fullmatch(entry)
                if ours and ours["name"] in names:
                    leftover = Leftover(path, "temp")
                elif old and old["name"] in names:
                    target = "/".join(parts + (old["name"],))
                    leftover = Leftover(path, "old-temp", target)
                elif _OLD_PROBE.fullmatch(entry):
                    leftover = Leftover(path, "old-probe")
                else:
                    continue
                st = folder.lstat(entry)
                if st is not None and stat.S_ISREG(st.st_mode):
                    found.append(leftover)
        return found

    def foreign(self, rel: str) -> Optional[str]:
        """Why replacing the file ``rel`` would change its owner, or None."""
        if not hasattr(os, "geteuid") or os.geteuid() == 0:
            return None  # root gives the new file the old one's owner
        folder, name = self._locate(rel)
        st = folder.lstat(name) if folder is not None else None
        if st is None or st.st_uid == os.geteuid():
            return None
        return (
            f"{self.root / rel} belongs to another user ({_user(st.st_uid)}), "
            f"not to you ({_user(os.geteuid())})"
        )

    def is_file(self, rel: str) -> bool:
        """Whether ``rel`` is a regular file (not a link to one)."""
        try:
            folder, name = self._locate(rel)
        except Unsafe:
            return False
        st = folder.lstat(name) if folder is not None else None
        return st is not None and stat.S_ISREG(st.st_mode)

    def remove(self, rel: str) -> bool:
        """Removes the regular file ``rel``; False if it is not there."""
        folder, name = self._locate(rel)
        if folder is None:
            return False
        st = folder.lstat(name)
        if st is None or not stat.S_ISREG(st.st_mode):
            return False
        faults.step()
        try:
            os.unlink(folder.at(name), dir_fd=folder.fd)
        except FileNotFoundError:
            return False
        recorded = _TEMP.fullmatch(name)
        if recorded and recorded["mtime"] is not None:
            # A temporary file that a SIGKILL left: the folder had the time
            # it recorded when it held the names it holds again now.
            with contextlib.suppress(OSError):
                if _digest(folder.names()) == recorded["names"]:
                    folder.set_times((0, int(recorded["mtime"], 16)))
        return True


def _flag(fd: int) -> Optional[Tuple[str, str]]:
    """``(kind, command that clears it)`` when the file or folder open as
    ``fd`` is flagged immutable or append-only; else None."""
    if sys.platform.startswith("linux"):
        try:
            import fcntl

            buffer = bytearray(struct.calcsize("l"))
            fcntl.ioctl(fd, _FS_IOC_GETFLAGS, buffer, True)
        except (ImportError, OSError):
            return None  # a file system without flags
        value = struct.unpack_from("=i", buffer)[0]
        for bit, (kind, letter) in _FS_FLAGS.items():
            if value & bit:
                return kind, f"chattr -{letter}"
        return None
    value = getattr(os.fstat(fd), "st_flags", 0)
    for bits, (kind, name) in _ST_FLAGS.items():
        if bits and value & bits:
            return kind, f"chflags no{name}"
    return None


def _user(uid: int) -> str:
    """``name, uid N``, or ``uid N`` for a user without a name."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _changed(rel: str) -> str:
    return (
        f"{rel} changed while this command ran (another program wrote it); "
        "what it wrote is kept"
    )


def _read_whole(fd: int, shown: str, limit: int = MAX_READ) -> bytes:
    """The bytes of the open regular file ``fd``, from its start; Unsafe if
    there are more than ``limit``."""
    size = os.fstat(fd).st_size
    if size > limit:
        raise Unsafe(f"{shown} is {size} bytes, more than any file it can be")
    chunks, offset = [], 0
    while True:
        chunk = _pread(fd, min(1 << 20, limit + 1 - offset), offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)
        if offset > limit:
            raise Unsafe(f"{shown} is more than {limit} bytes")


def _pread(fd: int, size: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # Windows
    return os.read(fd, size)


def read_file(
    path: Path, limit: int = MAX_READ, first: Optional[int] = None
) -> Optional[bytes]:
    """The bytes of the regular file ``path`` (outside the package: the
    distribution's metadata; with ``first``, only that many, as of bytecode
    under PYTHONPYCACHEPREFIX), None if it is missing. Unsafe for a symbolic
    link in its place, anything not a regular file (a FIFO is never waited
    on) or more than ``limit`` bytes."""
    flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Unsafe(f"{path} is a symbolic link") from e
        raise Unsafe(f"{path} cannot be read ({e.strerror})") from e
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unsafe(f"{path} is not a regular file")
        if first is not None:
            return _pread(fd, first, 0)
        return _read_whole(fd, str(path), limit)
    finally:
        os.close(fd)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _written(fd: int, old: os.stat_result, expected: bytes, ctime: bool) -> bool:
    """Whether the file open as ``fd``, read as ``old``, was written since:
    its size or modification time (and, while it still has its name, its
    change time, which no program can set back) differ, or its bytes."""
    now = os.fstat(fd)
    fields = ["st_size", "st_mtime_ns"] + (["st_ctime_ns"] if ctime else [])
    if any(getattr(now, f) != getattr(old, f) for f in fields):
        return True
    try:
        return _read_whole(fd, "", len(expected)) != expected
    except Unsafe:  # it grew meanwhile
        return True


def _keep(fd: int, path: str, old: os.stat_result, old_fd: int) -> None:
    """Gives the new file ``fd`` everything of the old one but its bytes:
    owner, group, mode, extended attributes (ACLs among them), then access
    and modification times. Raises OSError for what cannot be kept."""
    _copy_owner_and_mode(fd, path, old)
    _copy_xattrs(fd, old_fd)
    if _UTIME_FD:
        os.utime(fd, ns=(old.st_atime_ns, old.st_mtime_ns))
    else:
        os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))


def _copy_xattrs(fd: int, old_fd: int) -> None:
    """The old file's extended attributes on the new file, and no others
    (Linux; elsewhere the OS module has none to copy)."""
    if not hasattr(os, "listxattr"):
        return
    try:
        wanted = {n: os.getxattr(old_fd, n) for n in os.listxattr(old_fd)}
        have = {n: os.getxattr(fd, n) for n in os.listxattr(fd)}
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return  # a file system without them
        raise
    for name in sorted(set(have) - set(wanted)):
        try:
            os.removexattr(fd, name)
        except OSError as e:
            raise OSError(e.errno, f"cannot drop the extended attribute {name}") from e
    for name, value in sorted(wanted.items()):
        if have.get(name) == value:
            continue
        try:
            os.setxattr(fd, name, value)
        except OSError as e:
            raise OSError(e.errno, f"cannot keep its extended attribute {name}") from e


def _copy_owner_and_mode(fd: int, path: str, old: os.stat_result) -> None:
    """Gives the new file the old one's owner, group and mode, or raises.

    A new file belongs to whoever creates it, so the rename would otherwise
    hand the old file to the user running the tool. Root can give it back;
    anyone can keep a group they are in. Whatever cannot be kept is an error
    (``foreign`` refuses the usual case before anything is written).
    """
    if hasattr(os, "fchown"):
        new = os.fstat(fd)
        uid = old.st_uid if os.geteuid() == 0 else -1
        if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
            with contextlib.suppress(OSError):
                os.fchown(fd, uid, old.st_gid)
            new = os.fstat(fd)
            if (new.st_uid, new.st_gid) != (old.st_uid, old.st_gid):
                raise OSError(
                    errno.EPERM,
                    f"cannot keep its owner {old.st_uid} and group {old.st_gid}",
                )
    mode = stat.S_IMODE(old.st_mode)
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    else:
        os.chmod(path, mode)

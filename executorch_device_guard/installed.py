# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The ExecuTorch installed in this interpreter's environment, and changes to it.

``apply`` proves every target file is stock (the whole series applies to it
exactly) or already patched (the series reverses exactly) before it writes
anything. It writes each file atomically, then records the originals in
``executorch/.device_guard.json`` so that ``revert`` restores them byte for
byte. Nothing is written when any file is unknown.
"""

from __future__ import annotations

import enum
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from executorch_device_guard.patchset import apply_all, FilePatch, PatchError

STATE_FILE = ".device_guard.json"


class GuardError(Exception):
    """A refusal: the message says why, and nothing was modified."""


class FileState(enum.Enum):
    STOCK = "stock"
    PATCHED = "patched"
    UNKNOWN = "unknown"
    MISSING = "missing"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def executorch_root() -> Path:
    """The installed ``executorch`` package folder, found without importing it."""
    spec = importlib.util.find_spec("executorch")
    # ExecuTorch's wheel is a namespace package: take the portion holding exir.
    for location in (spec and spec.submodule_search_locations) or []:
        if (Path(location) / "exir").is_dir():
            return Path(location)
    raise GuardError(
        "ExecuTorch is not installed in this environment "
        "(no importable 'executorch' package has exir/)."
    )


def executorch_version() -> Optional[str]:
    try:
        return importlib.metadata.version("executorch")
    except importlib.metadata.PackageNotFoundError:
        return None


def classify(
    text: Optional[str], patches: List[FilePatch]
) -> Tuple[FileState, Optional[str]]:
    """The state of one file, and its patched text when it is stock."""
    if text is None:
        return FileState.MISSING, None
    try:
        return FileState.STOCK, apply_all(patches, text)
    except PatchError:
        pass
    try:
        apply_all(patches, text, reverse=True)
        return FileState.PATCHED, None
    except PatchError:
        return FileState.UNKNOWN, None


def read_text(path: Path) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None


def status(root: Path, targets: Dict[str, List[FilePatch]]) -> Dict[str, FileState]:
    return {
        rel: classify(read_text(root / rel), patches)[0]
        for rel, patches in targets.items()
    }


def _atomic_write(path: Path, data: bytes) -> None:
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _check_writable(root: Path, rels: List[str]) -> None:
    folders = {root} | {(root / rel).parent for rel in rels}
    for folder in sorted(folders):
        try:
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".device_guard_probe.")
        except OSError as e:
            raise GuardError(
                f"Cannot write to {folder} ({e.strerror}). Use an environment "
                "you can write to, e.g. a virtual environment you own."
            ) from e
        os.close(fd)
        os.unlink(probe)


def apply(root: Path, targets: Dict[str, List[FilePatch]]) -> List[str]:
    """Patches every stock target; returns the files written (empty if all patched)."""
    originals: Dict[str, str] = {}
    updates: Dict[str, str] = {}
    for rel, patches in targets.items():
        text = read_text(root / rel)
        state, patched = classify(text, patches)
        if state in (FileState.UNKNOWN, FileState.MISSING):
            raise GuardError(
                f"{root / rel} is {state.value}: it is neither the stock file "
                "that the patch series expects nor the patched one. It may be "
                "locally edited or from an unsupported ExecuTorch release. "
                "Nothing was changed."
            )
        if state is FileState.STOCK:
            assert text is not None and patched is not None
            originals[rel] = text
            updates[rel] = patched
    if not updates:
        return []
    _check_writable(root, list(updates))
    record = {
        "executorch_version": executorch_version(),
        "files": {
            rel: {
                "original": originals[rel],
                "original_sha256": sha256(originals[rel].encode()),
                "patched_sha256": sha256(updates[rel].encode()),
            }
            for rel in updates
        },
    }
    state_path = root / STATE_FILE
    previous = read_text(state_path)
    if previous is not None:
        record["files"] = {**json.loads(previous)["files"], **record["files"]}
    _atomic_write(state_path, json.dumps(record, indent=1).encode())
    written: List[str] = []
    try:
        for rel, text in updates.items():
            _atomic_write(root / rel, text.encode())
            written.append(rel)
    except BaseException:
        for rel in written:
            _atomic_write(root / rel, originals[rel].encode())
        if previous is None:
            os.unlink(state_path)
        else:
            _atomic_write(state_path, previous.encode())
        raise
    return written


def revert(root: Path, targets: Dict[str, List[FilePatch]]) -> List[str]:
    """Restores the recorded originals; returns the files written."""
    state_text = read_text(root / STATE_FILE)
    if state_text is None:
        if any(s is FileState.PATCHED for s in status(root, targets).values()):
            raise GuardError(
                f"Files are patched but {root / STATE_FILE} is missing, so the "
                "originals cannot be restored byte for byte. Reinstall ExecuTorch."
            )
        return []
    files = json.loads(state_text)["files"]
    for rel, entry in files.items():
        current = read_text(root / rel)
        if current is None or sha256(current.encode()) != entry["patched_sha256"]:
            raise GuardError(
                f"{root / rel} changed after it was patched, so reverting would "
                "lose those changes. Nothing was changed."
            )
    _check_writable(root, list(files))
    for rel, entry in files.items():
        _atomic_write(root / rel, entry["original"].encode())
    os.unlink(root / STATE_FILE)
    return list(files)

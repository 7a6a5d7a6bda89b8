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

import hashlib
from pathlib import Path
from typing import List

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


def export(root: Path, dest: Path) -> List[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for entry in read_series(root):
        text = entry.patch_path.read_text()
        split = text.find("\ndiff --git ")
        header, diff = text[: split + 1], entry.diff
        if not header.rstrip("\n").endswith("\n---"):
            header = header.rstrip("\n") + "\n---\n"
        for new_file in entry.new_files:
            diff += _new_file_diff(new_file, (root / new_file).read_bytes())
        out = dest / entry.patch_path.name
        out.write_text(header + diff + "-- \nexecutorch-device-guard\n\n")
        written.append(out)
    return written

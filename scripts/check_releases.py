# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Which ExecuTorch releases each patch of the series applies to, from source.

    python scripts/check_releases.py /path/to/executorch.git [REF ...]

Reads each target file at each release tag (v1.0.0 and later, plus main) from
a git repository of pytorch/executorch and classifies it with the same strict
applier that `apply` uses: stock (the patch applies), patched, unknown or
missing (not in that release), with the form of the change that fits when it
is a backport (patches/backports, scripts/backport.py). Prints a markdown
table.
"""

import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from executorch_device_guard import data_root  # noqa: E402
from executorch_device_guard.installation.installed import (  # noqa: E402
    BACKPORT,
    classify,
    form,
    UPSTREAM,
)
from executorch_device_guard.patchset import patched_files  # noqa: E402


def main(git_dir: str, refs: list) -> int:
    if not refs:
        tags = subprocess.run(
            ["git", "--git-dir", git_dir, "tag", "--list", "v1.*"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        refs = sorted(
            (t for t in tags if re.fullmatch(r"v1\.\d+\.\d+", t)),
            key=lambda t: tuple(map(int, t[1:].split("."))),
        ) + ["main"]
    targets = patched_files(data_root(), build_files=True, install=True)
    print("| ref | " + " | ".join(f"`{p}`" for p in targets) + " |")
    print("|---" * (len(targets) + 1) + "|")
    for ref in refs:
        cells = []
        version = subprocess.run(
            ["git", "--git-dir", git_dir, "show", f"{ref}:version.txt"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        for rel, patches in targets.items():
            if version and not patches[0].for_release(version):
                cells.append("not for this release")
                continue
            show = subprocess.run(
                ["git", "--git-dir", git_dir, "show", f"{ref}:{rel}"],
                capture_output=True,
                text=True,
            )
            text = show.stdout if show.returncode == 0 else None
            cell = classify(text, patches)[0].value
            name = form(text, patches) if text is not None else ""
            cells.append(
                cell + (f" ({name})" if name not in ("", UPSTREAM, BACKPORT) else "")
            )
        print(f"| {ref} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))

# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Copy just the ExecuTorch source files that building the custom ops library
reads, for a machine without network (gpu/build_custom_ops.sh).

    python scripts/pack_et_source.py SOURCE BUILD|LIST [DEST]

SOURCE is the tree that scripts/build_custom_ops.sh built BUILD from; the
files are those its compiler and CMake read there (ninja's dependency log,
the compile commands and CMake's own inputs), at their paths in SOURCE, so
that the build script takes DEST (default .et-src, which .gitignore lists) as
its SOURCE. LIST, a file of such paths one a line (DEST/files.txt of an
earlier pack; docs/evidence/custom-ops-build/et-src-files.txt), stands in for
BUILD. Writes DEST/files.txt and DEST/PACKED.txt: where the files came from,
their count and size.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Set

REPO = Path(__file__).resolve().parent.parent


def read_files(source: Path, build: Path) -> Set[str]:
    """Paths relative to SOURCE of every file of it that the build read."""
    cmake = next(
        build / f"cmake-{n}"
        for n in ("one", "stock")
        if (build / f"cmake-{n}").is_dir()
    )
    roots = [
        *build.glob("src-*"),
        *(c / "source-parent" / "executorch" for c in build.glob("cmake-*")),
        source,
    ]
    found: Set[str] = set()

    def keep(path: str) -> None:
        for root in roots:
            try:
                rel = os.path.relpath(os.path.normpath(path), root)
            except ValueError:
                continue
            if not rel.startswith(".."):
                found.add(rel)
                return

    deps = subprocess.run(
        ["ninja", "-C", str(cmake), "-t", "deps"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for line in deps.splitlines():
        if line.startswith(" "):
            keep(line.strip())
    for command in json.loads((cmake / "compile_commands.json").read_text()):
        keep(command["file"])
    for line in (cmake / "build.ninja").read_text().splitlines():
        if line.startswith("build build.ninja: RERUN_CMAKE"):
            for path in line.split("|", 1)[1].split():
                keep(path)
    return found


# Found in torch's headers when they have it, but the build points here too.
ALSO = ["backends/xnnpack/third-party/pthreadpool/include/pthreadpool.h"]


def main(source: Path, build: Path, dest: Path) -> int:
    if build.is_file():
        files = set(build.read_text().split())
    else:
        files = read_files(source.resolve(), build.resolve())
    files = sorted(files | {rel for rel in ALSO if (source / rel).is_file()})
    if dest.exists():
        shutil.rmtree(dest)
    size = 0
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, target)
        size += target.stat().st_size

    def commit(path: Path) -> str:
        proc = subprocess.run(
            ["git", "-C", str(path), "log", "-1", "--format=%H %cs"],
            capture_output=True,
            text=True,
        )
        return proc.stdout.strip() or "not a git checkout"

    (dest / "files.txt").write_text("".join(f"{rel}\n" for rel in files))
    (dest / "PACKED.txt").write_text(
        f"ExecuTorch source files that building custom_ops_aot_lib read, copied by\n"
        f"scripts/pack_et_source.py from {source} ({commit(source)}).\n"
        f"{len(files)} files, {size} bytes.\n"
    )
    print(f"{dest}: {len(files)} files, {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(
        main(
            Path(sys.argv[1]),
            Path(sys.argv[2]),
            Path(sys.argv[3]) if len(sys.argv) > 3 else REPO / ".et-src",
        )
    )

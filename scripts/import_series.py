# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Import the upstream series from commits in a checkout of pytorch/executorch.

    python scripts/import_series.py PATH/TO/executorch BASE

Each commit in BASE..HEAD, applied alone onto BASE (each is a pull request of
its own), becomes one line of ``patches/series``: a
``git format-patch`` file holding its message and its edits to existing files,
then the files it adds, copied here at their ExecuTorch paths. The patch files
carry no author or date: ``export`` writes the exporter's own identity.
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parent.parent
HEADER = """\
# The upstream change, one commit per line, applied in order. Each line names
# a `git format-patch` file that edits existing ExecuTorch files, then the new
# files (kept in this repository at their ExecuTorch paths) that the commit
# adds, and `upstream-only` for a fix beside the guard that `apply` and `run`
# do not install. Each commit stands on its own: none needs another.
# Written by scripts/import_series.py.
"""


def git(checkout: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "-c", "core.warnAmbiguousRefs=false", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _flags(series: Path) -> dict:
    """Subject part and number of each patch name -> the flags its line had
    (e.g. ``upstream-only``), which a rewrite keeps: by subject, or by number
    for a commit whose title changed."""
    flags = {}
    if series.is_file():
        for raw in series.read_text().splitlines():
            words = raw.split("#", 1)[0].split()
            if words:
                kept = [w for w in words[1:] if w == "upstream-only"]
                number, subject = words[0].split("-", 1)
                flags[subject] = flags[number] = kept
    return flags


def _alone(checkout: Path, base: str, commits: List[str]) -> List[str]:
    """Each commit as it applies alone onto ``base``: each is its own pull
    request off main, so its diff and index lines are against main. Built in a
    scratch index, with no work tree, so that a mirror that lacks some of
    main's large blobs serves as well as a full clone."""
    alone = []
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        for commit in commits:
            subprocess.run(
                ["git", "-C", str(checkout), "read-tree", base], check=True, env=env
            )
            subprocess.run(
                ["git", "-C", str(checkout), "apply", "--cached"],
                input=git(checkout, "diff", "--binary", f"{commit}^", commit),
                text=True,
                check=True,
                env=env,
            )
            tree = subprocess.run(
                ["git", "-C", str(checkout), "write-tree", "--missing-ok"],
                check=True,
                capture_output=True,
                text=True,
                env=env,
            ).stdout.strip()
            message = git(checkout, "log", "-1", "--format=%B", commit)
            alone.append(
                git(checkout, "commit-tree", tree, "-p", base, "-m", message).strip()
            )
    return alone


def main(checkout: Path, base: str) -> int:
    commits = git(checkout, "rev-list", "--reverse", f"{base}..HEAD").split()
    commits = _alone(checkout, base, commits)
    patches = REPO / "patches"
    flags = _flags(patches / "series")
    for old in patches.glob("*.patch"):
        old.unlink()
    lines: List[str] = []
    for number, commit in enumerate(commits, 1):
        changes = git(
            checkout, "diff-tree", "--no-commit-id", "-r", "--name-status", commit
        )
        added, edited = [], []
        for line in changes.splitlines():
            status, path = line.split("\t", 1)
            (added if status == "A" else edited).append(path)
            if status not in "AM":
                raise SystemExit(f"{commit}: {status} {path}: only adds and edits")
        name = git(
            checkout,
            "format-patch",
            "--no-stat",
            "--no-signature",
            f"--start-number={number}",
            f"--subject-prefix=PATCH {number}/{len(commits)}",
            "-1",
            commit,
            "-o",
            str(patches),
            "--",
            *edited,
        ).strip()
        path = Path(name)
        text = path.read_text()
        # No identity in the repository: `export` writes the exporter's.
        header, body = text.split("\n\n", 1)
        header = re.sub(
            r"^(From|Date): .*\n(?:[ \t].*\n)*", "", header + "\n", flags=re.M
        )
        text = header + "\n" + body
        path.write_text(text)
        for new_file in added:
            dest = REPO / new_file
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(
                subprocess.run(
                    ["git", "-C", str(checkout), "show", f"{commit}:{new_file}"],
                    check=True,
                    capture_output=True,
                ).stdout
            )
        number, subject = path.name.split("-", 1)
        lines.append(
            " ".join([path.name, *added, *flags.get(subject, flags.get(number, []))])
        )
    (patches / "series").write_text(HEADER + "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))

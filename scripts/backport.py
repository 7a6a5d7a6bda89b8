# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Write the backport forms of the series for older ExecuTorch releases.

    .venv/bin/python scripts/backport.py /path/to/executorch.git [--check]

For each Python file the series edits, reads the file at every release tag
(v1.0.0 and later; release candidates left out) of a git repository of
pytorch/executorch. Where the series' hunks do not apply exactly to a
release's stock file, the hunks are moved onto that file by one small,
fixed transformation, and the result is written to
``patches/backports/RELEASES.diff`` (e.g. ``v1.0.0-v1.1.0.diff``):

- each hunk keeps its added and removed lines, in order, exactly;
- its context lines are dropped from the outer ends, fewest first, until
  what remains (at least one line) occurs exactly once in the release's file,
  which is where the hunk goes;
- the backport is the diff of the release's stock file against that result,
  with three lines of the release's own context (``difflib``).

A file is written only where every hunk finds exactly one place, and only
after checking that its diff applies strictly to the release's stock file,
reverses back to it byte for byte, and adds and removes the same lines as
the series. Files stock under the series at every release get no backport.
The tool treats a backport like the series (``patchset.read_backports``):
exact matches only, never fuzz, at install time.

Rerun this after any change to a patch of the series; ``--check`` exits 1,
writing nothing, if ``patches/backports`` is not what it would write.
"""

import argparse
import collections
import difflib
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from executorch_device_guard.patchset import (  # noqa: E402
    apply_all,
    BACKPORTS,
    FilePatch,
    Hunk,
    parse_diff,
    patched_files,
    PatchError,
)

HEADER = """\
# Backport form of the patch series for ExecuTorch {releases}.
# Written by scripts/backport.py from the stock files at those tags: the
# series' added and removed lines, unchanged, with the context of these
# releases. Rerun it after changing patches/; do not edit by hand.
"""


class NoPlace(Exception):
    """A hunk fits nowhere, or in more than one place, in a release's file."""


def release_tags(git_dir: str) -> List[str]:
    tags = subprocess.run(
        ["git", "--git-dir", git_dir, "tag", "--list", "v1.*"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(
        (t for t in tags if re.fullmatch(r"v1\.\d+\.\d+", t)),
        key=lambda t: tuple(map(int, t[1:].split("."))),
    )


def show(git_dir: str, ref: str, rel: str) -> Optional[str]:
    proc = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{ref}:{rel}"],
        capture_output=True,
    )
    return proc.stdout.decode("utf-8") if proc.returncode == 0 else None


def _context(hunk: Hunk) -> Tuple[int, int]:
    """How many lines at the start and at the end of a hunk are context."""
    old, new = hunk.old_lines, hunk.new_lines
    lead = 0
    while lead < min(len(old), len(new)) and old[lead] == new[lead]:
        lead += 1
    trail = 0
    while (
        trail < min(len(old), len(new)) - lead
        and old[len(old) - 1 - trail] == new[len(new) - 1 - trail]
    ):
        trail += 1
    return lead, trail


def move_hunk(lines: List[str], hunk: Hunk, path: str, number: int) -> List[str]:
    """``lines`` with ``hunk`` applied where its trimmed context is unique."""
    lead, trail = _context(hunk)
    old, new = hunk.old_lines, hunk.new_lines
    trims = sorted(
        ((a, b) for a in range(lead + 1) for b in range(trail + 1)),
        key=lambda t: (t[0] + t[1], t[1]),
    )
    for a, b in trims:
        block = old[a : len(old) - b]
        if not block:
            continue
        places = [
            i
            for i in range(len(lines) - len(block) + 1)
            if tuple(lines[i : i + len(block)]) == block
        ]
        if len(places) == 1:
            at = places[0]
            return lines[:at] + list(new[a : len(new) - b]) + lines[at + len(block) :]
        if len(places) > 1:
            raise NoPlace(f"{path}: hunk {number} fits {len(places)} places")
    raise NoPlace(f"{path}: hunk {number} fits nowhere")


def fits(text: str, patches: List[FilePatch], reverse: bool = False) -> bool:
    """Whether the series' own hunks apply to ``text`` exactly and back."""
    try:
        return (
            apply_all(patches, apply_all(patches, text, reverse), not reverse) == text
        )
    except PatchError:
        return False


def changed_lines(patches: Sequence[FilePatch]) -> Tuple[List[str], List[str]]:
    """The removed and the added lines of patches, in order."""
    removed: List[str] = []
    added: List[str] = []
    for file_patch in patches:
        for hunk in file_patch.hunks:
            matcher = difflib.SequenceMatcher(
                a=hunk.old_lines, b=hunk.new_lines, autojunk=False
            )
            for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                if tag != "equal":
                    removed += hunk.old_lines[i1:i2]
                    added += hunk.new_lines[j1:j2]
    return removed, added


def backport(rel: str, stock: str, patches: List[FilePatch]) -> str:
    """The backport diff of one file for one release's stock text."""
    lines = stock.splitlines(keepends=True)
    for file_patch in patches:
        for number, hunk in enumerate(file_patch.hunks, 1):
            lines = move_hunk(lines, hunk, rel, number)
    patched = "".join(lines)
    if not stock.endswith("\n") or not patched.endswith("\n"):
        raise NoPlace(f"{rel}: no newline at the end of the file")
    diff = "".join(
        difflib.unified_diff(
            stock.splitlines(keepends=True),
            patched.splitlines(keepends=True),
            f"a/{rel}",
            f"b/{rel}",
            n=3,
        )
    )
    (form,) = parse_diff(diff)
    if apply_all([form], stock) != patched or apply_all([form], patched, True) != stock:
        raise NoPlace(f"{rel}: the backport does not apply strictly both ways")
    if changed_lines([form]) != changed_lines(patches):
        raise NoPlace(f"{rel}: the backport changes other lines than the series")
    return diff


def _name(tags: List[str], order: List[str]) -> str:
    """v1.0.0-v1.1.0 for a run of consecutive release tags, else a + list."""
    spans: List[List[str]] = []
    for tag in tags:
        if spans and order.index(tag) == order.index(spans[-1][-1]) + 1:
            spans[-1].append(tag)
        else:
            spans.append([tag])
    return "+".join(s[0] if len(s) == 1 else f"{s[0]}-{s[-1]}" for s in spans)


def forms(git_dir: str) -> Dict[str, str]:
    """File name in patches/backports -> its text."""
    order = release_tags(git_dir)
    files: Dict[str, List[str]] = collections.defaultdict(list)
    for rel, patches in patched_files(REPO, install=True).items():
        by_text: Dict[str, List[str]] = {}
        for tag in order:
            if not patches[0].for_release(tag[1:]):
                continue  # a backport-only change for other releases
            text = show(git_dir, tag, rel)
            if text is None or fits(text, patches):
                continue  # not in that release, or the series fits it
            if fits(text, patches, reverse=True):
                raise NoPlace(f"{rel} at {tag} already holds the series' change")
            by_text.setdefault(text, []).append(tag)
        # Releases whose backports hold the same lines share one: a hunk goes
        # where its lines are, whatever their numbers.
        by_lines: Dict[tuple, Tuple[str, List[str]]] = {}
        for text, tags in by_text.items():
            diff = backport(rel, text, patches)
            (form,) = parse_diff(diff)
            key = tuple((h.old_lines, h.new_lines) for h in form.hunks)
            shared, earlier = by_lines.setdefault(key, (diff, []))
            if not fits(text, parse_diff(shared)):
                raise NoPlace(f"{rel}: a shared backport does not fit {tags[0]}")
            earlier.extend(tags)
        for diff, tags in by_lines.values():
            tags.sort(key=order.index)
            files[_name(tags, order)].append(diff)
            print(f"{rel}: backport for {', '.join(tags)}", file=sys.stderr)
    result = {}
    for name, diffs in sorted(files.items()):
        releases = name.replace("+", ", ").replace("-", " to ")
        result[f"{name}.diff"] = HEADER.format(releases=releases) + "".join(diffs)
    return result


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", help="a git repository of pytorch/executorch")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if patches/backports is out of date",
    )
    args = parser.parse_args(argv)
    try:
        wanted = forms(args.git_dir)
    except subprocess.CalledProcessError as e:
        print(
            f"backport: cannot read {args.git_dir}: {e.stderr.strip()}", file=sys.stderr
        )
        return 2
    except NoPlace as e:
        print(f"backport: {e}", file=sys.stderr)
        return 1
    folder = REPO / "patches" / BACKPORTS
    present = {p.name: p.read_text() for p in folder.glob("*.diff")}
    if args.check:
        stale = sorted(set(present) ^ set(wanted)) + sorted(
            n for n in set(present) & set(wanted) if present[n] != wanted[n]
        )
        for name in stale:
            print(f"out of date: patches/{BACKPORTS}/{name}")
        return 1 if stale else 0
    folder.mkdir(exist_ok=True)
    for name in set(present) - set(wanted):
        (folder / name).unlink()
    for name, text in wanted.items():
        (folder / name).write_text(text)
        print(f"patches/{BACKPORTS}/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

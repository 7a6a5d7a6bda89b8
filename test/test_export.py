# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``export``: git am-able commits, authored by the user who exports them."""

import email
import email.policy
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import REPO
from executorch_device_guard.installation import installed
from executorch_device_guard.installation.installed import executorch_root, FileState
from executorch_device_guard.patchset import (
    apply_all,
    is_test,
    patched_files,
    read_series,
)
from sites import snapshot

SERIES = read_series(REPO)
AUTHOR = "Jane Doe <jane@example.com>"


def stock_files() -> Dict[str, str]:
    """Every file the series edits, as stock ExecuTorch has it.

    Python files come from the installed ExecuTorch. Build files (BUCK,
    targets.bzl, workflows) are not installed, nor are files of a backend
    the installed release does not ship, so each stands in as
    the lines its hunks expect, in order: enough for ``git am`` to apply the
    series.
    """
    files = {}
    for rel, patches in patched_files(REPO, build_files=True).items():
        text = None
        if rel.endswith(".py"):
            text = installed.read_text(executorch_root() / rel)
        if text is not None:
            # A test file goes where git am puts it (its code repeats).
            at_line = is_test(rel)
            state, _ = installed.classify(text, patches, at_line=at_line)
            if state is not FileState.STOCK:
                text = apply_all(patches, text, reverse=True, at_line=at_line)
        else:
            text = "".join(
                line for p in patches for hunk in p.hunks for line in hunk.old_lines
            )
        files[rel] = text
    return files


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True)


def stock_repo(path: Path) -> Path:
    for rel, text in stock_files().items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "stock")
    return path


def export(dest: Path, *args: str, env=None, cwd=None) -> subprocess.CompletedProcess:
    env = dict(env or os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "executorch_device_guard", "export", str(dest)]
    return subprocess.run(
        [*cmd, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def exported(tmp_path: Path) -> List[Path]:
    result = export(tmp_path / "out", "--author", AUTHOR)
    assert result.returncode == 0, result.stderr
    return sorted((tmp_path / "out").glob("*.patch"))


def test_series_applies_with_git_am(tmp_path: Path) -> None:
    mboxes = exported(tmp_path)
    assert [p.name for p in mboxes] == [e.patch_path.name for e in SERIES]
    repo = stock_repo(tmp_path / "executorch")
    am = git(repo, "am", *map(str, mboxes))
    assert am.returncode == 0, am.stdout + am.stderr

    log = git(
        repo,
        "log",
        "--reverse",
        "--format=%an <%ae>%n%B%n==END==",
        f"HEAD~{len(SERIES)}..",
    )
    commits = log.stdout.split("==END==\n")[:-1]
    assert len(commits) == len(SERIES)
    for i, commit in enumerate(commits):
        assert commit.startswith(AUTHOR + "\n")
        # Only the emitter's commit closes the issue.
        assert ("Fixes #21545" in commit) == (i == 0)
        assert ("Related to #21545" in commit) == (i > 0)
        assert "This PR was authored with Claude." in commit
    for rel, patches in patched_files(REPO, build_files=True).items():
        patched = apply_all(patches, stock_files()[rel], at_line=is_test(rel))
        assert (repo / rel).read_text() == patched
    for entry in SERIES:
        for new_file in entry.new_files:
            assert (repo / new_file).read_bytes() == (REPO / new_file).read_bytes()


@pytest.mark.parametrize("index", range(len(SERIES)))
def test_each_commit_applies_alone(tmp_path: Path, index: int) -> None:
    mbox = exported(tmp_path)[index]
    repo = stock_repo(tmp_path / "executorch")
    am = git(repo, "am", str(mbox))
    assert am.returncode == 0, am.stdout + am.stderr


def test_author_defaults_to_git_config(tmp_path: Path) -> None:
    config = tmp_path / "gitconfig"
    config.write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n")
    env = dict(os.environ, GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1")
    result = export(tmp_path / "out", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for mbox in (tmp_path / "out").glob("*.patch"):
        assert "\nFrom: Ada Lovelace <ada@example.com>\n" in mbox.read_text()


def test_refuses_without_an_author(tmp_path: Path) -> None:
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    result = export(tmp_path / "out", env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "set git config user.name and user.email, or pass --author" in result.stderr
    assert not (tmp_path / "out").exists()


def test_refuses_a_malformed_author(tmp_path: Path) -> None:
    result = export(tmp_path / "out", "--author", "nobody")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "must look like 'Name <email>'" in result.stderr


def _one_line_and_nothing_created(tmp_path: Path, before, result, *needles) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "out").exists()


def test_refuses_an_author_that_is_not_utf8(tmp_path: Path) -> None:
    """``--author $'N\\xff <a@b.c>'``: the bytes reach Python as surrogates."""
    before = snapshot(tmp_path)
    result = export(tmp_path / "out", "--author", os.fsdecode(b"N\xff <a@b.c>"))
    _one_line_and_nothing_created(
        tmp_path, before, result, "--author is not UTF-8 text", "N\\xff"
    )


def test_refuses_a_git_config_name_that_is_not_utf8(tmp_path: Path) -> None:
    config = tmp_path / "gitconfig"
    config.write_bytes(b"[user]\n\tname = J\xf6rg\n\temail = j@example.com\n")
    env = dict(os.environ, GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1")
    before = snapshot(tmp_path)
    result = export(tmp_path / "out", env=env, cwd=tmp_path)
    _one_line_and_nothing_created(
        tmp_path,
        before,
        result,
        "git config user.name is not UTF-8 text",
        "J\\xf6rg",
        "--author",
    )


def test_non_ascii_author_survives_git_am(tmp_path: Path) -> None:
    result = export(tmp_path / "out", "--author", "Zoë Ångström <zoe@example.com>")
    assert result.returncode == 0, result.stderr
    repo = stock_repo(tmp_path / "executorch")
    mbox = sorted((tmp_path / "out").glob("*.patch"))[0]
    assert git(repo, "am", str(mbox)).returncode == 0
    author = git(repo, "log", "-1", "--format=%an <%ae>").stdout.strip()
    assert author == "Zoë Ångström <zoe@example.com>"


def test_patches_carry_no_identity() -> None:
    for entry in SERIES:
        header = entry.patch_path.read_text().split("\n\n", 1)[0]
        assert not re.search(r"^(From|Date):", header, re.M), entry.patch_path.name


# At most this many words in each commit message (title and body), as export
# writes it: no PR text grows past its length at the series' second look.
WORD_LIMITS = [149, 138, 121, 120, 118, 167]


def _message(mbox: Path) -> str:
    """The commit message that ``git am`` takes from an exported mbox."""
    parsed = email.message_from_bytes(mbox.read_bytes(), policy=email.policy.default)
    subject = re.sub(r"^\[PATCH [^]]*\] ", "", " ".join(parsed["Subject"].split()))
    body = parsed.get_content().split("\n---\n", 1)[0]
    return subject + "\n\n" + body


def test_each_message_is_a_short_pr_text(tmp_path: Path) -> None:
    mboxes = exported(tmp_path)
    assert len(mboxes) == len(WORD_LIMITS)
    for mbox, limit in zip(mboxes, WORD_LIMITS):
        message = _message(mbox)
        assert len(message.split()) <= limit, (mbox.name, len(message.split()))
        headings = re.findall(r"^#+ .*$", message, re.M)
        assert headings == ["### Summary", "### Test plan"], mbox.name
        assert "This PR was authored with Claude." in message
        # Reviewers as upstream PRs name them.
        assert re.search(r"^cc @[\w-]+( @[\w-]+)*$", message, re.M), mbox.name


def test_prints_one_branch_per_commit_off_main(tmp_path: Path) -> None:
    result = export(tmp_path / "out", "--author", AUTHOR)
    assert result.returncode == 0, result.stderr
    commands = re.findall(r"^  (git switch .*)$", result.stdout, re.M)
    assert len(commands) == len(SERIES)
    repo = stock_repo(tmp_path / "executorch")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    for number, command in enumerate(commands, 1):
        ran = subprocess.run(
            command,
            shell=True,
            cwd=repo,
            capture_output=True,
            text=True,
            env=dict(
                os.environ,
                GIT_AUTHOR_NAME="t",
                GIT_AUTHOR_EMAIL="t@t",
                GIT_COMMITTER_NAME="t",
                GIT_COMMITTER_EMAIL="t@t",
            ),
        )
        assert ran.returncode == 0, command + ran.stdout + ran.stderr
        # Each branch holds main and its one commit.
        count = git(repo, "rev-list", "--count", "origin/main..HEAD").stdout
        assert count.strip() == "1", number


# The fifth attack (docs/hostile.md, "The fifth attack").


def _mailinfo(mbox: Path) -> List[str]:
    """The author and email that git am takes from a patch."""
    info = subprocess.run(
        ["git", "mailinfo", os.devnull, os.devnull],
        stdin=open(mbox, "rb"),
        capture_output=True,
        check=True,
    )
    return info.stdout.decode("utf-8").splitlines()[:2]


@pytest.mark.parametrize(
    "name",
    [
        "Smith, John",
        "A; B",
        "Jörg Müller",
        "Müller, Jörg",
        'A "B" \\ C.',
        "José (el jefe) García",
    ],
)
def test_the_author_is_written_as_it_was_checked(tmp_path: Path, name: str) -> None:
    """D7: 'Smith, John <john@x.org>' passed the check but was written
    `From: Smith` (no address: git am refused the patches), and a name
    with ';' lost its address too. The From: header now holds exactly the
    name and address checked (quoted, or RFC 2047-encoded), as git am
    reads them back."""
    result = export(tmp_path / "out", "--author", f"{name} <who@example.org>")
    assert result.returncode == 0, result.stderr
    patches = sorted((tmp_path / "out").glob("*.patch"))
    assert patches
    for mbox in patches:
        assert _mailinfo(mbox) == [f"Author: {name}", "Email: who@example.org"]


@pytest.mark.parametrize(
    "author,needle",
    [
        (
            "Jörg Müller <jörg@müller.de>",
            "--author's address 'jörg@müller.de' is not ASCII",
        ),
        ("Esc\x1b[31m <a@b.org>", "holds a control character"),
        ("x@y <a@b.org>", "holds '@': git am would take the address for it"),
        ("N" * 61 + " <a@b.org>", "is 61 bytes in UTF-8, more than 60"),
        ('Jörg "x" Müller <a@b.org>', "git am would drop those quotes"),
    ],
)
def test_an_author_that_cannot_be_written_is_refused(
    tmp_path: Path, author: str, needle: str
) -> None:
    """D7: a non-ASCII address ended in a UnicodeEncodeError traceback
    (exit 1, an empty folder left); an escape sequence in the name lost the
    address and kept a raw ESC byte. What a From: header cannot carry, or
    git am would not read back as it is, is refused in one line, nothing
    created."""
    before = snapshot(tmp_path)
    result = export(tmp_path / "out", "--author", author)
    _one_line_and_nothing_created(tmp_path, before, result, needle)
    assert "\x1b" not in result.stderr

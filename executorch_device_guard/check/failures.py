# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""How ``check`` compares two failures, and tells one to a user.

Stock and patched ExecuTorch run in two processes; the same failure may
print differently in each: a Python set in another order (each process has
its own string hashes unless they share a seed), an object's address, an
id. Two failures are *the same* when their stable parts are: the exception's
type, the step of the export that was running (child.py), the function that
raised it, and its first line with sets sorted and addresses and ids left
out (``normalised``), and so is the cause it was raised from, if any.

What a user can do about a failure that is not the patch's (a path that
does not take the model on CPU either) is told by ``way_out``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_ID = re.compile(r"\b(id|pid|tid)([=: ]+)\d+")
# A set, frozenset or dict literal without braces inside: its items in any order.
_BRACES = re.compile(r"\{([^{}]*)\}")


def _split_items(text: str) -> List[str]:
    """The top-level items of ``text``, split at commas outside quotes and
    brackets."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [item for item in items if item]


def normalised(message: str) -> str:
    """``message`` with what varies between two runs of the same failure left
    out: addresses (``0x7f...``), ids, and the order of a set's items."""
    text = _ADDRESS.sub("0x?", message)
    text = _ID.sub(lambda m: f"{m.group(1)}{m.group(2)}?", text)
    return _BRACES.sub(
        lambda m: "{" + ", ".join(sorted(_split_items(m.group(1)))) + "}", text
    )


def signature(result: Optional[Dict]) -> Optional[Tuple]:
    """What identifies an error result (child.py) across processes: type,
    step, raising function, normalised message, and the same of its cause.
    None for anything but an error."""
    if not result or result.get("outcome") != "error":
        return None
    cause = result.get("cause") or {}
    return (
        result.get("type"),
        result.get("step") or None,
        result.get("frame") or None,
        normalised(result.get("message", "")),
        cause.get("type"),
        cause.get("frame"),
        normalised(cause.get("message", "")),
    )


def cause_text(result: Optional[Dict]) -> Optional[str]:
    """``caused by TYPE: MESSAGE`` for an error raised from another, or None."""
    cause = (result or {}).get("cause")
    if not cause:
        return None
    # Addresses mean nothing once the process is gone.
    shown = {**cause, "message": normalised(cause.get("message", ""))}
    return f"caused by {error_text(shown)}"


def error_text(error: Dict) -> str:
    """``TYPE: MESSAGE``; an exception without a message is named with the
    function that raised it (a bare ``assert``)."""
    if error.get("message"):
        return f"{error['type']}: {error['message']}"
    where = f" in {error['frame']}" if error.get("frame") else ""
    return f"{error['type']} (no message){where}"


# Failures that a line of the user's own code fixes: (what the message
# says, what to do).
_WAYS_OUT = (
    (
        re.compile(r"Missing out variants: .*quantized_decomposed::"),
        "the model is quantized and ExecuTorch's quantized kernels are not "
        "registered: add 'import executorch.kernels.quantized' to the model's "
        "file (or to the function that builds it), and the emitter path takes it",
    ),
)


def way_out(result: Optional[Dict], path: str, paths: List[str]) -> str:
    """What a user can do when ``path`` does not take the model on CPU with
    stock ExecuTorch either: the fix in their own code where one is known,
    else leaving the path out (``paths``: the paths that ran)."""
    text = " ".join(
        filter(
            None,
            [
                (result or {}).get("message", ""),
                ((result or {}).get("cause") or {}).get("message", ""),
            ],
        )
    )
    for pattern, advice in _WAYS_OUT:
        if pattern.search(text):
            return advice
    others = [p for p in paths if p != path]
    if others:
        return (
            f"this is ExecuTorch's own limit, not the patch's; to check the "
            f"other paths alone, give --paths {' '.join(others)}"
        )
    return "this is ExecuTorch's own limit, not the patch's"

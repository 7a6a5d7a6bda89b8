# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What a Python file defines at its top level, read without running it.

``check --model file.py:attr`` tells a misspelt ``attr`` at once, before
torch is imported, from the names the file's source binds. A file that may
bind names that reading it cannot see (``from x import *``, a module
``__getattr__``, ``global``, ``globals()``, ``vars()``, ``exec``,
``sys.modules``, ``__dict__``) gets no answer here (None): the import then
tells. Every name the source may bind counts, so a name is never reported
missing that the import would find.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.machinery
import os
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set

# What EagerModelBase's convention asks of a class (models.py).
CONVENTION = ("get_eager_model", "get_example_inputs")

# Calls and attributes through which a module may bind names unseen.
_DYNAMIC_CALLS = {"globals", "vars", "exec", "__import__"}
_DYNAMIC_ATTRIBUTES = {"modules", "__dict__"}

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclasses.dataclass
class Names:
    """The names a module binds at its top level, its classes that follow
    EagerModelBase's convention, and what else may be a model: functions
    that take no argument, tuples (each sorted)."""

    names: Set[str]
    model_classes: List[str]
    others: List[str]


def top_level(path: Path) -> Optional[Names]:
    """The names ``path`` binds, or None when the source does not tell (it
    cannot be read or parsed, or it binds names dynamically). A package's
    ``__init__.py`` also counts the submodules in its folder."""
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    if _dynamic(tree):
        return None
    names = set(_bound(tree.body))
    if path.name == "__init__.py":
        names |= _submodules(path.parent)
    return Names(names, _model_classes(tree), _others(tree))


def _dynamic(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return True
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return True
        if isinstance(node, ast.Name) and node.id in _DYNAMIC_CALLS:
            return True
        if isinstance(node, ast.Attribute) and node.attr in _DYNAMIC_ATTRIBUTES:
            return True
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name == "__getattr__"
        for node in _module_scope(tree.body)
    )


def _module_scope(body: List[ast.stmt]) -> Iterator[ast.AST]:
    """Every node that runs in the module's own scope: not the bodies of
    functions, classes and lambdas (their names, decorators, defaults and
    bases do run there)."""
    todo: List[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, _SCOPES):
            if not isinstance(node, ast.Lambda):
                todo.extend(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                todo.extend(node.bases)
                todo.extend(node.keywords)
            else:
                todo.extend(node.args.defaults)
                todo.extend(d for d in node.args.kw_defaults if d is not None)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _bound(body: List[ast.stmt]) -> Iterator[str]:
    for node in _module_scope(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield alias.asname or alias.name.split(".")[0]
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id
        elif isinstance(node, ast.ExceptHandler) and node.name:
            yield node.name
        else:
            # Match patterns: case Point(x=a), case [*rest], case {**rest}.
            for field in ("name", "rest"):
                value = getattr(node, field, None)
                if isinstance(value, str) and type(node).__name__.startswith("Match"):
                    yield value


def _submodules(folder: Path) -> Set[str]:
    found = set()
    try:
        entries = os.listdir(folder)
    except OSError:
        return found
    suffixes = sorted(importlib.machinery.all_suffixes(), key=len, reverse=True)
    for entry in entries:
        if os.path.isdir(folder / entry):
            found.add(entry)
            continue
        for suffix in suffixes:
            if entry.endswith(suffix):
                found.add(entry[: -len(suffix)])
                break
    return found


def _model_classes(tree: ast.Module) -> List[str]:
    """The top-level classes whose body, or the body of a base class defined
    in the same file, binds every name of CONVENTION."""
    classes: Dict[str, ast.ClassDef] = {
        node.name: node for node in tree.body if isinstance(node, ast.ClassDef)
    }

    def members(name: str, seen: Set[str]) -> Set[str]:
        node = classes.get(name)
        if node is None or name in seen:
            return set()
        seen.add(name)
        found = set(_bound(node.body))
        for base in node.bases:
            if isinstance(base, ast.Name):
                found |= members(base.id, seen)
        return found

    return sorted(
        name
        for name in classes
        if not name.startswith("_") and set(CONVENTION) <= members(name, set())
    )


def _others(tree: ast.Module) -> List[str]:
    """Top-level functions that take no argument, and names assigned a tuple."""
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            required = len(args.posonlyargs) + len(args.args) - len(args.defaults)
            required += sum(d is None for d in args.kw_defaults)
            if required == 0:
                found.append(node.name)
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Tuple)
        ):
            found.append(node.targets[0].id)
    return sorted(n for n in set(found) if not n.startswith("_"))

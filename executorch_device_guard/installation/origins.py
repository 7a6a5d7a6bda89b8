# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Where Python would import a module from, without importing anything.

``import executorch.exir.emit._emitter`` imports ``executorch``, then
``executorch.exir`` from its ``__path__``, and so on. Each name goes first
to ``sys.modules``, then to each finder on ``sys.meta_path`` in turn; the
first that answers wins. The path finder, one of them, looks at each folder
(or zip file) on the path in order and takes the first regular package or
module it finds; the folders of a namespace package (no ``__init__.py``)
are merged across the whole path, and a regular package later on the path
wins over such a folder earlier on it. Another finder is an import hook (a
``.pth`` file or sitecustomize put it there, as editable installs do) that
may serve any name from anywhere.

``chain`` asks the same questions in the same order for every package on a
module's way, without running any of them: no ``__init__.py`` is executed,
so a package that changes its own ``__path__`` when it runs is not seen.
``instead`` compares the answers with an ExecuTorch package folder: each
target module must be that folder's file, each package on its way that
folder's regular package where it has an ``__init__.py`` and a namespace
package that includes that folder where it has none. (Another module of the
target's name in its own folder, an extension module or a package, is left
to the caller, which names it per file.)

Standard library only, and nothing else of this tool: ``run`` runs this
file's text in a child Python with the command's environment (``python -c
TEXT ANSWER REQUEST``), so that it sees what the command's Python sees.
"""

import importlib.machinery
import json
import os
import pkgutil
import sys


def _locations(spec):
    """A package's folders (None for a module). A namespace path of another
    finder cannot always be listed before its parent is imported: then the
    folders it was made with."""
    found = spec.submodule_search_locations
    if found is None:
        return None
    try:
        return [str(p) for p in found]
    except Exception:  # noqa: B902 - a _NamespacePath whose parent is not imported
        return [str(p) for p in getattr(found, "_path", [])]


def _on_path(name, path):
    """The path finder's answer for ``name`` among the folders ``path``."""
    portions = []
    for entry in path:
        if not isinstance(entry, str):
            continue
        try:
            finder = pkgutil.get_importer(entry or os.getcwd())
            spec = finder.find_spec(name) if finder is not None else None
        except Exception:  # noqa: B902 - an entry that no finder can read
            continue
        if spec is None:
            continue
        if spec.loader is not None:
            return spec
        portions += _locations(spec) or []
    if not portions:
        return None
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = portions
    return spec


def _named(finder):
    kind = finder if isinstance(finder, type) else type(finder)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', '?')}"


def find(name, path=None):
    """``(spec, finder)``: what ``import`` would load as ``name`` (a
    submodule of the package whose folders are ``path``), and the finder
    that said so when it is not the path finder (None: the path finder);
    ``(None, why)`` when nothing would be loaded."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__spec__", None), "sys.modules"
    for finder in list(sys.meta_path):
        if finder is importlib.machinery.PathFinder:
            spec, by = _on_path(name, sys.path if path is None else path), None
        else:
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            by = _named(finder)
            try:
                spec = find_spec(name, path)
            except Exception as e:  # noqa: B902 - the import would fail with it
                return None, f"{by} raised {type(e).__name__}"
        if spec is not None:
            return spec, by
    return None, None


def chain(name):
    """``[(name, spec, finder)]`` for each package on the way to the module
    ``name`` and for the module, as ``find`` answers; it ends where nothing
    would be loaded (spec None)."""
    parts = name.split(".")
    found = []
    path = None
    for depth in range(len(parts)):
        full = ".".join(parts[: depth + 1])
        spec, by = find(full, path)
        found.append((full, spec, by))
        if spec is None:
            break
        path = _locations(spec)
        if path is None and depth < len(parts) - 1:
            # A module, not a package: nothing below it can be imported.
            found.append((".".join(parts[: depth + 2]), None, None))
            break
    return found


def _real(path):
    return os.path.realpath(path)


def _regular(spec):
    origin = getattr(spec, "origin", None)
    return bool(spec.has_location and origin and spec.loader is not None)


def _matches(spec, folder, module_file):
    """Whether ``spec`` is what ``folder`` holds: the file ``module_file``
    (a module), or the package ``folder`` (regular where it has an
    ``__init__.py``, else a namespace package that includes it)."""
    if spec is None:
        return False
    if module_file is not None:
        return _regular(spec) and _real(spec.origin) == _real(module_file)
    if os.path.lexists(os.path.join(folder, "__init__.py")):
        return (
            _regular(spec)
            and os.path.basename(spec.origin).startswith("__init__.")
            and _real(os.path.dirname(spec.origin)) == _real(folder)
        )
    if _regular(spec):
        return False
    return _real(folder) in {_real(p) for p in _locations(spec) or []}


def _beside(spec, module_file):
    """Whether ``spec`` is another module in the target's own folder (an
    extension module, or a package folder, of its name), which the package's
    own listing finds and names (``installed.shadows``)."""
    if spec is None or not _regular(spec):
        return False
    here = _real(os.path.dirname(spec.origin))
    stem = module_file[: -len(".py")]
    return here in (_real(os.path.dirname(module_file)), _real(stem))


def _where(spec, depth, is_module):
    """What ``spec`` loads (a file, a package's folder, or a namespace
    package's first folder), how (``module``, ``package``, ``namespace``), and
    the ``executorch`` folder it lies in when the path finder found it."""
    if spec is None:
        return None, None, None
    if _regular(spec):
        origin = str(spec.origin)
        if is_module:
            folder, kind, up = os.path.dirname(origin), "module", depth - 1
            where = origin
        else:
            folder = where = os.path.dirname(origin)
            kind, up = "package", depth
    else:
        folders = _locations(spec) or []
        if not folders:
            return str(getattr(spec, "origin", None)), "module", None
        folder = where = folders[0]
        kind, up = "namespace", depth
    for _ in range(up):
        folder = os.path.dirname(folder)
    return where, kind, folder


def instead(root, rels):
    """The first package or module on the way to a target that Python would
    not import from the ExecuTorch package folder ``root``, as a dict:
    ``module`` (its name), ``where`` (what is loaded instead; None: nothing),
    ``kind``, ``portion`` (the ``executorch`` folder that holds it, when the
    path finder found it) and ``finder`` (the import hook or ``sys.modules``
    that answered, or None). None when every one comes from ``root``.
    ``rels``: the targets, paths of ``.py`` files relative to ``root``."""
    for rel in rels:
        parts = rel[: -len(".py")].split("/")
        found = chain(".".join(["executorch", *parts]))
        for depth, (name, spec, by) in enumerate(found):
            last = depth == len(parts)
            folder = os.path.join(root, *parts[:depth])
            module_file = os.path.join(root, rel) if last else None
            if last and _beside(spec, module_file):
                break  # in the target's own folder: the caller looks there
            if not _matches(spec, folder, module_file):
                where, kind, portion = _where(spec, depth, last)
                return {
                    "module": name,
                    "where": where,
                    "kind": kind,
                    "portion": portion if by is None else None,
                    "finder": by,
                }
    return None


def _main(answer, request):
    """For ``run``: ``instead`` for each first entry of the path in turn
    (null: the path as it is, the current folder first; a folder: in its
    place, as ``python FILE`` puts the script's folder), the first answer
    that is not None, with the entry, written to ``answer`` as JSON."""
    asked = json.loads(request)
    path0 = list(sys.path[:1])
    found = None
    for first in asked["firsts"]:
        if first is not None and path0 and not getattr(sys.flags, "safe_path", False):
            sys.path[0] = first
        found = instead(asked["root"], asked["rels"])
        if path0:
            sys.path[0] = path0[0]
        if found is not None:
            found["first"] = first
            break
    with open(answer, "w") as f:
        json.dump(found, f)


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])

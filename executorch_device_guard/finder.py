# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The import hook: ExecuTorch's modules served with the fix applied.

``install()`` puts a ``Finder`` first on ``sys.meta_path``. For a module
that the series changes (its *targets*: what ``apply`` installs, backports
included), the finder asks the rest of ``sys.meta_path`` for the spec Python
would use. Where that is a source file to which the change applies strictly
(``patchset.judge``: no fuzz, release ranges), the module runs the changed
text: compiled in memory, ``__file__`` unchanged, no bytecode written. A text
that already holds the fix, or a target whose change is not for that
release, loads as it is, silently. Anything else (a text the change does not
fit, an extension module, a zip) loads as Python would, with one line on
stderr per file per process.

Tracebacks read a frame's source line from the file its code names; Python
3.10 to 3.12 never ask ``linecache`` for it. So the changed code names a copy
of its text in the tool's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``,
then ``executorch-device-guard/<hash>/executorch/...``), written once,
atomically, and ``linecache`` holds the text under that name and the
installed file's. Where the copy cannot be written the fix still runs, and
its code names no file (``<FILE, changed by executorch-device-guard>``):
never the stock file, whose lines would be shown for the changed ones.

``EXECUTORCH_DEVICE_GUARD=off`` in the environment keeps the finder off;
``EXECUTORCH_DEVICE_GUARD_SERIES=DIR`` serves ``DIR/patches/series`` instead
of the tool's own. Until a target is imported, this module has imported only
``os`` and ``sys``, and every other import costs the finder one dict lookup.
"""

import os
import sys

import _thread

OFF = "EXECUTORCH_DEVICE_GUARD"
SERIES = "EXECUTORCH_DEVICE_GUARD_SERIES"

# The attribute that marks the finder, whichever copy of this module made it.
MARKER = "executorch_device_guard_finder"
# What ``check``'s children report for a target loaded without the finder.
MISSED = "loaded without the import hook"

_PREFIX = "executorch."


class Finder:
    """Serves the changed text of the series' target modules.

    ``served``: for each target module found, what was done, by its name:
    ``"changed"``, or the state that left it as Python loads it
    (``patchset.FileState``'s value) and why; ``missed()`` names those it
    never saw."""

    executorch_device_guard_finder = True

    def __init__(self):
        self.served = {}
        self._targets = None
        self._said = set()
        # (thread, name) being looked up: a hook of another tool that looks
        # the module up again (importlib.util.find_spec, as ddtrace's does)
        # reaches this finder again, and that inner call decides.
        self._finding = {}

    def find_spec(self, name, path=None, target=None):
        if not name.startswith(_PREFIX):
            return None
        if self._targets is None:
            try:
                self._targets = _targets()
            except Exception as e:  # never break an import
                self._targets = {}
                _say(f"the fix is off: its series cannot be read ({e})")
        found = self._targets.get(name)
        if found is None:
            return None
        key = (_thread.get_ident(), name)
        outer = key not in self._finding
        if outer:
            self._finding[key] = False
        try:
            spec = _others(name, path, target)
        finally:
            decided = self._finding.pop(key) if outer else False
        if spec is not None and not decided:
            try:
                self._decide(spec, *found)
            except Exception as e:  # never break an import
                _say(f"{spec.origin} loads as installed, without the fix: {e!r}")
            if not outer:
                self._finding[key] = True
        return spec

    def invalidate_caches(self):
        pass

    def missed(self):
        """The target modules loaded in this process that this finder did
        not serve: imported before it was on (by a ``.pth`` file), or where
        deciding failed."""
        targets = self._targets or _targets()  # raises where none can be read
        return [n for n in targets if n in sys.modules and n not in self.served]

    def _decide(self, spec, rel, patches):
        from executorch_device_guard import patchset

        state, why, text, _ = _judge(spec, rel, patches)
        if state is patchset.FileState.STOCK:
            _serve(spec, rel, text)
            self.served[spec.name] = ("changed", "")
            return
        _forget(spec)
        self.served[spec.name] = (state.value, why)
        if state in (patchset.FileState.PATCHED, patchset.FileState.NOT_FOR_RELEASE):
            return
        where = spec.origin or spec.name
        if where not in self._said:
            self._said.add(where)
            _say(f"{where} loads as installed, without the fix: {why}")


def install():
    """Turns the finder on in this process, first on ``sys.meta_path``, and
    returns it; once only, whichever copy of this module asks; None when
    ``EXECUTORCH_DEVICE_GUARD=off``."""
    if os.environ.get(OFF) == "off":
        return None
    for finder in sys.meta_path:
        if getattr(finder, MARKER, False):
            return finder
    finder = Finder()
    sys.meta_path.insert(0, finder)
    return finder


def verdict(root, rel, patches):
    """What the finder does with the target ``rel`` of the ExecuTorch
    package folder ``root``, found as Python would find it there: its
    ``patchset.FileState``, why (for a stock or patched file, the form of
    the change that fits it: ``form: upstream``), and the text of its other
    state (a patched file's stock text) where Python loads the file at
    ``root/rel``, else ""; None where no file is found. Reads the file,
    writes nothing, runs none of it."""
    folder = os.path.dirname(rel)
    if os.path.basename(rel) == "__init__.py":
        folder = os.path.dirname(folder)
    spec = _others(_module_name(rel), [os.path.join(root, folder)], None)
    if spec is None:
        return None
    state, why, other, form = _judge(spec, rel, patches)
    if form and not why:
        why = f"form: {form}"
    expected = os.path.join(root, *rel.split("/"))
    if spec.origin != expected:
        other = ""
        if why:
            why = f"Python loads {spec.origin or spec.name} instead: {why}"
    return state, why, other


def _targets():
    """Module name -> (path in the package, its patches), for the Python
    modules that the series, as ``apply`` installs it, changes."""
    from pathlib import Path

    from executorch_device_guard import data_root, patchset

    root = Path(os.environ[SERIES]) if os.environ.get(SERIES) else data_root()
    found = patchset.patched_files(root, install=True)
    return {_module_name(rel): (rel, patches) for rel, patches in found.items()}


def _module_name(rel):
    """``exir/emit/_emitter.py``: ``executorch.exir.emit._emitter``."""
    parts = ["executorch", *rel[: -len(".py")].split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _others(name, path, target):
    """The spec that the rest of ``sys.meta_path`` finds."""
    for finder in list(sys.meta_path):
        if getattr(finder, MARKER, False):
            continue
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is not None:
            spec = find_spec(name, path, target)
            if spec is not None:
                return spec
    return None


# Larger than any source file of ExecuTorch's (the emitter is 80 kB).
MAX_SOURCE = 64 << 20


def _judge(spec, rel, patches):
    """The state of the file ``spec`` loads, why, its changed text (when
    stock) and the form of the change that fits it."""
    import stat
    from importlib.machinery import SourceFileLoader

    from executorch_device_guard import patchset

    unknown = patchset.FileState.UNKNOWN
    origin = spec.origin or ""
    if type(spec.loader) is not SourceFileLoader or not origin.endswith(".py"):
        loader = type(spec.loader).__name__
        if loader == "zipimporter":
            return unknown, "it is inside a zip file", "", ""
        return unknown, f"it is not a source file ({loader} loads it)", "", ""
    if not origin.endswith(os.sep + rel.replace("/", os.sep)):
        return unknown, f"it is not at executorch/{rel}", "", ""
    package = origin[: -len(rel) - 1]
    version, why = _release(package)
    if why:
        return unknown, why, "", ""
    try:
        st = os.stat(origin)
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read
            return unknown, f"{rel} is not a regular file", "", ""
        if st.st_size > MAX_SOURCE:
            why = f"{rel} is {st.st_size} bytes, more than any file it can be"
            return unknown, why, "", ""
        with open(origin, encoding="utf-8", newline="") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        return unknown, f"it cannot be read ({e.__class__.__name__}: {e})", "", ""
    verdict = patchset.judge(patches, version, text)
    why = verdict.reason
    if verdict.state is unknown and patches[0].for_release(version):
        why = f"the change does not fit it ({why})"
    return verdict.state, why, verdict.other, verdict.form


def _release(package):
    """The release of the ExecuTorch in the folder ``package``, as the tool
    reads it: the ``Version`` of the one ``executorch-*.dist-info`` beside
    it, checked against ``executorch/version.py``; (None, "") where none
    describes it (the text decides); (None, why) where they disagree."""
    import re

    from executorch_device_guard.patchset import release_key

    site = os.path.dirname(package)
    try:
        infos = [n for n in os.listdir(site) if _is_dist_info(n)]
    except OSError:
        infos = []
    if len(infos) != 1:
        return None, ""
    meta = os.path.join(site, infos[0], "METADATA")
    version = _header(meta, "Version")
    if version is None:
        return None, ""
    try:
        with open(os.path.join(package, "version.py"), encoding="utf-8") as f:
            said = re.search(
                r"""^__version__\s*=\s*["']([^"'\n]*)["']""", f.read(), re.M
            )
    except (OSError, UnicodeDecodeError):
        said = None
    there = said.group(1) if said else None
    if there is not None and release_key(there) != release_key(version):
        return None, (
            f"{package}/version.py says {there!r}, but {meta} says {version!r}: "
            "which release it is cannot be told; reinstall ExecuTorch"
        )
    return version, ""


def _is_dist_info(name):
    lower = name.lower()
    return lower.startswith("executorch-") and lower.endswith(".dist-info")


def _header(path, key):
    """The first ``key:`` header of a METADATA file, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                field, _, value = line.partition(":")
                if field.strip().lower() == key.lower():
                    return value.strip() or None
    except OSError:
        pass
    return None


def _serve(spec, rel, text):
    """Makes ``spec`` load ``text`` in place of its file's."""
    import linecache

    # Without a copy, a name that is no file: never the stock file's lines.
    shown = _copy_for_tracebacks(text, rel) or _no_file(spec.origin)
    lines = text.splitlines(keepends=True)
    for name in (shown, spec.origin):
        # No modification time: linecache.checkcache keeps the entry.
        linecache.cache[name] = (len(text), None, lines, name)
    spec.loader = _Changed(spec.loader, text, shown)


def _no_file(origin):
    return f"<{origin}, changed by executorch-device-guard>"


def _forget(spec):
    """Drops the changed text that an earlier import put in ``linecache``
    for this file (a reload after the file changed)."""
    import linecache

    for name in (spec.origin, _no_file(spec.origin)):
        entry = linecache.cache.get(name)
        if entry is not None and len(entry) == 4 and entry[1] is None:
            del linecache.cache[name]


class _Changed:
    """The loader of a changed module: Python's own loader (``loader``) for
    all but its code, which is ``text`` compiled under the name ``shown``."""

    def __init__(self, loader, text, shown):
        self.loader = loader
        self.text = text
        self.shown = shown

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(self.get_code(module.__name__), module.__dict__)

    def get_code(self, fullname):
        return compile(self.text, self.shown, "exec", dont_inherit=True)

    def get_source(self, fullname):
        return self.text

    def __getattr__(self, name):  # get_filename, is_package, get_data, ...
        loader = self.__dict__.get("loader")  # none yet: copy, pickle
        if loader is None:
            raise AttributeError(name)
        return getattr(loader, name)


def cache_folder():
    """The tool's own cache folder, the one place the finder writes."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return os.path.join(base, "executorch-device-guard")


def _copy_for_tracebacks(text, rel):
    """The path of a file that holds ``text`` (written if it is not there),
    or None where none can be written."""
    import hashlib
    import tempfile

    data = text.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = os.path.join(cache_folder(), digest, "executorch", *rel.split("/"))
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return path
    except OSError:
        pass
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        return None
    return path


def _say(line):
    try:
        print(f"executorch-device-guard: {line}", file=sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass  # no stderr: the import goes on

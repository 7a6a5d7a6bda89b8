# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Turns the fix on in every Python that has this folder on ``PYTHONPATH``.

Python imports ``sitecustomize`` at start, from the first folder on its path
that holds one. This one turns the import hook on
(``executorch_device_guard.finder``), loading the tool from the package
folder around this file without adding it to ``sys.path``, then imports the
``sitecustomize`` that Python would have found without this folder, as
``ddtrace-run``'s bootstrap does. Children inherit ``PYTHONPATH``, so the
fix reaches every Python process of a command. ``EXECUTORCH_DEVICE_GUARD=off``
keeps it off; a Python older than 3.10 says so in one line and runs stock.
Written to parse on any Python: it must not break an old one's start.
"""

import os
import sys

_NAME = "executorch_device_guard"


def _turn_on():
    if os.environ.get("EXECUTORCH_DEVICE_GUARD") == "off":
        return
    if sys.version_info < (3, 10):
        sys.stderr.write(
            "executorch-device-guard: Python %d.%d is older than 3.10, which the "
            "fix needs: %s runs ExecuTorch without it\n"
            % (sys.version_info[0], sys.version_info[1], sys.executable)
        )
        return
    if _NAME not in sys.modules:
        import importlib.util

        folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        spec = importlib.util.spec_from_file_location(
            _NAME,
            os.path.join(folder, "__init__.py"),
            submodule_search_locations=[folder],
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = package
        try:
            spec.loader.exec_module(package)
        except BaseException:
            del sys.modules[_NAME]
            raise
    from executorch_device_guard.finder import install

    install()


def _chain():
    """Imports the next ``sitecustomize`` on the path, if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    places = [i for i, p in enumerate(sys.path) if _same(p, here)]
    for at in reversed(places):
        del sys.path[at]
    this = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401
    except ImportError as e:
        if getattr(e, "name", "sitecustomize") != "sitecustomize":  # 2.7: no name
            raise
        sys.modules["sitecustomize"] = this  # none other: this one stays
    finally:
        for at in places:
            sys.path.insert(at, here)


def _same(path, folder):
    try:
        return os.path.samefile(path or os.curdir, folder)
    except (OSError, ValueError):
        return False


try:
    _turn_on()
except Exception as e:  # a broken tool must not stop Python's start
    sys.stderr.write(
        "executorch-device-guard: the fix is off in this process: %s: %s\n"
        % (e.__class__.__name__, e)
    )
_chain()

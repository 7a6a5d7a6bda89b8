# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""What ``apply``'s startup files run at every start of Python.

``executorch_device_guard.pth`` (Python 3.10 to 3.14) and its PEP 829 form,
``executorch_device_guard.start`` (3.15 and later), both call ``turn_on``:
the import hook goes first on ``sys.meta_path`` (``finder.install``, which
``EXECUTORCH_DEVICE_GUARD=off`` keeps off). Until a target is imported, this
costs the start of Python the import of this package, this module and
``finder``, which import only ``os``, ``sys`` and ``_thread``.
"""

import sys

# Python may read the same site-packages twice (a venv's lib64 -> lib link).
_tried = False


def turn_on():
    """Turns the fix on in this process, once; a broken tool says so in one
    line and lets Python start."""
    global _tried
    if _tried:
        return
    _tried = True
    try:
        from executorch_device_guard.finder import install

        install()
    except Exception as e:
        try:
            print(
                "executorch-device-guard: the fix is off in this process: "
                f"{e.__class__.__name__}: {e}",
                file=sys.stderr,
            )
        except (OSError, ValueError, AttributeError):
            pass  # no stderr: Python starts all the same

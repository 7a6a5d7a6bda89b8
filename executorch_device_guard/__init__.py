# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Guard ExecuTorch's export against device-resident tensor data (#21545)."""

from __future__ import annotations

# The import hook (``finder``) loads this package into every Python that
# ``run`` or ``apply`` reaches: it imports nothing at start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__version__ = "0.3.0"


def data_root() -> Path:
    """The folder holding ``patches/`` and the new upstream files.

    A wheel carries them in ``_upstream``; a source checkout has them beside
    this package.
    """
    from pathlib import Path

    here = Path(__file__).resolve().parent
    bundled = here / "_upstream"
    return bundled if (bundled / "patches").is_dir() else here.parent

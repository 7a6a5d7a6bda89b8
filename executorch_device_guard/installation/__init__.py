# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The installed ExecuTorch: ``status``, ``apply`` and ``revert`` in its
package folder; ``run``, which turns the import hook on for one command; and
what the hook serves there (``served``), which ``check`` refuses on too."""

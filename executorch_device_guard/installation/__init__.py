# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The installed ExecuTorch: ``status``, ``apply`` and ``revert`` in its
package folder, and the patched overlay that ``run`` and ``check`` read
instead, which changes nothing there."""

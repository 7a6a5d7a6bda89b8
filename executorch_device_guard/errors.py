# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The one exception a user sees: a line naming the problem and the way out."""


class GuardError(Exception):
    """A refusal or a failure the user can act on; the CLI prints it and exits 2."""

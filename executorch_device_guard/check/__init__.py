# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``check``: the stock-versus-patched export matrix, each export in a child
process of a warm parent, and its verdict."""

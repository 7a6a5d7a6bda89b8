# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

import sys

try:
    from executorch_device_guard.cli import main
except KeyboardInterrupt:
    # Ctrl-C while Python imports the CLI: one line, as everywhere else.
    print("executorch-device-guard: error: interrupted (SIGINT).", file=sys.stderr)
    sys.exit(130)

sys.exit(main())

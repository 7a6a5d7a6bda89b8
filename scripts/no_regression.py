# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""ExecuTorch's own emitter tests, stock versus patched, side by side.

    .venv/bin/python scripts/no_regression.py

Runs the installed ExecuTorch's exir/emit/test/test_emit.py twice, each time
from an overlay (stock, then patched), and prints both pytest summaries. Exits
0 when they match. Not part of CI (about 4 minutes on 2 cores).
"""

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from executorch_device_guard.runner import Emitters, EMITTERS  # noqa: E402

TEST = "executorch/exir/emit/test/test_emit.py"


def main() -> int:
    summaries = {}
    with Emitters() as emitters:
        for emitter in EMITTERS:
            path = emitters.paths[emitter] / TEST
            proc = emitters.run(
                emitter,
                ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                timeout=1800,
            )
            counts = re.findall(
                r"^=*\s*(\d+ \w+(?:, \d+ \w+)*) in [\d.]+s", proc.stdout, re.M
            )
            summaries[emitter] = counts[-1] if counts else f"exit {proc.returncode}"
            print(f"{emitter:7} emitter: {summaries[emitter]}", flush=True)
    same = summaries["stock"] == summaries["patched"]
    print("same result" if same else "DIFFERENT results")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""ExecuTorch's own tests of the patched files, stock versus patched.

    .venv/bin/python scripts/no_regression.py [TEST ...]

Runs each of the installed ExecuTorch's test modules twice, where they are
installed: stock (the import hook off), then patched (the hook on), and
prints both pytest summaries. Exits 0 when they
match for every module. Default: the tests of every Python file the series
patches that the release ships them for (the emitter, PropagateDevicePass, the
bundled program, XNNPACK and Vulkan serialization), and of the LLM custom ops,
whose Python files only the backport patches (patched means what ``apply``
installs for those). Not part of CI (about 20 minutes).
"""

import re
import sys
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from executorch_device_guard.check.runner import Emitters, EMITTERS  # noqa: E402
from executorch_device_guard.installation.installed import (  # noqa: E402
    executorch_root,
)

TESTS = [
    "exir/emit/test/test_emit.py",
    "exir/tests/test_propagate_device_pass.py",
    "devtools/bundled_program/test/test_bundle_data.py",
    "devtools/bundled_program/test/test_config.py",
    "devtools/bundled_program/test/test_end2end.py",
    "backends/xnnpack/test/serialization/test_serialization.py",
    "backends/vulkan/test/test_serialization.py",
]
# The custom ops' own tests (test_preprocess_custom_ops.py defines the
# preprocess ops in Python, which the library already has: pytest.ini leaves it
# out too). The series changes their library in C++, which
# scripts/compare_custom_ops.py compares built stock and changed; here they
# run against the backport.
BACKPORT_TESTS = [
    "extension/llm/custom_ops/test_update_cache.py",
    "extension/llm/custom_ops/test_sdpa_with_kv_cache.py",
    "extension/llm/custom_ops/test_quantized_sdpa.py",
    "extension/llm/custom_ops/test_update_cross_attn_cache.py",
    "extension/llm/custom_ops/test_gated_delta.py",
    "extension/llm/custom_ops/test_quantized_moe.py",
]


def main(tests: List[str]) -> int:
    different = []
    for upstream in (True, False):
        group = [t for t in tests if (t in BACKPORT_TESTS) != upstream]
        if group:
            different += compare(group, upstream)
    print("DIFFERENT results: " + ", ".join(different) if different else "same results")
    return 1 if different else 0


def compare(tests: List[str], upstream: bool) -> List[str]:
    different = []
    with Emitters(upstream=upstream) as emitters:
        for test in tests:
            summaries = {}
            for emitter in EMITTERS:
                path = executorch_root() / test
                proc = emitters.run(
                    emitter,
                    ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                    timeout=1800,
                )
                counts = re.findall(
                    r"^=*\s*(\d+ [\w ]+?(?:, \d+ [\w ]+?)*) in [\d.]+s",
                    proc.stdout,
                    re.M,
                )
                summaries[emitter] = counts[-1] if counts else f"exit {proc.returncode}"
                print(f"{test}: {emitter:7} {summaries[emitter]}", flush=True)
            if summaries["stock"] != summaries["patched"]:
                different.append(test)
    return different


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or TESTS + BACKPORT_TESTS))

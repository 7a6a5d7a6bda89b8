"""What starts threads in a warm parent on a CUDA machine (issue 27).

    python gpu/thread_probe.py MODULE[:FUNCTION]...

Imports check's warm-parent preload list (runner.EXPORT_PRELOAD) one module at
a time in this interpreter (and calls FUNCTION where given, as a warm parent
does) and prints, after each, the seconds it took and the process's native
threads by name (/proc/self/task/*/comm); then the same for
torch.cuda.is_available() and a first CUDA tensor.
"""

import os
import sys
import time


def threads():
    names = []
    for tid in sorted(os.listdir("/proc/self/task"), key=int):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            names.append("?")
    return names


def step(label, fn):
    start = time.perf_counter()
    fn()
    took = time.perf_counter() - start
    names = threads()
    print(f"{took:7.2f} s  {len(names):2d} threads  {label}  {names}", flush=True)


if __name__ == "__main__":
    import importlib

    step("start", lambda: None)
    def preload(name):
        module, _, function = name.partition(":")
        try:
            imported = importlib.import_module(module)
        except ImportError as e:  # an optional preload ('?') this torch lacks
            print(f"          missing: {e}")
            return
        if function:
            getattr(imported, function)()

    for name in sys.argv[1:]:
        step(f"import {name}", lambda name=name: preload(name))
    import torch

    step("torch.cuda.is_available()", torch.cuda.is_available)
    step("torch.ones(1, device='cuda')", lambda: torch.ones(1, device="cuda"))

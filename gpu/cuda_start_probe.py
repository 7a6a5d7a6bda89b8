"""Which call starts CUDA (its driver thread) while a module is imported.

    PYTORCH_NVML_BASED_CUDA_CHECK=1 python gpu/cuda_start_probe.py MODULE[:FUNCTION]...

Imports each MODULE with a profile hook that, after every call into C, looks
at the process's native threads (/proc/self/task); the first call after which
there are more than after ``import torch`` is printed with its Python stack, then the probe stops.
Also prints the stack of each call to torch's CUDA entry points that start
CUDA (torch._C._cuda_init, torch._C._cuda_getDeviceCount) while importing.
"""

import os
import sys
import traceback


def main(modules):
    import importlib

    import torch

    for name in ("_cuda_init", "_cuda_getDeviceCount"):
        real = getattr(torch._C, name, None)
        if real is None:  # a CPU build of torch
            continue

        def spy(*args, _real=real, _name=name):
            print(f"--- torch._C.{_name}() called from:", flush=True)
            traceback.print_stack(sys._getframe(1), limit=25)
            return _real(*args)

        setattr(torch._C, name, spy)
    start = len(os.listdir("/proc/self/task"))
    print(f"threads after import torch: {start}")
    found = []

    def hook(frame, event, arg):
        if found or event not in ("c_return", "c_exception", "return"):
            return
        if len(os.listdir("/proc/self/task")) > start:
            found.append(1)
            what = getattr(arg, "__qualname__", repr(arg)) if event != "return" else ""
            print(f"--- a second thread after {event} {what} in:", flush=True)
            traceback.print_stack(frame, limit=40)
            sys.stdout.flush()

    for module in modules:
        name, _, function = module.partition(":")
        sys.setprofile(hook)
        try:
            try:
                imported = importlib.import_module(name)
            except ImportError as e:  # an optional preload this torch lacks
                print(f"missing: {e}")
                continue
            if function:  # a warm parent's preload step module:function
                getattr(imported, function)()
        finally:
            sys.setprofile(None)
        print(f"threads after import {module}: {len(os.listdir('/proc/self/task'))}")
        if found:
            break


if __name__ == "__main__":
    main(sys.argv[1:])

# Atomically swap a folder inside the package with a symlink to an outside copy, in a loop.
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE = 2
a, b = sys.argv[1].encode(), sys.argv[2].encode()
end = time.time() + float(sys.argv[3])
n = 0
while time.time() < end:
    if libc.renameat2(-100, a, -100, b, RENAME_EXCHANGE) != 0:
        print("err", ctypes.get_errno()); break
    n += 1
print("swaps", n)

# Relabel an installed ExecuTorch dist-info as another version, consistently:
# folder name, METADATA Version, and RECORD (paths and METADATA's sha256).
import base64, hashlib, os, re, sys
sp, old, new = sys.argv[1], sys.argv[2], sys.argv[3]
od = os.path.join(sp, f"executorch-{old}.dist-info"); nd = os.path.join(sp, f"executorch-{new}.dist-info")
os.rename(od, nd)
mp = os.path.join(nd, "METADATA")
m = open(mp, "rb").read().replace(f"\nVersion: {old}\n".encode(), f"\nVersion: {new}\n".encode())
open(mp, "wb").write(m)
h = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(m).digest()).rstrip(b"=").decode()
rp = os.path.join(nd, "RECORD")
out = []
for line in open(rp).read().splitlines():
    line = line.replace(f"executorch-{old}.dist-info/", f"executorch-{new}.dist-info/")
    if line.startswith(f"executorch-{new}.dist-info/METADATA,"):
        line = f"executorch-{new}.dist-info/METADATA,{h},{len(m)}"
    out.append(line)
open(rp, "w").write("\n".join(out) + "\n")

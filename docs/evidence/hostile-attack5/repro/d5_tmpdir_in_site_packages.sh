#!/bin/bash
# D5: run writes into site-packages when TMPDIR is site-packages itself, ExecuTorch's dist-info,
# or (bind mount) the package itself seen under another path; a kill -9 leaves the overlay there.
source /work/attack5/repro/common.sh r5
python3 /work/attack5/victims/snap.py $SPV > /tmp/d5a
TMPDIR=$SPV/executorch-1.5.1.dist-info $T run -- sh -c 'echo "overlay at: $PYTHONPATH"' 2>/dev/null
TMPDIR=$SPV $T run -- sh -c 'echo "overlay at: $PYTHONPATH"' 2>/dev/null
python3 /work/attack5/victims/snap.py $SPV > /tmp/d5b
echo "--- changes to site-packages after two runs (mtimes of site-packages and the dist-info):"; diff /tmp/d5a /tmp/d5b
echo "--- kill -9 of run leaves its overlay inside the dist-info:"
TMPDIR=$SPV/executorch-1.5.1.dist-info setsid $T run -- sleep 3 2>/dev/null & RP=$!
sleep 1.5; RUNPID=$(pgrep -P $RP -f "executorch-device-guard run" || echo $RP); kill -9 $RUNPID $RP 2>/dev/null; sleep 2.5
ls $SPV/executorch-1.5.1.dist-info
echo "--- bind mount of the package (needs root, private mount namespace):"
unshare -m bash -c "mount --make-rprivate /; mkdir -p /tmp/d5bm; mount --bind $SPV/executorch/exir /tmp/d5bm;
  TMPDIR=/tmp/d5bm $T run -- sh -c 'ls $SPV/executorch/exir | grep device-guard' 2>/dev/null"

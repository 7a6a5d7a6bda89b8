#!/bin/bash
# Run inside: unshare -m bash fulldisk.sh
mount --make-rprivate /
mkdir -p /tmp/fullfs && mount -t tmpfs -o size=200m tmpfs /tmp/fullfs
cp -a /work/attack5/victims/v6 /tmp/fullfs/v
P=/tmp/fullfs/v/bin/python
SP=/tmp/fullfs/v/lib/python3.11/site-packages
$P -m executorch_device_guard status | tail -1
python3 /work/attack5/victims/snap.py $SP/executorch > /tmp/fd_before
for kb in 0 4 8 12 16 20 24 28 32 40 48 64 80 100 120 140 160 200 300; do
  rm -f /tmp/fullfs/fill /tmp/fullfs/fill2
  dd if=/dev/zero of=/tmp/fullfs/fill bs=4k 2>/dev/null
  # free kb kilobytes
  if [ $kb -gt 0 ]; then truncate -s -${kb}K /tmp/fullfs/fill; fi
  out=$($P -m executorch_device_guard apply 2>&1); rc=$?
  echo "free=${kb}K apply rc=$rc: $(echo "$out" | tail -1 | cut -c1-200) [lines=$(echo "$out" | wc -l)]"
  echo "$out" | grep -q Traceback && echo "$out" | tail -5
  st=$($P -m executorch_device_guard status 2>&1 | tail -1 | cut -c1-120); echo "   status: $st"
  find $SP/executorch -name "*.tmp" | head -3
  rm -f /tmp/fullfs/fill
  $P -m executorch_device_guard revert >/dev/null 2>&1
done
python3 /work/attack5/victims/snap.py $SP/executorch > /tmp/fd_after
diff /tmp/fd_before /tmp/fd_after | head
umount /tmp/fullfs

#!/bin/bash
# D8: errors that span lines; a script with a bad or CRLF #! line is "command not found".
T=/work/attack5/tool/.venv/bin/executorch-device-guard
export TMPDIR=/tmp/mytmp; mkdir -p $TMPDIR; cd /tmp
$T run -- $'no\nsuch' 2>&1 | cat -A; echo "rc=${PIPESTATUS[0]}"
$T check --model $'/tmp/no\nsuch.py:make' 2>&1 | cat -A; echo "rc=${PIPESTATUS[0]}"
printf '#!/bin/sh\r\necho hi\r\n' > /tmp/d8_crlf.sh; chmod +x /tmp/d8_crlf.sh
$T run -- /tmp/d8_crlf.sh 2>&1 | grep -v "note: no process"; echo "rc=${PIPESTATUS[0]}"

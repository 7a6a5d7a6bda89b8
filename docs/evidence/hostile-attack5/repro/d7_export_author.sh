#!/bin/bash
# D7: export --author: a comma or ';' in the name ("Smith, John <john@x.org>") passes the
# 'Name <email>' check but the patches get "From: Smith" (no address: git mailinfo reads an
# empty author and email, so git am refuses them), exit 0. A non-ASCII address gives a traceback.
T=/work/attack5/tool/.venv/bin/executorch-device-guard
rm -rf /tmp/d7a /tmp/d7c
$T export /tmp/d7c --author 'Smith, John <john@x.org>' >/dev/null; echo "rc=$?"
grep -a -m1 '^From: ' /tmp/d7c/0001*
git mailinfo /tmp/d7msg /tmp/d7patch < /tmp/d7c/0001* | head -2
$T export /tmp/d7a --author 'Jörg Müller <jörg@müller.de>' 2>&1 | tail -2; echo "rc=${PIPESTATUS[0]}"

#!/usr/bin/env bash
# Creates .venv with the pinned test environment (constraints.txt) and this
# project installed in it, editable. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet --constraint constraints.txt \
    torch executorch pytest flatbuffers --editable .
.venv/bin/executorch-device-guard --version
# ExecuTorch's own linters, for scripts/lint_upstream.py and its test.
python3 -m venv .lintvenv
.lintvenv/bin/python -m pip install --quiet --requirement scripts/lint-requirements.txt

#!/usr/bin/env bash
# Creates .venv with the pinned test environment (constraints.txt) and this
# project installed in it, editable. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
step() { echo "setup: $* ($((SECONDS - start)) s)"; }
step "creating .venv with $(python3 --version)"
python3 -m venv .venv
step "updating pip"
.venv/bin/python -m pip install --quiet --upgrade pip
step "installing torch, ExecuTorch, pytest, pytest-xdist, flatbuffers, transformers (constraints.txt) and this project; about a minute the first time"
.venv/bin/python -m pip install --quiet --constraint constraints.txt \
    torch executorch pytest pytest-xdist flatbuffers transformers --editable .
step "installing ExecuTorch's own linters into .lintvenv (scripts/lint-requirements.txt)"
python3 -m venv .lintvenv
.lintvenv/bin/python -m pip install --quiet --requirement scripts/lint-requirements.txt
step "done"
.venv/bin/executorch-device-guard --version

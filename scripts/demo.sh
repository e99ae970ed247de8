#!/usr/bin/env bash
# The main job: a real GRPO-style RL run on CPU tracked by trackmux (spool + console +
# file), then a self-contained HTML report. Sets up its own virtualenv on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[demo]'
exec .venv/bin/trackmux demo "$@"

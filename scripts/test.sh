#!/usr/bin/env bash
# The test command: sets up everything a fresh machine needs, then runs every tox env
# (core, reliability, each backend against its real library, integration with a real
# mlflow server, the real verl SFT run, the report in headless Chromium, docs, lint, type).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the report browser test will fail" >&2
fi
python3 -m pip install --quiet --disable-pip-version-check "tox>=4.11"
rm -rf .tox/junit
status=0
python3 -m tox run-parallel --parallel 2 --parallel-no-spinner "$@" || status=$?
python3 scripts/summarize_tests.py .tox/junit || status=1
exit $status

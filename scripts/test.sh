#!/usr/bin/env bash
# The test command: sets up everything a fresh machine needs, then runs every tox env
# (core, reliability, each backend against its real library, integration with a real
# mlflow server, the real verl SFT run, the report in headless Chromium, docs, lint, type).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the browser tests (tox envs report, ui," \
            "postgres) will be skipped or fail" >&2
fi
# The team store's tests (tox env postgres) start a private PostgreSQL cluster of their own
# (trackmux/testing/postgres.py): they need the server binaries, not a running server.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
    || echo "warning: could not install postgresql; the team store tests will be skipped" >&2
fi
# tox gets a venv of its own: a distribution's python3 refuses pip installs into itself
# (PEP 668, "externally-managed-environment"), and the user's packages stay untouched.
VENV="${TRACKMUX_TOX_VENV:-.venv-tox}"
if [ ! -x "$VENV/bin/python" ]; then
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    # Debian/Ubuntu ship venv separately (python3-venv); install it when we may.
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv \
      >/dev/null) || { echo "error: python3 -m venv failed; install python3-venv" >&2; exit 1; }
    rm -rf "$VENV"
    python3 -m venv "$VENV"
  fi
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "tox>=4.11"
# The tox envs take about 15 GB (torch, verl, Ray, transformers ...); a full disk fails
# them as pip's "No space left on device" in whichever env installs last. Say so first.
free_gb=$(df -Pk . | awk 'NR == 2 { print int($4 / 1048576) }')
if [ "${free_gb:-0}" -lt 20 ]; then
  echo "warning: ${free_gb} GB free on $(df -P . | awk 'NR == 2 { print $6 }'); the tox" \
       "envs need about 15 GB (.tox/)" >&2
fi
rm -rf .tox/junit
status=0
"$VENV/bin/python" -m tox run-parallel --parallel 2 --parallel-no-spinner "$@" || status=$?
"$VENV/bin/python" scripts/summarize_tests.py .tox/junit || status=1
exit $status

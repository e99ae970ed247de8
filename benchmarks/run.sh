#!/usr/bin/env bash
# Create/update the benchmark venv and run B1-B6: prints the table, writes
# benchmarks/results/latest.json. Extra arguments go to `python -m benchmarks`
# (e.g. --quick, --only B3). BENCH_VENV overrides the venv location.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${BENCH_VENV:-.venv-bench}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  printf '*\n' > "$VENV/.gitignore"   # keep the venv out of git
fi
PIP=("$VENV/bin/python" -m pip install -q)
# torch first and alone, pinned: anything else may pull a multi-GB CUDA build
"$VENV/bin/python" -c "import torch" 2>/dev/null || "${PIP[@]}" torch==2.13.0
"$VENV/bin/python" -c "import verl, cachetools, uvicorn, fastapi" 2>/dev/null \
  || "${PIP[@]}" verl==0.9.1 cachetools uvicorn fastapi
"${PIP[@]}" -e ".[all]"
exec "$VENV/bin/python" -m benchmarks "$@"

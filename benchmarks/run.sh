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
# have MODULE...: every module is installed (found, not imported: importing verl costs ~10 s)
have() {
  "$VENV/bin/python" -c 'import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))' "$@"
}
# torch first and alone, pinned: anything else may pull a multi-GB CUDA build
have torch || "${PIP[@]}" torch==2.13.0
have verl cachetools uvicorn fastapi || "${PIP[@]}" verl==0.9.1 cachetools uvicorn fastapi
# trackmux itself, editable: reinstalled only when pyproject.toml (dependencies, entry
# points) or the checkout changed; a no-op `pip install -e` still costs ~40 s
STAMP="$VENV/.trackmux-install"
WANT="$(sha256sum pyproject.toml | cut -d' ' -f1) $PWD"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  "${PIP[@]}" -e ".[all]"
  printf '%s\n' "$WANT" > "$STAMP"
fi
exec "$VENV/bin/python" -m benchmarks "$@"

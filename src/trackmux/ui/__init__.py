"""``trackmux ui``: a live local dashboard over the spools, read-only (docs/ui.md).

Modules: app (Starlette app and the uvicorn server handle), routes (HTTP handlers),
queries (the JSON payloads), store (run discovery, the run list, caches within a memory
budget), runcache (one run read incrementally by seq), downsample (min/max buckets),
importance (hyperparameter importance with bootstrap intervals), sources (the doctor's
findings and the samples ledger, when installed), security (token and Host checks).
Needs the extra ``trackmux[ui]`` (starlette, uvicorn, numpy).
"""

"""trackmux benchmarks B1-B6: ``python -m benchmarks``; see docs/performance.md."""

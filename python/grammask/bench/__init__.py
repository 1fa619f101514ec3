"""Benchmarks users can run: grammask side by side with peer engines.

Pipeline: ``data`` finds and samples MaskBench files -> ``runner`` feeds each schema to one
isolated worker process per engine (``worker``, running an adapter from ``engines``) under a
time and memory limit -> ``stats`` turns per-schema records into counts and percentiles ->
``report`` writes results.md, results.json and PNG plots.

Entry point: ``python -m grammask.bench maskbench DIR --engines ... --out RESULTS_DIR``.
Nothing here imports an engine at import time; engines are imported inside their worker.
"""

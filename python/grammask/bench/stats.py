"""Statistics: per-engine counts and percentiles from per-schema records and raw times.

Takes the records written by ``maskbench`` (one per schema and engine) and the raw time arrays;
produces one summary dict per engine. Definitions (all times in microseconds):

- TTFM (time to first mask) = compile + matcher creation + first mask, over schemas that did not
  raise a compile error; a schema that timed out before its first mask counts as the time limit
  (MaskBench's convention), one that crashed or ran out of memory there is left out.
- TBM (time between masks) = one mask computation, over every token of every instance of every
  schema, plus one per instance for the stop token check. Accept time is reported separately.
- TBM CPU = the same masks' thread CPU time: on a shared machine a wall time also holds the
  time the fill waited for a core (its thread preempted), which the CPU time leaves out.
- Percentiles use linear interpolation between order statistics (numpy's default).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

TTFM_PCTS = (50, 75, 90, 99)
TBM_PCTS = (50, 75, 90, 95, 99, 99.9)
ACCEPT_PCTS = (50, 99)

#: Outcome keys counted per engine, in report order.
COUNT_KEYS = (
    "schemas",
    "passing",
    "compile_error",
    "valid_rejected",
    "invalid_accepted",
    "mask_disagrees",
    "matcher_exception",
    "crash",
    "timeout",
    "oom",
)


def percentiles(values: Iterable[float] | np.ndarray, pcts: Iterable[float]) -> dict[str, float]:
    """{"p50": ..., "max": ..., "avg": ...}; every value is None for an empty input."""
    arr = np.asarray(values, dtype=np.float64)
    pcts = list(pcts)
    out: dict[str, float | None] = {}
    if arr.size == 0:
        for p in pcts:
            out[pct_key(p)] = None
        out["max"] = out["avg"] = None
        return out
    vals = np.percentile(arr, pcts)
    for p, v in zip(pcts, vals):
        out[pct_key(p)] = float(v)
    out["max"] = float(arr.max())
    out["avg"] = float(arr.mean())
    return out


def pct_key(p: float) -> str:
    return f"p{p:g}"


def count_outcomes(records: list[dict[str, Any]]) -> dict[str, int]:
    """Schema counts per outcome. valid_rejected / invalid_accepted / mask_disagrees /
    matcher_exception count schemas with at least one such instance (a schema can be in several);
    instance-level totals are under ``instances_*``."""
    c = {k: 0 for k in COUNT_KEYS}
    inst = {"instances_valid_rejected": 0, "instances_invalid_accepted": 0,
            "tokens_mask_disagrees": 0, "instances_matcher_exception": 0}
    for r in records:
        c["schemas"] += 1
        st = r["status"]
        if st == "pass":
            c["passing"] += 1
        elif st in ("compile_error", "crash", "timeout", "oom"):
            c[st] += 1
        c["valid_rejected"] += r["valid_rejected"] > 0
        c["invalid_accepted"] += r["invalid_accepted"] > 0
        c["mask_disagrees"] += r["disagreements"] > 0
        c["matcher_exception"] += r["matcher_errors"] > 0
        inst["instances_valid_rejected"] += r["valid_rejected"]
        inst["instances_invalid_accepted"] += r["invalid_accepted"]
        inst["tokens_mask_disagrees"] += r["disagreements"]
        inst["instances_matcher_exception"] += r["matcher_errors"]
    c.update(inst)
    return c


def ttfm_values(records: list[dict[str, Any]], timeout_s: float) -> list[float]:
    out = []
    for r in records:
        if r.get("ttfm_us") is not None:
            out.append(float(r["ttfm_us"]))
        elif r["status"] == "timeout" and not r.get("compiled"):
            out.append(timeout_s * 1e6)
    return out


def summarize(
    records: list[dict[str, Any]],
    mask_us: np.ndarray,
    accept_us: np.ndarray,
    timeout_s: float,
    mask_cpu_us: np.ndarray | None = None,
) -> dict[str, Any]:
    """One engine's summary: outcome counts, TTFM/TBM/accept percentiles, token count, and the
    masks' thread CPU percentiles (``tbm_cpu_us``: None when not given or not known for every
    mask, as in folders written before CPU times were kept)."""
    s: dict[str, Any] = count_outcomes(records)
    s["ttfm_us"] = percentiles(ttfm_values(records, timeout_s), TTFM_PCTS)
    s["tbm_us"] = percentiles(mask_us, TBM_PCTS)
    s["accept_us"] = percentiles(accept_us, ACCEPT_PCTS)
    cpu = None if mask_cpu_us is None else np.asarray(mask_cpu_us, dtype=np.float64)
    known = cpu is not None and cpu.size == np.asarray(mask_us).size and not np.isnan(cpu).any()
    s["tbm_cpu_us"] = percentiles(cpu, TBM_PCTS) if known else None
    s["tokens"] = int(np.asarray(mask_us).size)
    s.update(memory_summary(records))
    return s


MEMORY_PCTS = (50, 99)


def memory_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Memory per compiled grammar in KiB, as the engine counts it: right after the first mask
    (``grammar_kib``) and after all instances, mask caches included (``grammar_cached_kib``);
    the per-vocabulary tables shared by all grammars, in MiB, the largest they grew to
    (``vocab_index_mib``); and the engine worker's peak resident set in MiB (``peak_rss_mb``, the
    maximum over schemas).
    Engines that report no grammar memory get None."""
    def kib(key: str) -> list[float]:
        return [r[key] / 1024.0 for r in records if r.get(key) is not None]

    rss = [r["peak_rss_mb"] for r in records if r.get("peak_rss_mb") is not None]
    vocab = [r["vocab_index_bytes"] for r in records if r.get("vocab_index_bytes") is not None]
    return {
        "grammar_kib": percentiles(kib("grammar_bytes"), MEMORY_PCTS),
        "grammar_cached_kib": percentiles(kib("grammar_cached_bytes"), MEMORY_PCTS),
        "vocab_index_mib": max(vocab) / 2**20 if vocab else None,
        "peak_rss_mb": max(rss) if rss else None,
    }

"""Report writers: results.md (markdown table), results.json, times.npz and CDF plots.

Takes the per-engine summaries from ``stats`` plus the run configuration; produces files in the
results folder. matplotlib is optional: without it the plots are skipped with a message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .stats import ACCEPT_PCTS, TBM_PCTS, TTFM_PCTS, pct_key

_COUNT_ROWS = [
    ("schemas", "schemas"),
    ("passing", "passing"),
    ("compile error", "compile_error"),
    ("valid rejected (schemas)", "valid_rejected"),
    ("invalid accepted (schemas)", "invalid_accepted"),
    ("mask disagrees with accept (schemas)", "mask_disagrees"),
    ("matcher exception (schemas)", "matcher_exception"),
    ("crash", "crash"),
    ("timeout", "timeout"),
    ("out of memory", "oom"),
    ("valid rejected (instances)", "instances_valid_rejected"),
    ("invalid accepted (instances)", "instances_invalid_accepted"),
    ("tokens (masks computed)", "tokens"),
]


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if v >= 100:
            return f"{v:,.0f}"
        if v >= 10:
            return f"{v:.1f}"
        return f"{v:.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def markdown_table(summaries: dict[str, dict[str, Any]]) -> str:
    engines = list(summaries)
    rows: list[tuple[str, list[Any]]] = []
    for label, key in _COUNT_ROWS:
        rows.append((label, [summaries[e].get(key) for e in engines]))
    for p in list(TTFM_PCTS) + ["max", "avg"]:
        k = pct_key(p) if p not in ("max", "avg") else p
        rows.append((f"TTFM {k} (µs)", [summaries[e]["ttfm_us"][k] for e in engines]))
    for p in list(TBM_PCTS) + ["max", "avg"]:
        k = pct_key(p) if p not in ("max", "avg") else p
        rows.append((f"TBM {k} (µs)", [summaries[e]["tbm_us"][k] for e in engines]))
    if any(summaries[e].get("tbm_cpu_us") for e in engines):
        for p in list(TBM_PCTS) + ["max", "avg"]:
            k = pct_key(p) if p not in ("max", "avg") else p
            rows.append((f"TBM thread CPU {k} (µs)",
                         [(summaries[e].get("tbm_cpu_us") or {}).get(k) for e in engines]))
    for p in ACCEPT_PCTS:
        k = pct_key(p)
        rows.append((f"accept {k} (µs)", [summaries[e]["accept_us"][k] for e in engines]))
    for key, label in (("grammar_kib", "grammar memory"), ("grammar_cached_kib", "grammar + mask caches")):
        for k in ("p50", "p99", "max"):
            rows.append((f"{label} {k} (KiB)", [summaries[e].get(key, {}).get(k) for e in engines]))
    rows.append(("vocabulary tables, shared (MiB)",
                 [summaries[e].get("vocab_index_mib") for e in engines]))
    rows.append(("worker peak RSS (MiB)", [summaries[e].get("peak_rss_mb") for e in engines]))
    header = "| metric | " + " | ".join(engines) + " |"
    sep = "|:--|" + "--:|" * len(engines)
    lines = [header, sep]
    for label, vals in rows:
        lines.append(f"| {label} | " + " | ".join(_fmt(v) for v in vals) + " |")
    return "\n".join(lines) + "\n"


def write_markdown(path: Path, summaries, config: dict[str, Any]) -> None:
    versions = ", ".join(f"{e} {v}" for e, v in config.get("versions", {}).items())
    env = config.get("environment", {})
    text = [
        "# MaskBench results\n",
        f"- command: `{config.get('command', '')}`",
        (f"- files: {config.get('n_files')} sampled with seed {config.get('seed')} "
         f"(limit {config.get('limit')}) from `{config.get('data_dir')}`; "
         f"{config.get('n_schemas_run')} run"),
        (f"- tokenizer: `{config.get('tokenizer')}`; per-schema limits: "
         f"{config.get('timeout_s')} s, {config.get('memory_mb')} MiB RSS"),
        f"- versions: {versions}",
        ("- TTFM: compile + matcher + first fill into "
         + ("a bitmask allocated per matcher (inside the TTFM)"
            if config.get("bitmask", "per-request") == "per-request"
            else "a bitmask each engine allocated before (reused)")),
        (f"- machine: {env.get('cpu', '?')}, {env.get('nproc', '?')} cores, "
         f"{env.get('memory_gib', '?')} GiB; wall time {config.get('wall_s', 0):.0f} s"
         + (" (sum over shards and sessions)" if len(config.get("sessions", [])) > 1 else "")),
    ]
    shards = config.get("shards", [])
    if len(shards) > 1 or any(sh["shard"] != [1, 1] for sh in shards):
        text.append("- shards: " + ", ".join(
            f"{sh['shard'][0]}/{sh['shard'][1]} ({sh['schemas']} of {sh['of']} schemas)"
            for sh in shards))
    resumed = [s for s in config.get("sessions", []) if s.get("skipped_done")]
    if resumed:
        text.append(f"- resumed {len(resumed)} time(s); every session's command is in results.json")
    if config.get("unavailable"):
        for e, why in config["unavailable"].items():
            text.append(f"- engine {e} not run: {why.splitlines()[0] if why else '?'}")
    if config.get("stopped_early"):
        text.append(f"- stopped early: {config['stopped_early']}")
    text.append("")
    text.append(markdown_table(summaries))
    path.write_text("\n".join(text), encoding="utf-8")


def write_json(path: Path, summaries, config, records) -> None:
    clean = [{k: v for k, v in r.items() if k not in ("mask_us", "accept_us")} for r in records]
    path.write_text(
        json.dumps({"config": config, "engines": summaries, "records": clean}, indent=1),
        encoding="utf-8",
    )


def write_times(path: Path, times: dict[str, dict[str, np.ndarray]]) -> None:
    """Raw times (µs, float32) per engine, for re-plotting or other statistics."""
    arrays = {}
    for e, d in times.items():
        for kind, arr in d.items():
            arrays[f"{e}__{kind}"] = np.asarray(arr, dtype=np.float32)
    np.savez_compressed(path, **arrays)


def _cdf_points(arr: np.ndarray, n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    arr = np.sort(np.asarray(arr, dtype=np.float64))
    if arr.size <= n:
        return arr, np.arange(1, arr.size + 1) / arr.size
    q = np.linspace(0, 1, n)
    return np.quantile(arr, q), q


def write_plots(out: Path, times: dict[str, dict[str, np.ndarray]], prefix: str = "") -> list[Path]:
    """CDF plots of mask time and of TTFM per engine, log x axis, each with a tail panel
    (fraction above x, log-log) so p99 and beyond are readable. Returns the files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping plots", file=sys.stderr)
        return []
    written = []
    for kind, title, xlabel in (
        ("mask_us", "Time per mask (TBM)", "µs per mask (log scale)"),
        ("ttfm_us", "Time to first mask (TTFM)", "µs (log scale)"),
    ):
        fig, (ax, tail) = plt.subplots(1, 2, figsize=(12, 4.8))
        any_data = False
        for e, d in times.items():
            arr = np.asarray(d.get(kind, []))
            arr = arr[arr > 0]
            if arr.size == 0:
                continue
            x, y = _cdf_points(arr)
            ax.plot(x, y, label=f"{e} (n={arr.size:,})")
            keep = y < 1
            tail.plot(x[keep], 1 - y[keep], label=e)
            any_data = True
        if not any_data:
            plt.close(fig)
            continue
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction ≤ x")
        ax.set_title(f"{title}: CDF")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        tail.set_xscale("log")
        tail.set_yscale("log")
        tail.set_xlabel(xlabel)
        tail.set_ylabel("fraction > x (log scale)")
        tail.set_title(f"{title}: tail")
        tail.grid(True, which="both", alpha=0.3)
        p = out / f"{prefix}{'tbm' if kind == 'mask_us' else 'ttfm'}_cdf.png"
        fig.tight_layout()
        fig.savefig(p, dpi=100)
        plt.close(fig)
        written.append(p)
    return written


def read_times(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Inverse of write_times."""
    out: dict[str, dict[str, np.ndarray]] = {}
    with np.load(path) as z:
        for key in z.files:
            engine, kind = key.rsplit("__", 1)
            out.setdefault(engine, {})[kind] = z[key]
    return out

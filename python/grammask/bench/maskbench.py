"""The MaskBench run: sample files, run every engine on every schema, write the results.

Takes the parsed command line (see ``__main__``); produces, in the results folder, results.md,
results.json (configuration, per-engine summaries, one record per schema and engine), times.npz
(raw times), records.jsonl (records as they finish, so an interrupted run leaves a trace),
worker-<engine>.log (engine warnings) and the CDF plots.

Engines are interleaved schema by schema: schema 1 on every engine, then schema 2, and so on, so a
run stopped early (Ctrl-C or --time-budget-s) still compares the engines on the same schemas.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from . import report
from .data import list_files, load_hf_tokenizer, load_task
from .engines import expand_engine_list
from .runner import (
    EngineUnavailable,
    EngineWorker,
    environment_note,
    progress,
    worker_log_path,
)
from .stats import summarize, ttfm_values


def run(
    data_dir: str,
    engines: str,
    out_dir: str,
    tokenizer_dir: str,
    limit: int | None = None,
    seed: int = 0,
    timeout_s: float = 120.0,
    memory_mb: int = 8192,
    time_budget_s: float | None = None,
    plots: bool = True,
    quiet: bool = False,
) -> dict[str, Any]:
    """Run the benchmark and write the results; returns {"config", "engines", "records"}."""
    t_start = time.monotonic()
    names = expand_engine_list(engines)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = list_files(data_dir, limit, seed)
    tok = load_hf_tokenizer(tokenizer_dir)

    workers: dict[str, EngineWorker] = {}
    unavailable: dict[str, str] = {}
    for name in names:
        log = worker_log_path(out, name)
        Path(log).write_text("")
        w = EngineWorker(name, str(tokenizer_dir), memory_mb, log_path=log)
        try:
            w.start()
        except EngineUnavailable as e:
            unavailable[name] = str(e)
            print(f"engine {name}: not available, skipped: {str(e).splitlines()[0]}",
                  file=sys.stderr)
            continue
        workers[name] = w
    started = dict(workers)  # every engine that ran, even if dropped after a failed restart
    if not workers:
        raise EngineUnavailable("no engine could be started: " + json.dumps(unavailable))

    records: dict[str, list[dict[str, Any]]] = {n: [] for n in workers}
    mask_times: dict[str, list[np.ndarray]] = {n: [] for n in workers}
    accept_times: dict[str, list[np.ndarray]] = {n: [] for n in workers}
    stopped_early = None
    jsonl = open(out / "records.jsonl", "w", encoding="utf-8")  # noqa: SIM115 (closed in finally)
    bar = progress(len(files), "maskbench") if not quiet else None
    try:
        for f in files:
            if time_budget_s is not None and time.monotonic() - t_start > time_budget_s:
                stopped_early = f"time budget of {time_budget_s:g} s reached"
                break
            task = load_task(f, tok)
            for name, w in list(workers.items()):
                if task.load_error:
                    continue
                try:
                    res = w.run(task, timeout_s)
                except EngineUnavailable as e:  # restart after a crash failed
                    unavailable[name] = f"restart failed: {e}"
                    del workers[name]
                    continue
                mask_times[name].append(res.pop("mask_us"))
                accept_times[name].append(res.pop("accept_us"))
                rec = {
                    "file": task.name,
                    "engine": name,
                    "instances": len(task.instances),
                    "valid": sum(i.valid for i in task.instances),
                    "tokens": int(mask_times[name][-1].size),
                    "mask_us_sum": float(mask_times[name][-1].sum()),
                    **res,
                }
                records[name].append(rec)
                jsonl.write(json.dumps(rec) + "\n")
            jsonl.flush()
            if bar is not None:
                passing = " ".join(
                    f"{n}:{sum(r['status'] == 'pass' for r in rs)}" for n, rs in records.items()
                )
                bar.set_postfix_str(f"pass {passing}")
                bar.update(1)
    except KeyboardInterrupt:
        stopped_early = "interrupted"
    finally:
        if bar is not None:
            bar.close()
        jsonl.close()
        for w in workers.values():
            w.stop()

    times = {
        n: {
            "mask_us": np.concatenate(mask_times[n]) if mask_times[n] else np.zeros(0),
            "accept_us": np.concatenate(accept_times[n]) if accept_times[n] else np.zeros(0),
        }
        for n in records
    }
    summaries = {}
    for n, recs in records.items():
        summaries[n] = summarize(recs, times[n]["mask_us"], times[n]["accept_us"], timeout_s)
        # Same values as the TTFM statistics: compile timeouts count as the limit.
        times[n]["ttfm_us"] = np.asarray(ttfm_values(recs, timeout_s), dtype=np.float64)
    n_done = max((len(r) for r in records.values()), default=0)
    config = {
        "command": "python -m grammask.bench " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "data_dir": str(data_dir),
        "tokenizer": str(tokenizer_dir),
        "limit": limit,
        "seed": seed,
        "n_files": len(files),
        "n_schemas_run": n_done,
        "timeout_s": timeout_s,
        "memory_mb": memory_mb,
        "engines": names,
        "versions": {n: w.version for n, w in started.items()},
        "restarts": {n: w.restarts for n, w in started.items()},
        "unavailable": unavailable,
        "stopped_early": stopped_early,
        "environment": environment_note(),
        "wall_s": time.monotonic() - t_start,
    }
    all_records = [r for n in records for r in records[n]]
    report.write_json(out / "results.json", summaries, config, all_records)
    report.write_markdown(out / "results.md", summaries, config)
    report.write_times(out / "times.npz", times)
    if plots:
        report.write_plots(out, times)
    return {"config": config, "engines": summaries, "records": all_records}


"""The MaskBench run: sample files, run every engine on every schema, write the results.

Takes the parsed command line (see ``__main__``); produces, in the results folder, the run's
records and raw times as they finish (``store``: run.json, records.jsonl, raw/), and at the end
results.md, results.json (configuration, per-engine summaries, one record per schema and engine),
times.npz (raw times), worker-<engine>.log (engine warnings) and the CDF plots.

Engines are interleaved schema by schema: schema 1 on every engine, then schema 2, and so on, so a
run stopped early (Ctrl-C or --time-budget-s) still compares the engines on the same schemas.

A run can cover one shard of the sample (``shard=(i, n)``: every n-th file from the i-th, so each
shard is itself a uniform sample) and can resume a folder, skipping the schemas it holds. The
report is always computed from the folder's files (``finish``), so one run, a resumed run and a
merge of shard folders give the same statistics over the same schemas.
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
from .data import list_files, load_hf_tokenizer, load_task, shard_files
from .engines import expand_engine_list
from .runner import (
    EngineUnavailable,
    EngineWorker,
    environment_note,
    progress,
    worker_log_path,
)
from .stats import summarize, ttfm_values
from .store import (
    IDENTITY_DEFAULTS,
    IDENTITY_KEYS,
    RAW_KINDS,
    RUN_FILE,
    FolderMismatch,
    RunWriter,
    check_resumable,
    read_merged,
    sample_digest,
    tokenizer_digest,
)


def _command() -> str:
    return "python -m grammask.bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])


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
    shard: tuple[int, int] = (1, 1),
    resume: bool = False,
    overwrite: bool = True,
    bitmask_per_request: bool = False,
) -> dict[str, Any]:
    """Run the benchmark and write the results; returns {"config", "engines", "records"}.

    ``resume``: continue the run in ``out_dir`` (same engines, versions, tokenizer, limits and
    sample, else FolderMismatch), skipping its schemas. Otherwise a folder that holds a run is
    started afresh when ``overwrite``, refused (FolderMismatch) when not.
    ``bitmask_per_request``: each matcher allocates its bitmask inside the TTFM (else each
    engine's bitmask is allocated once, before any timed window).
    """
    t_start = time.monotonic()
    names = expand_engine_list(engines)
    out = Path(out_dir)
    if not resume and not overwrite and (out / RUN_FILE).exists():
        raise FolderMismatch(f"{out} already holds a run: pass --resume to continue it, "
                             "--overwrite to start it again, or choose another folder")
    out.mkdir(parents=True, exist_ok=True)
    sample = list_files(data_dir, limit, seed)
    index = {f.name: i for i, f in enumerate(sample)}
    files = shard_files(sample, *shard)
    run_info = {
        "engines": names,
        "versions": None,  # known once the engines are set up
        "tokenizer_sha": tokenizer_digest(tokenizer_dir),
        "timeout_s": timeout_s,
        "memory_mb": memory_mb,
        "seed": seed,
        "limit": limit,
        "sample_sha": sample_digest([f.name for f in sample]),
        "bitmask": "per-request" if bitmask_per_request else "reused",
        "data_dir": str(data_dir),
        "tokenizer": str(tokenizer_dir),
        "n_files": len(sample),
        "shard": list(shard),
        "n_shard_files": len(files),
        "sessions": [],
    }
    if resume:
        check_resumable(out, run_info)
    tok = load_hf_tokenizer(tokenizer_dir)

    workers: dict[str, EngineWorker] = {}
    unavailable: dict[str, str] = {}
    for name in names:
        log = worker_log_path(out, name)
        if not resume:
            Path(log).write_text("")
        w = EngineWorker(name, str(tokenizer_dir), memory_mb, log_path=log,
                         bitmask_per_request=bitmask_per_request)
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

    run_info["versions"] = {n: w.version for n, w in started.items()}
    try:
        writer = RunWriter(out, run_info, resume)
    except BaseException:
        for w in workers.values():
            w.stop()
        raise
    session = {"command": _command(), "environment": environment_note(),
               "skipped_done": len(writer.done), "schemas": 0}
    writer.run["sessions"].append(session)
    writer.save_run()

    stopped_early = None
    todo = [f for f in files if f.name not in writer.done]
    bar = progress(len(todo), "maskbench") if not quiet else None
    passing = {n: 0 for n in workers}
    try:
        for f in todo:
            if time_budget_s is not None and time.monotonic() - t_start > time_budget_s:
                stopped_early = f"time budget of {time_budget_s:g} s reached"
                break
            task = load_task(f, tok)
            results = []
            for name, w in list(workers.items()):
                if task.load_error:
                    continue
                try:
                    res = w.run(task, timeout_s)
                except EngineUnavailable as e:  # restart after a crash failed
                    unavailable[name] = f"restart failed: {e}"
                    del workers[name]
                    continue
                raw = {k: res.pop(k) for k in RAW_KINDS}
                mask_us, accept_us = raw["mask_us"], raw["accept_us"]
                rec = {
                    "index": index[task.name],
                    "file": task.name,
                    "engine": name,
                    "instances": len(task.instances),
                    "valid": sum(i.valid for i in task.instances),
                    "tokens": int(mask_us.size),
                    "accepts": int(accept_us.size),
                    "mask_us_sum": float(mask_us.sum()),
                    **res,
                }
                results.append((rec, raw))
                passing[name] += rec["status"] == "pass"
            if results:
                writer.append_schema(results)
                session["schemas"] += 1
            if bar is not None:
                bar.set_postfix_str("pass " + " ".join(f"{n}:{k}" for n, k in passing.items()))
                bar.update(1)
    except KeyboardInterrupt:
        stopped_early = "interrupted"
    finally:
        if bar is not None:
            bar.close()
        for w in workers.values():
            w.stop()
        writer.close()
    session.update({
        "wall_s": time.monotonic() - t_start,
        "stopped_early": stopped_early,
        "restarts": {n: w.restarts for n, w in started.items()},
        "unavailable": unavailable,
    })
    writer.save_run()
    return finish(out, [out], _command(), plots)


def finish(out_dir: str | Path, folders: list[str | Path], command: str | None = None,
           plots: bool = True) -> dict[str, Any]:
    """Write results.md, results.json, times.npz (and plots) in ``out_dir`` from the records and
    raw times of one or more run folders of one sample (``store.read_merged``: refuses folders
    that are not comparable or overlap). Returns {"config", "engines", "records"}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts, records, raw = read_merged(folders)
    first = parts[0].run
    timeout_s = first["timeout_s"]
    times: dict[str, dict[str, np.ndarray]] = {}
    summaries = {}
    for e in first["versions"]:
        recs = [r for r in records if r["engine"] == e]
        summaries[e] = summarize(recs, raw[e]["mask_us"], raw[e]["accept_us"], timeout_s,
                                 raw[e]["mask_cpu_us"])
        # Same values as the TTFM statistics: compile timeouts count as the limit.
        times[e] = {**raw[e], "ttfm_us": np.asarray(ttfm_values(recs, timeout_s), dtype=np.float64)}
    sessions = [s for p in parts for s in p.run["sessions"]]
    restarts: dict[str, int] = {}
    unavailable: dict[str, str] = {}
    for s in sessions:
        for e, k in s.get("restarts", {}).items():
            restarts[e] = restarts.get(e, 0) + k
        unavailable.update(s.get("unavailable", {}))
    stops = [s["stopped_early"] for s in sessions if s.get("stopped_early")]
    shards = [{"folder": str(f), "shard": p.run["shard"], "schemas": len({r["file"] for r in
               p.records}), "of": p.run["n_shard_files"]} for f, p in zip(folders, parts)]
    n_done = len({r["file"] for r in records})
    config = {
        "command": command or sessions[-1]["command"],
        **{k: first.get(k, IDENTITY_DEFAULTS.get(k)) for k in IDENTITY_KEYS},
        "data_dir": first["data_dir"],
        "tokenizer": first["tokenizer"],
        "n_files": first["n_files"],
        "n_schemas_run": n_done,
        "shards": shards,
        "restarts": restarts,
        "unavailable": unavailable,
        # A shard stopped early and resumed to its end is complete: only its coverage counts.
        "stopped_early": ("; ".join(stops) or "cut off") if any(
            sh["schemas"] < sh["of"] for sh in shards) else None,
        "environment": sessions[0]["environment"],
        "wall_s": sum(s.get("wall_s", 0.0) for s in sessions),
        "sessions": sessions,
    }
    report.write_json(out / "results.json", summaries, config, records)
    report.write_markdown(out / "results.md", summaries, config)
    report.write_times(out / "times.npz", times)
    if plots:
        report.write_plots(out, times)
    return {"config": config, "engines": summaries, "records": records}

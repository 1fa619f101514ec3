"""Replays MaskBench files exactly as ``python -m grammask.bench maskbench`` runs them (the same
engine adapter and ``run_task`` protocol, after one warm-up compile) and times each fill by wall clock and by thread CPU, to
tell a slow fill (engine work) from a fill that waited for a core (a loaded machine, or the
compile's class-body thread on the same core).

    GRAMMASK_SHARED=/path/to/shared python bench/fill_cpu_replay.py [--engine NAME] FILE.json [FILE.json ...]

FILEs are names in ``<shared>/maskbench/data``. Prints, per file, the three slowest fills by wall
time as ``wall/cpu@instance:token`` (µs).
"""

from __future__ import annotations

import argparse

from grammask.bench.data import default_data_dir, default_tokenizer_dir, load_hf_tokenizer, load_task
from grammask.bench.engines import ENGINES
from grammask.bench.worker import run_task


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="grammask", choices=sorted(ENGINES), help="default grammask")
    ap.add_argument("files", nargs="+", metavar="FILE.json")
    args = ap.parse_args()
    tok = load_hf_tokenizer(default_tokenizer_dir())
    adapter = ENGINES[args.engine](tok)
    adapter.compile('{"type": "object"}')  # per-vocabulary set-up, not timed (the worker's template)
    data = default_data_dir()
    for name in args.files:
        task = load_task(data / name, tok)
        cpu: list[tuple[int, int, int]] = []
        res = run_task(adapter, task, lambda _msg: None, fill_cpu=cpu)
        if res["compile_error"]:
            print(f"{name:<45} compile error: {res['compile_error'][:80]}", flush=True)
            continue
        fills = sorted(zip(res["mask_us"], cpu), key=lambda f: f[0], reverse=True)
        top = "  ".join(f"{w:.0f}/{c / 1e3:.0f}@{i}:{p}" for w, (i, p, c) in fills[:3])
        print(f"{name:<45} fills {len(fills):>5}  slowest wall/cpu us: {top}", flush=True)


if __name__ == "__main__":
    main()

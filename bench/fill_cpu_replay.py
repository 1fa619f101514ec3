"""Replays MaskBench files as ``python -m grammask.bench maskbench`` does for grammask and times
each fill by wall clock and by thread CPU, to tell a slow fill (engine work) from a fill that
waited for a core (a loaded machine, or the compile's class-body thread on the same core).

    GRAMMASK_SHARED=/path/to/shared python bench/fill_cpu_replay.py FILE.json [FILE.json ...]

FILEs are names in ``<shared>/maskbench/data``. Prints, per file, the three slowest fills by wall
time as ``wall/cpu@token`` (µs).
"""

from __future__ import annotations

import sys
import time

import grammask as xgr
from grammask.bench.data import default_data_dir, default_tokenizer_dir, load_hf_tokenizer, load_task


def main(files: list[str]) -> None:
    tok = load_hf_tokenizer(default_tokenizer_dir())
    info = xgr.TokenizerInfo.from_huggingface(tok)
    # As the benchmark's grammask engine: one thread, no cache, MaskBench's options.
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    compiler.compile_json_schema('{"type": "object"}')  # per-vocabulary set-up, not timed
    data = default_data_dir()
    for name in files:
        task = load_task(data / name, tok)
        compiled = compiler.compile_json_schema(task.schema, any_whitespace=True, strict_mode=False)
        fills = []
        for inst in task.instances:
            m = xgr.GrammarMatcher(compiled)
            bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
            for pos, token in enumerate(inst.tokens):
                a, ta = time.perf_counter_ns(), time.thread_time_ns()
                m.fill_next_token_bitmask(bitmask)
                tb, b = time.thread_time_ns(), time.perf_counter_ns()
                fills.append(((b - a) / 1e3, (tb - ta) / 1e3, pos))
                if not m.accept_token(token):
                    break
        fills.sort(reverse=True)
        top = "  ".join(f"{w:.0f}/{c:.0f}@{p}" for w, c, p in fills[:3])
        print(f"{name:<45} fills {len(fills):>5}  slowest wall/cpu us: {top}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

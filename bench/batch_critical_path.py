"""The serial critical path of a batch_bench.py workload: each row filled alone, in batch order,
timed by thread CPU (so other processes on the machine barely change it).

Per batch step the fastest a two-thread fill can be, without splitting one row's mask across
threads, is max(slowest row, half the step's total). The sum of that over the decode, against
the serial total, is the speed-up an idle two-core machine allows. Printed with the row-time
percentiles and the steps whose slowest row is largest.

    python bench/batch_critical_path.py one-schema|maskbench [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import batch_bench as bb  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=["one-schema", "maskbench"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    import grammask

    tok = AutoTokenizer.from_pretrained(str(bb.shared_dir() / "tokenizers" / "llama3"))
    info = grammask.TokenizerInfo.from_huggingface(tok)
    if args.workload == "one-schema":
        schemas, docs = bb.one_schema_rows(tok, 64)
    else:
        import xgrammar

        infos = {
            "grammask": (grammask, info),
            "xgrammar": (xgrammar, xgrammar.TokenizerInfo.from_huggingface(tok)),
        }
        schemas, docs = bb.maskbench_rows(infos, tok, 64, args.seed)
    compiled = bb.compile_all(grammask, info, schemas, args.workload == "one-schema")
    ms = [grammask.GrammarMatcher(c) for c in compiled]
    bitmask = grammask.allocate_token_bitmask(64, info.vocab_size)
    steps = []
    for step in range(max(map(len, docs))):
        live = [i for i, d in enumerate(docs) if step < len(d)]
        times = []
        for i in live:
            t = time.thread_time_ns()
            ms[i].fill_next_token_bitmask(bitmask, i)
            times.append(time.thread_time_ns() - t)
        steps.append(times)
        for i in live:
            if not ms[i].accept_token(docs[i][step]):
                raise SystemExit(f"row {i} rejected token {step}")
    total = sum(map(sum, steps)) / 1e6
    slowest = sum(max(s) for s in steps) / 1e6
    bound = sum(max(max(s), sum(s) / 2) for s in steps) / 1e6
    rows = np.array([x for s in steps for x in s]) / 1e3
    print(
        f"{args.workload}: {len(steps)} steps, {len(rows)} rows; serial {total:.2f} ms; slowest row per step "
        f"{slowest:.2f} ms; two-thread bound {bound:.2f} ms: speed-up at most {total / bound:.2f}x"
    )
    print(
        "row us p50/p90/p99/max:", *np.percentile(rows, [50, 90, 99]).round(1), rows.max().round(1)
    )
    top = sorted(((max(s), sum(s), k) for k, s in enumerate(steps)), reverse=True)[:6]
    print(
        "steps with the slowest rows (row us, step us, step):",
        [(round(a / 1e3), round(b / 1e3), k) for a, b, k in top],
    )


if __name__ == "__main__":
    main()

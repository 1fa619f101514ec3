"""The serial critical path of a batch_bench.py workload: each row filled alone, in batch order,
timed by thread CPU (so other processes on the machine barely change it).

Per batch step the fastest a two-thread fill can be, without splitting one row's mask across
threads, is the batch call's own serial time plus max(slowest row, half the rows' total). The sum of that over the decode, against
the serial total, is the speed-up an idle two-core machine allows. Printed with the row-time
percentiles and the steps whose slowest row is largest.

MaskBench rows are those both grammask and XGrammar accept (as in batch_bench.py), or with
``--engines grammask`` those grammask accepts; ``--rows-cache`` and ``--max-steps`` as in batch_bench.py.

Also printed: the two-thread schedule of rows claimed costliest first with their costs known
(batch_fill_with's order when its predictions are right). ``--warm`` measures a second decode on
the same compiled grammars (their kernel and mask memos filled by the first), as a server sees a
schema it has served before.

    python bench/batch_critical_path.py WORKLOAD [--seed 0] [--engines grammask] [--pool 256]
        [--rows-cache F] [--max-steps N] [--warm] [--dump F]

WORKLOAD: one-schema, maskbench, one-schema-continuous or maskbench-continuous (batch_bench.py's).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import batch_bench as bb  # noqa: E402


def thread_ns(call) -> int:
    t = time.thread_time_ns()
    call()
    return time.thread_time_ns() - t


def decode(grammask, compiled, docs, vocab_size: int, max_steps: int, rows: int = 0):
    """Fresh matchers on `compiled` decode `docs` (continuously on `rows` rows when > 0, see
    bb.schedule), each row filled alone: (thread CPU ns of each live row, instance of each live
    row) per step, and the thread CPU ns of each step's batch call (serial).

    A row's time is its fill less the same fill repeated (a memo hit: the Python call, the buffer
    and the copy), plus its share of one serial batch fill of the step's rows (all hits then: the
    copies as a batch pays them) less a one-row batch fill (the call itself: Python, arguments,
    returned per step as serial time no thread shares). Without that, the ~1 us of Python call
    per row counted as work a second thread could share (about a third of one-schema's serial
    total), and so did the batch call's own ~10-15 us per step."""
    ms: list = [None] * (rows or len(docs))
    batch = grammask.BatchGrammarMatcher(max_threads=1)
    bitmask = grammask.allocate_token_bitmask(len(ms), vocab_size)
    plan = bb.schedule(docs, len(ms), rows > 0)
    steps, insts, calls = [], [], []
    for step in plan[:max_steps] if max_steps else plan:
        for r, inst, pos in step:
            if pos == 0:
                ms[r] = grammask.GrammarMatcher(compiled[inst])
        live = [r for r, _, _ in step]
        first = [thread_ns(lambda r=r: ms[r].fill_next_token_bitmask(bitmask, r)) for r in live]
        again = [thread_ns(lambda r=r: ms[r].fill_next_token_bitmask(bitmask, r)) for r in live]
        call = thread_ns(lambda: batch.batch_fill_next_token_bitmask([ms[live[0]]], bitmask, live[:1]))
        copies = thread_ns(lambda: batch.batch_fill_next_token_bitmask([ms[r] for r in live], bitmask, live))
        times = [max(a - b, 0) + max(copies - call, 0) // len(live) for a, b in zip(first, again)]
        steps.append(times)
        calls.append(call)
        insts.append([inst for _, inst, _ in step])
        for r, inst, pos in step:
            if not ms[r].accept_token(docs[inst][pos]):
                raise SystemExit(f"instance {inst} rejected token {pos}")
    return steps, insts, calls


def two_thread_schedule(times: list[int]) -> int:
    """The makespan of two threads taking rows costliest first from a shared counter (what
    batch_fill_with does when it knows each row's cost)."""
    free = [0, 0]
    for t in sorted(times, reverse=True):
        free[free.index(min(free))] += t
    return max(free)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload", choices=bb.WORKLOADS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default="grammask,xgrammar", help="engines that must accept a MaskBench row")
    ap.add_argument("--rows-cache", default="")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--warm", action="store_true", help="decode once first: measure a second decode on warm grammars")
    ap.add_argument("--dump", default="", help="write [[(instance, ns) per live row] per step] as JSON")
    ap.add_argument("--pool", type=int, default=256, help="instances a continuous workload draws from")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    import grammask

    tok = AutoTokenizer.from_pretrained(str(bb.shared_dir() / "tokenizers" / "llama3"))
    info = grammask.TokenizerInfo.from_huggingface(tok)
    infos = {"grammask": (grammask, info)}
    if "xgrammar" in args.engines.split(",") and args.workload.startswith("maskbench"):
        import xgrammar

        infos["xgrammar"] = (xgrammar, xgrammar.TokenizerInfo.from_huggingface(tok))
    schemas, docs = bb.workload_rows(args.workload, infos, tok, 64, args.seed, args.rows_cache, args.pool)
    rows = 64 if args.workload.endswith("-continuous") else 0
    used = max(inst for step in bb.schedule(docs, rows or len(docs), rows > 0) for _, inst, _ in step) + 1
    compiled = bb.compile_all(grammask, info, schemas[:used], args.workload.startswith("one-schema"))
    if args.warm:
        decode(grammask, compiled, docs, info.vocab_size, args.max_steps, rows)
    steps, insts, calls = decode(grammask, compiled, docs, info.vocab_size, args.max_steps, rows)
    if args.dump:
        # The batch call's serial time as instance -1 (batch_replay.py adds it to the step).
        dump = [list(zip(ins, s)) + [(-1, c)] for ins, s, c in zip(insts, steps, calls)]
        Path(args.dump).write_text(json.dumps(dump))
    call = sum(calls) / 1e6
    total = sum(map(sum, steps)) / 1e6 + call
    slowest = sum(max(s) for s in steps) / 1e6 + call
    bound = sum(max(max(s), sum(s) / 2) for s in steps) / 1e6 + call
    greedy = sum(two_thread_schedule(s) for s in steps) / 1e6 + call
    rows = np.array([x for s in steps for x in s]) / 1e3
    print(
        f"{args.workload}: {len(steps)} steps, {len(rows)} rows; serial {total:.2f} ms (batch calls {call:.2f}); "
        f"slowest row per step {slowest:.2f} ms; two-thread bound {bound:.2f} ms: speed-up at most {total / bound:.2f}x; "
        f"rows claimed costliest first {greedy:.2f} ms ({total / greedy:.2f}x)"
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

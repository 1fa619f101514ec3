"""Where a second batch thread's extra CPU goes: the same fills run alone or beside each other.

MaskBench cold (batch_bench.py's ``maskbench`` rows: 64 schemas, rows leave as they end), split
into two halves (even and odd rows). Per trial, fresh grammars, the CPU of the fills only:

* ``alone``: each half decoded by one thread, one half after the other (thread CPU, summed);
* ``shared``: both halves at once on two Python threads (each a 1-thread batch, the GIL
  released during fills), grammars compiled against one TokenizerInfo (one shared TokenIndex:
  trie, slices, cross-grammar kernel cache);
* ``separate``: as ``shared``, the second half compiled against a second TokenizerInfo (its own
  TokenIndex: nothing written or read in common but the allocator);
* ``batch1`` / ``batch2``: all 64 rows, one ``batch_fill_next_token_bitmask`` per step with
  ``max_threads`` 1 / 2 (process CPU, as batch_bench.py reports it).

``shared`` and ``separate`` above ``alone`` is what running at once costs. If ``separate`` costs
more than ``shared``, the cost grows with the memory touched (caches), not with lines both threads
write (locks, reference counts, shared caches), which ``separate`` does not have.

    python bench/batch_concurrency.py [--trials 3] [--rows-cache F]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import batch_bench as bb  # noqa: E402


def decode(mod, info, compiled, docs, rows, threads=1, barrier=None) -> int:
    """Decodes `docs[i]` for i in `rows` (matchers on `compiled[i]`), rows leaving as they end;
    returns the CPU ns of the fills (this thread's; the process's when `threads` > 1)."""
    clock = time.process_time_ns if threads > 1 else time.thread_time_ns
    batch = mod.BatchGrammarMatcher(max_threads=threads)
    bitmask = mod.allocate_token_bitmask(len(docs), info.vocab_size)
    ms = {i: mod.GrammarMatcher(compiled[i]) for i in rows}
    if barrier:
        barrier.wait()
    cpu = 0
    for step in range(max(len(docs[i]) for i in rows)):
        live = [i for i in rows if step < len(docs[i])]
        t = clock()
        batch.batch_fill_next_token_bitmask([ms[i] for i in live], bitmask, live)
        cpu += clock() - t
        for i in live:
            if not ms[i].accept_token(docs[i][step]):
                raise SystemExit(f"row {i} rejected token {step}")
    return cpu


def trial(mod, infos, schemas, docs, mode: str) -> float:
    halves = (list(range(0, len(docs), 2)), list(range(1, len(docs), 2)))
    second = infos[1] if mode == "separate" else infos[0]
    compiled = bb.compile_all(mod, infos[0], schemas, False)
    if mode in ("batch1", "batch2"):
        return decode(mod, infos[0], compiled, docs, range(len(docs)), int(mode[-1])) / 1e6
    if mode == "separate":
        other = bb.compile_all(mod, second, schemas, False)
        compiled = [other[i] if i % 2 else c for i, c in enumerate(compiled)]
    if mode == "alone":
        return sum(decode(mod, infos[0], compiled, docs, h) for h in halves) / 1e6
    out = [0, 0]
    barrier = threading.Barrier(2)

    def run(k):
        out[k] = decode(mod, infos[0], compiled, docs, halves[k], 1, barrier)

    ts = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(out) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--rows-cache", default="")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    import grammask

    tok = AutoTokenizer.from_pretrained(str(bb.shared_dir() / "tokenizers" / "llama3"))
    infos = [grammask.TokenizerInfo.from_huggingface(tok) for _ in range(2)]
    schemas, docs = bb.workload_rows(
        "maskbench", {"grammask": (grammask, infos[0])}, tok, 64, args.seed, args.rows_cache
    )
    modes = ("alone", "shared", "separate", "batch1", "batch2")
    res: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.trials):
        for m in modes:
            res[m].append(trial(grammask, infos, schemas, docs, m))
    print(f"maskbench cold, fill CPU ms per trial (min): {args.trials} trials")
    for m in modes:
        print(f"{m:>9}: {min(res[m]):7.1f}  ({', '.join(f'{x:.1f}' for x in res[m])})")


if __name__ == "__main__":
    main()

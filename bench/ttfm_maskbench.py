"""Time to first mask over the whole MaskBench, grammask only (Llama 3 tokenizer).

For each schema file (``strict_mode=False``, compiler cache off): compile, create a matcher and
fill its first mask, timed together on three clocks (the same interval):

- ``wall``: elapsed time (``perf_counter``), what a user waits for. The primary figure on a quiet
  machine; on a loaded one it also counts time the process waited for a core.
- ``process``: CPU time of all of this process's threads (``process_time``): the figure to compare
  builds with on a loaded machine. It is at least ``thread``.
- ``thread``: CPU time of the calling thread only (``thread_time``), the figure this script gave
  before session 26.

The compiler runs with ``max_threads=1``, so a compile runs on the calling thread only and the
three clocks agree on a quiet machine (before session 27 rule automata were built on up to 4
threads whatever ``max_threads`` said, and ``thread`` understated band compiles by ~13%).
Prints p50/p90/p99/max per clock over the schemas that compiled, how many took over 20 ms, 100 ms
and 1 s, and the slowest ``--top`` by the ``--clock`` chosen (default ``wall``). With ``--out``,
writes ``[[wall, process, thread, file, compiled], ...]`` (seconds) as JSON. With ``--files LIST``
(file names or paths, one a line), only those schemas (e.g. the slowest 50 of an earlier run, to
compare two builds).

    GRAMMASK_SHARED=/work/shared PYTHONPATH=python python bench/ttfm_maskbench.py [--top 20] [--clock process] [--out F]

The shared data directory is ``$GRAMMASK_SHARED`` or ``../shared`` next to the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

CLOCKS = ("wall", "process", "thread")


def shared_dir() -> Path:
    return Path(os.environ.get("GRAMMASK_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def now() -> tuple[float, float, float]:
    """The three clocks of ``CLOCKS``, in that order."""
    return time.perf_counter(), time.process_time(), time.thread_time()


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(t * 1e3 for t in seconds)
    n = len(ms)
    over = " ".join(f">{b}ms {sum(t > b for t in ms)}" for b in (20, 100, 1000))
    return (
        f"{name:>8}: p50 {ms[n // 2]:.2f} p90 {ms[int(n * 0.9)]:.2f} p99 {ms[int(n * 0.99)]:.1f} "
        f"max {ms[-1]:.0f} ms; {over}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=20, help="list the N slowest schemas")
    ap.add_argument("--clock", choices=CLOCKS, default="wall", help="the clock that orders --top")
    ap.add_argument("--out", help="write per-file times as JSON")
    ap.add_argument("--files", help="only the schemas named in this file, one a line")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    import grammask

    data = shared_dir() / "maskbench" / "data"
    if not data.is_dir():
        print(f"needs MaskBench in {data} (set GRAMMASK_SHARED)", file=sys.stderr)
        return 2
    info = grammask.TokenizerInfo.from_huggingface(
        AutoTokenizer.from_pretrained(str(shared_dir() / "tokenizers" / "llama3"))
    )
    bitmask = grammask.allocate_token_bitmask(1, info.vocab_size)
    results: list[tuple[float, float, float, str, bool]] = []
    paths = sorted(data.glob("*.json"))
    if args.files:
        wanted = {Path(line.strip()).name for line in Path(args.files).read_text().splitlines() if line.strip()}
        paths = [p for p in paths if p.name in wanted]
    for path in paths:
        schema = json.dumps(json.loads(path.read_text())["schema"])
        compiler = grammask.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        start = now()
        try:
            matcher = grammask.GrammarMatcher(
                compiler.compile_json_schema(schema, strict_mode=False)
            )
            matcher.fill_next_token_bitmask(bitmask)
            ok = True
        except grammask.GrammaskError:
            ok = False
        wall, process, thread = (b - a for a, b in zip(start, now()))
        results.append((wall, process, thread, path.name, ok))
    compiled = [r for r in results if r[4]]
    print(f"{len(compiled)} of {len(results)} schemas compiled; TTFM (compile + first mask):")
    for i, clock in enumerate(CLOCKS):
        print(summary(clock, [r[i] for r in compiled]))
    key = CLOCKS.index(args.clock)
    print(f"slowest by {args.clock} (wall / process / thread ms):")
    for r in sorted(results, key=lambda r: r[key], reverse=True)[: args.top]:
        print(f"  {r[0] * 1e3:9.1f} {r[1] * 1e3:9.1f} {r[2] * 1e3:9.1f}  {r[3]}{'' if r[4] else '  (error)'}")
    if args.out:
        Path(args.out).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

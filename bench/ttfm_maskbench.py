"""Time to first mask over the whole MaskBench, one thread, grammask only (Llama 3 tokenizer).

For each schema file (``strict_mode=False``, compiler cache off): compile, create a matcher and
fill its first mask, timed together in thread CPU time (usable on a loaded machine). Prints
p50/p90/p99/max over the schemas that compiled, how many took over 20 ms, 100 ms and 1 s, and the
slowest ``--top``. With ``--out``, writes ``[[seconds, file, compiled], ...]`` as JSON. With
``--files LIST`` (file names or paths, one a line), only those schemas (e.g. the slowest 50 of an
earlier run, to compare two builds).

    GRAMMASK_SHARED=/work/shared PYTHONPATH=python python bench/ttfm_maskbench.py [--top 20] [--out F]

The shared data directory is ``$GRAMMASK_SHARED`` or ``../shared`` next to the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def shared_dir() -> Path:
    return Path(os.environ.get("GRAMMASK_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=20, help="list the N slowest schemas")
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
    results: list[tuple[float, str, bool]] = []
    paths = sorted(data.glob("*.json"))
    if args.files:
        wanted = {Path(line.strip()).name for line in Path(args.files).read_text().splitlines() if line.strip()}
        paths = [p for p in paths if p.name in wanted]
    for path in paths:
        schema = json.dumps(json.loads(path.read_text())["schema"])
        compiler = grammask.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        start = time.thread_time()
        try:
            matcher = grammask.GrammarMatcher(
                compiler.compile_json_schema(schema, strict_mode=False)
            )
            matcher.fill_next_token_bitmask(bitmask)
            ok = True
        except grammask.GrammaskError:
            ok = False
        results.append((time.thread_time() - start, path.name, ok))
    times = sorted(t for t, _, ok in results if ok)
    n = len(times)
    ms = [t * 1e3 for t in times]
    print(
        f"{n} of {len(results)} schemas compiled; TTFM ms p50 {ms[n // 2]:.2f} p90 {ms[int(n * 0.9)]:.2f} "
        f"p99 {ms[int(n * 0.99)]:.1f} max {ms[-1]:.0f}"
    )
    print(
        "over 20 ms: {}, over 100 ms: {}, over 1 s: {}".format(
            *(sum(t > b for t in ms) for b in (20, 100, 1000))
        )
    )
    for t, name, ok in sorted(results, reverse=True)[: args.top]:
        print(f"  {t * 1e3:9.1f} ms  {name}{'' if ok else '  (error)'}")
    if args.out:
        Path(args.out).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

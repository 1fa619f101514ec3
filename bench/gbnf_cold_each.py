"""Each llama.cpp grammar's cold compile as the first real grammar of a fresh process.

    python bench/gbnf_cold_each.py [--tokenizer llama3] [--runs 3] [--engines grammask,llguidance]

bench/gbnf_bench.py compiles the grammars one after another in one process, so a grammar's "cold"
figure there depends on which earlier grammars already built the per-vocabulary indexes it needs.
Here every (engine, grammar) runs in its own process: the tokenizer is loaded, a trivial grammar
compiled and masked (the per-tokenizer set-up), then the grammar is compiled (cold: it pays every
per-vocabulary index it needs), masked once, and compiled again (warm). Thread CPU clock; the
best (smallest cold compile) of ``--runs`` processes is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def one(engine: str, path: Path, tokenizer: str) -> list[float]:
    """Cold compile ms, first mask us, warm compile ms of `path` in this process."""
    sys.path.insert(0, str(REPO / "bench"))
    import gbnf_bench as gb
    from transformers import AutoTokenizer

    shared = Path(os.environ.get("GRAMMASK_SHARED", REPO.parent / "shared"))
    hf = AutoTokenizer.from_pretrained(shared / "tokenizers" / tokenizer)
    if engine == "llguidance":
        e = gb.Llg(hf)
    else:
        e = gb.XgrLike(__import__(engine), hf)
    gb.ttfm(e, 'root ::= "a"')
    text = path.read_text(encoding="utf-8")
    clk = time.thread_time
    t0 = clk()
    compiled = e.compile(text)
    t1 = clk()
    e.fill(e.matcher(compiled))
    t2 = clk()
    e.compile(text)
    t3 = clk()
    return [(t1 - t0) * 1e3, (t2 - t1) * 1e6, (t3 - t2) * 1e3]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engines", default="grammask,llguidance")
    ap.add_argument("--one", nargs=2, metavar=("ENGINE", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], Path(args.one[1]), args.tokenizer)))
        return 0
    engines = args.engines.split(",")
    print(f"tokenizer {args.tokenizer}; best of {args.runs} fresh processes; thread clock")
    print(f"{'grammar':16} " + " ".join(f"{n + ' cold ms':>20} {'+1st us':>8} {'warm ms':>8}" for n in engines))
    totals = dict.fromkeys(engines, 0.0)
    for path in sorted((REPO / "testdata" / "gbnf").glob("*.gbnf")):
        cols = []
        for n in engines:
            best = None
            for _ in range(args.runs):
                cmd = [sys.executable, __file__, "--tokenizer", args.tokenizer, "--one", n, str(path)]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode != 0:
                    print(f"{path.name}: {n} failed: {out.stderr.strip()[-200:]}")
                    break
                v = json.loads(out.stdout.strip().splitlines()[-1])
                best = v if best is None or v[0] < best[0] else best
            if best is None:
                cols.append(f"{'error':>20} {'':>8} {'':>8}")
                continue
            totals[n] += best[0]
            cols.append(f"{best[0]:20.2f} {best[1]:8.0f} {best[2]:8.2f}")
        print(f"{path.name:16} " + " ".join(cols), flush=True)
    print("total cold compile ms: " + ", ".join(f"{n} {v:.2f}" for n, v in totals.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

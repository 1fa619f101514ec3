"""Schema-to-compiled-grammar time over sampled MaskBench schemas (Llama 3 tokenizer).

For each sampled schema (``strict_mode=False``, or the default options with ``--default-options``)
it times three stages through the public API:
JSON Schema to EBNF (``testing._json_schema_to_ebnf``), EBNF parsing (``Grammar.from_ebnf``), and
the whole ``GrammarCompiler.compile_json_schema`` (conversion, parsing and automata; cache off).
Schemas that do not compile are skipped. Prints p50/p90/p99 of each stage in ms.

Usage::

    python3 bench/compile_time.py [--limit 300] [--seed 0] [--default-options]

The shared data directory is ``$GRAMMASK_SHARED`` or ``../shared`` next to the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--default-options", action="store_true", help="strict_mode=True (the default) instead of False")
    args = ap.parse_args()
    shared = Path(os.environ.get("GRAMMASK_SHARED", REPO.parent / "shared"))
    data = shared / "maskbench" / "data"
    if not data.is_dir():
        print(f"error: {data} not found (set GRAMMASK_SHARED)", file=sys.stderr)
        return 2
    import grammask as xgr
    from grammask import testing
    from transformers import AutoTokenizer

    info = xgr.TokenizerInfo.from_huggingface(AutoTokenizer.from_pretrained(shared / "tokenizers" / "llama3"))
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    files = sorted(data.glob("*.json"))
    random.seed(args.seed)
    files = random.sample(files, min(args.limit, len(files)))
    strict = args.default_options
    stages: dict[str, list[float]] = {"to_ebnf": [], "parse": [], "compile_json_schema": []}
    for f in files:
        schema = json.dumps(json.loads(f.read_text(encoding="utf-8"))["schema"])
        try:
            t0 = time.perf_counter()
            ebnf = testing._json_schema_to_ebnf(schema, strict_mode=strict)
            t1 = time.perf_counter()
            xgr.Grammar.from_ebnf(ebnf)
            t2 = time.perf_counter()
            compiler.compile_json_schema(schema, strict_mode=strict)
            t3 = time.perf_counter()
        except xgr.GrammaskError:
            continue
        stages["to_ebnf"].append(t1 - t0)
        stages["parse"].append(t2 - t1)
        stages["compile_json_schema"].append(t3 - t2)
    for name, xs in stages.items():
        xs.sort()
        q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3  # noqa: E731
        print(f"{name:20} p50 {q(0.5):8.2f}  p90 {q(0.9):8.2f}  p99 {q(0.99):8.2f} ms  ({len(xs)} schemas)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CPU and wall time of the first structural-tag compile in a fresh process (issue 16).

Imports grammask, loads the Llama 3 tokenizer, builds ``get_model_structural_tag`` for N
generated tools (the tools of ``structural_tag_bench.py``) and times the first
``compile_structural_tag`` in the process (which pays the per-vocabulary class indexes), then a
second cold compile (fresh compiler, cache off), and, apart, the construction of the first
``GrammarCompiler`` (which builds the tokenizer's token index). ``time.process_time`` counts the
CPU time of every thread of the process, so it is the figure to compare on a loaded machine.

Usage::

    python3 bench/structural_tag_first_compile.py [--tools 50] [--warm-json]

``--warm-json`` first compiles and masks an unrelated JSON schema, as the comparison bench does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=50)
    ap.add_argument("--warm-json", action="store_true")
    args = ap.parse_args()
    shared = Path(os.environ.get("GRAMMASK_SHARED", REPO.parent / "shared"))
    import grammask
    from structural_tag_bench import make_tools
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(shared / "tokenizers" / "llama3"))
    info = grammask.TokenizerInfo.from_huggingface(tok)
    if args.warm_json:
        warm = grammask.GrammarCompiler(info).compile_json_schema(
            {"type": "object", "properties": {"x": {"type": "string"}}}
        )
        wm = grammask.GrammarMatcher(warm)
        wb = grammask.allocate_token_bitmask(1, info.vocab_size)
        for t in tok.encode('{"x": "warm up"}', add_special_tokens=False):
            wm.fill_next_token_bitmask(wb)
            wm.accept_token(t)
    tag_json = grammask.get_model_structural_tag(
        "llama", tools=make_tools(args.tools), max_whitespace_cnt=16
    ).model_dump_json()
    rows = []
    for label in ("first", "second"):
        # The first compiler of a tokenizer builds its token index (trie, string-body slice):
        # timed apart from the compile.
        c0, w0 = time.process_time(), time.perf_counter()
        comp = grammask.GrammarCompiler(info, cache_enabled=False)
        if label == "first":
            build = ((time.process_time() - c0) * 1e3, (time.perf_counter() - w0) * 1e3)
        c0, w0 = time.process_time(), time.perf_counter()
        comp.compile_structural_tag(tag_json)
        rows.append((label, (time.process_time() - c0) * 1e3, (time.perf_counter() - w0) * 1e3))
    print(f"tools={args.tools} GrammarCompiler(info): cpu {build[0]:7.1f} ms  wall {build[1]:7.1f} ms")
    for label, cpu, wall in rows:
        print(f"tools={args.tools} {label:<6} compile: cpu {cpu:7.1f} ms  wall {wall:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

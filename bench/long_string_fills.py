"""Mask fills along one long generated string: where a counted string body costs.

A schema ``{"s": {"type": "string", "maxLength": N}}`` is compiled for each ``--max-length``
and a document with a string of ``--chars`` characters (words drawn with a fixed seed) is
tokenized (Llama 3 by default) and replayed token by token, timing each
``fill_next_token_bitmask`` in thread CPU time. Prints the compile time, the fills' p50 and max,
and the slowest fills with their token index and the string's character offset: a counted run
built from blocks (``json_schema/compile/scalars.rs``, ``counted_chars``) shows a slow fill where
tokens may cross a block's end.

    GRAMMASK_SHARED=/work/shared PYTHONPATH=<package> python bench/long_string_fills.py \
        --max-length 2000 --max-length 4096 --chars 1500
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

if importlib.util.find_spec("grammask") is None:
    sys.path.append(str(Path(__file__).resolve().parent.parent / "python"))
import grammask  # noqa: E402
from grammask.bench.data import default_tokenizer_dir, load_hf_tokenizer  # noqa: E402

WORDS = (
    "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches "
    "near old castles"
).split()


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--max-length", type=int, action="append", required=True, metavar="N")
    ap.add_argument("--chars", type=int, default=1500, help="characters of the generated string")
    ap.add_argument("--top", type=int, default=6)
    args = ap.parse_args()
    tok = load_hf_tokenizer(default_tokenizer_dir())
    info = grammask.TokenizerInfo.from_huggingface(tok)
    compiler = grammask.GrammarCompiler(info)
    rng = random.Random(7)
    text = " ".join(rng.choice(WORDS) for _ in range(args.chars))[: args.chars]
    for n in args.max_length:
        if n < len(text):
            raise SystemExit(f"--max-length {n} is below --chars {len(text)}")
        schema = {
            "type": "object",
            "properties": {"s": {"type": "string", "maxLength": n}},
            "required": ["s"],
        }
        t0 = time.thread_time()
        compiled = compiler.compile_json_schema(json.dumps(schema), any_whitespace=False)
        compile_ms = (time.thread_time() - t0) * 1e3
        ids = tok.encode(json.dumps({"s": text}), add_special_tokens=False)
        matcher = grammask.GrammarMatcher(compiled)
        bitmask = grammask.allocate_token_bitmask(1, info.vocab_size)
        fills = []  # (µs, token index, character offset in the document)
        at = 0
        for i, t in enumerate(ids):
            t0 = time.thread_time_ns()
            matcher.fill_next_token_bitmask(bitmask)
            fills.append(((time.thread_time_ns() - t0) / 1e3, i, at))
            if not matcher.accept_token(t):
                raise SystemExit(f"token {i} ({t}) refused")
            at += len(tok.decode([t]))
        us = np.array([f[0] for f in fills])
        top = ", ".join(
            f"{d:.0f} us @ token {i} / char {c}"
            for d, i, c in sorted(fills, reverse=True)[: args.top]
        )
        print(
            f"maxLength {n}: compile {compile_ms:.1f} ms, {len(ids)} fills, p50 {np.median(us):.1f} us, "
            f"max {us.max():.0f} us; slowest: {top}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

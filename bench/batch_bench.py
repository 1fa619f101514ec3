"""Batch mask filling, 64 rows, 1 vs 2 threads: grammask's BatchGrammarMatcher beside XGrammar's
in the same run, plus peak memory per compiled grammar and of the caches.

Llama 3's tokenizer (128k vocabulary), one JSON Schema; 64 matchers each decode a different
instance document token by token. Per configuration (engine, threads) the grammar is compiled
fresh (no compiler cache), so the first pass fills the mask caches as in serving; each step times
one ``batch_fill_next_token_bitmask`` over the rows still running, then every matcher accepts its
next token (not timed). Reported: total fill time over the decode, ms per batch step (p50, p99),
and the 1-thread / 2-thread speed-up.

Memory: ``CompiledGrammar.memory_size_bytes`` right after compiling and after the decode (the
kernel and mask memos grow while masks are computed), the process's peak RSS, and a cache check:
20 distinct schemas compiled into a compiler with ``cache_limit_bytes`` = 2 MiB, then
``get_cache_size_bytes()`` (the recorded size, bounded by the limit) beside the current
``memory_size_bytes`` sum of the grammars still cached (which grows after insertion).

    python bench/batch_bench.py [--rows 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import random
import resource
import sys
import time
from pathlib import Path

import numpy as np

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "email": {"type": "string", "format": "email"},
        "score": {"type": "number"},
        "active": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string"}},
            "required": ["street", "city"],
        },
    },
    "required": ["id", "name", "active", "tags"],
}

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron".split()


def instance(rng: random.Random) -> str:
    doc = {
        "id": rng.randint(-1000, 10**6),
        "name": " ".join(rng.choice(WORDS).capitalize() for _ in range(rng.randint(1, 3))),
        "email": f"{rng.choice(WORDS)}{rng.randint(1, 99)}@example.com",
        "score": round(rng.uniform(-5, 100), rng.randint(0, 4)),
        "active": rng.random() < 0.5,
        "tags": [rng.choice(WORDS) for _ in range(rng.randint(0, 4))],
        "address": {"street": f"{rng.randint(1, 999)} {rng.choice(WORDS)} st", "city": rng.choice(WORDS)},
    }
    if rng.random() < 0.3:
        del doc["address"]
    return json.dumps(doc, indent=rng.choice([None, 2]))


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(mod, info, docs: list[list[int]], threads: int) -> tuple[list[float], int, int]:
    compiler = mod.GrammarCompiler(info, cache_enabled=False)
    compiled = compiler.compile_json_schema(json.dumps(SCHEMA))
    size_compiled = compiled.memory_size_bytes
    matchers = [mod.GrammarMatcher(compiled) for _ in docs]
    batch = mod.BatchGrammarMatcher(max_threads=threads)
    bitmask = mod.allocate_token_bitmask(len(docs), info.vocab_size)
    times = []
    for step in range(max(len(d) for d in docs)):
        live = [i for i, d in enumerate(docs) if step < len(d)]
        ms = [matchers[i] for i in live]
        t = time.perf_counter_ns()
        batch.batch_fill_next_token_bitmask(ms, bitmask, live)
        times.append((time.perf_counter_ns() - t) / 1e6)
        for i in live:
            if not matchers[i].accept_token(docs[i][step]):
                raise SystemExit(f"{mod.__name__}: row {i} rejected token {step} of its document")
    return times, size_compiled, compiled.memory_size_bytes


def cache_check(mod, info) -> tuple[int, int, int]:
    limit = 2 << 20
    compiler = mod.GrammarCompiler(info, cache_enabled=True, cache_limit_bytes=limit)
    kept = []
    for i in range(20):
        schema = dict(SCHEMA, properties=dict(SCHEMA["properties"], **{f"extra{i}": {"type": "integer"}}))
        cg = compiler.compile_json_schema(json.dumps(schema))
        m = mod.GrammarMatcher(cg)
        m.accept_string('{"id": 1, "name": "x", "active": true, "tags": [')
        kept.append(cg)
    return limit, compiler.get_cache_size_bytes(), sum(c.memory_size_bytes for c in kept[-4:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration; best total is kept")
    ap.add_argument("--tokenizer", default="llama3")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    import grammask
    import xgrammar

    shared = Path(os.environ.get("GRAMMASK_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    tok = AutoTokenizer.from_pretrained(str(shared / "tokenizers" / args.tokenizer))
    rng = random.Random(0)
    docs = [tok.encode(instance(rng), add_special_tokens=False) for _ in range(args.rows)]
    print(
        f"grammask {grammask.__version__}, xgrammar {importlib.metadata.version('xgrammar')}, "
        f"{os.cpu_count()} CPUs; {args.tokenizer}, {args.rows} rows, {sum(map(len, docs))} tokens, "
        f"{max(map(len, docs))} batch steps; best of {args.repeats}"
    )
    infos = {
        "grammask": (grammask, grammask.TokenizerInfo.from_huggingface(tok)),
        "xgrammar": (xgrammar, xgrammar.TokenizerInfo.from_huggingface(tok)),
    }
    print("| engine | threads | total fill ms | p50 ms/step | p99 ms/step | speed-up 1->2 | grammar bytes compiled -> after decode |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, (mod, info) in infos.items():
        best = {}
        for threads in (1, 2):
            runs = [run(mod, info, docs, threads) for _ in range(args.repeats)]
            best[threads] = min(runs, key=lambda r: sum(r[0]))
        for threads in (1, 2):
            times, s0, s1 = best[threads]
            speed = sum(best[1][0]) / sum(times)
            print(
                f"| {name} | {threads} | {sum(times):.1f} | {np.percentile(times, 50):.3f} | "
                f"{np.percentile(times, 99):.3f} | {speed:.2f}x | {s0 / 2**20:.2f} MiB -> {s1 / 2**20:.2f} MiB |"
            )
    print(f"\npeak RSS of this process: {peak_rss_mib():.0f} MiB")
    print("\n| engine | cache_limit_bytes | get_cache_size_bytes | memory_size_bytes now, last 4 cached |")
    print("|---|---:|---:|---:|")
    for name, (mod, info) in infos.items():
        limit, recorded, now = cache_check(mod, info)
        print(f"| {name} | {limit} | {recorded} | {now} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

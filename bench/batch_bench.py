"""Batch mask filling, 64 rows, 1 vs 2 threads: grammask's BatchGrammarMatcher beside XGrammar's
in the same run, plus peak memory per compiled grammar and of the caches.

Llama 3's tokenizer (128k vocabulary). Workloads:

* ``one-schema``: one JSON Schema; 64 matchers each decode a different instance document.
* ``maskbench``: 64 different MaskBench schemas (sampled with ``--seed``; files that either engine
  cannot compile, or whose first valid instance either engine rejects, are skipped), each row
  decoding its schema's first valid instance (``json.dumps`` of it) -- a server batch of different
  requests. Rows end at different lengths, so later steps have few rows (about 8 on average).
* ``one-schema-continuous``, ``maskbench-continuous``: continuous batching, as vLLM and SGLang
  serve: a pool of ``--pool`` instances of the workload above (the first 64 are its rows), 64
  rows, and a row whose document ended takes the next instance of the pool (a fresh matcher) at
  the next step. The decode stops before the first step that would have an empty row, so every
  step fills 64 rows.

Per configuration (engine, threads) the grammars are compiled fresh (no compiler cache), so the
first pass fills the mask caches as in serving; each step times one
``batch_fill_next_token_bitmask`` over the rows still running (wall and process CPU time, the
latter summed over all threads), then every matcher accepts its next token (not timed). The
configurations alternate (engine, 1 thread, 2 threads, next engine, ...) ``--repeats`` times and the
best total per configuration is kept. Reported: total fill time over the decode (wall, CPU), ms per
batch step (p50, p99), and the 1-thread / 2-thread speed-up of the wall total.

Memory: ``CompiledGrammar.memory_size_bytes`` right after compiling and after the decode (the
kernel and mask memos grow while masks are computed), the process's peak RSS, and a cache check:
20 distinct schemas compiled into a compiler with ``cache_limit_bytes`` = 2 MiB, then
``get_cache_size_bytes()`` (the recorded size, bounded by the limit) beside the current
``memory_size_bytes`` sum of the grammars still cached (which grows after insertion).

Bounding a run (XGrammar's maskbench decode takes minutes): ``--engines grammask`` measures grammask
alone (MaskBench rows are then chosen by grammask alone); ``--max-steps N`` decodes the first N
tokens of each row; ``--time-limit S`` stops each engine's first configuration after S seconds of
fills and caps its other configurations at the steps that one reached, so thread counts compare
over the same steps; ``--rows-cache FILE`` keeps the chosen MaskBench rows for later runs.
``--warm`` times a second decode on the same compiled grammars (a server's steady state for
schemas it has served before: mostly memoized masks) instead of the first.

    python bench/batch_bench.py [--rows 64] [--repeats 3] [--workloads one-schema,maskbench] [--seed 0] [--pool 256]
        [--engines grammask,xgrammar] [--threads 1,2] [--max-steps N] [--time-limit S] [--rows-cache F] [--warm]
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


def compile_all(mod, info, schemas: list[str], strict: bool) -> list:
    """One compiled grammar per row (the same object for rows sharing a schema text)."""
    compiler = mod.GrammarCompiler(info, cache_enabled=False)
    by_text: dict[str, object] = {}
    for s in schemas:
        if s not in by_text:
            by_text[s] = compiler.compile_json_schema(s, strict_mode=strict)
    return [by_text[s] for s in schemas]


def schedule(docs: list[list[int]], rows: int, continuous: bool) -> list[list[tuple[int, int, int]]]:
    """Per batch step, (row, instance, token position) of each live row. Static: row i decodes
    docs[i] from step 0 and leaves the batch when it ends (`rows` is len(docs)). Continuous: a
    row whose instance ended takes the next unstarted one at the next step; the schedule stops
    before the first step a row would have nothing to decode, so every step has `rows` rows."""
    if continuous and len(docs) < rows:
        raise SystemExit(f"a pool of {len(docs)} documents cannot fill {rows} rows")
    if not continuous:
        return [[(i, i, step) for i, d in enumerate(docs) if step < len(d)] for step in range(max(map(len, docs)))]
    current = [(i, 0) for i in range(rows)]  # (instance, next token position) per row
    fresh = rows
    steps = []
    while True:
        for r, (inst, pos) in enumerate(current):
            if pos == len(docs[inst]):
                if fresh == len(docs):
                    return steps
                current[r] = (fresh, 0)
                fresh += 1
        steps.append([(r, inst, pos) for r, (inst, pos) in enumerate(current)])
        current = [(inst, pos + 1) for inst, pos in current]


def run(mod, info, schemas, docs, threads: int, strict: bool, max_steps: int = 0, time_limit: float = 0.0, warm=False,
        rows: int = 0):
    """(wall ms per step, process CPU ms over all fills, grammar bytes after compile, after decode).

    `rows` > 0: continuous batching of the `docs` pool on `rows` rows (see `schedule`); 0: one
    row per document. Decodes at most `max_steps` steps (0: all), and stops after the step during
    which the fills' wall total passed `time_limit` seconds (0: no limit). `warm`: the same
    compiled grammars decode the documents once, untimed, first (their memos filled, as for
    schemas a server has seen)."""
    compiled = compile_all(mod, info, schemas, strict)
    unique = list({id(c): c for c in compiled}.values())
    size_compiled = sum(c.memory_size_bytes for c in unique)
    batch = mod.BatchGrammarMatcher(max_threads=threads)
    plan = schedule(docs, rows or len(docs), rows > 0)
    plan = plan[:max_steps] if max_steps else plan
    bitmask = mod.allocate_token_bitmask(rows or len(docs), info.vocab_size)
    for timed in (False, True) if warm else (True,):
        matchers: list = [None] * (rows or len(docs))
        times: list[float] = []
        cpu = 0
        for step in plan:
            if time_limit and timed and sum(times) > time_limit * 1e3:
                break
            for r, inst, pos in step:
                if pos == 0:
                    matchers[r] = mod.GrammarMatcher(compiled[inst])
            live = [r for r, _, _ in step]
            ms = [matchers[r] for r in live]
            c = time.process_time_ns()
            t = time.perf_counter_ns()
            batch.batch_fill_next_token_bitmask(ms, bitmask, live)
            times.append((time.perf_counter_ns() - t) / 1e6)
            cpu += time.process_time_ns() - c
            for r, inst, pos in step:
                if not matchers[r].accept_token(docs[inst][pos]):
                    raise SystemExit(f"{mod.__name__}: instance {inst} rejected token {pos} of its document")
    return times, cpu / 1e6, size_compiled, sum(c.memory_size_bytes for c in unique)


def accepts(mod, info, schema: str, tokens: list[int]) -> bool:
    """Whether `mod` compiles `schema` and accepts `tokens` then its stop token."""
    try:
        m = mod.GrammarMatcher(mod.GrammarCompiler(info, cache_enabled=False).compile_json_schema(schema, strict_mode=False))
        return all(m.accept_token(t) for t in tokens) and m.accept_token(info.stop_token_ids[0])
    except Exception:  # noqa: BLE001 - any failure skips the file
        return False


def one_schema_rows(tok, rows: int) -> tuple[list[str], list[list[int]]]:
    """`rows` copies of SCHEMA, each with the token ids of a different instance document."""
    rng = random.Random(0)
    docs = [tok.encode(instance(rng), add_special_tokens=False) for _ in range(rows)]
    return [json.dumps(SCHEMA)] * rows, docs


def maskbench_rows(infos, tok, rows: int, seed: int) -> tuple[list[str], list[list[int]]]:
    """`rows` (schema text, token ids of its first valid instance) that both engines accept."""
    files = sorted((shared_dir() / "maskbench" / "data").glob("*.json"))
    random.Random(seed).shuffle(files)
    schemas, docs = [], []
    for f in files:
        d = json.loads(f.read_text())
        valid = [t["data"] for t in d.get("tests", []) if t.get("valid")]
        if not valid:
            continue
        schema = json.dumps(d["schema"])
        tokens = tok.encode(json.dumps(valid[0]), add_special_tokens=False)
        if all(accepts(mod, info, schema, tokens) for mod, info in infos.values()):
            schemas.append(schema)
            docs.append(tokens)
            if len(docs) == rows:
                break
    return schemas, docs


WORKLOADS = ("one-schema", "maskbench", "one-schema-continuous", "maskbench-continuous")


def workload_rows(workload: str, infos, tok, rows: int, seed: int, rows_cache: str = "", pool: int = 256):
    """(schema texts, token ids per instance) of `workload`: `rows` instances, or `pool` for a
    continuous workload. MaskBench instances are those every engine in `infos` accepts, read from
    / written to `rows_cache` when given (a cache with too few is redone; a smaller set is a
    prefix of a larger one)."""
    if workload not in WORKLOADS:
        raise SystemExit(f"unknown workload {workload!r}; one of {', '.join(WORKLOADS)}")
    n = pool if workload.endswith("-continuous") else rows
    if workload.startswith("one-schema"):
        return one_schema_rows(tok, n)
    if rows_cache and os.path.exists(rows_cache):
        schemas, docs = json.loads(Path(rows_cache).read_text())
        if len(docs) >= n:
            return schemas[:n], docs[:n]
    schemas, docs = maskbench_rows(infos, tok, n, seed)
    if rows_cache:
        Path(rows_cache).write_text(json.dumps([schemas, docs]))
    return schemas, docs


def shared_dir() -> Path:
    return Path(os.environ.get("GRAMMASK_SHARED", Path(__file__).resolve().parents[2] / "shared"))


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
    ap.add_argument("--workloads", default="one-schema,maskbench")
    ap.add_argument("--seed", type=int, default=0, help="MaskBench file sample")
    ap.add_argument("--engines", default="grammask,xgrammar")
    ap.add_argument("--threads", default="1,2", help="thread counts; the speed-up is against the first")
    ap.add_argument("--max-steps", type=int, default=0, help="decode at most this many steps (0: all)")
    ap.add_argument("--time-limit", type=float, default=0.0, help="seconds of fills per engine's first run")
    ap.add_argument("--rows-cache", default="", help="file keeping the MaskBench rows chosen")
    ap.add_argument("--warm", action="store_true", help="time a second decode on the same compiled grammars")
    ap.add_argument("--pool", type=int, default=256, help="instances a continuous workload draws from")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(shared_dir() / "tokenizers" / args.tokenizer))
    infos = {}
    for name in args.engines.split(","):
        mod = importlib.import_module(name)
        infos[name] = (mod, mod.TokenizerInfo.from_huggingface(tok))
    thread_counts = [int(t) for t in args.threads.split(",")]
    print(
        ", ".join(f"{n} {getattr(m, '__version__', None) or importlib.metadata.version(n)}" for n, (m, _) in infos.items())
        + f"; {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"{args.tokenizer}; best of {args.repeats}"
    )
    for workload in args.workloads.split(","):
        schemas, docs = workload_rows(workload, infos, tok, args.rows, args.seed, args.rows_cache, args.pool)
        rows = args.rows if workload.endswith("-continuous") else 0
        plan = schedule(docs, rows or len(docs), rows > 0)
        used = {inst for step in plan for _, inst, _ in step}
        schemas, docs = schemas[: max(used) + 1], docs[: max(used) + 1]  # instances start in order
        print(
            f"\n### {workload}{' (warm)' if args.warm else ''}: {rows or len(docs)} rows, "
            f"{len({schemas[i] for i in used})} schemas, {len(used)} documents, "
            f"{sum(map(len, plan))} tokens, {len(plan)} batch steps\n"
        )
        print(
            "| engine | threads | steps | total fill ms (wall) | process CPU ms | p50 ms/step | p99 ms/step "
            f"| speed-up {thread_counts[0]}->t | grammar bytes compiled -> after decode |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
        runs: dict = {(name, t): [] for name in infos for t in thread_counts}
        steps = {name: args.max_steps for name in infos}
        for _ in range(args.repeats):
            for name, (mod, info) in infos.items():
                for threads in thread_counts:
                    limit = args.time_limit if not runs[name, threads] and threads == thread_counts[0] else 0.0
                    strict = workload.startswith("one-schema")
                    r = run(mod, info, schemas, docs, threads, strict, steps[name], limit, args.warm, rows)
                    if limit:
                        steps[name] = len(r[0])
                    runs[name, threads].append(r)
        for name in infos:
            best = {t: min(runs[name, t], key=lambda r: sum(r[0])) for t in thread_counts}
            for threads in thread_counts:
                times, cpu, s0, s1 = best[threads]
                speed = sum(best[thread_counts[0]][0]) / sum(times)
                print(
                    f"| {name} | {threads} | {len(times)} | {sum(times):.1f} | {cpu:.1f} | "
                    f"{np.percentile(times, 50):.3f} | {np.percentile(times, 99):.3f} | {speed:.2f}x | "
                    f"{s0 / 2**20:.2f} MiB -> {s1 / 2**20:.2f} MiB |"
                )
        sys.stdout.flush()
    print(f"\npeak RSS of this process: {peak_rss_mib():.0f} MiB")
    print("\n| engine | cache_limit_bytes | get_cache_size_bytes | memory_size_bytes now, last 4 cached |")
    print("|---|---:|---:|---:|")
    for name, (mod, info) in infos.items():
        limit, recorded, now = cache_check(mod, info)
        print(f"| {name} | {limit} | {recorded} | {now} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

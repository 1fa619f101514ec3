"""Tool-calling structural tags: compile time and mask latency, grammask vs XGrammar 0.2.8.

After a warm-up (one unrelated grammar compiled and masked in each library, which pays the
one-time per-tokenizer indexes), for N generated tools (varied parameter schemas) it builds ``get_model_structural_tag(model,
tools)`` with each library's own function (same JSON), compiles it with a fresh compiler (cache off,
cold) and then walks one output (free text, two tool calls, more text) token by token, timing
``fill_next_token_bitmask`` before each token. Prints compile ms (median of --repeat cold compiles)
and mask µs p50/p99/max for both, in the same run and process.

Usage::

    python3 bench/structural_tag_bench.py [--model llama] [--tools 10 50] [--repeat 5] [--slowest K] [--steps] [--cpu] [--rounds N]

``--cpu`` times masks in thread CPU time instead of wall time (steadier on a shared machine);
``--rounds N`` walks the output N times, each after a fresh cold compile, and reports each step's
minimum (a loaded machine's preemptions and cache evictions filtered out). ``--steps`` prints every step's mask time in order (which states cost the p50), ``--slowest K`` also prints, per library and tool count, the K slowest mask steps with the text
before them and the token that followed (first visits of new parser states).

The shared data directory is ``$GRAMMASK_SHARED`` or ``../shared`` next to the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def make_tools(n: int) -> list:
    """n tools with varied argument schemas (strings, enums, bounded integers, nested objects,
    arrays, optional fields, one without parameters)."""
    tools = []
    for i in range(n):
        kind = i % 5
        props: dict = {"query": {"type": "string", "description": f"query {i}"}}
        required = ["query"]
        if kind >= 1:
            props["limit"] = {"type": "integer", "minimum": 1, "maximum": 100}
        if kind >= 2:
            props["unit"] = {"type": "string", "enum": ["metric", "imperial", f"u{i}"]}
            required.append("unit")
        if kind >= 3:
            props["filters"] = {
                "type": "object",
                "properties": {
                    "lang": {"type": "string"},
                    "safe": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["lang"],
            }
        if kind == 4:
            props = {}
            required = []
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": f"tool_{i}_{['search', 'lookup', 'convert', 'filter', 'ping'][kind]}",
                    "description": f"Tool number {i}",
                    "parameters": {"type": "object", "properties": props, "required": required},
                },
            }
        )
    return tools


def output_text(model: str, tools: list) -> str:
    if model != "llama":
        raise SystemExit("the walked output is written for --model llama")
    a, b = tools[0]["function"]["name"], tools[min(3, len(tools) - 1)]["function"]["name"]
    call_a = '{"name": "' + a + '", "parameters": {"query": "weather in Paris tomorrow"}}'
    call_b = (
        '{"name": "'
        + b
        + '", "parameters": {"query": "x", "limit": 5, "unit": "metric", "filters": {"lang": "en", "tags": ["a", "b"]}}}'
    )
    return (
        "I will look this up for you. "
        + call_a
        + " and then "
        + call_b
        + " Done; the results follow."
    )


def run(lib, name: str, model: str, tools: list, tok, info, repeat: int, text: str, clock=time.perf_counter, rounds: int = 1) -> dict:
    tag = lib.get_model_structural_tag(model, tools=tools, max_whitespace_cnt=16)
    tag_json = tag.model_dump_json()
    times = []
    cg = None
    for _ in range(repeat):
        comp = lib.GrammarCompiler(info, cache_enabled=False)
        t0 = time.perf_counter()
        cg = comp.compile_structural_tag(tag_json)
        times.append((time.perf_counter() - t0) * 1e3)
    ids = tok.encode(text, add_special_tokens=False)
    lat = [float("inf")] * len(ids)
    for r in range(rounds):
        if r:
            cg = lib.GrammarCompiler(info, cache_enabled=False).compile_structural_tag(tag_json)
        matcher = lib.GrammarMatcher(cg)
        bm = lib.allocate_token_bitmask(1, info.vocab_size)
        for i, t in enumerate(ids):
            t0 = clock()
            matcher.fill_next_token_bitmask(bm)
            lat[i] = min(lat[i], (clock() - t0) * 1e6)
            if not matcher.accept_token(t):
                raise SystemExit(f"{name} rejected token {t} {tok.decode([t])!r}")
    lat_a = np.array(lat)
    slowest = [
        (lat[i], tok.decode(ids[max(0, i - 6) : i]), tok.decode([ids[i]]))
        for i in sorted(range(len(ids)), key=lambda i: -lat[i])
    ]
    steps = [(lat[i], tok.decode([ids[i]])) for i in range(len(ids))]
    return {
        "steps": steps,
        "slowest": slowest,
        "lib": name,
        "compile_ms": statistics.median(times),
        "compile_ms_first": times[0],
        "p50_us": float(np.percentile(lat_a, 50)),
        "p99_us": float(np.percentile(lat_a, 99)),
        "max_us": float(lat_a.max()),
        "tokens": len(ids),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama")
    ap.add_argument("--tools", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--slowest", type=int, default=0, metavar="K")
    ap.add_argument("--steps", action="store_true", help="print every step's mask time, in order")
    ap.add_argument("--cpu", action="store_true", help="time masks in thread CPU time, not wall time")
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="walk N times, each on a fresh cold compile, and keep each step's minimum (steadier on a loaded machine)",
    )
    args = ap.parse_args()
    shared = Path(os.environ.get("GRAMMASK_SHARED", REPO.parent / "shared"))
    import grammask
    import xgrammar
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(shared / "tokenizers" / "llama3"))
    infos = {
        "grammask": grammask.TokenizerInfo.from_huggingface(tok),
        "xgrammar": xgrammar.TokenizerInfo.from_huggingface(tok),
    }
    # One-time per-tokenizer work (vocabulary indexes built on first use) is paid by a warm-up
    # compile and mask of an unrelated grammar in each library, as a server does at start.
    for name, lib in (("grammask", grammask), ("xgrammar", xgrammar)):
        warm = lib.GrammarCompiler(infos[name]).compile_json_schema(
            {"type": "object", "properties": {"x": {"type": "string"}}}
        )
        wm = lib.GrammarMatcher(warm)
        wb = lib.allocate_token_bitmask(1, infos[name].vocab_size)
        for t in tok.encode('{"x": "warm up"}', add_special_tokens=False):
            wm.fill_next_token_bitmask(wb)
            wm.accept_token(t)
    rows = []
    for n in args.tools:
        tools = make_tools(n)
        text = output_text(args.model, tools)
        for name, lib in (("grammask", grammask), ("xgrammar", xgrammar)):
            clock = time.thread_time if args.cpu else time.perf_counter
            r = run(lib, name, args.model, tools, tok, infos[name], args.repeat, text, clock, args.rounds)
            r["tools"] = n
            rows.append(r)
    for r in rows:
        r["slowest"] = r["slowest"][: args.slowest]
        if not args.steps:
            del r["steps"]
    if args.json:
        print(json.dumps(rows, indent=1))
    print(
        f"model={args.model} vocabulary=llama3 (cold compiles, cache off; masks along a {rows[0]['tokens']}-token output, per-step minimum of {args.rounds} walks)"
    )
    print(
        f"{'tools':>5} {'library':<9} {'compile ms (median)':>20} {'first':>8} {'mask p50 µs':>12} {'p99 µs':>10} {'max µs':>10}"
    )
    for r in rows:
        print(
            f"{r['tools']:>5} {r['lib']:<9} {r['compile_ms']:>20.1f} {r['compile_ms_first']:>8.1f} "
            f"{r['p50_us']:>12.1f} {r['p99_us']:>10.1f} {r['max_us']:>10.1f}"
        )
    for r in rows:
        for i, (us, token) in enumerate(r.get("steps", [])):
            print(f"{r['tools']:>5} {r['lib']:<9} step {i:>3} {us:>10.1f} µs  before {token!r}")
    for r in rows:
        for us, before, token in r["slowest"]:
            print(f"{r['tools']:>5} {r['lib']:<9} {us:>10.1f} µs  after ...{before!r} next {token!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Lark grammars: compile time and per-token mask time, grammask vs XGrammar 0.2.8 vs llguidance.

Three Lark grammars (a key=value config language with %import common and %ignore, an arithmetic
expression grammar with left recursion, and free text or an inline %json tool call), each with a
sample document. For each engine, in the same run and process, on the Llama 3 tokenizer:
compile time (median of ``--repeat`` uncached compiles: ``GrammarCompiler.compile_lark`` for
grammask and XGrammar, ``grammar_from_lark`` + ``LLMatcher`` for llguidance), compile plus the
first mask (engines differ in how much work they defer to the first masks), and the time to fill
the token bitmask at each step along the document's tokenization (p50 / p99 over all steps of
``--rounds`` passes, the first pass included, so p99 shows first-visit costs). Every engine must accept every token of the document.

With ``--cases`` it instead decides every (grammar, string) case of tests/lark_cases.py with the
three engines and prints the agreement counts (tests/test_lark.py asserts the same).

Usage::

    python3 bench/lark_bench.py [--repeat 5] [--rounds 3] [--tokenizer llama3] [--cases]
                                [--clock wall|thread]

``--clock thread`` times with this thread's CPU time (``time.thread_time``) instead of wall time:
steadier on a loaded machine, but blind to work on other threads (with ``max_threads=1`` the
three engines' compiles of these grammars took the same process CPU time as thread CPU time).

The shared data directory is ``$GRAMMASK_SHARED`` or ``../shared`` next to the repository root.
"""

from __future__ import annotations

import argparse
import os
import statistics
import importlib.util
import sys
import time
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
clock = time.perf_counter  # or time.thread_time (--clock thread)
# The package PYTHONPATH (or the environment) names wins; this checkout's only as a fallback
# (inserting it first made side-by-side runs of two builds measure this one twice).
if importlib.util.find_spec("grammask") is None:
    sys.path.append(str(REPO / "python"))

GRAMMARS = {
    "config": (
        'start: (pair | COMMENT)*\npair: KEY "=" value ";"\n?value: SIGNED_NUMBER | ESCAPED_STRING | list\n'
        'list: "[" [value ("," value)*] "]"\nKEY: /[a-z_][a-z0-9_.]*/\nCOMMENT: /#[^\\n]*/\n'
        "%import common.SIGNED_NUMBER\n%import common.ESCAPED_STRING\n%import common.WS\n%ignore WS",
        'name = "grammask";\nversion = 1.5;\n# a comment\nitems = [1, 2, "three", [4.5e3, -6]];\n'
        'server.port = 8080;\nserver.hosts = ["a.example", "b.example"];\n',
    ),
    "arith": (
        'start: sum\n?sum: sum "+" product | sum "-" product | product\n'
        '?product: product "*" atom | product "/" atom | atom\n'
        '?atom: NUMBER | NAME "(" [sum ("," sum)*] ")" | NAME | "-" atom | "(" sum ")"\n'
        "NAME: /[a-zA-Z_][a-zA-Z0-9_]*/\n%import common.NUMBER\n%import common.WS_INLINE\n%ignore WS_INLINE",
        "3 * (x + 4.25) - max(a, b / 2, -c) * (y - (z + 1)) / 7 + sqrt(q * q + r * r) - 1000",
    ),
    "tool_call": (
        'start: TEXT | "<tool>" call "</tool>"\nTEXT: /[^<][^<]*/\n'
        'call: %json {"type": "object", "properties": {"name": {"enum": ["get_weather", "search"]}, '
        '"arguments": {"type": "object", "properties": {"city": {"type": "string"}, '
        '"days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["city"]}}, '
        '"required": ["name", "arguments"]}',
        '<tool>{"name": "get_weather", "arguments": {"city": "Seattle, WA", "days": 3}}</tool>',
    ),
}


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall")
    ap.add_argument("--cases", action="store_true", help="agreement counts over tests/lark_cases.py")
    args = ap.parse_args()
    global clock
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    shared = Path(os.environ.get("GRAMMASK_SHARED", REPO.parent / "shared"))
    if args.cases:
        return cases(shared)
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(shared / "tokenizers" / args.tokenizer)
    import grammask
    import llguidance
    import llguidance.hf
    import llguidance.numpy
    import xgrammar

    engines = {}
    for name, mod in (("grammask", grammask), ("xgrammar", xgrammar)):
        info = mod.TokenizerInfo.from_huggingface(hf)
        comp = mod.GrammarCompiler(info, max_threads=1, cache_enabled=False)

        def compile_fn(text, comp=comp):
            return comp.compile_lark(text)

        def run_fn(compiled, tokens, mod=mod, vocab=info.vocab_size):
            m = mod.GrammarMatcher(compiled)
            bm = mod.allocate_token_bitmask(1, vocab)
            times = []
            for t in tokens:
                t0 = clock()
                m.fill_next_token_bitmask(bm)
                times.append(clock() - t0)
                if not m.accept_token(t):
                    raise RuntimeError(f"token {t} rejected")
            return times

        engines[name] = (compile_fn, run_fn)

    tok = llguidance.hf.from_tokenizer(hf)

    def llg_compile(text):
        m = llguidance.LLMatcher(tok, llguidance.LLMatcher.grammar_from_lark(text), log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def llg_run(compiled, tokens):
        m = compiled.deep_copy()
        mask = llguidance.numpy.allocate_token_bitmask(1, tok.vocab_size)
        times = []
        for t in tokens:
            t0 = clock()
            llguidance.numpy.fill_next_token_bitmask(m, mask)
            times.append(clock() - t0)
            if not m.consume_token(t):
                raise RuntimeError(f"token {t} rejected: {m.get_error()}")
        return times

    engines["llguidance"] = (llg_compile, llg_run)

    print(f"tokenizer {args.tokenizer}; compile = median of {args.repeat} uncached compiles; "
          f"mask = fill_next_token_bitmask per token, {args.rounds} passes; {args.clock} clock")
    print("compile+1st: compile then the first mask (the first repeat is cold; the median is over "
          "repeats, which may reuse per-vocabulary caches)")
    print(f"{'grammar':10} {'engine':11} {'tokens':>6} {'compile ms':>11} {'+1st cold':>11} "
          f"{'+1st med':>11} {'mask p50 us':>12} {'mask p99 us':>12}")
    for gname, (text, doc) in GRAMMARS.items():
        tokens = hf.encode(doc, add_special_tokens=False)
        for ename, (compile_fn, run_fn) in engines.items():
            try:
                cts, firsts = [], []
                for _ in range(args.repeat):
                    t0 = clock()
                    compiled = compile_fn(text)
                    cts.append(clock() - t0)
                    firsts.append(cts[-1] + run_fn(compiled, tokens[:1])[0])
                mts: list[float] = []
                for _ in range(args.rounds):
                    mts += run_fn(compiled, tokens)
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"{gname:10} {ename:11} error: {type(e).__name__}: {str(e)[:120]}")
                continue
            print(f"{gname:10} {ename:11} {len(tokens):6d} {statistics.median(cts) * 1e3:11.2f} "
                  f"{firsts[0] * 1e3:11.2f} {statistics.median(firsts) * 1e3:11.2f} "
                  f"{pct(mts, 50) * 1e6:12.1f} {pct(mts, 99) * 1e6:12.1f}")
    return 0


def cases(shared: Path) -> int:
    sys.path.insert(0, str(REPO / "tests"))
    import grammask
    import llguidance
    import xgrammar
    import xgrammar.testing
    from lark_cases import CASES, LLGUIDANCE_DIFF, XGRAMMAR_DIFF

    tok = llguidance.LLTokenizer((shared / "tokenizers" / "gpt2" / "tokenizer.json").read_text())
    byte_tok = [tok.tokenize_bytes(bytes([b]))[0] for b in range(256)]

    def ours(lark, s):
        try:
            g = grammask.Grammar.from_lark(lark)
        except grammask.GrammaskError:
            return "ERR"
        return grammask.testing._is_grammar_accept_string(g, s)

    def xg(lark, s):
        try:
            g = xgrammar.Grammar.from_lark(lark)
        except Exception:  # noqa: BLE001
            return "ERR"
        return xgrammar.testing._is_grammar_accept_string(g, s)

    def ll(lark, s):
        try:
            m = llguidance.LLMatcher(tok, llguidance.LLMatcher.grammar_from_lark(lark), log_level=0)
        except Exception:  # noqa: BLE001
            return "ERR"
        if m.is_error():
            return "ERR"
        return all(m.consume_token(byte_tok[b]) for b in s.encode()) and m.is_accepting()

    n = acc = rej = same_x = same_l = 0
    for cid, (lark, strings) in CASES.items():
        for s in strings:
            a, b, c = ours(lark, s), xg(lark, s), ll(lark, s)
            n += 1
            acc += a is True
            rej += a is False
            same_x += a == b
            same_l += a == c
    print(f"{len(CASES)} grammars, {n} grammar/string cases: grammask accepts {acc}, rejects {rej}")
    print(f"agrees with XGrammar 0.2.8 on {same_x}/{n} (listed differences: {len(XGRAMMAR_DIFF)})")
    print(f"agrees with llguidance {getattr(llguidance, '__version__', '?')} on {same_l}/{n} "
          f"(listed differences: {len(LLGUIDANCE_DIFF)})")
    return 0 if (n - same_x, n - same_l) == (len(XGRAMMAR_DIFF), len(LLGUIDANCE_DIFF)) else 1


if __name__ == "__main__":
    sys.exit(main())

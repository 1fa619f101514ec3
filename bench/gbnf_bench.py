"""llama.cpp's GBNF grammars: compile, first mask and per-token masks, grammask vs XGrammar 0.2.8 vs
llguidance, in one process and run.

    python bench/gbnf_bench.py [--extra DIR] [--tokenizer llama3] [--docs 20] [--tokens 64]
                               [--repeat 5] [--seed 0] [--engines grammask,xgrammar,llguidance]
                               [--clock wall|thread]

Grammars: every ``*.gbnf`` of testdata/gbnf (llama.cpp's ``grammars/`` folder) plus those in
``--extra`` (more grammars, e.g. from a newer llama.cpp). llguidance reads them through its own
``gbnf_to_lark`` converter.

Per grammar and engine, after each engine has compiled and masked one trivial grammar (so the
per-tokenizer set-up is paid before):

* ``cold``: the first compile of the grammar in this process, and the first mask after it
  (``compile + 1st mask`` = time to first mask). grammask builds per-vocabulary character-class
  indexes on first use and keeps them for the process, so this is where they show.
* ``warm``: the median over ``--repeat`` more uncached compiles (``cache_enabled=False``) and their
  first masks.
* masks along ``--docs`` random documents: grammask samples each token uniformly from its own mask
  (seeded; at most ``--tokens`` tokens, the stop token when allowed with probability 1/8), then each
  engine replays the same tokens from a fresh matcher of its cold-compiled grammar, timing every
  ``fill_next_token_bitmask``. p50/p99/max over all steps. grammask's masks are compared bit for bit
  with XGrammar's on every step (``agree``), over the tokens that are not added/special tokens
  (grammask never lets grammar text produce one; XGrammar lets a negated class such as ``[^\\n]``
  read them); llguidance's are not compared (its lexer splits differently).

``--clock thread`` times with this thread's CPU time (``time.thread_time``) instead of wall time:
steadier on a loaded machine, but blind to work on other threads (none of the three engines
compiles these grammars on several threads with ``max_threads=1``).

The shared data folder is ``$GRAMMASK_SHARED`` or ``../shared`` next to the repository.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
clock = time.perf_counter  # or time.thread_time (--clock thread)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class XgrLike:
    """grammask or XGrammar behind one interface."""

    def __init__(self, mod, hf):
        self.mod = mod
        self.info = mod.TokenizerInfo.from_huggingface(hf)
        self.comp = mod.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.bm = mod.allocate_token_bitmask(1, self.info.vocab_size)

    def compile(self, text):
        return self.comp.compile_grammar(text)

    def matcher(self, compiled):
        return self.mod.GrammarMatcher(compiled)

    def fill(self, m):
        m.fill_next_token_bitmask(self.bm)
        return self.bm

    def accept(self, m, t):
        return m.accept_token(t)


class Llg:
    def __init__(self, hf):
        import llguidance
        import llguidance.hf
        import llguidance.numpy
        from llguidance.gbnf_to_lark import gbnf_to_lark

        self.llg = llguidance
        self.to_lark = gbnf_to_lark
        self.tok = llguidance.hf.from_tokenizer(hf)
        self.bm = llguidance.numpy.allocate_token_bitmask(1, self.tok.vocab_size)

    def compile(self, text):
        # gbnf_to_lark writes the top code point as `\U10FFFF`, which its own regex parser rejects.
        lark = self.to_lark(text).replace("\\U10FFFF", "\\U0010FFFF")
        m = self.llg.LLMatcher(self.tok, self.llg.LLMatcher.grammar_from_lark(lark), log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def matcher(self, compiled):
        return compiled.deep_copy()

    def fill(self, m):
        self.llg.numpy.fill_next_token_bitmask(m, self.bm)
        return self.bm

    def accept(self, m, t):
        return m.consume_token(t)


def ttfm(engine, text) -> tuple[float, float, object]:
    t0 = clock()
    compiled = engine.compile(text)
    t1 = clock()
    engine.fill(engine.matcher(compiled))
    return t1 - t0, clock() - t1, compiled


def sample_docs(gm, compiled, n: int, max_tokens: int, rng) -> list[list[int]]:
    """Random token sequences allowed by grammask's masks (the stop token ends a document)."""
    stop = set(gm.info.stop_token_ids)
    docs = []
    for _ in range(n):
        m = gm.matcher(compiled)
        doc: list[int] = []
        for _ in range(max_tokens):
            bits = np.unpackbits(gm.fill(m).numpy().view(np.uint8), bitorder="little")
            allowed = np.flatnonzero(bits[: gm.info.vocab_size])
            stops = [t for t in allowed if t in stop]
            if stops and (len(stops) == len(allowed) or rng.random() < 0.125):
                doc.append(int(stops[0]))
                break
            choices = [t for t in allowed if t not in stop]
            t = int(rng.choice(choices))
            doc.append(t)
            assert gm.accept(m, t)
        docs.append(doc)
    return docs


def replay(engine, compiled, docs, keep_masks: bool):
    times, masks = [], []
    gc.disable()
    try:
        for doc in docs:
            m = engine.matcher(compiled)
            for t in doc:
                t0 = clock()
                bm = engine.fill(m)
                times.append(clock() - t0)
                if keep_masks:
                    masks.append(np.unpackbits(np.asarray(bm).view(np.uint8), bitorder="little"))
                if not engine.accept(m, t):
                    raise RuntimeError(f"token {t} rejected")
    finally:
        gc.enable()
    return times, masks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra", type=Path, help="a folder with more .gbnf files")
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default="grammask,xgrammar,llguidance")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall")
    args = ap.parse_args()
    global clock
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    shared = Path(os.environ.get("GRAMMASK_SHARED", REPO.parent / "shared"))
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(shared / "tokenizers" / args.tokenizer)
    import grammask

    names = args.engines.split(",")
    engines: dict = {}
    for name in names:
        if name == "grammask":
            engines[name] = XgrLike(grammask, hf)
        elif name == "xgrammar":
            import xgrammar

            engines[name] = XgrLike(xgrammar, hf)
        elif name == "llguidance":
            engines[name] = Llg(hf)
    for e in engines.values():  # per-tokenizer set-up, paid before any timing
        ttfm(e, 'root ::= "a"')

    files = sorted((REPO / "testdata" / "gbnf").glob("*.gbnf"))
    if args.extra:
        files += sorted(args.extra.glob("*.gbnf"))
    rng = np.random.default_rng(args.seed)
    # Added tokens are never grammar text in grammask (XGrammar lets a negated class read them).
    text_ids = np.ones(engines["grammask"].info.vocab_size, dtype=bool)
    text_ids[list(engines["grammask"].info.special_token_ids)] = False
    print(f"tokenizer {args.tokenizer}; {args.docs} random documents of at most {args.tokens} tokens "
          f"per grammar; warm = median of {args.repeat} uncached compiles; {args.clock} clock")
    print(f"{'grammar':16} {'engine':11} {'cold ms':>8} {'+1st us':>8} {'warm ms':>8} {'+1st us':>8} "
          f"{'steps':>6} {'p50 us':>7} {'p99 us':>8} {'max us':>8} {'agree':>6}")
    totals = {n: [0.0, 0.0] for n in engines}
    for path in files:
        text = path.read_text(encoding="utf-8")
        compiled, cold = {}, {}
        for n, e in engines.items():
            try:
                c, f1, compiled[n] = ttfm(e, text)
                cold[n] = (c, f1)
            except Exception as err:  # noqa: BLE001 - report and go on
                print(f"{path.name:16} {n:11} error: {type(err).__name__}: {str(err)[:100]}")
        if "grammask" not in compiled:
            continue
        docs = sample_docs(engines["grammask"], compiled["grammask"], args.docs, args.tokens, rng)
        ref = None
        for n, e in engines.items():
            if n not in compiled:
                continue
            warm = [ttfm(e, text)[:2] for _ in range(args.repeat)]
            wc = statistics.median(w[0] for w in warm)
            wf = statistics.median(w[1] for w in warm)
            totals[n][0] += cold[n][0]
            totals[n][1] += cold[n][0] + cold[n][1]
            compile_cols = f"{cold[n][0] * 1e3:8.2f} {cold[n][1] * 1e6:8.0f} {wc * 1e3:8.2f} {wf * 1e6:8.0f}"
            try:
                times, masks = replay(e, compiled[n], docs, keep_masks=n in ("grammask", "xgrammar"))
            except Exception as err:  # noqa: BLE001 - its compile figures still count
                print(f"{path.name:16} {n:11} {compile_cols} replay error: {err}")
                continue
            agree = ""
            if n == "grammask":
                ref = masks
            elif n == "xgrammar" and ref is not None:
                same = sum(bool(np.array_equal(a[text_ids], b[text_ids])) for a, b in zip(ref, masks))
                agree = f"{same}/{len(masks)}"
            print(f"{path.name:16} {n:11} {compile_cols} {len(times):6d} {pct(times, 50) * 1e6:7.1f} "
                  f"{pct(times, 99) * 1e6:8.1f} {max(times) * 1e6:8.0f} {agree:>6}")
    print("total cold compile ms / cold compile + first mask ms: "
          + ", ".join(f"{n} {v[0] * 1e3:.1f} / {v[1] * 1e3:.1f}" for n, v in totals.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

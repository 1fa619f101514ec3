"""Which random EBNF grammars does XGrammar 0.2.8 compile that grammask refuses, and the reverse?

Grammars mix rule options (``max_tokens``, ``max_chars``, ``lazy``, ``capture``, ``temperature``),
token macros, ``Regex``/``Substring``/``TagDispatch``, repetition ranges, recursion and lookaheads;
every rule is reachable from ``root``. Each compile runs in a forked child with a time limit (Llama 3
tokenizer from ``$GRAMMASK_SHARED/tokenizers``). Compile acceptance only: masks are compared by the
tests. Prints the outcome counts, then two examples of each disagreement.

Usage::

    python bench/ebnf_compile_diff.py [--seed 2] [--count 300] [--timeout 20]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import select
import signal
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_schema_suite import shared_dir  # noqa: E402

ATOMS = ['"a"', '"bc"', '"("', '")"', '"x"', '""']
CLASSES = ["[a-z]", '[^"]', "[0-9]"]
TOKENS = ["Token(128009)", "Token(128009, 128001)", "ExcludeToken(128009)"]


class Gen:
    """Random grammars over a few rule names."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def atom(self, names, depth):
        k = self.r.random()
        if k < 0.25:
            return self.r.choice(ATOMS)
        if k < 0.35:
            return self.r.choice(CLASSES)
        if k < 0.55:
            return self.r.choice(names)
        if k < 0.62:
            return self.r.choice(TOKENS)
        if k < 0.66:
            return 'Regex("[a-c]+")'
        if k < 0.68:
            return 'Substring("ab cd")'
        if depth < 2:
            q = self.r.choice(["", "?", "*", "+", "{2}", "{0,3}", "{1,}"])
            return f"({self.expr(names, depth + 1)}){q}"
        return '"z"'

    def expr(self, names, depth=0):
        seqs = (
            " ".join(self.atom(names, depth) for _ in range(self.r.randint(1, 3)))
            for _ in range(self.r.randint(1, 3))
        )
        return " | ".join(seqs)

    def options(self):
        r, opts = self.r, []
        if r.random() < 0.35:
            opts.append(f"max_tokens={r.randint(0, 5)}")
        if r.random() < 0.25:
            opts.append(f"max_chars={r.randint(0, 6)}")
        for name, p in (("lazy", 0.1), ("capture", 0.1), ("temperature=0.5", 0.05)):
            if r.random() < p:
                opts.append(name)
        return f"[{', '.join(opts)}]" if opts else ""

    def one(self):
        r = self.r
        names = ["root"] + [f"r{i}" for i in range(r.randint(1, 3))]
        lines = []
        for n in names:
            body = self.expr(names)
            if r.random() < 0.08:
                loop = r.choice(["true", "false"])
                body = f'TagDispatch(("<t>", {r.choice(names)}), loop_after_dispatch={loop})'
            la = ' (= "a")' if r.random() < 0.05 else ""
            opts = self.options() if n != "root" or r.random() < 0.3 else ""
            lines.append(f"{n}{opts} ::= {body}{la}")
        return "\n".join(lines)

    def reachable(self):
        """A grammar whose every rule is reachable from ``root``."""
        while True:
            text = self.one()
            bodies = {
                line.split(" ", 1)[0].split("[")[0]: line.split("::=", 1)[1]
                for line in text.split("\n")
            }
            seen, todo = {"root"}, ["root"]
            while todo:
                body = bodies[todo.pop()]
                for n in bodies:
                    if n not in seen and re.search(rf"\b{n}\b", body):
                        seen.add(n)
                        todo.append(n)
            if len(seen) == len(bodies):
                return text


def forked(compile_fn, text: str, limit: float) -> str:
    """``ok``, ``TIMEOUT``, ``CRASH ...`` or the error's class and first line."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            compile_fn(text)
            out = "ok"
        except Exception as e:  # noqa: BLE001 (any refusal is an outcome)
            out = f"{type(e).__name__}: {str(e).splitlines()[0][:140] if str(e) else ''}"
        os.write(w, out.encode()[:4000])
        os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], limit)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(r)
        return "TIMEOUT"
    data = os.read(r, 4096).decode()
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return data or f"CRASH status {status}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per compile")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    from transformers import AutoTokenizer

    import grammask
    import xgrammar

    tok = AutoTokenizer.from_pretrained(str(shared_dir() / "tokenizers" / "llama3"))
    xc = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo.from_huggingface(tok), cache_enabled=False)
    gc = grammask.GrammarCompiler(grammask.TokenizerInfo.from_huggingface(tok), cache_enabled=False)
    gen = Gen(args.seed)
    counts: collections.Counter = collections.Counter()
    examples = collections.defaultdict(list)
    for _ in range(args.count):
        text = gen.reachable()
        x = forked(xc.compile_grammar, text, args.timeout)
        g = forked(gc.compile_grammar, text, args.timeout)
        xs = x if x in ("ok", "TIMEOUT") else ("CRASH" if x.startswith("CRASH") else "error")
        if g == "TIMEOUT" or g.startswith("CRASH"):
            key = f"grammask {g} (XGrammar {xs})"
        elif (xs == "ok") != (g == "ok"):
            key = (
                f"XGrammar ok, grammask refuses: {g}"
                if xs == "ok"
                else f"grammask ok, XGrammar {xs}"
            )
        elif xs == "TIMEOUT" and g != "ok":
            key = f"XGrammar TIMEOUT, grammask refuses: {g}"
        else:
            key = f"same: {xs}"
        counts[key] += 1
        examples[key].append(text)
    for key, n in counts.most_common():
        print(n, key)
    for key, texts in examples.items():
        if not key.startswith("same"):
            print("=====", key)
            for text in texts[:2]:
                print(text, "\n--")


if __name__ == "__main__":
    main()

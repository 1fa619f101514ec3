#!/usr/bin/env python3
"""Differential fuzzing of grammask's EBNF parser and printer against XGrammar 0.2.8.

Generates random XGrammar-dialect grammar texts (valid ones and mutated ones), parses them with
grammask (through the ignored Rust test `parse_batch`) and with XGrammar, and reports
1. texts one side accepts and the other rejects (parse level), and
2. for texts both accept, strings on which XGrammar disagrees with itself between the original
   text and grammask's printed form (language level: catches parser and printer bugs).
Run from the repository root: python3 testdata/grammars/fuzz_against_xgrammar.py [N] [SEED]"""
import itertools, json, os, random, subprocess, sys, tempfile

import xgrammar as xg
from xgrammar.testing import _is_grammar_accept_string as accepts

N = int(sys.argv[1]) if len(sys.argv) > 1 else 300
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
RULES = ["root", "r1", "r2"]


def atom(depth):
    k = rng.randrange(10)
    if k < 3:
        return rng.choice(['"a"', '"b"', '"ab"', '""', '"\\x61"', '"é"'])
    if k < 5:
        return rng.choice(["[ab]", "[^a]", "[a-c]", "[b\\-]", "[é-ü]", "[]", "[^]"])
    if k < 7:
        return rng.choice(RULES)
    if depth > 3:
        return '"a"'
    return "(" + expr(depth + 1) + ")" if rng.random() < 0.9 else "()"


def postfix(depth):
    a = atom(depth)
    q = rng.choice(["", "", "", "*", "+", "?", "{2}", "{0,2}", "{1,}", "{0}", "{0, -1}"])
    return a + q


def seq(depth):
    return " ".join(postfix(depth) for _ in range(rng.randint(1, 3)))


def expr(depth=0):
    return " | ".join(seq(depth) for _ in range(rng.randint(1, 3)))


def grammar():
    # r1 and r2 are always defined so references resolve; recursion is possible.
    lines = [f"{r} ::= {expr()}" for r in RULES]
    rng.shuffle(lines)
    return "\n".join(lines)


def mutate(text):
    pos = rng.randrange(len(text) + 1)
    if rng.random() < 0.5 and pos < len(text):
        return text[:pos] + text[pos + 1:]
    return text[:pos] + rng.choice('()|*+?{},[]"\\ =:-^#\n') + text[pos:]


texts = []
for i in range(N):
    t = grammar()
    texts.append(mutate(t) if i % 3 == 2 else t)

with tempfile.TemporaryDirectory() as d:
    inp, out = os.path.join(d, "in.json"), os.path.join(d, "out.json")
    json.dump(texts, open(inp, "w"))
    env = dict(os.environ, GRAMMASK_PARSE_BATCH_IN=inp, GRAMMASK_PARSE_BATCH_OUT=out)
    subprocess.run(["cargo", "test", "-q", "-p", "grammask-core", "--lib", "--", "--ignored", "parse_batch"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    ours = json.load(open(out))

STRINGS = [""] + ["".join(p) for n in range(1, 5) for p in itertools.product("abé", repeat=n)]


def xgrammar_verdicts(text, printed):
    """Runs XGrammar in a forked child (XGrammar 0.2.8 can crash on odd grammars). Returns
    ("crash", None), ("error", message) or ("ok", index of the first differing string or -1)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            try:
                g = xg.Grammar.from_ebnf(text)
            except Exception as e:
                res = ("error", str(e).strip().splitlines()[-1])
            else:
                res = ("ok", -1)
                if printed is not None:
                    ours_g = xg.Grammar.from_ebnf(printed)
                    for i, s in enumerate(STRINGS):
                        if accepts(g, s) != accepts(ours_g, s):
                            res = ("ok", i)
                            break
            os.write(w, json.dumps(res).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return tuple(json.loads(data)) if data else ("crash", None)


parse_diff = lang_diff = both = crashes = 0
for text, res in zip(texts, ours):
    verdict, detail = xgrammar_verdicts(text, res.get("printed"))
    if verdict == "crash":
        crashes += 1
        print(f"XGRAMMAR CRASHED on\n{text}\n  grammask: {res.get('error', 'ok')}\n")
        continue
    if (verdict == "ok") != ("printed" in res):
        parse_diff += 1
        print(f"PARSE DIFF\n{text}\n  xgrammar: {detail if verdict == 'error' else 'ok'}\n  grammask: {res.get('error', 'ok')}\n")
        continue
    if verdict != "ok":
        continue
    both += 1
    if detail >= 0:
        lang_diff += 1
        print(f"LANGUAGE DIFF on {STRINGS[detail]!r}\n{text}\n--- printed by grammask:\n{res['printed']}")
print(f"{len(texts)} texts, {both} parsed by both, {parse_diff} parse disagreements, "
      f"{lang_diff} language disagreements, {crashes} XGrammar crashes")

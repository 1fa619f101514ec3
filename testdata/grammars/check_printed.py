#!/usr/bin/env python3
"""Checks grammask's parser and printer against XGrammar: the Rust corpus test dumps, for every
corpus grammar (both dialects), the grammar as grammask prints it; this script feeds that printed
text to XGrammar and checks every accept/reject expectation. Run from the repository root:
  GRAMMASK_DUMP_PRINTED=/tmp/printed.json cargo test -p grammask-core corpus_grammars
  python3 testdata/grammars/check_printed.py /tmp/printed.json"""
import glob, json, os, sys

import xgrammar as xg
from xgrammar.testing import _is_grammar_accept_string as accepts

HERE = os.path.dirname(os.path.abspath(__file__))
printed = json.load(open(sys.argv[1], encoding="utf-8"))
bad = 0
checked = 0
for path in sorted(glob.glob(os.path.join(HERE, "*.json"))):
    case = json.load(open(path, encoding="utf-8"))
    if "error" in case or "crashes" in case.get("note", ""):
        continue  # XGrammar 0.2.8 segfaults on some nullable cycles; see the case's note
    text = printed[case["name"]]
    g = xg.Grammar.from_ebnf(text, root_rule_name=case["root"])
    for s, want in [(s, True) for s in case["accept"]] + [(s, False) for s in case["reject"]]:
        checked += 1
        if accepts(g, s) != want:
            bad += 1
            print(f"{case['name']}: XGrammar on grammask's printed grammar {'rejects' if want else 'accepts'} {s!r}\n{text}")
print(f"{checked} expectations checked on {len(printed)} printed grammars, {bad} disagreements")
sys.exit(1 if bad else 0)

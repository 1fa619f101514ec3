"""Property tests (hypothesis) on the Python API, with bounded example counts:

* regex grammars accept exactly the strings Python's ``re.fullmatch`` accepts (a safe subset);
* masks equal a brute-force reference (a fork of the matcher accepting each token) on random
  EBNF grammars, and ``rollback`` restores earlier masks;
* arbitrary text given to the front ends and arbitrary ids given to the matcher raise only
  grammask exceptions (or succeed).

A failing example hypothesis finds is kept below as an ``@example`` (a regression test).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import grammask as xgr  # noqa: E402
from conftest import small_info  # noqa: E402

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ALPHA = "ab(),"
TOKENS = [c.encode() for c in ALPHA] + [b"ab", b"(a", b"),", b"ba", b"a)", b"((", b"</s>"]


def mask_bits(m: xgr.GrammarMatcher, n: int) -> np.ndarray:
    bm = xgr.allocate_token_bitmask(1, n)
    m.fill_next_token_bitmask(bm)
    return np.unpackbits(np.asarray(bm).view(np.uint8), bitorder="little")[:n].astype(bool)


# --- regex vs re.fullmatch ---------------------------------------------------------------------

def regexes(depth: int = 0):
    atom = st.one_of(
        st.sampled_from(["a", "b", "c", "[ab]", "[^a]", "[a-c]", "\\.", "x"]),
    )
    if depth >= 2:
        return atom
    sub = st.deferred(lambda: regexes(depth + 1))
    return st.one_of(
        atom,
        st.lists(sub, min_size=1, max_size=3).map("".join),
        st.tuples(sub, sub).map(lambda t: f"(?:{t[0]}|{t[1]})"),
        st.tuples(sub, st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,}"])).map(lambda t: f"(?:{t[0]}){t[1]}"),
    )


@FAST
@given(regexes(), st.lists(st.text("abcx.d", max_size=6), min_size=1, max_size=8))
@example("(?:a|b)*", ["", "ab", "c"])
def test_regex_accepts_what_re_fullmatch_accepts(pattern: str, strings: list[str]):
    info = small_info([bytes([b]) for b in range(128)] + [b"</s>"])
    compiled = xgr.GrammarCompiler(info).compile_regex(pattern)
    for s in strings:
        m = xgr.GrammarMatcher(compiled)
        ok = m.accept_string(s) and m.is_completed()
        assert ok == bool(re.fullmatch(pattern, s)), (pattern, s)


# --- masks vs brute force on random EBNF --------------------------------------------------------

def exprs(depth: int = 0):
    lit = st.text(ALPHA, max_size=2).map(lambda s: json.dumps(s))
    cls = st.sampled_from(["[a-b]", "[^a]", "[(-)]", "[,]"])
    ref = st.sampled_from(["r0", "r1"])
    atom = st.one_of(lit, cls, ref)
    if depth >= 3:
        return atom
    sub = st.deferred(lambda: exprs(depth + 1))
    return st.one_of(
        atom,
        st.lists(sub, min_size=1, max_size=3).map(lambda xs: "(" + " ".join(xs) + ")"),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: "(" + " | ".join(xs) + ")"),
        st.tuples(sub, st.sampled_from(["*", "+", "?", "{0,2}"])).map(lambda t: f"({t[0]}){t[1]}"),
    )


@FAST
@given(exprs(), exprs(), st.lists(st.integers(0, 1000), max_size=8))
@example('"(" r1 ")"', '"a" r0?', [0, 1, 2])
def test_masks_equal_brute_force_and_rollback_restores(body0: str, body1: str, picks: list[int]):
    ebnf = f"root ::= r0\nr0 ::= {body0}\nr1 ::= {body1}\n"
    info = small_info(TOKENS)
    try:
        compiled = xgr.GrammarCompiler(info).compile_grammar(ebnf)
    except xgr.GrammaskError:
        return  # e.g. a rule that derives only itself
    n = len(TOKENS)
    m = xgr.GrammarMatcher(compiled)
    history = []
    for p in picks:
        if m.is_terminated():
            break
        bits = mask_bits(m, n)
        brute = np.array([m.fork().accept_token(t) for t in range(n)])
        assert np.array_equal(bits, brute), (ebnf, history)
        allowed = np.flatnonzero(bits)
        if len(allowed) == 0:
            break
        history.append(bits)
        assert m.accept_token(int(allowed[p % len(allowed)]))
    while history:
        m.rollback(1)
        assert np.array_equal(mask_bits(m, n), history.pop()), ebnf


# --- robustness: only grammask exceptions -------------------------------------------------------

GRAMMAR_TEXT = st.lists(
    st.sampled_from(list('root::=|()*+?[]^-"\\ab\n{},0123é') + ["::=", "root ::= ", "(=", "\\x", "\\u"]), max_size=30
).map("".join)


@FAST
@given(GRAMMAR_TEXT, st.text(max_size=20), st.text(max_size=40))
@example('root ::= "a"{99999999999}', "(", "{")
def test_front_ends_raise_only_grammask_errors(ebnf: str, pattern: str, schema: str):
    compiler = xgr.GrammarCompiler(small_info(TOKENS))
    for f, arg in (
        (compiler.compile_grammar, ebnf),
        (compiler.compile_regex, pattern),
        (compiler.compile_json_schema, schema),
        (compiler.compile_json_schema, '{"type":"string","pattern":' + json.dumps(pattern) + "}"),
    ):
        try:
            f(arg)
        except xgr.GrammaskError:
            pass


@FAST
@given(st.lists(st.one_of(st.integers(-(2**40), 2**40), st.integers(0, len(TOKENS) + 2)), max_size=10), st.integers(0, 12))
def test_matcher_calls_raise_only_grammask_errors(ids: list[int], rollback: int):
    compiled = xgr.GrammarCompiler(small_info(TOKENS)).compile_grammar('root ::= ("(" root ")" | "a")+')
    m = xgr.GrammarMatcher(compiled)
    for t in ids:
        m.accept_token(t)
    try:
        m.rollback(rollback)
    except xgr.GrammaskError:
        pass
    if not m.is_terminated():
        mask_bits(m, len(TOKENS))

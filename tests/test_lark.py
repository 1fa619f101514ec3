"""Lark front end: ``Grammar.from_lark`` / ``GrammarCompiler.compile_lark``.

(a) Differential: every (grammar, string) case of ``lark_cases.CASES`` (over 200) is decided by
    grammask, XGrammar 0.2.8 and llguidance in the same run; grammask must agree with each peer
    except on the pairs listed, with their reasons, in ``lark_cases`` (and docs/lark.md).
(b) Token masks of Lark grammars equal a brute-force reference (fork + accept_token per id) on a
    byte vocabulary with multi-byte tokens, along random walks.
(c) Errors: typed exceptions with ``line L, column C``; unsupported features name themselves.
"""

from __future__ import annotations

import importlib
import random

import grammask as xgr
import numpy as np
import pytest
from conftest import bool_mask, byte_vocab, small_info, tokenizer_dir
from lark_cases import CASES, LLGUIDANCE_DIFF, XGRAMMAR_DIFF

PAIRS = [(cid, s) for cid, (_, ss) in CASES.items() for s in ss]


def test_case_count():
    assert len(PAIRS) >= 100
    assert all((cid, s) in PAIRS for cid, s in XGRAMMAR_DIFF)
    assert all((cid, s) in PAIRS for cid, s in LLGUIDANCE_DIFF)


def grammask_accepts(lark: str, s: str):
    try:
        g = xgr.Grammar.from_lark(lark)
    except xgr.GrammaskError:
        return "ERR"
    return xgr.testing._is_grammar_accept_string(g, s)


@pytest.fixture(scope="module")
def peers():
    xgrammar = pytest.importorskip("xgrammar", reason="xgrammar is not installed (differential tests)")
    importlib.import_module("xgrammar.testing")  # `xgrammar.testing` is a submodule

    llg = pytest.importorskip("llguidance", reason="llguidance is not installed (differential tests)")
    tok = llg.LLTokenizer((tokenizer_dir("gpt2") / "tokenizer.json").read_text())
    byte_tok = [tok.tokenize_bytes(bytes([b])) for b in range(256)]
    assert all(len(t) == 1 for t in byte_tok)

    def xg(lark: str, s: str):
        try:
            g = xgrammar.Grammar.from_lark(lark)
        except Exception:  # noqa: BLE001 - any refusal counts as "no grammar"
            return "ERR"
        return xgrammar.testing._is_grammar_accept_string(g, s)

    def ll(lark: str, s: str):
        try:
            m = llg.LLMatcher(tok, llg.LLMatcher.grammar_from_lark(lark), log_level=0)
        except Exception:  # noqa: BLE001
            return "ERR"
        if m.is_error():
            return "ERR"
        for b in s.encode():
            if not m.consume_token(byte_tok[b][0]):
                return False
        return m.is_accepting()

    return xg, ll


@pytest.mark.parametrize("cid", list(CASES))
def test_lark_cases_match_xgrammar_and_llguidance(cid, peers):
    xg, ll = peers
    lark, strings = CASES[cid]
    for s in strings:
        ours, theirs_x, theirs_l = grammask_accepts(lark, s), xg(lark, s), ll(lark, s)
        if (cid, s) in XGRAMMAR_DIFF:
            assert ours != theirs_x, f"{cid} {s!r}: listed as a difference from XGrammar but agrees"
        else:
            assert ours == theirs_x, f"{cid} {s!r}: grammask {ours}, XGrammar {theirs_x}"
        if (cid, s) in LLGUIDANCE_DIFF:
            assert ours != theirs_l, f"{cid} {s!r}: listed as a difference from llguidance but agrees"
        else:
            assert ours == theirs_l, f"{cid} {s!r}: grammask {ours}, llguidance {theirs_l}"


def test_compile_lark_uses_the_cache_and_matches():
    info = small_info(byte_vocab())
    c = xgr.GrammarCompiler(info)
    text = 'start: "a" NUMBER\n%import common.NUMBER\n%ignore " "'
    cg = c.compile_lark(text)
    assert c.compile_lark(text) is cg or c.get_cache_size_bytes() > 0
    m = xgr.GrammarMatcher(cg)
    assert m.accept_string("a 12.5")
    assert m.is_completed()


# ---------------------------------------------------------------------------------------------
# brute-force masks

MASK_GRAMMARS = [
    'start: item ("," item)*\nitem: NAME "=" (NUMBER | ESCAPED_STRING)\n%import common.CNAME -> NAME\n'
    "%import common.NUMBER\n%import common.ESCAPED_STRING\n%ignore /[ \\t]+/",
    'start: "<" %regex {"substring_words": "the quick brown fox"} ">" /[a-zé]+/i',
    'start: expr\n?expr: expr "+" term | term\n?term: /[0-9]+/ | "(" expr ")"\n%ignore " "',
]
EXTRA = [b"ab", b"a=", b", ", b"12", b"1.5", b'"x', b'\\"', b"the", b" quick", b"fox>", "é".encode(), b"\xc3", b"+(", b") "]


@pytest.mark.parametrize("k", range(len(MASK_GRAMMARS)))
def test_lark_masks_match_brute_force(k):
    tokens = byte_vocab(EXTRA)
    info = small_info(tokens)
    cg = xgr.GrammarCompiler(info).compile_lark(MASK_GRAMMARS[k])
    rng = random.Random(k)
    for _walk in range(3):
        m = xgr.GrammarMatcher(cg)
        for _step in range(12):
            mask = bool_mask(m, len(tokens))
            ref = np.array([m.fork().accept_token(t) for t in range(len(tokens))], dtype=bool)
            stop = len(tokens) - 1
            ref[stop] = m.is_completed()
            assert (mask == ref).all(), f"grammar {k}: tokens {np.flatnonzero(mask != ref)}"
            allowed = [t for t in np.flatnonzero(ref) if t != stop]
            if not allowed:
                break
            assert m.accept_token(int(rng.choice(allowed)))


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    ("text", "exc", "where"),
    [
        ('start: "a\n', xgr.GrammarSyntaxError, "line 1, column 8"),
        ("start: a\n", xgr.InvalidGrammarError, "line 1, column 8"),
        ("start: A\nA: b\nb: \"x\"", xgr.InvalidGrammarError, "line 2, column 4"),
        ('start: "a"\n  | (', xgr.GrammarSyntaxError, "line 2"),
        ("start: <|eot|>", xgr.InvalidGrammarError, "line 1, column 8"),
        ("start: X\nX[lazy]: /a+/", xgr.InvalidGrammarError, "line 2, column 3"),
        ('x[stop=""]: /.*/\nstart: x', xgr.UnsupportedFeatureError, "line 1, column 3"),
        ('x[stop=y]: /.*/\nstart: x\ny: "a"', xgr.InvalidGrammarError, "line 1, column 3"),
        ("start[capture=1]: /a+/", xgr.InvalidGrammarError, "line 1, column 7"),
        ("start[temperature=hot]: /a+/", xgr.InvalidGrammarError, "line 1, column 7"),
        ("start: @sub", xgr.UnsupportedFeatureError, "named grammars"),
        ("start: /a(?=b)/", xgr.GrammaskError, "line 1, column 8"),
    ],
)
def test_errors_are_typed_with_line_and_column(text, exc, where):
    with pytest.raises(exc, match=None) as e:
        xgr.Grammar.from_lark(text)
    assert where in str(e.value), str(e.value)
    assert isinstance(e.value, RuntimeError)


def test_named_grammars_are_refused_not_ignored():
    with pytest.raises(xgr.UnsupportedFeatureError):
        xgr.Grammar.from_lark('start: "a"', named_grammars={"x": 'start: "b"'})

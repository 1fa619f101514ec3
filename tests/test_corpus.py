"""The shared grammar corpus (testdata/grammars/*.json, format in its README.md), run from Python.

Each case is checked three ways: ``grammask.testing._is_grammar_accept_string``; a matcher over a
byte vocabulary fed the string with ``accept_string`` (then ``is_completed``) and, separately,
token by token (one byte token per byte); and the grammar printed by ``str(grammar)`` parsed back,
which must accept and reject the same strings. ``error`` cases must raise a GrammaskError whose
message contains the expected substring.
"""

from __future__ import annotations

import json
from functools import lru_cache

import grammask as xgr
import pytest
from conftest import CORPUS_DIR, byte_vocab, small_info
from grammask.testing import _is_grammar_accept_string

CASES = sorted(CORPUS_DIR.glob("*.json"))


def _load(path):
    case = json.loads(path.read_text(encoding="utf-8"))
    assert case["name"] == path.stem, f"{path}: name {case['name']!r} differs from the file name"
    assert case["dialect"] in ("xgrammar", "iso"), path
    assert ("error" in case) != ("accept" in case or "reject" in case), (
        f"{path}: error XOR accept/reject"
    )
    return case


def _parse(case) -> xgr.Grammar:
    if case["dialect"] == "iso":
        return xgr.Grammar.from_iso_ebnf(case["grammar"], root_rule_name=case["root"])
    return xgr.Grammar.from_ebnf(case["grammar"], root_rule_name=case["root"])


@lru_cache(maxsize=1)
def _byte_compiler() -> xgr.GrammarCompiler:
    return xgr.GrammarCompiler(small_info(byte_vocab()), cache_enabled=False)


def _matcher_accepts(compiled: xgr.CompiledGrammar, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled)
    ok = m.accept_string(text) and m.is_completed()
    # Same string, token by token: every byte is token id == byte value.
    m2 = xgr.GrammarMatcher(compiled)
    ok2 = all(m2.accept_token(b) for b in text.encode("utf-8")) and m2.is_completed()
    assert ok == ok2, f"accept_string says {ok}, byte tokens say {ok2} for {text!r}"
    if ok:
        # A complete sentence takes the stop token and terminates.
        stop = m.stop_token_ids[0]
        assert m.accept_token(stop) and m.is_terminated()
    return ok


def test_corpus_is_not_empty():
    assert len(CASES) >= 40, f"only {len(CASES)} corpus files in {CORPUS_DIR}"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_corpus_case(path):
    case = _load(path)
    if "error" in case:
        with pytest.raises(xgr.GrammaskError) as ei:
            _parse(case)
        assert case["error"] in str(ei.value), f"expected {case['error']!r} in {ei.value}"
        assert isinstance(ei.value, RuntimeError)
        return

    grammar = _parse(case)
    compiled = _byte_compiler().compile_grammar(grammar)
    printed = str(grammar)
    reparsed = xgr.Grammar.from_ebnf(printed, root_rule_name=case["root"])
    assert str(reparsed) == printed, "printing is not a fixed point"
    compiled_printed = _byte_compiler().compile_grammar(reparsed)
    for want, strings in ((True, case.get("accept", [])), (False, case.get("reject", []))):
        for s in strings:
            if case["dialect"] == "xgrammar":
                assert _is_grammar_accept_string(case["grammar"], s) is want, (
                    f"testing helper on {s!r}"
                )
            assert _is_grammar_accept_string(grammar, s) is want, (
                f"testing helper (Grammar) on {s!r}"
            )
            assert _matcher_accepts(compiled, s) is want, f"matcher on {s!r}"
            assert _matcher_accepts(compiled_printed, s) is want, (
                f"printed grammar on {s!r}:\n{printed}"
            )


def test_builtin_json_text_matches_builtin_grammar():
    case = _load(CORPUS_DIR / "builtin_json_text.json")
    # The corpus copy is the exact-language text (`spelling="any"`).
    assert str(xgr.Grammar.from_ebnf(case["grammar"])) == str(xgr.Grammar.builtin_json_grammar(spelling="any"))


def test_error_cases_carry_a_location():
    for path in CASES:
        case = _load(path)
        if "error" not in case:
            continue
        with pytest.raises(xgr.GrammaskError) as ei:
            _parse(case)
        assert "line " in str(ei.value) and "column " in str(ei.value), f"{path.stem}: {ei.value}"

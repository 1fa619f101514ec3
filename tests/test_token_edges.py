"""Token-level grammar elements: ``Token(id, ...)``, ``ExcludeToken(id, ...)``,
``TokenTagDispatch(...)``, the token-level structural tags, and the added-token rule.

Masks are checked against a brute-force reference on the real Llama 3 and Qwen2.5 vocabularies:
a fork of the matcher accepts each id in turn (no prefix shortcut: a token element reads a token
by id, whatever its first byte). Where XGrammar 0.2.8 is installed, accept/reject along walks is
compared with it; the differences are the documented ones (added tokens are never free tokens in
grammask), listed in ``KNOWN_XGRAMMAR_DIFFERENCES``.
"""

from __future__ import annotations

import json
import random

import grammask as xgr
import numpy as np
import pytest
from conftest import compiler, hf_tokenizer, tokenizer_info

# Llama 3 added tokens: <|start_header_id|>, <|end_header_id|>, <|python_tag|>; eos <|eot_id|>.
L3_SH, L3_EH, L3_PY, L3_EOT = 128006, 128007, 128010, 128009
# Qwen2.5: <tool_call>, </tool_call> (added, not flagged special), <|fim_pad|>; eos <|im_end|>.
QW_TC, QW_ETC, QW_FIM_PAD, QW_IM_END = 151657, 151658, 151662, 151645


def brute_force(m: xgr.GrammarMatcher, vocab_size: int) -> np.ndarray:
    """Every id fed to one fork of the matcher (accept, then roll back)."""
    f = m.fork()
    out = np.zeros(vocab_size, dtype=bool)
    for t in range(vocab_size):
        if f.accept_token(t):
            out[t] = True
            f.rollback(1)
    return out


def mask_of(m: xgr.GrammarMatcher, vocab_size: int) -> np.ndarray:
    bm = xgr.allocate_token_bitmask(1, vocab_size)
    m.fill_next_token_bitmask(bm)
    bits = bm.numpy().view(np.uint32)[0]
    ids = np.arange(vocab_size)
    return ((bits[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)


LLAMA3_CASES = [
    # (grammar, a token walk as (kind, value): ("id", n) or ("text", s) tokenized)
    (
        f'root ::= Token({L3_SH}) [a-z]+ Token({L3_EH}) "\\n\\n" [^\\n]*',
        [("id", L3_SH), ("text", "user"), ("id", L3_EH), ("text", "\n\nhello")],
    ),
    (
        f"root ::= ExcludeToken({L3_SH}, {L3_EH}, 13)* Token({L3_PY})",
        [("text", "some text"), ("id", L3_PY)],
    ),
    (
        f'root ::= TokenTagDispatch(({L3_PY}, call), excludes=(13))\ncall ::= "{{" [a-z]* "}}"',
        [("text", "hi"), ("id", L3_PY), ("text", "{ab}"), ("text", " x")],
    ),
    (
        f'root ::= ("a" | Token({L3_SH}))+ "b"',
        [("text", "a"), ("id", L3_SH), ("text", "a"), ("text", "b")],
    ),
]

QWEN_CASES = [
    (
        f'root ::= Token({QW_TC}) "{{" [a-z"]* "}}" Token({QW_ETC})',
        [("id", QW_TC), ("text", '{"ab"}'), ("id", QW_ETC)],
    ),
    (
        f'root ::= [a-z ]* (Token({QW_TC}, {QW_FIM_PAD}) [0-9]+)?',
        [("text", "abc "), ("id", QW_FIM_PAD), ("text", "12")],
    ),
]


def _walk_ids(tok, info, walk):
    out = []
    for kind, v in walk:
        if kind == "id":
            out.append(v)
        else:
            out.extend(tok.encode(v, add_special_tokens=False))
    return out


@pytest.mark.parametrize(
    "family,grammar,walk",
    [("llama3", g, w) for g, w in LLAMA3_CASES] + [("qwen2.5", g, w) for g, w in QWEN_CASES],
)
def test_masks_match_brute_force(family, grammar, walk):
    tok = hf_tokenizer(family)
    info = tokenizer_info(family)
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(grammar))
    ids = _walk_ids(tok, info, walk)
    V = info.vocab_size
    check_at = {0, len(ids) // 2, len(ids)}
    for i, t in enumerate(ids + [None]):
        if i in check_at:
            got, want = mask_of(m, V), brute_force(m, V)
            diff = np.nonzero(got != want)[0]
            assert diff.size == 0, f"{grammar!r} step {i}: differing ids {diff[:20].tolist()}"
        if t is None:
            break
        assert m.accept_token(t), f"{grammar!r}: token {t} at step {i}"
    assert m.is_completed()


def test_accept_rollback_sequences():
    info = tokenizer_info("llama3")
    tok = hf_tokenizer("llama3")
    g = f'root ::= Token({L3_SH}) [a-z]+ Token({L3_EH}) "x"'
    m = xgr.GrammarMatcher(compiler("llama3").compile_grammar(g))
    user = tok.encode("user", add_special_tokens=False)
    assert not m.accept_token(L3_EH)
    assert not m.accept_string("<|start_header_id|>"), "text never matches a token element"
    assert m.accept_token(L3_SH)
    for t in user:
        assert m.accept_token(t)
    assert m.find_jump_forward_string() == ""
    assert m.accept_token(L3_EH)
    assert m.find_jump_forward_string() == "x"
    m.rollback(1 + len(user))
    assert not m.accept_token(L3_EH)
    for t in user:
        assert m.accept_token(t)
    assert m.accept_token(L3_EH)
    assert m.accept_string("x") and m.is_completed()
    assert m.accept_token(info.stop_token_ids[0]) and m.is_terminated()
    m.rollback(2)
    assert not m.is_terminated() and not m.is_completed()
    m.reset()
    assert m.accept_token(L3_SH)


def test_batch_fill_matches_single_fill():
    info = tokenizer_info("qwen2.5")
    c = compiler("qwen2.5")
    cg = c.compile_grammar(QWEN_CASES[0][0])
    ms = [xgr.GrammarMatcher(cg) for _ in range(3)]
    assert ms[1].accept_token(QW_TC)
    bm = xgr.allocate_token_bitmask(3, info.vocab_size)
    xgr.BatchGrammarMatcher().batch_fill_next_token_bitmask(ms, bm)
    for i, m in enumerate(ms):
        one = xgr.allocate_token_bitmask(1, info.vocab_size)
        m.fill_next_token_bitmask(one)
        assert (one[0] == bm[i]).all()


def test_serialization_round_trip():
    info = tokenizer_info("llama3")
    g = xgr.Grammar.from_ebnf(LLAMA3_CASES[2][0])
    s = g.serialize_json()
    assert json.loads(s)["__VERSION__"] == xgr.get_serialization_version()
    g2 = xgr.Grammar.deserialize_json(s)
    assert str(g2) == str(g) and "TokenTagDispatch" not in str(g) and "ExcludeToken(13, 128010)" in str(g)
    cg = compiler("llama3").compile_grammar(g)
    cg2 = xgr.CompiledGrammar.deserialize_json(cg.serialize_json(), info)
    m = xgr.GrammarMatcher(cg2)
    assert m.accept_token(L3_PY) and m.accept_string("{}")


def test_out_of_range_ids_are_typed_errors():
    c = compiler("llama3")
    with pytest.raises(xgr.InvalidGrammarError, match="overlap"):
        xgr.Grammar.from_ebnf("root ::= TokenTagDispatch((5, r), excludes=(5))\nr ::= \"a\"")
    with pytest.raises(xgr.InvalidGrammarError, match="out of range"):
        c.compile_grammar("root ::= Token(200000)")
    with pytest.raises(xgr.InvalidGrammarError, match="out of range"):
        c.compile_grammar("root ::= ExcludeToken(5, 99999999)")
    with pytest.raises(xgr.GrammaskError):
        xgr.Grammar.from_ebnf("root ::= Token(99999999999)")
    with pytest.raises(xgr.GrammaskError):
        xgr.Grammar.from_ebnf("root ::= Token()")
    m = xgr.GrammarMatcher(c.compile_grammar(f"root ::= Token({L3_SH})"))
    assert not m.accept_token(10**9) and not m.accept_token(-1)


def test_added_tokens_are_never_text_by_default():
    info = tokenizer_info("qwen2.5")
    assert {QW_TC, QW_ETC, QW_FIM_PAD} <= set(info.special_token_ids)
    cg = compiler("qwen2.5").compile_json_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    m = xgr.GrammarMatcher(cg)
    assert m.accept_string('{"a": "x')
    mask = mask_of(m, info.vocab_size)
    assert mask[ord("y")] or mask.sum() > 1000
    assert not mask[QW_ETC] and not mask[QW_TC] and not mask[QW_FIM_PAD]
    assert not m.accept_token(QW_ETC)
    # The "marked" rule (only added tokens flagged special) lets </tool_call> be text again.
    marked = xgr.TokenizerInfo.from_huggingface(hf_tokenizer("qwen2.5"), special_tokens="marked")
    assert QW_ETC not in set(marked.special_token_ids)
    m2 = xgr.GrammarMatcher(xgr.GrammarCompiler(marked).compile_grammar(cg.grammar))
    assert m2.accept_string('{"a": "x') and m2.accept_token(QW_ETC)


def _tool_tag(begin="<tool_call>", end="</tool_call>"):
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<tool_call>"],
            "tags": [
                {
                    "type": "tag",
                    "begin": begin,
                    "content": {"type": "json_schema", "json_schema": {"type": "object"}},
                    "end": end,
                }
            ],
        },
    }


def test_structural_tag_begin_end_that_is_an_added_token():
    info = tokenizer_info("qwen2.5")
    tok = hf_tokenizer("qwen2.5")
    m = xgr.GrammarMatcher(compiler("qwen2.5").compile_structural_tag(_tool_tag()))
    assert mask_of(m, info.vocab_size)[QW_TC]
    for t in tok.encode("Sure. ", add_special_tokens=False):
        assert m.accept_token(t)
    assert m.accept_token(QW_TC)
    assert m.accept_string('{"k": "</tool_call>')  # the text, spelled by smaller tokens
    assert not mask_of(m, info.vocab_size)[QW_ETC], "not inside a JSON string"
    assert m.accept_string('"}')
    assert mask_of(m, info.vocab_size)[QW_ETC]
    assert m.accept_token(QW_ETC) and m.is_completed()
    # The text spelling still works as well (as in XGrammar).
    m = xgr.GrammarMatcher(compiler("qwen2.5").compile_structural_tag(_tool_tag()))
    assert m.accept_string('<tool_call>{"k": 1}</tool_call>') and m.is_completed()


def test_token_level_structural_tags():
    c = compiler("qwen2.5")
    info = tokenizer_info("qwen2.5")
    V = info.vocab_size
    obj = {"type": "json_schema", "json_schema": {"type": "object"}}
    cases = {
        "token": {"type": "token", "token": QW_TC},
        "token_by_text": {"type": "token", "token": "<tool_call>"},
        "exclude_token": {"type": "exclude_token", "exclude_tokens": [ord("a") - 32]},
        "any_tokens": {"type": "any_tokens", "exclude_tokens": [QW_TC]},
        "token_triggered_tags": {
            "type": "token_triggered_tags",
            "trigger_tokens": [QW_TC],
            "tags": [{"type": "tag", "begin": {"type": "token", "token": QW_TC}, "content": obj,
                      "end": {"type": "token", "token": "</tool_call>"}}],
        },
        "token_dispatch": {"type": "token_dispatch", "rules": [[QW_TC, obj]], "loop": False},
    }  # fmt: skip
    for name, fmt in cases.items():
        m = xgr.GrammarMatcher(c.compile_structural_tag({"type": "structural_tag", "format": fmt}))
        got, want = mask_of(m, V), brute_force(m, V)
        assert (got == want).all(), name
    m = xgr.GrammarMatcher(c.compile_structural_tag({"type": "structural_tag", "format": cases["token_triggered_tags"]}))
    tok = hf_tokenizer("qwen2.5")
    assert not m.accept_string("hello"), "free tokens are matched by id, never by accept_string"
    for t in tok.encode("hello ", add_special_tokens=False):
        assert m.accept_token(t)
    assert m.accept_token(QW_TC) and m.accept_string('{"a": 1}')
    assert not m.accept_string("</tool_call>") and m.accept_token(QW_ETC)
    for t in tok.encode(" done", add_special_tokens=False):
        assert m.accept_token(t)
    assert m.is_completed()
    # Tokens by text need the tokenizer; ids work without one.
    with pytest.raises(xgr.UnsupportedFeatureError, match="needs the tokenizer"):
        xgr.Grammar.from_structural_tag({"type": "structural_tag", "format": cases["token_by_text"]})
    assert "Token(151657)" in str(xgr.Grammar.from_structural_tag({"type": "structural_tag", "format": cases["token"]}))
    with pytest.raises(xgr.InvalidStructuralTagError):
        c.compile_structural_tag({"type": "structural_tag", "format": {"type": "token", "token": "no such token!"}})


def test_budget_counts_token_edges():
    info = tokenizer_info("llama3")
    cg = compiler("llama3").compile_grammar(f'root ::= Token({L3_SH}) [a-z]{{1,30}} Token({L3_EH})')
    for budget in (4, 6):
        m = xgr.GrammarMatcher(cg, max_tokens=budget)
        rng = random.Random(budget)
        n = 0
        while not m.is_terminated():
            allowed = np.nonzero(mask_of(m, info.vocab_size))[0]
            assert allowed.size, f"budget {budget}: empty mask after {n} tokens"
            assert m.accept_token(int(rng.choice(allowed)))
            n += 1
            assert n <= budget
    with pytest.raises(xgr.GrammaskError):
        xgr.GrammarMatcher(cg, max_tokens=3)


# ---------------------------------------------------------------------------------------------
# XGrammar parity

# Differences found (grammask vs XGrammar 0.2.8), all from the added-token rule: XGrammar's
# ExcludeToken / TokenTagDispatch free tokens include added tokens such as <|start_header_id|>,
# grammask's never do (they are special; a grammar names them with Token(id)).
KNOWN_XGRAMMAR_DIFFERENCES = {"added token as a free token (ExcludeToken)"}


def _xgr():
    return pytest.importorskip("xgrammar")


def test_accept_reject_matches_xgrammar():
    X = _xgr()
    if not hasattr(X, "GrammarMatcher") or X is xgr:
        pytest.skip("the real XGrammar is not installed")
    tok = hf_tokenizer("llama3")
    xinfo = X.TokenizerInfo.from_huggingface(tok)
    xc = X.GrammarCompiler(xinfo)
    info = tokenizer_info("llama3")
    V = info.vocab_size
    special = set(info.special_token_ids)
    diffs = []
    rng = random.Random(7)
    # Free tokens exclude every added token (ids 128000..128255) in both libraries, so the
    # languages are the same; the added-token difference is checked on its own below.
    added = ", ".join(str(i) for i in range(128000, 128256))
    added_but_trigger = ", ".join(str(i) for i in range(128000, 128256) if i != L3_PY)
    parity = [
        (g.replace("ExcludeToken(", f"ExcludeToken({added}, ").replace("excludes=(13)", f"excludes=(13, {added_but_trigger})"), w)
        for g, w in LLAMA3_CASES
    ]
    for grammar, walk in parity:
        ids = _walk_ids(tok, info, walk)
        ours = xgr.GrammarMatcher(compiler("llama3").compile_grammar(grammar))
        theirs = X.GrammarMatcher(xc.compile_grammar(grammar))
        for step, t in enumerate(ids + [None]):
            probe = sorted(set(rng.sample(range(V), 300)) | {L3_SH, L3_EH, L3_PY, 13, 64, L3_EOT})
            for p in probe:
                a = ours.fork().accept_token(p) if hasattr(ours, "fork") else None
                f = theirs.fork() if hasattr(theirs, "fork") else None
                if f is None:
                    pytest.skip("XGrammar matcher has no fork()")
                b = f.accept_token(p)
                if a != b:
                    kind = (
                        "added token as a free token (ExcludeToken)"
                        if p in special and b and not a
                        else f"other: {grammar!r} step {step} token {p}"
                    )
                    diffs.append(kind)
            if t is None:
                break
            assert ours.accept_token(t) and theirs.accept_token(t)
    assert set(diffs) <= KNOWN_XGRAMMAR_DIFFERENCES, sorted(set(diffs))[:20]


def test_added_token_as_free_token_differs_from_xgrammar():
    """The one known difference: XGrammar's ExcludeToken includes added tokens."""
    X = _xgr()
    if X is xgr:
        pytest.skip("the real XGrammar is not installed")
    tok = hf_tokenizer("llama3")
    xc = X.GrammarCompiler(X.TokenizerInfo.from_huggingface(tok))
    g = f"root ::= ExcludeToken({L3_PY})*"
    theirs = X.GrammarMatcher(xc.compile_grammar(g))
    ours = xgr.GrammarMatcher(compiler("llama3").compile_grammar(g))
    assert theirs.accept_token(L3_SH) and not ours.accept_token(L3_SH)
    assert theirs.accept_token(64) and ours.accept_token(64)


def test_lark_special_tokens():
    info = tokenizer_info("llama3")
    text = 'start: <|start_header_id|> NAME <|end_header_id|> "\\n" <[128010]>\nNAME: /[a-z]+/'
    with pytest.raises(xgr.InvalidGrammarError, match="needs the tokenizer"):
        xgr.Grammar.from_lark(text)
    g = xgr.Grammar.from_lark(text, tokenizer_info=info)
    assert f"Token({L3_SH})" in str(g) and f"Token({L3_PY})" in str(g)
    for cg in (compiler("llama3").compile_grammar(g), compiler("llama3").compile_lark(text)):
        m = xgr.GrammarMatcher(cg)
        assert not m.accept_string("<|start_header_id|>")
        assert m.accept_token(L3_SH) and m.accept_string("user") and m.accept_token(L3_EH)
        assert m.accept_string("\n") and m.accept_token(L3_PY) and m.is_completed()
    cg = compiler("llama3").compile_lark("start: <[^13]> <[*]>")
    m = xgr.GrammarMatcher(cg)
    mask = mask_of(m, info.vocab_size)
    assert not mask[13] and mask[14] and not mask[L3_SH]

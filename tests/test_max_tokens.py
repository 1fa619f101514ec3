"""The ``max_tokens`` rule option (EBNF, Lark, structural tag ``any_text.max_tokens``).

Rule (docs/guides/ebnf_regex.md): an occurrence reads ``N`` tokens accepted with ``accept_token``
freely (a token read across its start is its first; ``accept_string`` does not count), then may
only read bytes along a shortest way to an end of its rule, ending where it can.

- masks equal the brute-force reference (``tests/test_masks.py``) on Llama 3 and Qwen2.5 at
  every state of random walks (uniform among the allowed tokens);
- random sampling always ends, and the budgeted part takes at most ``N`` + (shortest end) tokens;
- rollback, fork and reset restore budgets; strings do not count; jump-forward strings follow
  the spent budget; serialized compiled grammars and batch masks keep it; with the matcher's own
  ``max_tokens`` the output still ends within that budget;
- XGrammar 0.2.8: equal full masks where both rules agree, and the differences (either engine may be
  the one allowing more) checked to still differ, each way (``XGRAMMAR_DIFFERENCES``).
"""

from __future__ import annotations

import itertools
import json
import random
import re

import grammask as xgr
import numpy as np
import pytest
from conftest import bool_mask, compiler, hf_tokenizer, tokenizer_info
from grammask.testing import _get_matcher_from_grammar
from test_masks import brute_force_large

FAMILIES = ["llama3", "qwen2.5"]

SAY = 'root ::= "say:" x "!"\nx[max_tokens={n}] ::= [a-z ]* "."'
# A JSON value whose budget covers every value nested in it.
REC_VALUE = (
    'root ::= value\nvalue[max_tokens={n}] ::= "[" (value ("," value)*)? "]" '
    '| "{{" (key ":" value ("," key ":" value)*)? "}}" | [1-9] [0-9]* | "true"\nkey ::= "\\"" [a-z]+ "\\""'
)
FREE = 'root ::= "say:" x "!"\nx[max_tokens={n}] ::= [a-z ]+'


def ids_of(family: str, text: str) -> list:
    return hf_tokenizer(family).encode(text, add_special_tokens=False)


def check_mask(m, info, where: str) -> np.ndarray:
    got = bool_mask(m, info.vocab_size)
    want = brute_force_large(
        m, info.decoded_vocab, info.vocab_size, set(info.stop_token_ids), set(info.special_token_ids)
    )
    diff = np.flatnonzero(got != want)
    assert diff.size == 0, (where, diff[:10].tolist(), [info.decoded_vocab[i] for i in diff[:10]])
    return got


def sample(m, info, rng: random.Random, limit: int, check=None) -> list:
    """Accepts tokens drawn uniformly from the mask until the matcher terminates (or `limit`)."""
    out = []
    for step in range(limit):
        if m.is_terminated():
            break
        mask = check(m, step) if check else bool_mask(m, info.vocab_size)
        allowed = np.flatnonzero(mask)
        assert allowed.size, f"empty mask after {out}"
        t = int(rng.choice(allowed.tolist()))
        assert m.accept_token(t)
        out.append(t)
    return out


# ---------------------------------------------------------------------------------------------
# masks against the brute-force reference


MASK_GRAMMARS = {
    "say": SAY.format(n=3),
    "free_captured": 'root ::= "(" x ")" ("," "(" x ")")*\nx[max_tokens=2, capture] ::= [a-z]+ ("-" [0-9]+)?',
    "with_max_chars": 'root ::= "say:" x "!"\nx[max_tokens=4, max_chars=12] ::= [a-z ]* "."',
    # Recursive rules (see crates/grammask-core/tests/rule_max_tokens.rs for the semantics).
    "rec_expr": 'root ::= e\ne[max_tokens=3] ::= "(" e ")" | [a-z]+ | [a-z]+ " + " e',
    "rec_value": REC_VALUE.format(n=4),
    "rec_inside_and_outside": 'root ::= "<" c ">" a\na[max_tokens=2] ::= "(" c ")" | "y"\n'
    'c[max_tokens=3] ::= "[" a "]" | [a-z]+ | "{" c "}"',
    # Left recursion: a sum, and a list inside a budgeted value.
    "rec_left_sum": 'root ::= expr "!"\nexpr[max_tokens=3] ::= expr "+" term | term\nterm ::= [0-9]+ | "(" expr ")"',
    "rec_left_list": 'root ::= v\nv[max_tokens=4] ::= "[" list "]" | [a-z]+\nlist ::= list "," v | v',
    # Left recursion through another rule (captured, so the compiler keeps the rules apart).
    "rec_left_group": 'root ::= v\nv[max_tokens=4] ::= "[" p "]" | [a-z]+\n'
    'p[capture] ::= q "," v | v\nq[capture] ::= p "+" | "z"',
    # Spent from the start: one letter, no brackets.
    "rec_zero": 'root ::= "say:" e "!" e\ne[max_tokens=0] ::= "(" e ")" | [a-z]+ | "[" f "]"\nf ::= [a-z] f | "z"',
}


@pytest.mark.parametrize("name", list(MASK_GRAMMARS))
@pytest.mark.parametrize("family", FAMILIES)
def test_masks_match_brute_force_along_random_walks(family, name):
    info = tokenizer_info(family)
    cg = compiler(family).compile_grammar(MASK_GRAMMARS[name])
    rng = random.Random(f"{family}/{name}")
    for walk in range(2):
        m = xgr.GrammarMatcher(cg)
        sample(m, info, rng, 10, lambda m, step: check_mask(m, info, f"{name} walk {walk} step {step}"))


# ---------------------------------------------------------------------------------------------
# occurrences end within their budget


def x_tokens(decoded, ids, start: int, end: int) -> int:
    """Tokens that read a byte of ``[start, end)``, or the first one that ends after ``start``."""
    n, pos = 0, 0
    for t in ids:
        nxt = pos + len(decoded[t])
        if nxt > start and pos < end:
            n += 1
        pos = nxt
    return n


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("grammar,shortest_end", [(SAY, 1), (FREE, 1)])
def test_random_sampling_ends_within_the_budget(family, grammar, shortest_end):
    info = tokenizer_info(family)
    decoded = info.decoded_vocab
    comp = compiler(family)
    rng = random.Random(family + grammar)
    for n in (0, 1, 3):
        cg = comp.compile_grammar(grammar.format(n=n))
        for _ in range(4):
            m = xgr.GrammarMatcher(cg)
            ids = sample(m, info, rng, 200)
            assert m.is_terminated(), f"no end after {len(ids)} tokens (N={n})"
            text = b"".join(decoded[t] for t in ids if t not in info.stop_token_ids)
            start, end = len(b"say:"), text.index(b"!")
            used = x_tokens(decoded, ids, start, end)
            # `FREE` ends at once when spent: at most N tokens, or the one shortest token with N=0.
            bound = max(n, shortest_end) if grammar is FREE else n + shortest_end
            assert used <= bound, (n, [decoded[t] for t in ids])
    # Without the option the same sampling runs long: the bound above is the option's doing.
    m = xgr.GrammarMatcher(comp.compile_grammar(grammar.replace("[max_tokens={n}]", "")))
    assert len(sample(m, info, rng, 40)) >= 8


# ---------------------------------------------------------------------------------------------
# rollback, fork, reset, strings, jump-forward, serialization, batch, matcher budget


def allows(m, info, ids) -> bool:
    return bool(bool_mask(m, info.vocab_size)[ids[0]])


@pytest.mark.parametrize("family", FAMILIES)
def test_rollback_fork_reset_restore_budgets_and_strings_do_not_count(family):
    info = tokenizer_info(family)
    cg = compiler(family).compile_grammar(FREE.format(n=2))
    hello, bang = ids_of(family, " hello"), ids_of(family, "!")
    m = xgr.GrammarMatcher(cg)
    assert m.accept_string("say:")
    assert m.accept_token(hello[0])
    f = m.fork()
    assert m.accept_token(hello[0])
    assert not allows(m, info, hello) and allows(m, info, bang)
    assert not m.fork().accept_token(hello[0])
    assert allows(f, info, hello), "a fork keeps its own budget"
    m.rollback(1)
    assert allows(m, info, hello)
    assert m.accept_token(hello[0]) and not allows(m, info, hello)
    m.reset()
    assert m.accept_string("say:") and m.accept_token(hello[0]) and allows(m, info, hello)
    # Strings are free: any number of them, then still two tokens.
    m = xgr.GrammarMatcher(cg)
    assert m.accept_string("say: one two three four five six")
    assert m.accept_token(hello[0]) and allows(m, info, hello)
    assert m.accept_token(hello[0]) and not allows(m, info, hello)
    # accept_string is not held to a spent budget either (as in XGrammar).
    assert m.accept_string(" more text")


@pytest.mark.parametrize("family", FAMILIES)
def test_jump_forward_follows_a_spent_budget(family):
    cg = compiler(family).compile_grammar(SAY.format(n=1))
    m = xgr.GrammarMatcher(cg)
    assert m.accept_string("say:")
    assert m.find_jump_forward_string() == ""
    assert m.accept_token(ids_of(family, " hello")[0])
    # Spent in a state that cannot end: the shortest way out is "." and then "!".
    assert m.find_jump_forward_string() == ".!"


@pytest.mark.parametrize("family", FAMILIES)
def test_serialized_grammars_and_batch_masks_keep_budgets(family):
    info = tokenizer_info(family)
    cg = compiler(family).compile_grammar(FREE.format(n=1))
    back = xgr.CompiledGrammar.deserialize_json(cg.serialize_json(), info)
    hello = ids_of(family, " hello")
    ms = [xgr.GrammarMatcher(g) for g in (cg, back)]
    for m in ms:
        assert m.accept_string("say:") and m.accept_token(hello[0])
    fresh = xgr.GrammarMatcher(cg)
    assert fresh.accept_string("say:")
    masks = [bool_mask(m, info.vocab_size) for m in ms + [fresh]]
    assert (masks[0] == masks[1]).all() and not masks[0][hello[0]] and masks[2][hello[0]]
    bm = xgr.allocate_token_bitmask(3, info.vocab_size)
    xgr.BatchGrammarMatcher().batch_fill_next_token_bitmask(ms + [fresh], bm)
    for i, m in enumerate(ms + [fresh]):
        single = xgr.allocate_token_bitmask(1, info.vocab_size)
        m.fill_next_token_bitmask(single)
        assert (single[0] == bm[i]).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_matcher_token_budget_with_rule_budgets(family):
    info = tokenizer_info(family)
    cg = compiler(family).compile_grammar(
        'root ::= ("<" x ">")+ "."\nx[max_tokens=3] ::= [a-z]* "end" | [0-9]+ "."'
    )
    rng = random.Random(family)
    for budget in (12, 20):
        for _ in range(4):
            m = xgr.GrammarMatcher(cg, max_tokens=budget)
            ids = sample(m, info, rng, budget + 1)
            assert m.is_terminated() and len(ids) <= budget, (budget, len(ids))


# ---------------------------------------------------------------------------------------------
# front ends and structural tags


def test_lark_max_tokens():
    m = _get_matcher_from_grammar(xgr.Grammar.from_lark('start: "a" x\nx[max_tokens=1]: /b+/'))
    assert m.accept_string("abbbb") and m.is_completed()
    m = _get_matcher_from_grammar(xgr.Grammar.from_lark('start: x\nx[max_tokens=2]: "(" x ")" | "a"'))
    assert m.accept_string("((((a))))") and m.is_completed()
    m = _get_matcher_from_grammar(xgr.Grammar.from_lark('start: x\nx[max_tokens=2]: x "+" x | "a"'))
    assert m.accept_string("a+a+a") and m.is_completed()
    # Left recursion through another rule: a group entered through one rule (e) works, as does one
    # without budgets entered through two (f, and g after a byte); one with a cycle of left calls
    # avoiding its entry (g, h) does not.
    m = _get_matcher_from_grammar('root ::= e\ne[max_tokens=2] ::= f "+" | "x"\nf[capture] ::= e "-" | "y"')
    assert m.accept_string("x-+-+") and m.is_completed()
    two = 'root ::= e\ne[max_tokens=2] ::= f "+" | "(" g ")" | "x"\nf[capture] ::= g "-" | "y"\ng[capture] ::= f "*" | "z"'
    m = _get_matcher_from_grammar(two)
    assert m.accept_string("y*-+") and m.is_completed()
    with pytest.raises(xgr.UnsupportedFeatureError, match="rule 'g', left-recursive through other rules"):
        _get_matcher_from_grammar(
            'root ::= e\ne[max_tokens=2] ::= f "+" | "x"\nf[capture] ::= g "-" | "y"\n'
            'g[capture] ::= f "*" | h "*" | "z"\nh[capture] ::= g "!" | "w"'
        )
    with pytest.raises(xgr.UnsupportedFeatureError, match="'y' with max_tokens is used inside"):
        _get_matcher_from_grammar('root ::= x\nx[lazy] ::= y | "a" x\ny[max_tokens=1] ::= "a"+')
    # Inside a lazy rule that is not recursive it works (the lazy rule keeps its rule edges).
    lazy = 'root ::= x "!"\nx[lazy] ::= y ","?\ny[max_tokens=1] ::= "a"+'
    assert _get_matcher_from_grammar(lazy).accept_string("a!")
    assert not _get_matcher_from_grammar(lazy).accept_string("aa")
    # Nested budgets (a regular max_tokens rule inside another) work.
    m = _get_matcher_from_grammar(xgr.Grammar.from_lark('start: x\nx[max_tokens=2]: "<" y ">" y\ny[max_tokens=1]: /b+/'))
    assert m.accept_string("<bbb>bb") and m.is_completed()


def tag_text(max_tokens, **kw) -> str:
    content = {"type": "any_text", "max_tokens": max_tokens, **kw}
    fmt = {"type": "tag", "begin": "<t>", "content": content, "end": "</t>"}
    return json.dumps({"type": "structural_tag", "format": fmt})


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kw", [{}, {"excludes": ["STOP"]}, {"excludes": ["STOP"], "max_chars": 40}])
def test_structural_tag_any_text_max_tokens(family, kw):
    info = tokenizer_info(family)
    cg = compiler(family).compile_structural_tag(tag_text(3, **kw))
    assert "max_tokens=3" in str(cg.grammar)
    decoded = info.decoded_vocab
    rng = random.Random(family + json.dumps(kw))
    for _ in range(3):
        m = xgr.GrammarMatcher(cg)
        assert m.accept_string("<t>")
        ids = sample(m, info, rng, 30, lambda m, step: check_mask(m, info, f"step {step}"))
        assert m.is_terminated()
        text = b"".join(decoded[t] for t in ids if t not in info.stop_token_ids)
        assert text.endswith(b"</t>") and b"STOP" not in text
        # At most 3 text tokens, then one that starts the end tag.
        assert x_tokens(decoded, ids, 0, len(text) - len(b"</t>")) <= 3, [decoded[t] for t in ids]
    m = xgr.GrammarMatcher(cg)
    word = ids_of(family, " hello")
    assert m.accept_string("<t>")
    for _ in range(3):
        assert m.accept_token(word[0])
    assert not m.fork().accept_token(word[0])
    assert m.accept_string("</t>") and m.is_completed()


# ---------------------------------------------------------------------------------------------
# XGrammar 0.2.8

# (grammar, tokens accepted, probe, the engine whose mask allows the probe next, why): the other
# engine's mask refuses it. Both directions are recorded and checked, so a change in either
# engine's behaviour on a listed case fails the test.
XG, GM = "xgrammar", "grammask"
XGRAMMAR_DIFFERENCES = [
    # XGrammar does not count a token read across the start of the occurrence.
    ('root ::= "sa" x "!"\nx[max_tokens=1] ::= [a-z ]+', "say", " hello", XG, "crossing token"),
    # Spent where the rule cannot end: XGrammar reads anything until it can end (relaxing the
    # budget, with a warning); grammask only the shortest ways to an end.
    (SAY.format(n=2), "say: hello world", " hello", XG, "relaxed until it can end"),
]


# A group entered through two of its rules inside the budget of `c`: `a` (budgeted) and `b`
# (after "<"). An ended `a` completes into the `b` that called it even when both are spent, and
# is wrapped in a new `b` (on to another `a`) only while the new levels are not spent.
GROUP_IN_A_BUDGET = (
    'root ::= c\nc[max_tokens={c}] ::= a | "<" b ">"\na[max_tokens={n}] ::= b "x" | "y" | "(" a ")"\n'
    'b[capture] ::= a "z" | "w"'
)

# (c, n, pieces, probe, whether the probe is allowed)
TWO_ENTRY_CASES = [
    # Spent after "<", "y": `a` ends into the `b` around it ("z"), which then ends (">").
    (2, 1, "<|y", "z", True),
    (2, 1, "<|y|z", ">", True),
    (2, 1, "<|y|z", "x", False),
    # `a`'s budget (1 token, from "y") is spent when it ends: it is not wrapped ("x" after "z").
    (9, 1, "<|y|z", "x", False),
    (9, 1, "<|y|z", ">", True),
    # With 2 tokens it is: `b(a(b(a(y) z) x)`.
    (9, 2, "<|y|z", "x", True),
    (9, 2, "<|y|z|x", "z", True),
]


# Spent where it cannot end (`c`, 2 tokens, after `<`, `y`, `z`): XGrammar relaxes the budget and
# lets the finished `a` be wrapped in a new `b` on to another `a` (`x`).
XGRAMMAR_DIFFERENCES.append(
    (GROUP_IN_A_BUDGET.format(c=2, n=1), "<|y|z", "x", XG, "left-recursive group: relaxed until it can end"),
)

# A group entered through two of its rules inside the budget of `c`, none of its rules with a
# budget: each chain is opened by the entry it starts with (`a` after nothing, `b` after "<"), as
# if the group were entered through that rule alone. An ended level of the other entry inside the
# chain completes into the level that called it, spent or not; the chain's own entry, once ended,
# is wrapped in new levels only while they are not spent.
UNBUDGETED_GROUP = (
    'root ::= c\nc[max_tokens={c}] ::= a | "<" b ">"\na[capture] ::= b "x" | "y" | "(" a ")"\n'
    'b[capture] ::= a "z" | "w"'
)

# (c, pieces, probe, whether the probe is allowed)
UNBUDGETED_GROUP_CASES = [
    # `b`'s chain: the ended `a` ("y") completes into `b` even when spent ("z").
    (2, "<|y", "z", True),
    (2, "<|y|z", ">", True),
    # `b` ended ("z") is wrapped (on to an `a`, "x") only while the new levels are not spent:
    # not at the third token, but at the third of four.
    (2, "<|y|z", "x", False),
    (3, "<|y|z", "x", False),
    (4, "<|y|z", "x", True),
    # `a`'s chain: the ended `a` ("y") is wrapped in a `b` ("z") only before the budget is spent.
    (1, "y", "z", False),
    (2, "y", "z", True),
    (2, "y|z", "x", True),
]

# Spent where `c` cannot end (after `<`, `y`, `z`): XGrammar relaxes the budget and wraps the
# ended `b` in an `a` (`x`); spent where it can end (after `y`, `z`, `x`), it still wraps `a`.
XGRAMMAR_DIFFERENCES += [
    (UNBUDGETED_GROUP.format(c=3), "<|y|z", "x", XG, "left-recursive group without budgets: relaxed"),
    (UNBUDGETED_GROUP.format(c=2), "y|z", "xz", XG, "left-recursive group without budgets: spent, can end"),
]


# A left-recursive budgeted rule (XGrammar accepts the grammar as it is).
LEFT_SUM = 'root ::= expr "!"\nexpr[max_tokens={n}] ::= expr "+" term | term\nterm ::= [0-9]+'
XGRAMMAR_DIFFERENCES.append(
    (LEFT_SUM.format(n=2), "1+", "12", XG, "left recursion: relaxed until it can end"),
)
# XGrammar reads max_tokens=0 as no budget (against its own rule documentation, where a
# non-negative value bounds the occurrence); grammask as spent from the start.
ZERO = 'root ::= r "!"\nr[max_tokens=0] ::= [a-z]+'
XGRAMMAR_DIFFERENCES += [
    (ZERO, "", "abc", XG, "max_tokens=0: no budget in XGrammar"),
    ('root ::= e "!"\ne[max_tokens=0] ::= "(" e ")" | [a-z]+', "", "(", XG, "max_tokens=0, recursive"),
]

# A rule that never ends (`r ::= "bc" r`, with or without a budget) matches no string: grammask
# offers no token into it, XGrammar offers every prefix of its first bytes (tokens no output can
# complete; on a generated grammar with `[^"]` before such a rule, ~128K more at the first mask).
NEVER_ENDS = 'root ::= "a" r | "x"\nr{opt} ::= "bc" r'
XGRAMMAR_DIFFERENCES += [
    (NEVER_ENDS.format(opt=opt), "", "ab", XG, "a rule that never ends") for opt in ("", "[max_chars=0]")
]

# A recursive max_chars=0 rule that can end (`r1 ::= "bc" | "b" r1`) as an alternative of the
# root: by grammask's rule (docs/guides/ebnf_regex.md: a spent occurrence ends at the first
# position where it can, and `r1` cannot end before a `c`) `b`, `bb`, `bc`, ... start it;
# XGrammar 0.2.8 allows nothing into it there (only `x`; it also refuses the string "bc"), while
# it agrees where `r1` follows a byte (`root ::= "a" r1 | "x"`).
SPENT_ALTERNATIVE = 'root ::= r1 | "x"\nr1[max_chars=0] ::= "bc" | "b" r1'
XGRAMMAR_DIFFERENCES += [
    (SPENT_ALTERNATIVE, "", probe, GM, "max_chars=0 rule as a root alternative") for probe in ("b", "bc")
]


def test_max_tokens_zero_is_a_budget_of_zero_unlike_xgrammar():
    xg = pytest.importorskip("xgrammar")
    theirs, ours = xg.testing._is_grammar_accept_string, xgr.testing._is_grammar_accept_string
    assert theirs(ZERO, "abc!") and not ours(ZERO, "abc!")
    assert theirs(ZERO, "a!") and ours(ZERO, "a!")
    # Without the option neither has a budget; max_chars=0 is a budget of 0 in both.
    free, chars = ZERO.replace("[max_tokens=0]", ""), ZERO.replace("tokens", "chars")
    for g, s, want in [(free, "abc!", True), (chars, "abc!", False), (chars, "a!", True)]:
        assert theirs(g, s) == ours(g, s) == want, (g, s)


def _xg_mask(xg, cg, ids, vocab_size) -> np.ndarray:
    m = xg.GrammarMatcher(cg)
    for t in ids:
        assert m.accept_token(t)
    bm = xg.allocate_token_bitmask(1, vocab_size)
    m.fill_next_token_bitmask(bm)
    bits = np.unpackbits(bm[0].numpy().view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(bool)


@pytest.mark.parametrize("family", ["llama3"])
def test_full_masks_equal_xgrammar_where_the_rules_agree(family):
    xg = pytest.importorskip("xgrammar")
    info = tokenizer_info(family)
    tok = hf_tokenizer(family)
    xinfo = xg.TokenizerInfo.from_huggingface(tok, vocab_size=info.vocab_size)
    grammar = FREE.format(n=2)
    xcg = xg.GrammarCompiler(xinfo).compile_grammar(grammar)
    cg = compiler(family).compile_grammar(grammar)
    # Tokens that never cross the start of x, and x spent in a state where it can end.
    prefix = ids_of(family, "say:")
    assert b"".join(info.decoded_vocab[t] for t in prefix) == b"say:"
    hello = ids_of(family, " hello")
    for n in range(3):
        ids = prefix + hello * n
        m = xgr.GrammarMatcher(cg)
        for t in ids:
            assert m.accept_token(t)
        ours = bool_mask(m, info.vocab_size)
        theirs = _xg_mask(xg, xcg, ids, info.vocab_size)
        diff = np.flatnonzero(ours != theirs)
        assert diff.size == 0, (n, [info.decoded_vocab[i] for i in diff[:10]])
    # Strings under a generous budget: both accept the same.
    for s in ["say:hello world!", "say:!", "say: a b c d e f g h!", "say:A!"]:
        for g in (FREE, SAY):
            text = g.format(n=100)
            want = xg.testing._is_grammar_accept_string(text, s)
            assert xgr.testing._is_grammar_accept_string(text, s) == want, (text, s)


@pytest.mark.parametrize("grammar,text,probe,allowed_by,why", XGRAMMAR_DIFFERENCES)
def test_xgrammar_differences_still_differ(grammar, text, probe, allowed_by, why):
    xg = pytest.importorskip("xgrammar")
    family = "llama3"
    info = tokenizer_info(family)
    xinfo = xg.TokenizerInfo.from_huggingface(hf_tokenizer(family), vocab_size=info.vocab_size)
    ids = [t for piece in text.split("|") for t in ids_of(family, piece)]
    p = ids_of(family, probe)[0]
    theirs = _xg_mask(xg, xg.GrammarCompiler(xinfo).compile_grammar(grammar), ids, info.vocab_size)
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(grammar))
    for t in ids:
        assert m.accept_token(t)
    ours = bool_mask(m, info.vocab_size)[p]
    assert (bool(theirs[p]), bool(ours)) == (allowed_by == XG, allowed_by == GM), why


# ---------------------------------------------------------------------------------------------
# recursive rules


@pytest.mark.parametrize("family", FAMILIES)
def test_recursive_budgets_end_and_outputs_are_json(family):
    jsonschema = pytest.importorskip("jsonschema")
    info = tokenizer_info(family)
    decoded = info.decoded_vocab
    comp = compiler(family)
    rng = random.Random("rec" + family)
    schema = {"type": ["array", "object", "integer", "boolean"]}
    lengths = []
    for n in (1, 4, 8):
        cg = comp.compile_grammar(REC_VALUE.format(n=n))
        for _ in range(4):
            m = xgr.GrammarMatcher(cg)
            ids = sample(m, info, rng, 300)
            # Spent after n tokens; then every open value and list has a bounded rest.
            assert m.is_terminated(), f"no end after {len(ids)} tokens (N={n})"
            text = b"".join(decoded[t] for t in ids if t not in info.stop_token_ids)
            jsonschema.validate(json.loads(text), schema)
            lengths.append(len(ids))
    # Without the option the same sampling runs long: the ends above are the budget's doing.
    free = comp.compile_grammar(REC_VALUE.format(n=1).replace("[max_tokens=1]", ""))
    runs = [len(sample(xgr.GrammarMatcher(free), info, rng, 60)) for _ in range(4)]
    assert max(runs) > max(lengths[:4]), (runs, lengths)


@pytest.mark.parametrize("family", FAMILIES)
def test_recursive_budgets_rollback_fork_reset(family):
    info = tokenizer_info(family)
    cg = compiler(family).compile_grammar(MASK_GRAMMARS["rec_expr"])
    m = xgr.GrammarMatcher(cg)
    ids = ids_of(family, "((ab")
    for t in ids:
        assert m.accept_token(t)
    before = check_mask(m, info, "after ((ab")
    # Spending more tokens on a fork, then rolling them back, restores the budget.
    f = m.fork()
    rng = random.Random(family)
    more = sample(f, info, rng, 4)
    f.rollback(len(more))
    assert (check_mask(f, info, "rolled back") == before).all()
    # A string neither counts nor stays spent: read and rolled back, the mask is the same.
    s = m.fork()
    assert s.accept_string(" + ")
    s.rollback(1)
    assert (bool_mask(s, info.vocab_size) == before).all()
    m.reset()
    assert (check_mask(m, info, "reset") == bool_mask(xgr.GrammarMatcher(cg), info.vocab_size)).all()


def test_recursive_max_tokens_zero_holds_strings_too():
    g = MASK_GRAMMARS["rec_zero"]
    for s, ok in [("say:a!b", True), ("say:(a)!b", False), ("say:ab!b", False), ("say:a!(", False)]:
        m = _get_matcher_from_grammar(g)
        assert (m.accept_string(s) and m.is_completed()) == ok, s


def test_recursive_budgets_refuse_a_matcher_token_budget():
    with pytest.raises(xgr.UnsupportedFeatureError, match="recursive rule"):
        _get_matcher_from_grammar('root ::= e\ne[max_tokens=2] ::= "(" e ")" | "x"', max_tokens=10)
    # A lazy rule using a max_tokens rule is named as such.
    with pytest.raises(xgr.UnsupportedFeatureError, match="max_chars or lazy on a rule using a max_tokens rule"):
        _get_matcher_from_grammar('root ::= x "!"\nx[lazy] ::= y\ny[max_tokens=2] ::= [a-z]+', max_tokens=10)


def test_recursive_budgets_strings_agree_with_xgrammar():
    xg = pytest.importorskip("xgrammar")
    # accept_string ignores max_tokens in both.
    for g in [MASK_GRAMMARS["rec_expr"], REC_VALUE.format(n=1), MASK_GRAMMARS["rec_inside_and_outside"]]:
        for s in ["((ab + cd))", "ab + (cd + ef)", "(a", "[1,[2,{\"k\":true}]]", "{}", "<[y]>y", "<{{ab}}>(q)", "x)"]:
            want = xg.testing._is_grammar_accept_string(g, s)
            assert xgr.testing._is_grammar_accept_string(g, s) == want, (g, s)


@pytest.mark.parametrize("family", FAMILIES)
def test_recursive_budgets_jump_forward_serialization_batch_captures(family):
    info = tokenizer_info(family)
    grammar = 'root ::= "say:" e "!"\ne[max_tokens=1, capture] ::= "(" e ")" | "ab" | "ab+" e'
    cg = compiler(family).compile_grammar(grammar)
    open_ = ids_of(family, "(((")
    assert b"".join(info.decoded_vocab[t] for t in open_) == b"((("
    m = xgr.GrammarMatcher(cg)
    assert m.accept_string("say:")
    assert m.accept_token(open_[0])
    # Spent inside three open levels... of which the token read one or more: each level's
    # shortest rest is "ab" then ")", and the root's "!".
    depth = len(info.decoded_vocab[open_[0]])
    assert m.find_jump_forward_string() == "ab" + ")" * depth + "!"
    back = xgr.CompiledGrammar.deserialize_json(cg.serialize_json(), info)
    other = xgr.GrammarMatcher(back)
    assert other.accept_string("say:") and other.accept_token(open_[0])
    fresh = xgr.GrammarMatcher(cg)
    assert fresh.accept_string("say:")
    ms = [m, other, fresh]
    masks = [check_mask(x, info, f"matcher {i}") for i, x in enumerate(ms)]
    assert (masks[0] == masks[1]).all() and not (masks[0] == masks[2]).all()
    bm = xgr.allocate_token_bitmask(3, info.vocab_size)
    xgr.BatchGrammarMatcher().batch_fill_next_token_bitmask(ms, bm)
    for i, x in enumerate(ms):
        single = xgr.allocate_token_bitmask(1, info.vocab_size)
        x.fill_next_token_bitmask(single)
        assert (single[0] == bm[i]).all()
    # The spent occurrence ends along its shortest ways; captures see every level.
    rest = "ab" + ")" * depth + "!"
    for t in ids_of(family, rest):
        assert m.accept_token(t), rest
    assert m.is_completed()
    caps = [c for c in m.get_captures() if c[0] == "e"]
    assert caps[-1][1] == b"(" * depth + b"ab" + b")" * depth, caps


def test_recursive_budget_masks_equal_xgrammar_where_the_rules_agree():
    xg = pytest.importorskip("xgrammar")
    family = "llama3"
    info = tokenizer_info(family)
    xinfo = xg.TokenizerInfo.from_huggingface(hf_tokenizer(family), vocab_size=info.vocab_size)
    grammar = 'root ::= "say:" e "!"\ne[max_tokens=1] ::= "(" e ")" | [a-z]+'
    xcg = xg.GrammarCompiler(xinfo).compile_grammar(grammar)
    cg = compiler(family).compile_grammar(grammar)
    prefix = ids_of(family, "say:")
    # No token across the start of e; spent (one token) where the occurrence can end: both allow
    # only what ends it. Before it is spent, both allow the same.
    for text in ["", "hello"]:
        ids = prefix + (ids_of(family, text) if text else [])
        assert b"".join(info.decoded_vocab[t] for t in ids) == b"say:" + text.encode()
        m = xgr.GrammarMatcher(cg)
        for t in ids:
            assert m.accept_token(t)
        ours = bool_mask(m, info.vocab_size)
        theirs = _xg_mask(xg, xcg, ids, info.vocab_size)
        diff = np.flatnonzero(ours != theirs)
        assert diff.size == 0, (text, [info.decoded_vocab[i] for i in diff[:10]])


def _strings_agree_with_xgrammar(xg, xcomp, grammar: str, alphabet: str, longest: int) -> None:
    """Every string over ``alphabet`` up to ``longest`` characters: accepted, and complete, as by
    XGrammar (budgets do not hold for strings in either)."""
    ours, theirs = _get_matcher_from_grammar(grammar), xg.GrammarMatcher(xcomp.compile_grammar(grammar))
    checked = 0
    for n in range(longest + 1):
        for chars in itertools.product(alphabet, repeat=n):
            s = "".join(chars)
            got = []
            for m in (ours, theirs):
                ok = m.accept_string(s)
                got.append((ok, ok and m.is_completed()))
                if ok and s:
                    m.rollback(1)
            assert got[0] == got[1], (s, got)
            checked += 1
    assert checked == sum(len(alphabet) ** n for n in range(longest + 1))


def _mask_agrees_with_xgrammar(xg, xcomp, family: str, grammar: str, text: str) -> np.ndarray:
    """The mask after ``text``'s tokens, checked against brute force and equal to XGrammar's.
    ``|`` splits ``text`` into pieces tokenized apart (so no token crosses a rule's start)."""
    info = tokenizer_info(family)
    ids = [t for piece in text.split("|") if piece for t in ids_of(family, piece)]
    assert b"".join(info.decoded_vocab[t] for t in ids) == text.replace("|", "").encode()
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(grammar))
    for t in ids:
        assert m.accept_token(t)
    ours = check_mask(m, info, f"{grammar!r} after {text!r}")
    theirs = _xg_mask(xg, xcomp.compile_grammar(grammar), ids, info.vocab_size)
    diff = np.flatnonzero(ours != theirs)
    assert diff.size == 0, (grammar, text, [info.decoded_vocab[i] for i in diff[:10]])
    return ours


def _xg_compiler(xg, family: str):
    info = tokenizer_info(family)
    return xg.GrammarCompiler(xg.TokenizerInfo.from_huggingface(hf_tokenizer(family), vocab_size=info.vocab_size))


# Left recursion through another rule: `a` is the group's entry (used from outside it). Captured,
# so the compiler keeps `q` apart instead of copying it into `a`.
LEFT_GROUP = 'root ::= a "!"\na[max_tokens={n}] ::= q "+" | "x" | "(" a ")"\nq[capture] ::= a "y" | "z"'

# The root itself in such a group, entered through it (outside every budget) and through the
# budgeted `a` (inside its own brackets): refused before, as two entries.
ROOT_GROUP = 'root ::= a "z" | "w"\na[max_tokens={n}] ::= root "x" | "y" | "(" a ")"'

# (grammar, string alphabet and longest string, the token that grows the occurrence, masks: (N,
# text, whether that token is allowed)). Full masks where both rules agree (no token across the
# start of an occurrence, spent where it can end): before the budget is spent, and once spent,
# where a finished occurrence ends instead of being wrapped in another level ("+" for expr; "y",
# which wraps `a` in `q` on the way to another `a`).
LEFT_RECURSIVE = {
    "self": (
        LEFT_SUM,
        ("12+!", 6),
        "+",
        [(2, "", False), (2, "1", True), (5, "1+2", True), (1, "1", False), (1, "12", False), (3, "1+2", False)]
        + [(4, "1+2+3", False)],
    ),
    "group": (
        LEFT_GROUP,
        ("xyz+()!", 5),
        "y",
        [(2, "", False), (2, "x", True), (1, "x", False), (2, "xy+", False), (3, "xy+", True), (1, "z+", False)]
        + [(3, "z+", True), (2, "(x)", False), (3, "(x)", True)],
    ),
    # "x" after "yz" wraps the finished `a` ("y") in `root` ("yz") and that in another `a`.
    "root group": (
        ROOT_GROUP,
        ("wxyz()", 5),
        "x",
        [(2, "", False), (1, "y|z", False), (3, "y|z", True), (4, "y|z", True), (2, "y|z|x", False)]
        + [(1, "w|x", False), (4, "w|x|z", True), (3, "(|y|)", False)],
    ),
}


@pytest.mark.parametrize("name", list(LEFT_RECURSIVE))
def test_left_recursive_budget_strings_and_masks_agree_with_xgrammar(name):
    xg = pytest.importorskip("xgrammar")
    family = "llama3"
    xcomp = _xg_compiler(xg, family)
    grammar, (alphabet, longest), grow, cases = LEFT_RECURSIVE[name]
    _strings_agree_with_xgrammar(xg, xcomp, grammar.format(n=2), alphabet, longest)
    token = ids_of(family, grow)[0]
    for n, text, grows in cases:
        ours = _mask_agrees_with_xgrammar(xg, xcomp, family, grammar.format(n=n), text)
        assert ours[token] == grows, (n, text)


def test_a_string_after_a_spent_budget_wraps_a_left_recursive_group():
    """After the tokens ``(`` and ``x`` spend ``a``'s budget, the string ``y`` (strings are read
    free) wraps the finished ``x`` in ``q ::= a "y"``, as XGrammar reads it too; the masks after it
    follow the spent budget again (``+`` ends that ``q``'s ``a``; XGrammar's looser budget also
    allows more ``y``s, so only the string is compared with it)."""
    family = "llama3"
    info = tokenizer_info(family)
    grammar = LEFT_GROUP.format(n=1).replace('root ::= a "!"', "root ::= a")
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(grammar))
    for piece in ["(", "x"]:
        (t,) = ids_of(family, piece)
        assert m.accept_token(t)
    check_mask(m, info, "after (, x")
    assert m.accept_string("y")
    mask = check_mask(m, info, "after (, x, string y")
    assert mask[ids_of(family, "+")[0]] and not mask[ids_of(family, "y")[0]]
    xg = pytest.importorskip("xgrammar")
    xm = xg.GrammarMatcher(_xg_compiler(xg, family).compile_grammar(grammar))
    assert all(xm.accept_token(ids_of(family, p)[0]) for p in ["(", "x"]) and xm.accept_string("y")


def probe_after_pieces(grammar: str, text: str, probe: str) -> bool:
    """Llama 3: accepts the one-token pieces of ``text`` (``|``-separated), checking the full mask
    against brute force before each and after the last; the bit of ``probe`` then."""
    family = "llama3"
    info = tokenizer_info(family)
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(grammar))
    for piece in text.split("|"):
        (t,) = ids_of(family, piece)
        check_mask(m, info, f"before {piece!r} of {text!r}")
        assert m.accept_token(t), (text, piece)
    mask = check_mask(m, info, f"after {text!r}")
    return bool(mask[ids_of(family, probe)[0]])


@pytest.mark.parametrize("c, n, text, probe, allowed", TWO_ENTRY_CASES)
def test_left_recursive_group_entered_through_two_rules(c, n, text, probe, allowed):
    """Full Llama 3 masks against brute force along the pieces; the probe bit as the stack
    reference reads it (``crates/grammask-core/tests/rule_max_tokens.rs``, ``rec_marked_groups``).
    Fails with every completion of an ended ``a`` into a spent ``b`` read as a wrap (the first
    case) and with none (the fourth)."""
    assert probe_after_pieces(GROUP_IN_A_BUDGET.format(c=c, n=n), text, probe) == allowed


def test_left_recursive_group_wrapped_before_its_budget_is_spent_unlike_xgrammar():
    """`a` (2 tokens from `y`) ends after `y` with one token used: the new levels around it are
    not spent, so it is wrapped (`b(a(b(a(y) z) x)`) and `x` after `z` is the new `a`'s shortest
    way to its end (grammask's rule: growth is decided where the wrapped level ends). XGrammar
    0.2.8 refuses `x` there."""
    xg = pytest.importorskip("xgrammar")
    family = "llama3"
    info = tokenizer_info(family)
    grammar = GROUP_IN_A_BUDGET.format(c=9, n=2)
    ids = [t for piece in ["<", "y", "z"] for t in ids_of(family, piece)]
    x = ids_of(family, "x")[0]
    assert not _xg_mask(xg, _xg_compiler(xg, family).compile_grammar(grammar), ids, info.vocab_size)[x]
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(grammar))
    assert all(m.accept_token(t) for t in ids)
    assert bool_mask(m, info.vocab_size)[x]


@pytest.mark.parametrize("c, text, probe, allowed", UNBUDGETED_GROUP_CASES)
def test_left_recursive_group_without_budgets_entered_through_two_rules(c, text, probe, allowed):
    """Full Llama 3 masks against brute force along the pieces; the probe bit as the stack
    reference reads it (``crates/grammask-core/tests/rule_max_tokens.rs``,
    ``rec_unbudgeted_groups``). ``(3, "<|y|z", "x")`` fails where every entry opens chains
    (``a`` inside ``b``'s chain wrapped at the second token)."""
    assert probe_after_pieces(UNBUDGETED_GROUP.format(c=c), text, probe) == allowed


# Nested budgets: a regular `max_tokens` rule inside another (each keeps its own budget; an
# inner occurrence is also spent when the outer one is).
NESTED_OUTER = 'root ::= "say:" a "!"\na[max_tokens={n}] ::= b | b "." b\nb[max_tokens=5] ::= [a-z]+ ("," [a-z]+)*'
NESTED_INNER = 'root ::= "say:" a "!"\na[max_tokens={n}] ::= "<" b ">" [a-z]* | [0-9]+\nb[max_tokens=1] ::= [a-z]+'

# (grammar, string grammar, alphabet and longest string, the probe token, masks: (N, pieces,
# whether the probe is allowed)). Masks where both rules agree (no token across the start of an
# occurrence, spent where it can end): the outer budget spent inside an open inner occurrence
# ends both ("," refused after two tokens at N=2); the inner budget spent inside an open outer
# occurrence ends the inner one only (">" then letters again, until the outer is spent).
NESTED = {
    "outer_spent": (
        NESTED_OUTER,
        ("ab,.!", 5),
        ",",
        [(2, "say:", False), (2, "say:|hello", True), (2, "say:|hello|world", False)]
        + [(3, "say:|hello|world", True), (3, "say:|hello|.|ab", False), (4, "say:|hello|.|ab", True)],
    ),
    "inner_spent": (
        NESTED_INNER,
        ("ab<>1!", 5),
        "abc",
        [(4, "say:|<", True), (4, "say:|<|hello", False), (4, "say:|<|hello|>", True)]
        + [(4, "say:|<|hello|>|abc", False), (5, "say:|<|hello|>|abc", True), (4, "say:|12", False)],
    ),
}

# A `max_tokens` rule inside a lookahead: the lookahead reads its body (bytes ahead, no budget);
# its real occurrence keeps its budget ("abc" refused once b is spent after three tokens, N=3).
NESTED["lookahead"] = (
    'root ::= "say:" a b "!"\na ::= [a-z]+ (= b)\nb[max_tokens={n}] ::= "<" [0-9]+ ">" | "<" [0-9]+ ">" [a-z]+',
    ("a<1>!", 5),
    "abc",
    [(3, "say:", True), (3, "say:|hello", True), (3, "say:|hello|<", False), (3, "say:|hello|<|12", False)]
    + [(3, "say:|hello|<|12|>", False), (4, "say:|hello|<|12|>", True)],
)


@pytest.mark.parametrize("name", list(NESTED))
def test_nested_budget_strings_and_masks_agree_with_xgrammar(name):
    xg = pytest.importorskip("xgrammar")
    family = "llama3"
    xcomp = _xg_compiler(xg, family)
    grammar, (alphabet, longest), probe, cases = NESTED[name]
    _strings_agree_with_xgrammar(xg, xcomp, grammar.format(n=2).replace('"say:" ', ""), alphabet, longest)
    token = ids_of(family, probe)[0]
    assert ids_of(family, probe) == [token]
    for n, text, allowed in cases:
        ours = _mask_agrees_with_xgrammar(xg, xcomp, family, grammar.format(n=n), text)
        assert ours[token] == allowed, (n, text)


# `Token(...)` inside a regular `max_tokens` rule: a token edge of its automaton, one token that
# weighs one byte on the shortest ways. T: a text token ("XYZ"), P: an added special token.
# (grammar, cases: (N, pieces with "<T>"/"<P>" for those tokens, {probe: allowed})). Masks where
# both rules agree (spent where the occurrence can end, or before it is spent), equal to
# XGrammar's and to a brute force over every id; "token_then_text" at N=1 after "hello" is spent
# where it cannot end: grammask allows only the token edge (its shortest way), XGrammar anything.
TOKEN_INSIDE = {
    "token_then_text": (
        'root ::= "s:" a "!"\na[max_tokens={n}] ::= [a-z]* Token({T}) [a-z]*',
        [(1, "s:", {"T": True, "abc": True}), (2, "s:|hello", {"T": True, "abc": True})]
        + [(1, "s:|hello|<T>", {"abc": False, "!": True}), (2, "s:|<T>", {"abc": True})]
        + [(2, "s:|hello|<T>", {"abc": False}), (3, "s:|hello|<T>", {"abc": True})],
    ),
    # Spent where it can end: the twin's final state drops the token edge, so T is refused.
    "optional_token": (
        'root ::= "s:" a "!"\na[max_tokens={n}] ::= [a-z]+ (Token({T}) [a-z]*)?',
        [(1, "s:|hello", {"T": False, "!": True}), (2, "s:|hello", {"T": True, "abc": True})]
        + [(2, "s:|hello|<T>", {"abc": False}), (3, "s:|hello|<T>", {"abc": True})],
    ),
    "token_set": (
        'root ::= "s:" a "!"\na[max_tokens={n}] ::= ([a-z] | Token({T}, {P}))+',
        [(1, "s:", {"T": True, "P": True}), (1, "s:|hello", {"P": False, "T": False})]
        + [(2, "s:|<P>", {"abc": True, "T": True}), (2, "s:|hello|<T>", {"P": False})]
        + [(3, "s:|hello|<T>", {"P": True, "abc": True})],
    ),
}

# `Token(...)` beside a recursive budget (one token weighing one byte on the spent levels'
# shortest ways) and inside nested budgets. Masks where both rules agree: before the budget is
# spent, and once spent where the occurrence ends or has one way left (")" after P at N=3).
TOKEN_INSIDE["recursive"] = (
    'root ::= a\na[max_tokens={n}] ::= "(" a ")" | Token({P})',
    [(4, "", {"P": True, "(": True}), (4, "(|(", {"P": True, "(": True}), (4, "(|(|<P>", {")": True, "(": False})]
    + [(3, "(|(|<P>", {")": True, "P": False}), (4, "(|(|<P>|)", {")": True})],
)
TOKEN_INSIDE["nested"] = (
    'root ::= "s:" a "!"\na[max_tokens={n}] ::= b | b "." b\nb[max_tokens=5] ::= [a-z]+ Token({T})?',
    [(2, "s:|hello", {"T": True, ".": True, "!": True, "abc": True})]
    + [(2, "s:|hello|<T>", {".": False, "!": True}), (3, "s:|hello|<T>", {".": True, "!": True})]
    + [(4, "s:|hello|<T>|.|ab", {"T": False, "!": True}), (5, "s:|hello|<T>|.|ab", {"T": True, "!": True})],
)


@pytest.mark.parametrize("name", list(TOKEN_INSIDE))
def test_token_inside_a_budget_masks_agree_with_xgrammar(name):
    xg = pytest.importorskip("xgrammar")
    from test_token_edges import brute_force

    family = "llama3"
    info = tokenizer_info(family)
    special = {"T": ids_of(family, "XYZ"), "P": [128010]}
    assert len(special["T"]) == 1 and info.decoded_vocab[128010] == b"<|python_tag|>"
    grammar, cases = TOKEN_INSIDE[name]
    _token_cases_agree(xg, grammar, cases, special)
    # Spent where it cannot end: only the token edge, its shortest way (XGrammar allows anything).
    g = grammar.format(n=1, T=special["T"][0], P=128010)
    if name == "token_then_text":
        m = xgr.GrammarMatcher(compiler(family).compile_grammar(g))
        for t in ids_of(family, "s:") + ids_of(family, "hello"):
            assert m.accept_token(t)
        assert np.flatnonzero(bool_mask(m, info.vocab_size)).tolist() == special["T"]
    if name == "recursive":
        # Spent after "((" where `a` cannot end: only its shortest way, the token (XGrammar also
        # allows "(").
        m = xgr.GrammarMatcher(compiler(family).compile_grammar(grammar.format(n=2, P=128010)))
        for t in ids_of(family, "(") * 2:
            assert m.accept_token(t)
        assert np.flatnonzero(bool_mask(m, info.vocab_size)).tolist() == [128010]
        assert (bool_mask(m, info.vocab_size) == brute_force(m, info.vocab_size)).all()


# `Token(...)`/`ExcludeToken(...)` inside a `max_chars` or `lazy` rule: a token edge of its
# automaton that counts one character (XGrammar counts the token's decoded characters). X: the
# one-character text token "X" (one character either way), P: the added special token
# "<|python_tag|>" (14 characters for XGrammar). Cases as in TOKEN_INSIDE, with N the max_chars;
# masks equal XGrammar's and a brute force over every id.
TOKEN_INSIDE_CHARS = {
    "token_then_text": (
        'root ::= "s:" a "!"\na[max_chars={n}] ::= [a-z]* Token({X}) [a-z]*',
        [(5, "s:", {"X": True, "abc": True, "!": False}), (5, "s:|ab|<X>", {"ab": True, "abc": False})]
        + [(5, "s:|abcdefg", {"X": True, "abc": True}), (5, "s:|abcd|<X>", {"a": False, "!": True})],
    ),
    "token_set": (
        'root ::= "s:" a "!"\na[max_chars={n}] ::= ([a-z] | Token({X}, {P}))+',
        [(3, "s:", {"X": True, "P": True}), (3, "s:|<X>|<X>", {"a": True, "abc": False, "P": True})]
        + [(3, "s:|<X>|<X>|<X>", {"X": False, "P": False, "!": True}), (3, "s:|a|<X>", {"a": True, "ab": False})],
    ),
    "exclude_token": (
        'root ::= "s:" a "!"\na[max_chars={n}] ::= [a-z]* ExcludeToken({X}, {P}) [a-z]*',
        [(4, "s:", {"X": False, "P": False, "abc": True, "!": True}), (4, "s:|ab|!", {"a": True, "!": True})]
        + [(4, "s:|ab|!|a", {"a": False, "!": True})],
    ),
}


def _token_walk(family: str, text: str, special: dict) -> list:
    """The ids of `text`'s pieces (`|`-separated): `<K>` is `special[K]`, else the text's tokens."""
    ids = []
    for piece in filter(None, text.split("|")):
        key = piece[1:-1] if piece.startswith("<") and piece.endswith(">") else None
        ids += special[key] if key in special else ids_of(family, piece)
    return ids


def _token_case_agrees(xg, xinfo, family: str, g: str, text: str, special: dict, probes: dict) -> None:
    """After `text` (see `_token_walk`), grammask's full mask under `g` equals a brute force over
    every id and XGrammar 0.2.8's, and each probe (a `special` key or a text) is allowed as given."""
    from test_token_edges import brute_force

    info = tokenizer_info(family)
    ids = _token_walk(family, text, special)
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(g))
    for t in ids:
        assert m.accept_token(t), (g, text, t)
    ours = bool_mask(m, info.vocab_size)
    assert (ours == brute_force(m, info.vocab_size)).all(), (g, text)
    # A fresh compiler per grammar: XGrammar 0.2.8's cache mixes up masks of grammars that
    # differ only in a Token(...) id.
    theirs = _xg_mask(xg, xg.GrammarCompiler(xinfo).compile_grammar(g), ids, info.vocab_size)
    if "ExcludeToken" in g:
        # XGrammar's ExcludeToken also allows special tokens; grammask's text tokens only.
        theirs[list(info.special_token_ids)] = False
    diff = np.flatnonzero(ours != theirs)
    assert diff.size == 0, (g, text, [info.decoded_vocab[i] for i in diff[:10]])
    for probe, allowed in probes.items():
        p = special[probe][0] if probe in special else ids_of(family, probe)[0]
        assert ours[p] == allowed, (g, text, probe)


def _token_cases_agree(xg, grammar: str, cases: list, special: dict) -> None:
    """Every case `(n, text, probes)` of a TOKEN_INSIDE* table passes `_token_case_agrees` on
    llama3 under `grammar` with `n` and each `special` key's first id filled in."""
    family = "llama3"
    xinfo = xg.TokenizerInfo.from_huggingface(hf_tokenizer(family), vocab_size=tokenizer_info(family).vocab_size)
    for n, text, probes in cases:
        g = grammar.format(n=n, **{key: ids[0] for key, ids in special.items()})
        _token_case_agrees(xg, xinfo, family, g, text, special, probes)


@pytest.mark.parametrize("name", list(TOKEN_INSIDE_CHARS))
def test_token_inside_a_char_budget_masks_agree_with_xgrammar(name):
    xg = pytest.importorskip("xgrammar")

    family = "llama3"
    info = tokenizer_info(family)
    special = {"X": ids_of(family, "X"), "P": [128010]}
    assert len(special["X"]) == 1 and info.decoded_vocab[128010] == b"<|python_tag|>"
    grammar, cases = TOKEN_INSIDE_CHARS[name]
    _token_cases_agree(xg, grammar, cases, special)


# `Token(...)`/`ExcludeToken(...)` inside a recursive `max_chars` rule: the chart counts the token's
# characters (UTF-8 lead bytes; "<|python_tag|>" is 14, as XGrammar 0.2.8 counts its decoded
# characters), and once the outermost occurrence has read its budget and can end, no token edge
# inside it reads. Cases as in TOKEN_INSIDE_CHARS; masks equal XGrammar's and a brute force.
TOKEN_INSIDE_REC_CHARS = {
    "nested": (
        'root ::= "s:" a "!"\na[max_chars={n}] ::= "(" a ")" | ([a-z] | Token({X}, {P})) a?',
        [(3, "s:", {"X": True, "P": True}), (3, "s:|<P>", {"!": True, "X": False, "P": False, "a": False})]
        + [(15, "s:|<P>", {"a": True, "P": True}), (3, "s:|(|<P>", {"a": True, ")": True})]
        + [(3, "s:|<X>|<X>", {"a": True, "P": True}), (3, "s:|<X>|a|<X>", {"!": True, "X": False})]
        + [(15, "s:|<P>|<X>", {"!": True, "X": False}), (16, "s:|(|<P>|)", {"!": True, "a": False})],
    ),
    "exclude_token": (
        'root ::= "s:" a "!"\na[max_chars={n}] ::= "[" a "]" | ExcludeToken({X}, {P}) a?',
        [(4, "s:|hello", {"!": True, "abc": False}), (6, "s:|hello", {"abc": True, "!": True})]
        # "[" is read both ways (literal, ExcludeToken): the occurrence that reads it ends at
        # "hello" (6 characters) where its ExcludeToken parse can end, for its "[" a "]" parse too.
        + [(4, "s:|[|hello", {"]": False, "!": True}), (9, "s:|[|hello", {"]": True, "abc": True})],
    ),
}


@pytest.mark.parametrize("name", list(TOKEN_INSIDE_REC_CHARS))
def test_token_inside_a_recursive_char_budget_masks_agree_with_xgrammar(name):
    xg = pytest.importorskip("xgrammar")

    special = {"X": ids_of("llama3", "X"), "P": [128010]}
    grammar, cases = TOKEN_INSIDE_REC_CHARS[name]
    _token_cases_agree(xg, grammar, cases, special)


def test_token_inside_a_char_budget_counts_one_character_unlike_xgrammar():
    xg = pytest.importorskip("xgrammar")
    from test_token_edges import brute_force

    family = "llama3"
    info = tokenizer_info(family)
    special = {"X": ids_of(family, "X"), "P": [128010]}
    xinfo = xg.TokenizerInfo.from_huggingface(hf_tokenizer(family), vocab_size=info.vocab_size)
    g = TOKEN_INSIDE_CHARS["token_set"][0].format(n=3, X=special["X"][0], P=128010)
    ids = _token_walk(family, "s:|a|<P>", special)
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(g))
    assert all(m.accept_token(t) for t in ids)
    ours = bool_mask(m, info.vocab_size)
    assert (ours == brute_force(m, info.vocab_size)).all()
    # Two characters read (a, the token): one more, or the end.
    assert ours[ids_of(family, "a")[0]] and ours[128010] and ours[ids_of(family, "!")[0]]
    # XGrammar counts 15 characters: only the end.
    theirs = _xg_mask(xg, xg.GrammarCompiler(xinfo).compile_grammar(g), ids, info.vocab_size)
    assert np.flatnonzero(theirs).tolist() == ids_of(family, "!")


def test_token_inside_a_lazy_rule_ends_at_the_first_end():
    # XGrammar 0.2.8 refuses any rule reference in a lazy rule (its token expressions are rules).
    family = "llama3"
    info = tokenizer_info(family)
    from test_token_edges import brute_force

    x = ids_of(family, "X")[0]
    g = f'root ::= "s:" a "!"\na[lazy] ::= [a-z]* Token({x}, 128010) [a-z]*'
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(g))
    for t in ids_of(family, "s:hello"):
        assert m.accept_token(t)
    mask = bool_mask(m, info.vocab_size)
    assert (mask == brute_force(m, info.vocab_size)).all()
    assert mask[x] and mask[128010] and mask[ids_of(family, "abc")[0]]
    assert m.accept_token(128010)
    mask = bool_mask(m, info.vocab_size)
    assert (mask == brute_force(m, info.vocab_size)).all()
    assert np.flatnonzero(mask).tolist() == ids_of(family, "!")


# A `max_tokens` rule inside a `max_chars` rule: the `max_chars` rule keeps its rule edges (its
# character budget enforced on the chart, as on a recursive rule), so the inner occurrence keeps
# its token budget. (walk, {probe: allowed}); XGrammar 0.2.8 agrees where no budget is spent
# where its rule cannot end (there XGrammar allows any continuation).
CHARS_AROUND_TOKENS = (
    'root ::= "s:" x "#"\nx[max_chars=8] ::= y "!" [a-z ]*\ny[max_tokens=3] ::= [a-z]+ ("," [a-z]+)*',
    [
        ("s:", {"hello": True, "!": False}),
        ("s:|hello", {"!": True, ",": True, "abc": True}),
        ("s:|hello|,", {"abc": True, "!": False}),
        ("s:|hi|!", {"abc": True, "#": True}),
        ("s:|hi|!|abc", {"#": True, "abc": False, "a": True}),
        ("s:|hello|!", {"#": True, "ab": True, "abc": False}),
        ("s:|hello|there", {"!": True, ",": True}),
        ("s:|hello|,|ab", {"!": True, ",": False, "a": False}),
    ],
)


def test_token_budget_inside_a_char_budget_masks_agree_with_xgrammar():
    xg = pytest.importorskip("xgrammar")
    from test_token_edges import brute_force

    family = "llama3"
    info = tokenizer_info(family)
    xinfo = xg.TokenizerInfo.from_huggingface(hf_tokenizer(family), vocab_size=info.vocab_size)
    g, cases = CHARS_AROUND_TOKENS
    theirs_cg = xg.GrammarCompiler(xinfo, cache_enabled=False).compile_grammar(g)
    for text, probes in cases:
        ids = _token_walk(family, text, {})
        m = xgr.GrammarMatcher(compiler(family).compile_grammar(g))
        for t in ids:
            assert m.accept_token(t), (text, t)
        ours = bool_mask(m, info.vocab_size)
        assert (ours == brute_force(m, info.vocab_size)).all(), text
        theirs = _xg_mask(xg, theirs_cg, ids, info.vocab_size)
        diff = np.flatnonzero(ours != theirs)
        assert diff.size == 0, (text, [info.decoded_vocab[i] for i in diff[:10]])
        for probe, allowed in probes.items():
            assert ours[ids_of(family, probe)[0]] == allowed, (text, probe)
    # Strings do not spend the inner budget but are held to the outer one.
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(g))
    assert m.accept_string("s:abc,de,fg!#") and m.is_completed()
    m = xgr.GrammarMatcher(compiler(family).compile_grammar(g))
    assert m.accept_string("s:hi!abcde") and not m.accept_string("f")
    # Still refused with it: a matcher budget. max_tokens on the max_chars rule itself compiles
    # (both budgets on one rule: `test_recursive_token_and_char_budgets_together_*`).
    with pytest.raises(xgr.UnsupportedFeatureError, match="or with max_chars or lazy on a rule using"):
        xgr.GrammarMatcher(compiler(family).compile_grammar(g), max_tokens=20)
    both = g.replace("x[max_chars=8]", "x[max_chars=8, max_tokens=3]")
    for s in ["s:abc,de,fg!#", "s:hi!abcde", "s:hi!abcdef#"]:
        assert xgr.testing._is_grammar_accept_string(both, s) == xg.testing._is_grammar_accept_string(both, s), s


# A group of rules left-recursive through each other entered through two of its rules: the
# budgeted one and one used outside every budget. Full Llama 3 masks equal XGrammar 0.2.8's before
# the budget is spent and where the spent occurrence ends; (N, pieces) where they differ: XGrammar
# drops the spent "a" open around "b" (after "w" at N=1, "yz" at N=2) although it cannot end yet,
# grammask lets it take its shortest way ("x"; documented in docs/guides/ebnf_regex.md).
TWO_ENTRIES = 'root ::= a | b\na[max_tokens={n}] ::= b "x" | "y"\nb ::= a "z" | "w"'


def test_group_entered_through_two_rules_masks_agree_with_xgrammar():
    xg = pytest.importorskip("xgrammar")
    family = "llama3"
    xcomp = _xg_compiler(xg, family)
    info = tokenizer_info(family)
    x = ids_of(family, "x")[0]
    agree = [(1, "", None), (1, "y", False), (1, "y|z", False), (1, "w|x", None), (2, "y", None), (2, "w", True)]
    agree += [(2, "y|z|x", None), (3, "y|z", True), (3, "w|x|z|x", None), (4, "w|x|z", True)]
    for n, text, x_allowed in agree:
        ours = _mask_agrees_with_xgrammar(xg, xcomp, family, TWO_ENTRIES.format(n=n), text)
        assert x_allowed is None or ours[x] == x_allowed, (n, text)
    for n, text in [(1, "w"), (2, "y|z")]:
        g = TWO_ENTRIES.format(n=n)
        ids = [t for piece in text.split("|") for t in ids_of(family, piece)]
        m = xgr.GrammarMatcher(compiler(family).compile_grammar(g))
        assert all(m.accept_token(t) for t in ids)
        ours = check_mask(m, info, f"{g!r} after {text!r}")
        theirs = _xg_mask(xg, xcomp.compile_grammar(g), ids, info.vocab_size)
        assert ours[x] and not theirs[x], (n, text)


# ---------------------------------------------------------------------------------------------
# recursive max_tokens together with recursive max_chars

# {t}: a token budget, {c}: a character budget. Both on one rule; a recursive max_chars rule using
# a max_tokens rule; each around or beside the other (a recursive one of each).
BOTH = [
    'root ::= e "!"\ne[max_tokens={t}, max_chars={c}] ::= "(" e ")" | [a-z]+ ("+" e)?',
    'root ::= e "!"\ne[max_chars={c}] ::= "(" e ")" | w ("," e)?\nw[max_tokens={t}] ::= [a-z]+',
    'root ::= e "|" f\ne[max_chars={c}] ::= "(" e ")" | [a-z]+\nf[max_tokens={t}] ::= "[" f "]" | [a-z]+',
    'root ::= f "!"\nf[max_tokens={t}] ::= "[" f "]" | e ("," f)?\ne[max_chars={c}] ::= "(" e ")" | [a-z]+',
]


def _unit(decoded: bytes) -> bool:
    """A token that never reads across the start of a rule occurrence in ``BOTH``: one byte, or
    letters only (a token read across the start of a max_tokens occurrence is its first in
    grammask, not counted in XGrammar: ``a_token_across_the_start_is_the_first_token``)."""
    return len(decoded) == 1 or decoded.isalpha()


@pytest.mark.parametrize("template", BOTH)
def test_recursive_token_and_char_budgets_together_equal_xgrammar(template):
    """Full masks on Llama 3 equal XGrammar 0.2.8's along random walks of single-unit tokens,
    wherever the grammar without ``max_chars`` masks as XGrammar does (its recursive
    ``max_tokens`` differs once spent away from an end: XGrammar reads on until the occurrence
    can end, nested levels unrestricted; grammask takes a shortest way, see
    ``XGRAMMAR_DIFFERENCES``). Each budget shapes some compared masks (the grammar without
    either option masks otherwise there), so a matcher ignoring either budget fails."""
    _walk_both_against_xgrammar(template, edges=False)


def _walk_both_against_xgrammar(template: str, edges: bool) -> None:
    """The walks of ``test_recursive_token_and_char_budgets_together_equal_xgrammar``; with
    ``edges``, the tokens ``Token(...)`` names are taken too, and some walks must take them."""
    xg = pytest.importorskip("xgrammar")
    family = "llama3"
    info = tokenizer_info(family)
    n, decoded = info.vocab_size, info.decoded_vocab
    named = {int(i) for i in re.findall(r"(?<!Exclude)Token\((\d+)\)", template)}
    took = 0
    xinfo = xg.TokenizerInfo.from_huggingface(hf_tokenizer(family), vocab_size=n)
    xc, comp = xg.GrammarCompiler(xinfo), compiler(family)
    stop = set(info.stop_token_ids)
    rng = random.Random(template)
    shaped = {"max_tokens": 0, "max_chars": 0}
    compared = 0
    for t, c in ((1, 4), (1, 12), (2, 6), (3, 9)):
        text = template.format(t=t, c=c)
        strip = {
            "max_tokens": re.sub(r"max_tokens=\d+(, )?", "", text).replace("[]", ""),
            "max_chars": re.sub(r"(, )?max_chars=\d+", "", text).replace("[]", ""),
        }
        cg, xcg = comp.compile_grammar(text), xc.compile_grammar(text)
        without = {k: comp.compile_grammar(g) for k, g in strip.items()}
        tokens_only = xc.compile_grammar(strip["max_chars"])
        for _ in range(6):
            ids: list = []
            for _ in range(12):
                alone = _both_mask(xgr, without["max_chars"], ids, n)
                if (alone != _xg_mask(xg, tokens_only, ids, n)).any():
                    break  # the known max_tokens difference, not this combination's
                ours = _both_mask(xgr, cg, ids, n)
                diff = np.flatnonzero(ours != _xg_mask(xg, xcg, ids, n))
                assert diff.size == 0, (text, [decoded[i] for i in ids], [decoded[i] for i in diff[:10]])
                compared += 1
                shaped["max_chars"] += int((alone != ours).any())
                shaped["max_tokens"] += int((_both_mask(xgr, without["max_tokens"], ids, n) != ours).any())
                choices = [i for i in np.flatnonzero(ours) if i not in stop and _unit(decoded[i])]
                edge = [i for i in np.flatnonzero(ours) if i in named]
                if edge and rng.random() < 0.5:
                    choices = edge
                    took += 1
                if not choices:
                    break
                ids.append(int(rng.choice(choices)))
    assert compared > 60 and shaped["max_tokens"] > 3 and shaped["max_chars"] > 3, (compared, shaped)
    assert took > 3 or not edges, took


# BOTH with token expressions (Llama 3's <|start_header_id|>, 19 characters, and ExcludeToken of
# <|eot_id|>, every text token but it) inside either budget, both, or beside them.
BOTH_TOKENS = [
    'root ::= e "!"\ne[max_tokens={t}, max_chars={c}] ::= "(" e ")" | [a-z]+ ("+" e)? | Token(128006) e',
    'root ::= e "|" f\ne[max_chars={c}] ::= "(" e ")" | [a-z]+ | Token(128006)\nf[max_tokens={t}] ::= "[" f "]" | [a-z]+',
    'root ::= e "!"\ne[max_chars={c}] ::= "(" e ")" | w ("," e)?\nw[max_tokens={t}] ::= [a-z]+ | Token(128006) [a-z]',
    'root ::= f "!"\nf[max_tokens={t}] ::= "[" f "]" | Token(128006) f | e ("," f)?\n'
    'e[max_chars={c}] ::= "(" e ")" | [a-z]+ | "#" ExcludeToken(128009)',
]


@pytest.mark.parametrize("template", BOTH_TOKENS)
def test_token_expressions_with_both_recursive_budgets_equal_xgrammar(template):
    """``test_recursive_token_and_char_budgets_together_equal_xgrammar`` with token expressions:
    the walks also take the ``Token(...)`` tokens (counted as one token and their decoded
    characters, as XGrammar 0.2.8 counts them), and each budget shapes some compared masks."""
    _walk_both_against_xgrammar(template, edges=True)


def _both_mask(lib, cg, ids, vocab_size) -> np.ndarray:
    m = lib.GrammarMatcher(cg)
    for t in ids:
        assert m.accept_token(t)
    return bool_mask(m, vocab_size)


@pytest.mark.parametrize(
    "text,ok",
    [
        # Strings are held to max_chars (e ends after 3 characters where it can) and not to
        # max_tokens, as in XGrammar.
        ("(ab)!", True),
        ("abcdefgh!", False),
        ("abc!", True),
        ("ab+cd!", False),
        ("a+b!", True),
        ("((a))!", True),
    ],
)
def test_strings_with_both_budgets_equal_xgrammar(text, ok):
    xg = pytest.importorskip("xgrammar")
    grammar = BOTH[0].format(t=1, c=3)
    assert xg.testing._is_grammar_accept_string(grammar, text) == ok
    assert xgr.testing._is_grammar_accept_string(grammar, text) == ok


# ---------------------------------------------------------------------------------------------
# lookahead assertions beside recursive budgets

# Formerly refused ("... in a grammar with lookahead assertions is not supported"). {t}: a token
# budget, {c}: a character budget. Each lookahead holds wherever its rule can end in the grammar
# (XGrammar 0.2.8 does not enforce lookaheads; grammask does), so masks can be compared whole.
LOOKAHEAD_BUDGETS = [
    'root ::= e "!"\ne[max_tokens={t}] ::= "(" e ")" | w ("+" e)?\nw ::= [a-z]+ (= [)!+])',
    'root ::= e "!"\ne[max_tokens={t}] ::= "(" e ")" | [a-z]+ ("+" e)? (= [)!])',
    'root ::= e "!"\ne[max_chars={c}] ::= "(" e ")" | w ("," e)?\nw ::= [a-z]+ (= [)!,])',
    'root ::= e "!"\ne[max_tokens={t}, max_chars={c}] ::= "(" e ")" | [a-z]+ ("+" e)? (= [)!])',
]


@pytest.mark.parametrize("template", LOOKAHEAD_BUDGETS)
def test_lookahead_beside_recursive_budgets_equals_xgrammar(template):
    """Full masks on Llama 3 equal XGrammar 0.2.8's along random walks of single-unit tokens,
    wherever the grammar without its lookahead masks as XGrammar does (see
    ``test_recursive_token_and_char_budgets_together_equal_xgrammar`` for the known budget
    difference), and equal that grammar's masks (each lookahead holds wherever its rule ends).
    The budgets shape some compared masks (the grammar without them masks otherwise there)."""
    _walk_lookahead_against_xgrammar(template)


# LOOKAHEAD_BUDGETS with Token(...) (Llama 3's <|start_header_id|>), formerly refused ("... both
# lookahead assertions and token expressions is not supported"): an obligation pending at the
# token edge, paid by the token's text ("<"), and a token inside a rule with its own lookahead.
LOOKAHEAD_TOKEN_BUDGETS = [
    'root ::= e "!"\ne[max_tokens={t}] ::= "(" e ")" | w ("+" e)? | w Token(128006) e\nw ::= [a-z]+ (= [)!+<])',
    'root ::= e "!"\ne[max_chars={c}] ::= "(" e ")" | w ("," e)? | w Token(128006) e\nw ::= [a-z]+ (= [)!,<])',
    'root ::= e "!"\ne[max_tokens={t}, max_chars={c}] ::= "(" e ")" | [a-z]+ ("+" e)? | Token(128006) e (= [)!])',
]


@pytest.mark.parametrize("template", LOOKAHEAD_TOKEN_BUDGETS)
def test_lookahead_and_token_edges_beside_recursive_budgets_equal_xgrammar(template):
    """``test_lookahead_beside_recursive_budgets_equals_xgrammar`` with token edges: the walks
    take the token ``Token(...)`` names too (a token edge's completion steps the obligations
    pending before it over the token's bytes, else the next bytes miss masks)."""
    _walk_lookahead_against_xgrammar(template, edge=128006)


def _walk_lookahead_against_xgrammar(template: str, edge: int | None = None) -> None:
    """The walks of ``test_lookahead_beside_recursive_budgets_equals_xgrammar``; with ``edge``,
    that token is taken half the times it is allowed, and some walks must take it."""
    xg = pytest.importorskip("xgrammar")
    took = 0
    family = "llama3"
    info = tokenizer_info(family)
    n, decoded = info.vocab_size, info.decoded_vocab
    xinfo = xg.TokenizerInfo.from_huggingface(hf_tokenizer(family), vocab_size=n)
    xc, comp = xg.GrammarCompiler(xinfo), compiler(family)
    stop = set(info.stop_token_ids)
    rng = random.Random(template)
    compared = shaped = 0
    for t, c in ((1, 4), (2, 6), (3, 9)):
        text = template.format(t=t, c=c)
        plain = re.sub(r" \(= [^)]*\)\)?$", "", re.sub(r" \(= \[[^]]*\]\)", "", text))
        free = re.sub(r"\[max_[^]]*\]", "", text)
        assert plain != text and free != text
        cg, xcg = comp.compile_grammar(text), xc.compile_grammar(text)
        cg_plain, xcg_plain, cg_free = (
            comp.compile_grammar(plain),
            xc.compile_grammar(plain),
            comp.compile_grammar(free),
        )
        for _ in range(5):
            ids: list = []
            for _ in range(12):
                alone = _both_mask(xgr, cg_plain, ids, n)
                if (alone != _xg_mask(xg, xcg_plain, ids, n)).any():
                    break  # a known budget difference, not this combination's
                ours = _both_mask(xgr, cg, ids, n)
                diff = np.flatnonzero(ours != _xg_mask(xg, xcg, ids, n))
                assert diff.size == 0, (text, [decoded[i] for i in ids], [decoded[i] for i in diff[:10]])
                assert (ours == alone).all()
                compared += 1
                shaped += int((_both_mask(xgr, cg_free, ids, n) != ours).any())
                choices = [i for i in np.flatnonzero(ours) if i not in stop and _unit(decoded[i])]
                if edge is not None and ours[edge] and rng.random() < 0.5:
                    choices = [edge]
                    took += 1
                if not choices:
                    break
                ids.append(int(rng.choice(choices)))
    assert compared > 30 and shaped > 3, (compared, shaped)
    assert took > 3 or edge is None, took

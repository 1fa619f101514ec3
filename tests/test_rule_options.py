"""EBNF and Lark rule options: ``max_chars``, ``lazy``, ``capture``, ``temperature``
(``max_tokens`` has its own module, ``tests/test_max_tokens.py``).

- masks of grammars with options equal the brute-force reference (``tests/test_masks.py``) on a
  real tokenizer, at every position of a real tokenization;
- the bounded languages against their definition on enumerated strings;
- captures under accept, rollback, fork and reset; temperatures (per rule, default, batch fill,
  draft trees);
- typed errors for bad options;
- where XGrammar 0.2.8 is installed, accepted/rejected strings and captures compared with it
  (the known differences are listed in ``XGRAMMAR_DIFFERENCES`` and checked to still differ).
"""

from __future__ import annotations

import itertools
import warnings

import grammask as xgr
import numpy as np
import pytest
from conftest import bool_mask, compiler, hf_tokenizer, matcher_for, byte_vocab, tokenize, tokenizer_info
from grammask.testing import _get_matcher_from_grammar, _is_grammar_accept_string
from test_masks import brute_force_large

# ---------------------------------------------------------------------------------------------
# masks on a real tokenizer

MASK_CASES = {
    "bounded_and_captured": (
        'root ::= "say: " x " then " y "!"\n'
        'x[max_chars=7, capture] ::= [a-z ]+\n'
        'y[lazy, temperature=0.5] ::= [a-z ]* "."',
        "say: hi yo then abc def.!",
    ),
    "max_chars_unicode": (
        'root ::= "[" w ("," w)* "]"\n' 'w[max_chars=3, capture="word"] ::= [^,\\]]+',
        "[日本語,ab,é]",
    ),
    "lazy_stop_string": (
        'root ::= "<t>" body "</t>" "\\n"?\n' 'body[lazy] ::= [^]* "."',
        "<t>Some text. more</t>",
    ),
    # Lark stop regex: the body cannot contain "\n\n" or "END" before the stop ends it.
    "lark_stop_regex": (
        xgr.Grammar.from_lark(
            'start: "<t>" x "</t>" TAIL\n'
            'x[stop=/\\n\\n|END/, capture, stop_capture="s"]: /(.|\\n)*/\n'
            "TAIL: /[a-z ]*/"
        ),
        "<t>Some text\nmore END</t>ok then",
    ),
}


@pytest.mark.parametrize("name", list(MASK_CASES))
@pytest.mark.parametrize("family", ["llama3", "qwen2.5"])
def test_masks_match_brute_force_on_real_tokenizer(family, name):
    ebnf, doc = MASK_CASES[name]
    if name == "lazy_stop_string":
        # body ends at its first ".", so the document's text after it must not contain one.
        doc = "<t>Some text.</t>"
    info = tokenizer_info(family)
    comp = compiler(family)
    cg = comp.compile_grammar(ebnf)
    decoded = info.decoded_vocab
    stop_ids = set(info.stop_token_ids)
    special = set(info.special_token_ids)
    ids = tokenize(hf_tokenizer(family), info, doc)
    m = xgr.GrammarMatcher(cg)
    for pos in range(len(ids) + 1):
        got = bool_mask(m, info.vocab_size)
        want = brute_force_large(m, decoded, info.vocab_size, stop_ids, special)
        diff = np.flatnonzero(got != want)
        assert diff.size == 0, (
            f"{family}/{name} after {pos} tokens: ids {diff[:10].tolist()} "
            f"{[decoded[i] for i in diff[:10]]} mask={got[diff[:10]].tolist()}"
        )
        if pos < len(ids):
            assert got[ids[pos]], f"the next real token {decoded[ids[pos]]!r} is not allowed"
            assert m.accept_token(ids[pos])
    assert m.is_completed()


def test_bounded_masks_forbid_what_the_bound_forbids():
    """A token that would put a fourth character into a max_chars=3 rule is masked out, one that
    ends it is allowed (synthetic vocabulary, so the tokens are known)."""
    toks = byte_vocab([b"ab", b"abc", b"abcd", b"c;", b"cd;"])
    m = matcher_for('root ::= x ";"\nx[max_chars=3] ::= [a-z]+', toks)
    ids = {t: i for i, t in enumerate(toks)}
    allowed = bool_mask(m, len(toks))
    assert allowed[ids[b"abc"]] and not allowed[ids[b"abcd"]]
    assert m.accept_token(ids[b"ab"])
    allowed = bool_mask(m, len(toks))
    assert allowed[ids[b"c;"]] and not allowed[ids[b"cd;"]] and allowed[ids[b";"[:1]]]


# ---------------------------------------------------------------------------------------------
# languages


def accepts(grammar: str, s: str) -> bool:
    return _is_grammar_accept_string(grammar, s)


@pytest.mark.parametrize("option", ["lazy", "max_chars=0", "max_chars=1", "max_chars=3"])
@pytest.mark.parametrize("body", ['[ab]+ "c"?', '"a" | "ab" | "abb" | "b"+', '("é" | "a")+ "b"*'])
def test_bounded_language_is_its_definition(option, body):
    """The rule's strings with no proper prefix of at least N characters in the rule's own
    language (N = 0 for lazy): every string up to 5 characters over a small alphabet."""
    plain = f"root ::= {body}"
    bounded = f"root ::= x\nx[{option}] ::= {body}"
    limit = 0 if option == "lazy" else int(option.split("=")[1])
    for n in range(6):
        for chars in itertools.product("abcé", repeat=n):
            s = "".join(chars)
            want = accepts(plain, s) and not any(accepts(plain, s[:k]) for k in range(limit, len(s)))
            assert accepts(bounded, s) == want, (option, body, s)


def test_bounded_rules_need_a_regular_body():
    with pytest.raises(xgr.InvalidGrammarError, match="lazy rule 'x'.*recursive rule 'x'"):
        _get_matcher_from_grammar('root ::= x\nx[lazy] ::= "(" x ")" | "a"')
    # max_chars works on a recursive rule (below): x ends at its first end after 2 characters.
    assert _get_matcher_from_grammar('root ::= x\nx[max_chars=2] ::= y\ny ::= "(" y ")" | "a"').accept_string("((a))")
    # max_tokens works on a recursive rule (tests/test_max_tokens.py), a left-recursive one too, and
    # on rules left-recursive through each other entered through one rule only, or through several
    # when none of them has a budget; not where a cycle of left calls avoids an entry.
    assert _get_matcher_from_grammar('root ::= x\nx[max_tokens=3] ::= "(" x ")" | "a"').accept_string("((a))")
    assert _get_matcher_from_grammar('root ::= x\nx[max_tokens=3] ::= x ")" | "a"').accept_string("a))")
    assert _get_matcher_from_grammar('root ::= x\nx[max_tokens=3] ::= y ")" | "a"\ny[capture] ::= x "(" | "b"').accept_string(
        "a()()"
    )
    two = 'root ::= x\nx[max_tokens=3] ::= y ")" | "[" z "]" | "a"\ny[capture] ::= z "(" | "b"\nz[capture] ::= y "+" | "c"'
    assert _get_matcher_from_grammar(two).accept_string("[b+(+]")
    with pytest.raises(xgr.UnsupportedFeatureError, match="rule 'y', left-recursive through other rules"):
        _get_matcher_from_grammar(two.replace('z "(" |', 'z "(" | v "(" |') + '\nv[capture] ::= y "-" | "e"')


@pytest.mark.parametrize(
    "text, exc, needle",
    [
        ('root[nope] ::= "a"', xgr.GrammarSyntaxError, "unknown rule option 'nope'"),
        ('root[max_chars=x] ::= "a"', xgr.GrammarSyntaxError, "needs a count"),
        ('root[temperature=-0.5] ::= "a"', xgr.InvalidGrammarError, ">= 0"),
        ('root[temperature=1e99] ::= "a"', xgr.InvalidGrammarError, "float32"),
        ('root[lazy, lazy] ::= "a"', xgr.GrammarSyntaxError, "given twice"),
        ('root[capture=""] ::= "a"', xgr.GrammarSyntaxError, "empty"),
        ('root[capture_hidden_body_rule_id=2] ::= "a"', xgr.UnsupportedFeatureError, "internal rule option"),
    ],
)
def test_bad_options_are_typed_errors(text, exc, needle):
    with pytest.raises(exc, match=needle):
        xgr.Grammar.from_ebnf(text)


def test_options_print_and_serialize():
    text = 'root ::= x\nx[max_chars=3, capture="n", lazy, temperature=0.25] ::= [a-z]+ "."'
    g = xgr.Grammar.from_ebnf(text)
    printed = str(g)
    assert 'x[max_chars=3, capture="n", lazy, temperature=0.25] ::= ' in printed
    assert str(xgr.Grammar.from_ebnf(printed)) == printed
    back = xgr.Grammar.deserialize_json(g.serialize_json())
    assert str(back) == printed
    info = xgr.TokenizerInfo(byte_vocab(), stop_token_ids=[256])
    cg = xgr.GrammarCompiler(info).compile_grammar(g)
    cg2 = xgr.CompiledGrammar.deserialize_json(cg.serialize_json(), info)
    m = xgr.GrammarMatcher(cg2)
    assert m.accept_string("ab.") and m.get_captures() == [("n", b"ab.")]
    assert m.temperature is None  # completed: no rule can read a byte


# ---------------------------------------------------------------------------------------------
# captures

CAPTURE_GRAMMAR = (
    'root ::= call ("," call)*\n'
    'call[capture] ::= name "(" arg? ")"\n'
    'name[capture="fn"] ::= [a-z]+\n'
    'arg[capture] ::= [0-9]+'
)


def test_captures_follow_accept_rollback_fork_and_reset():
    m = _get_matcher_from_grammar(CAPTURE_GRAMMAR)
    assert m.get_captures() == []
    assert m.accept_string("foo(")
    assert m.get_captures() == [("fn", b"foo")]
    assert m.accept_string("1")
    # "1" may be the whole arg (then ")" follows) or its start: the occurrence so far is reported.
    assert m.get_captures() == [("fn", b"foo"), ("arg", b"1")]
    assert m.accept_string("2")
    assert m.get_captures() == [("fn", b"foo"), ("arg", b"12")]
    assert m.accept_string(")")
    assert m.get_captures() == [("fn", b"foo"), ("arg", b"12"), ("call", b"foo(12)")]
    f = m.fork()
    assert m.accept_string(",ba")
    assert m.get_captures()[-1] == ("fn", b"ba")
    assert f.get_captures() == [("fn", b"foo"), ("arg", b"12"), ("call", b"foo(12)")]
    m.rollback(1)
    assert m.get_captures() == f.get_captures()
    m.rollback(2)
    assert m.get_captures() == [("fn", b"foo"), ("arg", b"1")]
    m.reset()
    assert m.get_captures() == []
    # A rejected string changes nothing.
    assert m.accept_string("a(1)") and not m.accept_string("(")
    assert m.get_captures() == [("fn", b"a"), ("arg", b"1"), ("call", b"a(1)")]


def test_captures_on_real_tokens():
    info = tokenizer_info("llama3")
    comp = compiler("llama3")
    m = xgr.GrammarMatcher(comp.compile_grammar(CAPTURE_GRAMMAR))
    ids = tokenize(hf_tokenizer("llama3"), info, "alpha(42),beta()")
    for t in ids:
        assert m.accept_token(t)
    assert m.get_captures() == [
        ("fn", b"alpha"),
        ("arg", b"42"),
        ("call", b"alpha(42)"),
        ("fn", b"beta"),
        ("call", b"beta()"),
    ]
    m.rollback(len(ids))
    assert m.get_captures() == []


def test_capture_deduplication_keeps_the_longest_per_start():
    m = _get_matcher_from_grammar('root ::= x x\nx[capture] ::= "a" | "aa"')
    assert m.accept_string("aaa")
    assert m.get_captures(deduplicate=False) == [("x", b"a"), ("x", b"aa"), ("x", b"a"), ("x", b"aa")]
    assert m.get_captures() == [("x", b"aa"), ("x", b"a"), ("x", b"aa")]
    m = _get_matcher_from_grammar('root ::= "x"')
    assert m.accept_string("x") and m.get_captures() == []


def test_lark_options():
    lark = 'start: x "!"\nx[stop="END", stop_capture="s", capture, temperature=0.5]: /[a-z]*/'
    m = _get_matcher_from_grammar(xgr.Grammar.from_lark(lark))
    assert m.temperature == 0.5
    assert not m.fork().accept_string("abENDcEND!")
    assert m.accept_string("abcEND!")
    assert m.get_captures() == [("s", b"END"), ("x", b"abc")]
    # A stop regex: the stop text varies; the capture splits at the shortest stop text.
    lark = 'start: (x ";")+\nx[stop=/E[0-9]*D|!/, stop_capture="s", capture]: /[a-z ]*/'
    m = _get_matcher_from_grammar(xgr.Grammar.from_lark(lark))
    assert not m.fork().accept_string("a!b!;")
    assert m.accept_string("ab cE12D;d!;")
    assert m.get_captures() == [("s", b"E12D"), ("x", b"ab c"), ("s", b"!"), ("x", b"d")]
    with pytest.raises(xgr.InvalidGrammarError, match="only supported on rules"):
        xgr.Grammar.from_lark("start: X\nX[lazy]: /a+/")
    m = _get_matcher_from_grammar(xgr.Grammar.from_lark("start[max_tokens=3]: /a+/"))
    assert m.accept_string("a" * 10), "strings do not count against max_tokens"


# ---------------------------------------------------------------------------------------------
# temperature

TEMP_GRAMMAR = (
    'root ::= "a" x "b" y "c"\n'
    'x[temperature=0.5] ::= [a-z]+\n'
    'y[temperature=0.9] ::= "(" z ")"\n'
    'z ::= [0-9]+'
)


def test_temperature_is_the_innermost_active_rules():
    m = _get_matcher_from_grammar(TEMP_GRAMMAR, default_temperature=2.0)
    seen = [m.temperature]
    for part in ["a", "q", "b", "(", "1", ")", "c"]:
        assert m.accept_string(part)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seen.append(m.temperature)
    f32 = float(np.float32(0.9))
    # "aq": x may read more (0.5) or "b" follows (root, default): 0.5 wins over the default.
    assert seen == [2.0, 0.5, 0.5, f32, f32, f32, 2.0, 2.0]
    m.rollback(5)
    assert m.temperature == 0.5
    # Without default_temperature: None where no rule has one.
    m = _get_matcher_from_grammar(TEMP_GRAMMAR)
    assert m.temperature is None and m.accept_string("a") and m.temperature == 0.5


def test_ambiguous_temperatures_take_the_maximum_with_a_warning():
    g = 'root ::= x | y\nx[temperature=0.5] ::= "a" [a-z]+\ny[temperature=0.75] ::= "a" [0-9]+'
    m = _get_matcher_from_grammar(g)
    with pytest.warns(UserWarning, match="Multiple active grammar paths"):
        assert m.temperature == 0.75


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_default_temperature_is_validated(bad):
    with pytest.raises(ValueError, match="default_temperature"):
        _get_matcher_from_grammar('root ::= "a"', default_temperature=bad)


def test_batch_fill_temperature():
    torch = pytest.importorskip("torch")
    ms = [
        _get_matcher_from_grammar(TEMP_GRAMMAR),
        _get_matcher_from_grammar(TEMP_GRAMMAR, default_temperature=1.5),
        _get_matcher_from_grammar('root ::= "z"'),
    ]
    assert ms[0].accept_string("a")
    t = torch.full((5,), 7.0, dtype=torch.float32)
    xgr.BatchGrammarMatcher.batch_fill_temperature(ms, t, [4, 0, 2])
    assert t.tolist() == [1.5, 7.0, -1.0, 7.0, 0.5]
    a = np.zeros(3, dtype=np.float32)
    xgr.BatchGrammarMatcher.batch_fill_temperature(ms, a)
    assert a.tolist() == [0.5, 1.5, -1.0]
    with pytest.raises(ValueError):
        xgr.BatchGrammarMatcher.batch_fill_temperature(ms, np.zeros(3, dtype=np.float64))


@pytest.mark.filterwarnings("ignore:Multiple active grammar paths")
def test_draft_tree_temperatures_follow_each_node():
    toks = byte_vocab()
    info = xgr.TokenizerInfo(toks, stop_token_ids=[256])
    cg = xgr.GrammarCompiler(info).compile_grammar(TEMP_GRAMMAR)
    m = xgr.GrammarMatcher(cg, default_temperature=1.0)
    # Root, then "a" (x: 0.5), then "q" (x or root: 0.5), then "b" (y: 0.9).
    draft = np.array([0, ord("a"), ord("q"), ord("b")], dtype=np.int64)
    next_token = np.array([1, 2, 3, -1], dtype=np.int64)
    next_sibling = np.array([-1, -1, -1, -1], dtype=np.int64)
    bm = np.zeros((4, (len(toks) + 31) // 32), dtype=np.int32)
    temps = np.zeros(4, dtype=np.float32)
    assert m.traverse_draft_tree(next_token, next_sibling, draft, bm, temperatures=temps)
    assert temps.tolist() == [1.0, 0.5, 0.5, float(np.float32(0.9))]


# ---------------------------------------------------------------------------------------------
# structural tags


def test_any_text_max_chars_with_excludes():
    tag = {
        "type": "structural_tag",
        "format": {"type": "any_text", "excludes": ["<", "ab"], "max_chars": 40},
    }
    g = xgr.Grammar.from_structural_tag(tag)
    assert _is_grammar_accept_string(g, "x" * 40)
    assert not _is_grammar_accept_string(g, "x" * 41)
    assert not _is_grammar_accept_string(g, "xab")
    assert _is_grammar_accept_string(g, "日本" * 20)


# ---------------------------------------------------------------------------------------------
# XGrammar 0.2.8

XG_CASES = [
    ('root ::= x "c"\nx[max_chars=3] ::= [a-z]+', ["abcc", "abc", "abcdc", "ac", "abcdec", "c"]),
    ('root ::= x "c"\nx[max_chars=3] ::= [a-z]+ "c"', ["abcc", "abcdcc", "acc", "abcc"]),
    ('root ::= x\nx[max_chars=2] ::= "é"+', ["é", "éé", "ééé"]),
    ('root ::= x\nx[lazy] ::= "a"+', ["a", "aa"]),
    ('root ::= x "c"\nx[lazy] ::= [a-z]* "c"', ["abcc", "cc", "abc", "ababc"]),
    ('root ::= "a" x "b" x\nx[capture="name"] ::= [a-z]+', ["axbyz", "aqqbzz"]),
    ('root ::= x "," x\nx[capture] ::= [a-z]+', ["ab,ab", "a,bc"]),
    ('root ::= x\nx[capture] ::= "(" y ")"\ny[capture="inner"] ::= [a-z]+', ["(ab)", "(ab"]),
    ('root ::= x x\nx[capture] ::= "a" | "aa"', ["aaa", "aa"]),
    (CAPTURE_GRAMMAR, ["foo(12),ba()", "f(", "f(1)"]),
]

# Known differences: (grammar, string) -> what differs. Each is checked to still differ.
XGRAMMAR_DIFFERENCES = {
    # Both readings of the ambiguous prefix are live; XGrammar lists them in completion order,
    # grammask nested/later-starting occurrences first.
    ('root ::= "a" x "b" x\nx[capture="name"] ::= [a-z]+', "axbyz"): "capture order",
    ('root ::= "a" x "b" x\nx[capture="name"] ::= [a-z]+', "aqqbzz"): "capture order",
    ('root ::= x x\nx[capture] ::= "a" | "aa"', "aaa"): "capture order",
    ('root ::= x x\nx[capture] ::= "a" | "aa"', "aa"): "capture order",
}


def _xg():
    return pytest.importorskip("xgrammar", reason="XGrammar 0.2.8 (test extra) is not installed")


@pytest.mark.parametrize("case", range(len(XG_CASES)))
def test_against_xgrammar(case):
    xg = _xg()
    from xgrammar.testing import _get_matcher_from_grammar as xg_matcher

    grammar, strings = XG_CASES[case]
    for s in strings:
        ours = _get_matcher_from_grammar(grammar)
        theirs = xg_matcher(grammar)
        ok_ours = ours.accept_string(s)
        ok_theirs = theirs.accept_string(s)
        assert ok_ours == ok_theirs, (grammar, s)
        if not ok_ours:
            continue
        assert ours.is_completed() == theirs.is_completed(), (grammar, s)
        caps_ours, caps_theirs = ours.get_captures(), theirs.get_captures()
        if (grammar, s) in XGRAMMAR_DIFFERENCES:
            assert caps_ours != caps_theirs and sorted(caps_ours) == sorted(caps_theirs), (grammar, s)
        else:
            assert caps_ours == caps_theirs, (grammar, s)
    del xg


# Lark stop=/suffix= (string, regex, terminal): acceptance and captures equal XGrammar's.
XG_LARK_CASES = [
    ('start: x "!"\nx[stop=/b|ab/, stop_capture="s", capture]: /[a-z]*/', ["xab!", "xb!", "xbab!"]),
    ('start: x "!"\nx[stop=/b|zab/, stop_capture="s", capture]: /q|qza/', ["qzab!", "qb!"]),
    ('start: x "!"\nx[stop=/b|cb/, stop_capture="s", capture]: /a*/', ["acb!", "ab!"]),
    ('start: (x ";")+\nx[stop=/E[0-9]*D|!/, stop_capture="s", capture]: /[a-z ]*/', ["ab cE12D;d!;"]),
    ('start: x "!"\nx[stop=/\\n\\n|END/, stop_capture="s", capture]: /(.|\\n)*/', ["a\nbEND!", "a\n\n!"]),
    ('start: y "!"\ny[capture]: x\nx[stop="END", stop_capture="s", capture]: /[a-z]*/', ["xEND!"]),
    ('start: y\ny[capture]: x "!"\nx[stop="END", capture]: /[a-z]*/', ["xEND!"]),
    ('start: z "!"\nz[capture]: y\ny[capture]: "q" x\nx[stop=/E[0-9]*D/, capture]: /[a-z]*/', ["qxE12D!"]),
    ('start: y "!"\ny[capture]: x\nx[suffix=/b|ab/, stop_capture="s", capture]: /[a-z]*/', ["xab!"]),
    ('start: y "!"\ny[capture]: x\nx[suffix="END", capture]: /[a-z]*/', ["xEND!"]),
    ('start: x "!"\nx[stop=STOP, capture, stop_capture="s"]: /[a-z]*/\nSTOP: "E" /[0-9]/', ["aE1!"]),
]


@pytest.mark.parametrize("case", range(len(XG_LARK_CASES)))
def test_lark_stop_captures_against_xgrammar(case):
    xg = _xg()
    from xgrammar.testing import _get_matcher_from_grammar as xg_matcher

    lark, strings = XG_LARK_CASES[case]
    for s in strings:
        ours = _get_matcher_from_grammar(xgr.Grammar.from_lark(lark))
        theirs = xg_matcher(xg.Grammar.from_lark(lark))
        ok = ours.accept_string(s)
        assert ok == theirs.accept_string(s), (lark, s)
        assert ok or s in ("xbab!", "qb!", "ab!"), (lark, s)
        if ok:
            assert ours.get_captures() == theirs.get_captures(), (lark, s)


def test_temperatures_against_xgrammar():
    _xg()
    from xgrammar.testing import _get_matcher_from_grammar as xg_matcher

    for grammar in [TEMP_GRAMMAR, 'root ::= x\nx[temperature=0.5] ::= "(" y ")"\ny ::= [a-z]+']:
        for kw in [{}, {"default_temperature": 2.0}]:
            ours, theirs = _get_matcher_from_grammar(grammar, **kw), xg_matcher(grammar, **kw)
            for part in ["a", "q", "b", "(", "1", ")", "c"] if grammar == TEMP_GRAMMAR else ["(", "a", ")"]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    assert ours.temperature == theirs.temperature, (grammar, part)
                assert ours.accept_string(part) and theirs.accept_string(part)
            assert ours.temperature == theirs.temperature


# ---------------------------------------------------------------------------------------------
# max_chars on recursive rules: an outermost occurrence ends at its first end once it has read
# its budget; occurrences nested in it are not bounded (XGrammar 0.2.8's semantics; see
# crates/grammask-core/tests/rule_max_chars.rs for the reference from the definition).

REC_CHARS = {
    "parens": ('root ::= a\na[max_chars={n}] ::= "(" a ")" | "x"', "()x"),
    "tail": ('root ::= a "q"\na[max_chars={n}] ::= "(" a ")" | "x" "y"*', "()xyq"),
    "list": ('root ::= a\na[max_chars={n}] ::= "[" (a ("," a)*)? "]" | "x"', "[],x"),
    "two_rules": ('root ::= a "q"\na[max_chars={n}] ::= "(" b ")" | "x" "y"*\nb[max_chars={n}] ::= "[" a "]" | "u" "v"*', "()[]xuvq"),
    "through": ('root ::= x\nx[max_chars={n}] ::= y\ny ::= "ab" y | "c"', "abc"),
    "closed_tail": ('root ::= a\na[max_chars={n}] ::= "(" a ")" "z"* | "x"', "()xz"),
}


@pytest.mark.parametrize("name", list(REC_CHARS))
def test_recursive_max_chars_strings_agree_with_xgrammar(name):
    """Every string up to 6 characters: XGrammar and grammask accept the same prefixes and end at
    the same places."""
    _xg()
    from xgrammar.testing import _get_matcher_from_grammar as xg_matcher

    template, alphabet = REC_CHARS[name]
    compared = 0
    for n in (0, 1, 2, 3, 5):
        g = template.format(n=n)
        ours_m, theirs_m = _get_matcher_from_grammar(g), xg_matcher(g)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for length in range(1, 7):
                for chars in itertools.product(alphabet, repeat=length):
                    s = "".join(chars)
                    ours, theirs = ours_m.fork(), theirs_m.fork()
                    ok = ours.accept_string(s)
                    assert ok == theirs.accept_string(s), (g, s)
                    if ok:
                        assert ours.is_completed() == theirs.is_completed(), (g, s)
                    compared += 1
    assert compared > 5 * 3**6


def _xg_full_mask(xg, xcg, ids, vocab_size):
    m = xg.GrammarMatcher(xcg)
    for t in ids:
        assert m.accept_token(t)
    bm = xg.allocate_token_bitmask(1, vocab_size)
    m.fill_next_token_bitmask(bm)
    return np.unpackbits(bm[0].numpy().view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


REC_CHARS_TEXT = [
    ('root ::= "say:" e "!"\ne[max_chars=6] ::= "(" e ")" | [a-z]+', ["say:", "say:(", "say:((", "say:(ab", "say:hello", "say:(hello", "say:((((((("]),
    (
        'root ::= v\nv[max_chars=8] ::= "[" (v ("," v)*)? "]" | [0-9]+ | "true"',
        ["", "[", "[1", "[1,", "[[", "[1,2", "[12,[3", "[1,22,3]"],
    ),
]


@pytest.mark.parametrize("family", ["llama3", "qwen2.5"])
def test_recursive_max_chars_masks_match_brute_force_and_xgrammar(family):
    xg = _xg()
    info = tokenizer_info(family)
    xinfo = xg.TokenizerInfo.from_huggingface(hf_tokenizer(family), vocab_size=info.vocab_size)
    compared = 0
    for grammar, texts in REC_CHARS_TEXT:
        cg = compiler(family).compile_grammar(grammar)
        xcg = xg.GrammarCompiler(xinfo).compile_grammar(grammar)
        for text in texts:
            ids = tokenize(hf_tokenizer(family), info, text) if text else []
            assert b"".join(info.decoded_vocab[t] for t in ids) == text.encode()
            m = xgr.GrammarMatcher(cg)
            for t in ids:
                assert m.accept_token(t), (grammar, text)
            ours = bool_mask(m, info.vocab_size)
            want = brute_force_large(
                m, info.decoded_vocab, info.vocab_size, set(info.stop_token_ids), set(info.special_token_ids)
            )
            diff = np.flatnonzero(ours != want)
            assert diff.size == 0, (grammar, text, [info.decoded_vocab[i] for i in diff[:10]])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = _xg_full_mask(xg, xcg, ids, info.vocab_size)
            diff = np.flatnonzero(ours != theirs)
            assert diff.size == 0, (grammar, text, [info.decoded_vocab[i] for i in diff[:10]])
            compared += 1
    assert compared == sum(len(t) for _, t in REC_CHARS_TEXT)


def test_recursive_max_chars_rollback_fork_reset():
    g = 'root ::= a "q"\na[max_chars=3] ::= "(" a ")" | "x" "y"*'
    m = _get_matcher_from_grammar(g)
    assert m.accept_string("x") and m.accept_string("yy")
    f = m.fork()
    assert not f.accept_string("y"), "three characters read and it can end: it ends"
    assert f.accept_string("q") and f.is_completed()
    m.rollback(1)
    assert m.accept_string("y") and m.accept_string("y")
    assert not m.accept_string("y") and not m.accept_string("yq")
    m.rollback(2)
    assert m.accept_string("yy") and m.accept_string("q")
    m.reset()
    assert m.accept_string("(xyyyy)q"), "nested: the inner occurrence is not bounded"


def test_recursive_max_chars_in_lark():
    info = xgr.TokenizerInfo(byte_vocab(), stop_token_ids=[256])
    cg = xgr.GrammarCompiler(info).compile_lark('start: a "q"\na[max_chars=3]: "(" a ")" | "x" "y"*')
    for s, ok in [("xyyq", True), ("xyyyq", False), ("(xyyyy)q", True), ("((((x))))q", True)]:
        assert xgr.GrammarMatcher(cg).accept_string(s) == ok, s


def test_recursive_max_chars_errors():
    # Lookahead assertions beside token expressions compile (formerly refused; masks are checked
    # in test_max_tokens.py).
    g = 'root ::= a ")"\na[max_chars=2] ::= "(" a ")" | "x" | Token(1) (= ")")'
    cg = xgr.GrammarCompiler(xgr.TokenizerInfo(byte_vocab(), stop_token_ids=[256])).compile_grammar(g)
    assert xgr.GrammarMatcher(cg).accept_string("(x))")
    info = xgr.TokenizerInfo([b"(", b")", b"x", b"</s>"], stop_token_ids=[3])
    cg = xgr.GrammarCompiler(info).compile_grammar('root ::= a\na[max_chars=2] ::= "(" a ")" | "x"')
    with pytest.raises(xgr.UnsupportedFeatureError, match="max_chars on a recursive rule"):
        xgr.GrammarMatcher(cg, max_tokens=5)


def test_grammar_format_keeps_rule_options_and_capture_names():
    tag = {
        "type": "structural_tag",
        "format": {
            "type": "tag",
            "begin": "<a>",
            "content": {"type": "grammar", "grammar": 'root ::= x\nx[capture, max_chars=3] ::= [a-z]+'},
            "end": "</a>",
        },
    }
    info = xgr.TokenizerInfo(byte_vocab(), stop_token_ids=[256])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_structural_tag(tag))
    assert not m.fork().accept_string("<a>abcd</a>")
    assert m.accept_string("<a>abc</a>")
    assert m.get_captures() == [("x", b"abc")]

"""GrammarMatcher, BatchGrammarMatcher, GrammarCompiler and serialization: the semantics of
XGrammar 0.2.8 (shared/reference/xgrammar-api.md §1.2-1.5 and §3) on small synthetic vocabularies.

A rejected token or string returns False and leaves the state unchanged (checked through the full
mask and ``is_completed`` before and after); misuse raises a GrammaskError or ValueError/TypeError.
"""

from __future__ import annotations

import json
import threading
import warnings

import grammask as xgr
import numpy as np
import pytest
from conftest import bool_mask, byte_vocab, small_info

# Multi-byte tokens on top of the 256 single bytes: ids 256.. in this order, then </s>.
EXTRA = [b"ab", b"abc", "é".encode(), "日本".encode(), b"hello", b" world", b"\xe6", b"\x97\xa5"]
VOCAB = byte_vocab(EXTRA)
STOP = len(VOCAB) - 1
N = len(VOCAB)
ID = {t: i for i, t in enumerate(VOCAB)}

# Errors raised for misuse. XGrammar raises RuntimeError; grammask raises GrammaskError (a
# RuntimeError) or ValueError for bad arguments. See the report for the ValueError deviation.
MISUSE = (RuntimeError, ValueError)


@pytest.fixture(scope="module")
def info():
    return small_info(VOCAB)


@pytest.fixture(scope="module")
def compiler(info):
    return xgr.GrammarCompiler(info)


def state(m: xgr.GrammarMatcher):
    """An observable fingerprint of the matcher state."""
    if m.is_terminated():
        return ("terminated", m.is_completed())
    return (tuple(np.flatnonzero(bool_mask(m, N))), m.is_completed(), m.find_jump_forward_string())


def make(compiler, ebnf, **kw):
    return xgr.GrammarMatcher(compiler.compile_grammar(ebnf), **kw)


# ---------------------------------------------------------------------------------------------
# accept_token


def test_accept_token_mismatch_leaves_state_unchanged(compiler):
    m = make(compiler, 'root ::= "abc" "d"')
    assert m.accept_token(ID[b"ab"])
    before = state(m)
    for bad in [ID[b"a"], ID[b"abc"], ID[b"hello"], ID["é".encode()], STOP]:
        assert m.accept_token(bad) is False
        assert state(m) == before
    assert m.accept_token(ID[b"c"]) and m.accept_token(ID[b"d"])
    assert m.is_completed() and not m.is_terminated()


@pytest.mark.parametrize("bad", [N, N + 5, 10**9, 2**31, 2**40, -1, -(2**40)])
def test_out_of_range_and_negative_ids_are_rejected(compiler, bad):
    m = make(compiler, "root ::= [a-z]+")
    before = state(m)
    assert m.accept_token(bad) is False
    assert state(m) == before


def test_special_and_padding_ids_never_accepted():
    # An empty token is special; ids past the encoded vocabulary are padding (special too).
    toks = [b"a", b"", b"b", b"</s>"]
    info = xgr.TokenizerInfo(toks, vocab_size=40, stop_token_ids=[3])
    assert 1 in info.special_token_ids
    assert all(i in info.special_token_ids for i in range(4, 40))
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= ("a" | "b" | "")*'))
    for t in [1, 4, 39]:
        assert m.accept_token(t) is False
    allowed = bool_mask(m, 40)
    assert allowed[0] and allowed[2] and allowed[3]
    assert not allowed[1] and not allowed[4:].any()
    assert m.accept_token(0) and m.accept_token(3) and m.is_terminated()


def test_stop_token_only_when_completed(compiler):
    m = make(compiler, 'root ::= "ab" "c"?')
    assert not bool_mask(m, N)[STOP]
    assert m.accept_token(STOP) is False
    assert m.accept_token(ID[b"a"])
    assert m.accept_token(STOP) is False
    assert m.accept_token(ID[b"b"])
    assert m.is_completed() and not m.is_terminated()
    assert bool_mask(m, N)[STOP]
    assert m.accept_token(STOP) is True
    assert m.is_terminated()


def test_nothing_accepted_after_termination(compiler):
    m = make(compiler, 'root ::= "a"*')
    assert m.accept_token(STOP)
    assert m.is_terminated()
    assert m.accept_token(ID[b"a"]) is False
    assert m.accept_token(STOP) is False
    assert m.accept_string("a") is False
    with pytest.raises(MISUSE):
        m.fill_next_token_bitmask(xgr.allocate_token_bitmask(1, N))
    with pytest.raises(MISUSE):
        m.find_jump_forward_string()


def test_several_stop_tokens():
    toks = [b"a", b"b", b"<eos>", b"<eot>"]
    info = xgr.TokenizerInfo(toks, stop_token_ids=[2, 3])
    cg = xgr.GrammarCompiler(info).compile_grammar('root ::= "a" "b"?')
    m = xgr.GrammarMatcher(cg)
    assert sorted(m.stop_token_ids) == [2, 3]
    assert m.accept_token(0)
    allowed = bool_mask(m, 4)
    assert allowed.tolist() == [False, True, True, True]
    for stop in (2, 3):
        f = m.fork()
        assert f.accept_token(stop) and f.is_terminated()
    # The stop tokens are not text: "<eos>" cannot be written by the grammar either.
    g = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "a" | "<eos>"'))
    assert g.accept_token(2) is False


def test_override_stop_tokens(compiler):
    cg = compiler.compile_grammar('root ::= "a"')
    m = xgr.GrammarMatcher(cg, override_stop_tokens=ID[b"z"])
    assert m.stop_token_ids == [ID[b"z"]]
    assert m.accept_token(ID[b"a"])
    allowed = bool_mask(m, N)
    assert allowed[ID[b"z"]] and not allowed[STOP]
    assert m.accept_token(STOP) is False
    assert m.accept_token(ID[b"z"]) and m.is_terminated()
    m2 = xgr.GrammarMatcher(cg, override_stop_tokens=[ID[b"x"], ID[b"y"]])
    assert sorted(m2.stop_token_ids) == [ID[b"x"], ID[b"y"]]
    with pytest.raises(MISUSE):
        xgr.GrammarMatcher(cg, override_stop_tokens=[])
    with pytest.raises(MISUSE):
        xgr.GrammarMatcher(cg, override_stop_tokens=[N + 100])


def test_terminate_without_stop_token_quirk(compiler):
    # XGrammar 0.2.8 (verified): is_terminated() == is_completed(); the mask still allows the stop
    # token once complete, but accept_token(stop) returns False; text that continues a complete
    # sentence is still accepted (only an accepted stop token blocks input).
    m = make(compiler, 'root ::= "a" "b"*', terminate_without_stop_token=True)
    assert not m.is_terminated()
    assert not bool_mask(m, N)[STOP]
    assert m.accept_token(ID[b"a"])
    assert m.is_completed() and m.is_terminated()
    allowed = bool_mask(m, N)
    assert allowed[STOP] and allowed[ID[b"b"]] and not allowed[ID[b"a"]]
    assert m.accept_token(STOP) is False
    assert m.accept_token(ID[b"b"]) is True
    assert m.is_terminated()
    m.rollback(2)
    assert not m.is_terminated()
    # A nullable grammar is terminated from the start and still takes text (the testing helper
    # _is_grammar_accept_string relies on this).
    n = make(compiler, 'root ::= "a"*', terminate_without_stop_token=True)
    assert n.is_terminated()
    assert n.accept_string("") and n.accept_string("aa") and n.is_terminated()


# ---------------------------------------------------------------------------------------------
# accept_string, rollback, reset, fork


def test_accept_string_is_transactional_and_one_step(compiler):
    m = make(compiler, 'root ::= "hello" " " "world" "!"?')
    before = state(m)
    assert m.accept_string("hello wor") is True
    mid = state(m)
    assert m.accept_string("ldX") is False
    assert state(m) == mid
    assert m.accept_string(b"ld") is True
    assert m.is_completed()
    m.rollback(1)
    assert state(m) == mid
    m.rollback(1)
    assert state(m) == before
    assert m.accept_string("") is True  # empty string: accepted, one step
    m.rollback(1)
    assert state(m) == before
    with pytest.raises(MISUSE):
        m.rollback(1)


def test_accept_string_multibyte_split(compiler):
    m = make(compiler, 'root ::= "日本" "é"')
    assert m.accept_string(b"\xe6") is True  # first byte of 日
    assert m.accept_token(ID[b"\x97\xa5"]) is True
    assert m.accept_string("本é") and m.is_completed()


def test_rollback_past_stop_token(compiler):
    m = make(compiler, 'root ::= "ab"')
    assert m.accept_token(ID[b"ab"])
    after_ab = state(m)
    assert m.accept_token(STOP) and m.is_terminated()
    m.rollback(1)
    assert not m.is_terminated()
    assert state(m) == after_ab
    assert m.accept_token(STOP)
    m.rollback(2)
    assert state(m) == state(make(compiler, 'root ::= "ab"'))
    with pytest.raises(MISUSE):
        m.rollback(1)
    m.rollback(0)


def test_rollback_too_far_leaves_state(compiler):
    m = make(compiler, "root ::= [a-z]*")
    m.accept_string("ab")
    m.accept_token(ID[b"c"])
    before = state(m)
    with pytest.raises(MISUSE):
        m.rollback(3)
    assert state(m) == before
    with pytest.raises(MISUSE):
        m.rollback(-1)


def test_reset(compiler):
    m = make(compiler, 'root ::= "ab" "c"')
    fresh = state(m)
    m.accept_string("abc")
    m.accept_token(STOP)
    assert m.is_terminated()
    m.reset()
    assert not m.is_terminated()
    assert state(m) == fresh
    with pytest.raises(MISUSE):
        m.rollback(1)


def test_fork_is_independent(compiler):
    m = make(compiler, 'root ::= ("a" | "b")* "."')
    m.accept_string("ab")
    f = m.fork()
    assert state(f) == state(m)
    assert f.accept_string("aa.") and f.accept_token(STOP)
    assert f.is_terminated() and not m.is_terminated()
    assert not m.is_completed()
    assert m.accept_string("b.")
    g = m.fork()
    g.rollback(2)
    assert m.is_completed() and not g.is_completed()


def test_is_completed_vs_is_terminated(compiler):
    m = make(compiler, 'root ::= "a"+')
    assert not m.is_completed() and not m.is_terminated()
    m.accept_token(ID[b"a"])
    assert m.is_completed() and not m.is_terminated()
    m.accept_token(ID[b"a"])
    assert m.is_completed() and not m.is_terminated()
    m.accept_token(STOP)
    assert m.is_terminated()


# ---------------------------------------------------------------------------------------------
# find_jump_forward_string


def test_jump_forward_forced_text_and_choices(compiler):
    m = make(compiler, 'root ::= "hello" (" world" | "!") "?"')
    assert m.find_jump_forward_string() == "hello"
    before = state(m)
    assert m.find_jump_forward_string() == "hello"  # no state change
    assert state(m) == before
    m.accept_string("hello")
    assert m.find_jump_forward_string() == ""  # a choice
    m.accept_string(" w")
    assert m.find_jump_forward_string() == "orld?"
    m.accept_string("orld?")
    assert m.is_completed()
    assert m.find_jump_forward_string() == ""


def test_jump_forward_stops_where_grammar_may_end(compiler):
    m = make(compiler, 'root ::= "ab" "cd"?')
    assert m.find_jump_forward_string() == "ab"
    m.accept_string("ab")
    assert m.find_jump_forward_string() == ""


def test_jump_forward_never_breaks_utf8(compiler):
    # 日 = e6 97 a5, 旦 = e6 97 a6: two bytes forced, then a choice inside the character.
    m = make(compiler, 'root ::= "x" ("日" | "旦")')
    s = m.find_jump_forward_string()
    assert s == "x"
    m.accept_string("x")
    assert m.find_jump_forward_string() == ""
    # Mid-character: the remaining forced bytes do not start a character; whatever is returned
    # must be valid text (it is a str) and a prefix of what remains.
    m2 = make(compiler, 'root ::= "日本"')
    assert m2.find_jump_forward_string() == "日本"
    m2.accept_string(b"\xe6")
    out = m2.find_jump_forward_string()
    assert isinstance(out, str)
    assert ("日本".encode()[1:]).startswith(out.encode())


# ---------------------------------------------------------------------------------------------
# BatchGrammarMatcher


def _matchers_at_various_states(compiler):
    grammars = [
        'root ::= [a-z]+ "." ',
        'root ::= "hello" (" world")?',
        'root ::= ("日本" | "é")* "!"',
    ]
    prefixes = [["", "ab", "abc."], ["", "hel", "hello"], ["", "日本", "日本é"]]
    out = []
    for g, ps in zip(grammars, prefixes):
        for p in ps:
            m = make(compiler, g)
            assert m.accept_string(p)
            out.append(m)
    return out


@pytest.mark.parametrize("threads", [1, 3, "auto"])
def test_batch_fill_equals_single_fills(compiler, threads):
    ms = _matchers_at_various_states(compiler)
    want = xgr.allocate_token_bitmask(len(ms), N)
    for i, m in enumerate(ms):
        m.fill_next_token_bitmask(want, i)
    got = xgr.allocate_token_bitmask(len(ms), N)
    xgr.BatchGrammarMatcher(threads).batch_fill_next_token_bitmask(ms, got)
    assert (np.asarray(got) == np.asarray(want)).all()
    # With indices: row indices[i] gets matcher i; other rows are untouched.
    big = np.full((len(ms) + 4, want.shape[1]), 12345, dtype=np.int32)
    idx = [len(ms) + 3 - i for i in range(len(ms))]
    xgr.BatchGrammarMatcher(threads).batch_fill_next_token_bitmask(ms, big, idx)
    for i, r in enumerate(idx):
        assert (big[r] == np.asarray(want)[i]).all()
    untouched = sorted(set(range(len(ms) + 4)) - set(idx))
    assert (big[untouched] == 12345).all()


def test_batch_fill_errors(compiler):
    ms = _matchers_at_various_states(compiler)[:2]
    bm = xgr.allocate_token_bitmask(2, N)
    with pytest.raises(MISUSE):
        xgr.BatchGrammarMatcher(2).batch_fill_next_token_bitmask(ms, bm, [0])
    with pytest.raises(MISUSE):
        xgr.BatchGrammarMatcher(2).batch_fill_next_token_bitmask(ms, bm, [0, 2])
    with pytest.raises(MISUSE):
        xgr.BatchGrammarMatcher(0)


def test_batch_accept_and_rollback(compiler):
    a = make(compiler, 'root ::= "ab"')
    b = make(compiler, 'root ::= "xy"')
    assert xgr.BatchGrammarMatcher.batch_accept_token([a, b], [ID[b"a"], ID[b"a"]]) == [True, False]
    assert xgr.BatchGrammarMatcher.batch_accept_string([a, b], ["b", "xy"]) == [True, True]
    assert a.is_completed() and b.is_completed()
    xgr.BatchGrammarMatcher.batch_rollback([a, b], [2, 1])
    assert not a.is_completed() and not b.is_completed()
    assert a.accept_string("ab") and b.accept_string("xy")
    xgr.BatchGrammarMatcher.batch_rollback([a, b])
    assert not a.is_completed()
    with pytest.raises(RuntimeError):
        xgr.BatchGrammarMatcher.batch_accept_token([a, b], [1])
    with pytest.raises(RuntimeError):
        xgr.BatchGrammarMatcher.batch_accept_string([a], ["a", "b"])
    with pytest.raises(RuntimeError):
        xgr.BatchGrammarMatcher.batch_rollback([a, b], [1])


def test_matcher_constructor_arguments(compiler):
    cg = compiler.compile_grammar('root ::= "a"')
    with pytest.raises(ValueError):
        xgr.GrammarMatcher('root ::= "a"')
    with pytest.warns(DeprecationWarning):
        m = xgr.GrammarMatcher(cg, max_rollback_tokens=5)
    assert m.max_rollback_tokens == -1
    with pytest.raises(ValueError):
        xgr.GrammarMatcher(cg, default_temperature=-1.0)
    assert xgr.GrammarMatcher(cg, default_temperature=0.5).temperature == 0.5


# ---------------------------------------------------------------------------------------------
# GrammarCompiler cache


def test_compiler_cache_shares_compiled_grammars(info):
    c = xgr.GrammarCompiler(info)
    g = 'root ::= ("a" | "b" [c-z])* "."'
    a = c.compile_grammar(g)
    size0 = c.get_cache_size_bytes()
    assert size0 > 0
    # Filling masks memoizes them inside the shared compiled grammar: a second compile returns the
    # same compiled grammar (its memory size includes those masks).
    m = xgr.GrammarMatcher(a)
    for s in ["", "a", "b"]:
        m.accept_string(s)
        bool_mask(m, N)
    b = c.compile_grammar(g)
    assert b.memory_size_bytes == a.memory_size_bytes
    # The cache counts that growth (re-measured), so it stays within cache_limit_bytes.
    assert c.get_cache_size_bytes() > size0
    c.clear_cache()
    assert c.get_cache_size_bytes() == 0
    fresh = c.compile_grammar(g)
    assert fresh.memory_size_bytes < a.memory_size_bytes
    # Grammar objects and the same text from a Grammar both hit a cache entry.
    gr = xgr.Grammar.from_ebnf(g)
    c.compile_grammar(gr)
    n = c.get_cache_size_bytes()
    c.compile_grammar(xgr.Grammar.from_ebnf(g))
    assert c.get_cache_size_bytes() == n


def test_compiler_cache_disabled(info):
    c = xgr.GrammarCompiler(info, cache_enabled=False)
    c.compile_grammar('root ::= "a"')
    assert c.get_cache_size_bytes() == 0


def test_compiler_cache_limit_evicts(info):
    probe = xgr.GrammarCompiler(info)
    probe.compile_grammar('root ::= "a"+')
    one = probe.get_cache_size_bytes()
    c = xgr.GrammarCompiler(info, cache_limit_bytes=int(one * 1.5))
    assert c.cache_limit_bytes == int(one * 1.5)
    for g in ['root ::= "a"+', 'root ::= "b"+', 'root ::= "c"+', 'root ::= "d"+']:
        c.compile_grammar(g)
        assert 0 < c.get_cache_size_bytes() <= c.cache_limit_bytes
    assert xgr.GrammarCompiler(info).cache_limit_bytes == -1
    with pytest.raises(ValueError):
        xgr.GrammarCompiler(info, cache_limit_bytes=-2)
    with pytest.raises(ValueError):
        xgr.GrammarCompiler("not a tokenizer info")


def test_compile_from_several_threads(info):
    c = xgr.GrammarCompiler(info)
    grammars = [f'root ::= "{chr(97 + i)}"+ [0-9]{{1,{i + 1}}}' for i in range(6)]
    results = {}
    errors = []

    def work(k):
        try:
            g = grammars[k % len(grammars)]
            cg = c.compile_grammar(g)
            m = xgr.GrammarMatcher(cg)
            ok = m.accept_string(chr(97 + k % len(grammars)) + "1") and m.is_completed()
            results[k] = (g, ok, tuple(np.flatnonzero(bool_mask(m, N))))
        except Exception as e:  # noqa: BLE001 -- any failure in a thread is reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 24 and all(ok for _, ok, _ in results.values())
    by_grammar = {}
    for g, _, mask in results.values():
        by_grammar.setdefault(g, set()).add(mask)
    assert all(len(v) == 1 for v in by_grammar.values())


# ---------------------------------------------------------------------------------------------
# Serialization


def test_grammar_serialize_round_trip():
    g = xgr.Grammar.from_ebnf('root ::= a "," b\na ::= [a-z]+\nb ::= "x" | "y" b')
    s = g.serialize_json()
    json.loads(s)
    g2 = xgr.Grammar.deserialize_json(s)
    assert str(g2) == str(g)
    with pytest.raises(xgr.GrammaskError):
        xgr.Grammar.deserialize_json("{not json")
    obj = json.loads(s)
    version_key = next(k for k in obj if "version" in k.lower())
    obj[version_key] = "v0-bogus"
    with pytest.raises(xgr.DeserializeVersionError):
        xgr.Grammar.deserialize_json(json.dumps(obj))
    with pytest.raises((xgr.DeserializeFormatError, xgr.InvalidJSONError)):
        xgr.Grammar.deserialize_json(json.dumps({"nope": 1}))


def test_tokenizer_info_serialize_round_trip(info):
    s = info.serialize_json()
    back = xgr.TokenizerInfo.deserialize_json(s)
    assert back.decoded_vocab == info.decoded_vocab
    assert back.stop_token_ids == info.stop_token_ids
    assert back.vocab_size == info.vocab_size
    assert back.dump_metadata() == info.dump_metadata()
    with pytest.raises(xgr.GrammaskError):
        xgr.TokenizerInfo.deserialize_json("[1, 2")


def test_compiled_grammar_round_trip_and_mismatch(compiler, info):
    cg = compiler.compile_grammar('root ::= "ab" [0-9]*')
    s = cg.serialize_json()
    back = xgr.CompiledGrammar.deserialize_json(s, info)
    assert str(back.grammar) == str(cg.grammar)
    m1, m2 = xgr.GrammarMatcher(cg), xgr.GrammarMatcher(back)
    for text in ["", "a", "ab", "ab12"]:
        m1.reset(), m2.reset()
        assert m1.accept_string(text) and m2.accept_string(text)
        assert (bool_mask(m1, N) == bool_mask(m2, N)).all()
    other = small_info(VOCAB + [b"extra"], stop_ids=[STOP])
    with pytest.raises(xgr.DeserializeFormatError, match="(?i)mismatch"):
        xgr.CompiledGrammar.deserialize_json(s, other)
    obj = json.loads(s)
    obj["__VERSION__"] = "something-else"
    with pytest.raises(xgr.DeserializeVersionError):
        xgr.CompiledGrammar.deserialize_json(json.dumps(obj), info)
    assert issubclass(xgr.DeserializeVersionError, xgr.DeserializeFormatError)
    assert cg.tokenizer_info.vocab_size == info.vocab_size
    assert cg.memory_size_bytes > 0


def test_no_warnings_on_normal_use(compiler):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = make(compiler, 'root ::= "a"')
        m.accept_token(ID[b"a"])
        m.fill_next_token_bitmask(xgr.allocate_token_bitmask(1, N))

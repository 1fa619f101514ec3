"""Hostile input never crashes, hangs or overflows the stack: it either works quickly or raises a
typed error (a GrammaskError subclass, or ValueError/TypeError for bad arguments).

Risky cases run in a fresh interpreter (``conftest.run_python``) with a time limit, so a crash or
a hang fails the test instead of killing pytest. Each child prints one verdict line:
``OK <seconds> <what happened>`` or ``TYPED <seconds> <exception class> <message>``; anything else (an
untyped exception, a signal, a timeout) fails.
"""

from __future__ import annotations

import subprocess

import grammask as xgr
import numpy as np
import pytest
from conftest import bool_mask, byte_vocab, run_python, small_info

TYPED = (xgr.GrammaskError, ValueError, TypeError)

PRELUDE = """
import sys, time
import numpy as np
import grammask as xgr
TYPED = (xgr.GrammaskError, ValueError, TypeError)
def verdict(fn):
    t = time.monotonic()
    try:
        what = fn()
    except TYPED as e:
        print("TYPED", f"{time.monotonic() - t:.3f}", type(e).__name__, str(e)[:200].replace("\\n", " "))
        return
    print("OK", f"{time.monotonic() - t:.3f}", what)
def bitmask(vocab_size):
    return np.full((1, (vocab_size + 31) // 32), -1, dtype=np.int32)  # numpy: no torch import
def byte_info():
    return xgr.TokenizerInfo([bytes([b]) for b in range(256)] + [b"</s>"], stop_token_ids=[256])
"""


def run_case(body: str, timeout: float = 60.0, max_seconds: float = 20.0) -> tuple[str, str]:
    """Runs ``body`` after PRELUDE in a child; returns (status, detail) where status is OK or
    TYPED. Fails the test on a crash, a hang, an untyped error or a slow verdict."""
    try:
        proc = run_python(PRELUDE + body, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for more than {timeout}s:\n{body}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("OK ", "TYPED "))]
    assert proc.returncode == 0 and lines, (
        f"child failed (rc {proc.returncode}):\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-3000:]}"
    )
    status, seconds, detail = lines[-1].split(" ", 2)
    assert float(seconds) < max_seconds, f"took {seconds}s: {lines[-1]}"
    return status, detail


# ---------------------------------------------------------------------------------------------
# grammar text


def test_deeply_nested_ebnf_groups():
    status, detail = run_case("""
text = "root ::= " + "(" * 100_000 + '"a"' + ")" * 100_000
verdict(lambda: xgr.Grammar.from_ebnf(text) and "parsed")
""")
    assert status == "TYPED" and "LimitExceededError" in detail, detail


def test_deeply_nested_ebnf_rules_chain():
    # 100,000 rules, each referencing the next: deep by references, not syntax.
    status, detail = run_case(
        """
n = 100_000
text = "\\n".join([f"root ::= r1"] + [f"r{i} ::= \\"(\\" r{i+1} \\")\\"" for i in range(1, n)] + [f"r{n} ::= \\"a\\""])
def go():
    c = xgr.GrammarCompiler(byte_info())
    m = xgr.GrammarMatcher(c.compile_grammar(text))
    ok = m.accept_string("(" * 1000)
    return f"compiled-accept={ok}"
verdict(go)
""",
        timeout=120,
        max_seconds=60,
    )
    assert status in ("OK", "TYPED"), detail


def test_deeply_nested_regex_and_schema():
    status, detail = run_case("""
verdict(lambda: xgr.Grammar.from_regex("(" * 100_000 + "a" + ")" * 100_000) and "parsed")
""")
    assert status == "TYPED", detail
    status, detail = run_case("""
schema = '{"type":"array","items":' * 100_000 + '{}' + '}' * 100_000
verdict(lambda: xgr.Grammar.from_json_schema(schema) and "parsed")
""")
    assert status == "TYPED", detail


@pytest.mark.parametrize(
    "rep", ["{4294967296}", "{0,4294967297}", "{99999999999999999999}", "{1000000}", "{100001,}"]
)
def test_huge_repetition_bounds(rep):
    status, detail = run_case(f"""
verdict(lambda: xgr.Grammar.from_ebnf('root ::= "a"{rep}') and "parsed")
""")
    assert status == "TYPED", detail


def test_nested_repetitions_multiply():
    # 1000 x 1000 x 1000 repetitions: a billion states if expanded naively.
    status, detail = run_case(
        """
def go():
    c = xgr.GrammarCompiler(byte_info())
    cg = c.compile_grammar('root ::= (("ab"{1000}){1000}){1000}')
    m = xgr.GrammarMatcher(cg)
    return f"accept={m.accept_string('ab' * 100)}"
verdict(go)
""",
        timeout=120,
        max_seconds=60,
    )
    assert status in ("OK", "TYPED"), detail


def test_largest_allowed_repetition_is_usable():
    status, detail = run_case(
        """
def go():
    c = xgr.GrammarCompiler(byte_info())
    m = xgr.GrammarMatcher(c.compile_grammar('root ::= "a"{100000}'))
    assert m.accept_string("a" * 99_999) and not m.is_completed()
    assert m.accept_string("a") and m.is_completed() and not m.accept_string("a")
    return "ok"
verdict(go)
""",
        timeout=120,
        max_seconds=60,
    )
    assert status == "OK", detail


# ---------------------------------------------------------------------------------------------
# matching


def test_deeply_nested_json_text():
    status, detail = run_case(
        """
def go():
    c = xgr.GrammarCompiler(byte_info())
    m = xgr.GrammarMatcher(c.compile_builtin_json_grammar())
    ok = m.accept_string("[" * 100_000)
    if not ok:
        return "rejected-open"
    assert not m.is_completed()
    bm = bitmask(257)
    m.fill_next_token_bitmask(bm)
    ok2 = m.accept_string("]" * 100_000)
    return f"open-accepted close={ok2} completed={m.is_completed()}"
verdict(go)
""",
        timeout=120,
        max_seconds=30,
    )
    assert status in ("OK", "TYPED"), detail
    if status == "OK":
        assert detail == "open-accepted close=True completed=True", detail


def test_deeply_nested_json_token_by_token():
    status, detail = run_case(
        """
def go():
    c = xgr.GrammarCompiler(byte_info())
    m = xgr.GrammarMatcher(c.compile_builtin_json_grammar())
    bm = bitmask(257)
    for i in range(20_000):
        if i % 1000 == 0:
            m.fill_next_token_bitmask(bm)
        if not m.accept_token(ord("[")):
            return f"rejected-at-{i}"
    for i in range(20_000):
        if not m.accept_token(ord("]")):
            return f"rejected-close-at-{i}"
    return f"done completed={m.is_completed()}"
verdict(go)
""",
        timeout=120,
        max_seconds=30,
    )
    assert status in ("OK", "TYPED"), detail
    if status == "OK":
        assert detail == "done completed=True", detail


def test_exploding_ambiguous_grammar():
    status, detail = run_case(
        """
def go():
    c = xgr.GrammarCompiler(byte_info())
    m = xgr.GrammarMatcher(c.compile_grammar('s ::= s s | "a" | ""', root_rule_name="s"))
    bm = bitmask(257)
    for i in range(3000):
        if not m.accept_token(ord("a")):
            return f"rejected-at-{i}"
        if i % 500 == 0:
            m.fill_next_token_bitmask(bm)
    ok = m.accept_string("a" * 3000)
    return f"accepted string={ok} completed={m.is_completed()}"
verdict(go)
""",
        timeout=30,
        max_seconds=20,
    )
    assert status in ("OK", "TYPED"), detail
    if status == "TYPED":
        assert "LimitExceededError" in detail, detail


def test_exploding_ambiguous_expression_grammar():
    status, detail = run_case(
        """
def go():
    c = xgr.GrammarCompiler(byte_info())
    g = 'root ::= e\\ne ::= e "+" e | e e | "1" | ""'
    m = xgr.GrammarMatcher(c.compile_grammar(g))
    ok = m.accept_string("1+" * 1500 + "1")
    return f"accepted={ok}"
verdict(go)
""",
        timeout=30,
        max_seconds=20,
    )
    assert status in ("OK", "TYPED"), detail
    if status == "TYPED":
        assert "LimitExceededError" in detail, detail


@pytest.mark.parametrize(
    "data",
    [b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"ok\xfe", b"\x80"],
)
def test_invalid_utf8_in_accept_string(data):
    info = small_info(byte_vocab())
    for g in ['root ::= [^"]*', "root ::= ([\\x00-\\U0010ffff])*", 'root ::= "ok" [^a]*']:
        m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar(g))
        assert m.accept_string(data) is False, (g, data)
        # Unchanged and still usable.
        assert m.accept_string("ok") is True
    # A token whose bytes are invalid UTF-8 is rejected the same way.
    info2 = small_info([b"a", data, b"</s>"])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info2).compile_grammar('root ::= [^"]*'))
    assert m.accept_token(1) is False
    assert not bool_mask(m, 3)[1]


def test_truncated_utf8_is_a_prefix_not_a_sentence():
    info = small_info(byte_vocab())
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= [^"]*'))
    assert m.accept_string(b"\xc3") is True and not m.is_completed()
    assert m.accept_string(b"(") is False
    assert m.accept_string(b"\xa9") is True and m.is_completed()
    assert m.accept_string(b"\xe6\x97") is True and not m.is_completed()


@pytest.mark.parametrize(
    "tid", [-1, -(2**31), 2**31, 2**32, 2**32 + 97, 2**63 - 1, 2**63, 2**64, 10**30, -(10**30)]
)
def test_huge_and_negative_token_ids(tid):
    info = small_info(byte_vocab())
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "a"*'))
    assert m.accept_token(tid) is False
    assert m.accept_token(ord("a")) is True


def test_non_integer_token_id():
    info = small_info(byte_vocab())
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "a"*'))
    with pytest.raises(TYPED):
        m.accept_token("a")
    with pytest.raises(TYPED):
        m.accept_token(None)


# ---------------------------------------------------------------------------------------------
# bitmask buffers


@pytest.fixture(scope="module")
def matcher_factory():
    info = small_info(byte_vocab())
    cg = xgr.GrammarCompiler(info).compile_grammar("root ::= [a-z]+")
    return lambda: xgr.GrammarMatcher(cg)


BAD_NUMPY = {
    "float32": lambda: np.zeros((1, 9), dtype=np.float32),
    "int64": lambda: np.zeros((1, 9), dtype=np.int64),
    "uint8": lambda: np.zeros((1, 36), dtype=np.uint8),
    "too_narrow": lambda: np.zeros((1, 8), dtype=np.int32),
    "too_narrow_1d": lambda: np.zeros(3, dtype=np.int32),
    "3d": lambda: np.zeros((1, 1, 9), dtype=np.int32),
    "0d": lambda: np.zeros((), dtype=np.int32),
    "non_contiguous": lambda: np.zeros((1, 18), dtype=np.int32)[:, ::2],
    "fortran_2rows": lambda: np.asfortranarray(np.zeros((2, 9), dtype=np.int32)),
    "read_only": lambda: _read_only(np.zeros((1, 9), dtype=np.int32)),
    "list": lambda: [[0] * 9],
    "none": lambda: None,
}


def _read_only(a):
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("kind", list(BAD_NUMPY))
def test_bad_numpy_bitmasks(matcher_factory, kind):
    m = matcher_factory()
    with pytest.raises(TYPED):
        m.fill_next_token_bitmask(BAD_NUMPY[kind]())
    with pytest.raises(TYPED):
        xgr.BatchGrammarMatcher(2).batch_fill_next_token_bitmask([m], BAD_NUMPY[kind]())
    assert m.accept_string("abc")  # still usable


def test_bitmask_index_out_of_range(matcher_factory):
    m = matcher_factory()
    bm = np.zeros((2, 9), dtype=np.int32)
    for idx in [2, 100, -1, 2**40, 2**70]:
        with pytest.raises(TYPED):
            m.fill_next_token_bitmask(bm, idx)
    assert (bm == 0).all()
    with pytest.raises(TYPED):
        xgr.BatchGrammarMatcher(2).batch_fill_next_token_bitmask([m], bm, [-1])
    with pytest.raises(TYPED):
        xgr.BatchGrammarMatcher(2).batch_fill_next_token_bitmask([m], bm, [5])
    # Wider than needed is fine: the extra words are cleared.
    wide = np.full((1, 12), 7, dtype=np.int32)
    m.fill_next_token_bitmask(wide)
    assert (wide[0, 9:] == 0).all()


def test_bad_torch_bitmasks(matcher_factory):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    m = matcher_factory()
    for bad in [
        torch.zeros((1, 9), dtype=torch.float32),
        torch.zeros((1, 9), dtype=torch.int64),
        torch.zeros((1, 8), dtype=torch.int32),
        torch.zeros((1, 1, 9), dtype=torch.int32),
        torch.zeros((9, 2), dtype=torch.int32).t(),
        torch.zeros((1, 18), dtype=torch.int32)[:, ::2],
    ]:
        with pytest.raises(TYPED):
            m.fill_next_token_bitmask(bad)
    good = torch.zeros((1, 9), dtype=torch.int32)
    m.fill_next_token_bitmask(good)
    assert good.any()


# ---------------------------------------------------------------------------------------------
# vocabularies


def test_ten_thousand_byte_token():
    big = b"a" * 10_000
    info = small_info(byte_vocab([big, "日".encode() * 3000]))
    n = 259
    c = xgr.GrammarCompiler(info)
    m = xgr.GrammarMatcher(c.compile_grammar('root ::= "a"*'))
    allowed = bool_mask(m, n)
    assert allowed[256] and not allowed[257]
    assert m.accept_token(256) and m.accept_token(256)
    m2 = xgr.GrammarMatcher(c.compile_grammar('root ::= "a"{5000,15000}'))
    assert bool_mask(m2, n)[256]
    assert m2.accept_token(256)
    assert not bool_mask(m2, n)[256]
    m3 = xgr.GrammarMatcher(c.compile_grammar('root ::= "日"+'))
    assert bool_mask(m3, n)[257] and m3.accept_token(257)


def test_oversized_token():
    status, detail = run_case(
        """
def go():
    info = xgr.TokenizerInfo([b"a", b"b" * 1_000_000, b"</s>"], stop_token_ids=[2])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "b"*'))
    bm = bitmask(3)
    m.fill_next_token_bitmask(bm)
    return f"built accept={m.accept_token(1)}"
verdict(go)
""",
        timeout=120,
        max_seconds=30,
    )
    assert status in ("OK", "TYPED"), detail


def test_many_long_tokens_vocabulary():
    status, detail = run_case(
        """
def go():
    toks = [bytes([b]) for b in range(256)] + [bytes([97 + i % 26]) * (1000 + i) for i in range(3000)] + [b"</s>"]
    info = xgr.TokenizerInfo(toks, stop_token_ids=[len(toks) - 1])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= [a-c]*'))
    bm = bitmask(len(toks))
    m.fill_next_token_bitmask(bm)
    return "ok"
verdict(go)
""",
        timeout=120,
        max_seconds=30,
    )
    assert status in ("OK", "TYPED"), detail


def test_bad_tokenizer_info_arguments():
    with pytest.raises(TYPED):
        xgr.TokenizerInfo([b"a", b"b"], vocab_size=1)
    with pytest.raises(TYPED):
        xgr.TokenizerInfo([b"a", b"b"], stop_token_ids=[5])
    with pytest.raises(TYPED):
        xgr.TokenizerInfo([b"a", b"b"], stop_token_ids=[-1])
    with pytest.raises(TYPED):
        xgr.TokenizerInfo([1, 2])


def test_ambiguous_fill_work_budget_raises_limit_exceeded():
    """A fill of ``root ::= root root | [a-c] | ""`` after a long text costs work cubic in the
    text; past ``MAX_FILL_WORK`` (docs/limits.md) it raises LimitExceededError, every time,
    and the matcher stays usable (rolling the text back masks as before)."""
    toks = []
    for n in range(1, 7):
        for i in range(3**n):
            run = bytes(b"abc"[i // 3**k % 3] for k in range(n))
            toks += [run, run + b"("]
    info = small_info(toks + [b"</s>"])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= root root | [a-c] | ""'))
    assert m.accept_string("abcacbbc")
    short = bool_mask(m, len(toks) + 1)
    assert short[: len(toks)].sum() == len(toks) // 2  # every letter run, none with "("
    assert m.accept_string(("abcacbbcabac" * 20)[:220])
    bm = xgr.allocate_token_bitmask(1, len(toks) + 1)
    for _ in range(2):
        with pytest.raises(xgr.LimitExceededError, match="one mask"):
            m.fill_next_token_bitmask(bm)
    m.rollback(1)
    assert (bool_mask(m, len(toks) + 1) == short).all()

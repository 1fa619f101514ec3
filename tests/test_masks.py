"""Token masks equal a brute-force reference.

The reference decides each token on its own: a fork of the matcher accepts the token
(``accept_token``); the token is allowed iff that succeeds. Stop tokens are allowed iff the
matcher ``is_completed()``; special, added and padding ids never. Two parts:

(a) property tests: random small EBNF grammars, walked along random allowed tokens, on synthetic
    byte vocabularies with multi-byte UTF-8 tokens and split UTF-8 bytes;
(b) sampled states on the real Llama 3, Qwen2.5, Llama 2 and Gemma 2 vocabularies (padded past
    the tokenizer size) for the builtin JSON grammar and three EBNF grammars, one of them
    ambiguous and left-recursive, along the real tokenization of a valid document. The brute
    force over all ids uses the prefix-closure of valid prefixes to skip tokens whose first byte
    is already rejected (that skip is itself checked against ``accept_token`` on a sample).
"""

from __future__ import annotations

import random
import zlib

import grammask as xgr
import numpy as np
import pytest
from conftest import bool_mask, compiler, hf_tokenizer, tokenize, tokenizer_info

# ---------------------------------------------------------------------------------------------
# brute force


def brute_force_small(m: xgr.GrammarMatcher, vocab_size: int) -> np.ndarray:
    """For every id: fork, accept_token."""
    return np.array([m.fork().accept_token(t) for t in range(vocab_size)], dtype=bool)


def brute_force_large(
    m: xgr.GrammarMatcher, decoded: list, vocab_size: int, stop_ids, special_ids
) -> np.ndarray:
    """The same reference over a large vocabulary, faster: one fork that accepts a token and rolls
    it back; tokens whose first byte is rejected are rejected without a call (prefix closure).
    Special ids are fed to the fork too, without the shortcut: a token element (``Token(id)``)
    reads them by id, whatever their text."""
    f = m.fork()
    first_ok = {}
    for b in range(256):
        ok = f.accept_string(bytes([b]))
        if ok:
            f.rollback(1)
        first_ok[b] = ok
    out = np.zeros(vocab_size, dtype=bool)
    special = set(special_ids)
    for t in range(vocab_size):
        if t >= len(decoded):
            continue
        if t in special:
            if f.accept_token(t):
                out[t] = True
                f.rollback(1)
            continue
        data = decoded[t]
        if t in stop_ids:
            out[t] = m.is_completed()
            continue
        if data and not first_ok[data[0]]:
            continue
        if f.accept_token(t):
            out[t] = True
            f.rollback(1)
    return out


# ---------------------------------------------------------------------------------------------
# (a) random grammars on synthetic vocabularies

CHARS = ["a", "b", "(", ")", ",", "é", "日"]


def synthetic_vocab(rng: random.Random) -> list:
    toks = [c.encode() for c in CHARS]
    toks += [b"\xc3", b"\xa9", b"\xe6", b"\x97", b"\xa5", b"\xe6\x97", b"\x97\xa5", b"\xff"]
    for _ in range(50):
        s = "".join(rng.choice(CHARS) for _ in range(rng.randint(1, 4))).encode()
        if rng.random() < 0.15 and len(s) > 1:
            s = s[: rng.randint(1, len(s) - 1)]  # possibly cut inside a character
        toks.append(s)
    toks.append(b"")  # an empty token is special
    toks.append(b"</s>")
    return toks


def random_expr(rng: random.Random, n_rules: int, depth: int) -> str:
    pick = rng.randrange(3 if depth > 3 else 8)
    if pick == 0:
        s = "".join(rng.choice(CHARS) for _ in range(rng.randint(0, 2)))
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if pick == 1:
        c = rng.choice(["[a-b]", "[^a]", "[é日]", "[(),]", "[^()]", "[a-é]", "[^]"])
        return c
    if pick == 2:
        return rule_name(rng.randrange(n_rules))
    if pick in (3, 4):
        return (
            "("
            + " ".join(random_expr(rng, n_rules, depth + 1) for _ in range(rng.randint(1, 3)))
            + ")"
        )
    if pick == 5:
        return (
            "("
            + " | ".join(random_expr(rng, n_rules, depth + 1) for _ in range(rng.randint(2, 3)))
            + ")"
        )
    inner = random_expr(rng, n_rules, depth + 1)
    q = rng.choice(["*", "+", "?", "{2}", "{0,2}", "{1,}", "{1,3}"])
    return f"({inner}){q}"


def rule_name(i: int) -> str:
    return "root" if i == 0 else f"r{i}"


def random_grammar(rng: random.Random) -> str:
    n = rng.randint(1, 4)
    return "\n".join(f"{rule_name(i)} ::= {random_expr(rng, n, 0)}" for i in range(n))


@pytest.mark.parametrize("seed", range(8))
def test_random_grammars_match_brute_force(seed):
    rng = random.Random(1000 + seed)
    checked = 0
    for case in range(25):
        toks = synthetic_vocab(rng)
        stop = len(toks) - 1
        vocab_size = len(toks) + rng.randint(0, 40)  # padding ids past the tokenizer
        info = xgr.TokenizerInfo(toks, vocab_size=vocab_size, stop_token_ids=[stop])
        text = random_grammar(rng)
        try:
            cg = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(text)
        except xgr.GrammaskError:
            continue
        m = xgr.GrammarMatcher(cg)
        for step in range(10):
            if m.is_terminated():
                break
            got = bool_mask(m, vocab_size)
            want = brute_force_small(m, vocab_size)
            assert want[stop] == m.is_completed()
            diff = np.flatnonzero(got != want)
            assert diff.size == 0, (
                f"case {case} step {step}: ids {diff[:10].tolist()} "
                f"({[toks[i] if i < len(toks) else 'pad' for i in diff[:10]]}) mask={got[diff[:10]].tolist()}\n{text}"
            )
            assert not got[len(toks) - 2] and not got[len(toks) :].any()  # empty token, padding
            checked += 1
            allowed = np.flatnonzero(got)
            if allowed.size == 0:
                break
            t = int(rng.choice(list(allowed)))
            assert m.accept_token(t)
            if rng.random() < 0.2 and m.accept_string("a"):
                pass  # a random string, sometimes accepted
    assert checked >= 40, f"only {checked} masks checked"


def test_random_grammar_generator_is_varied():
    rng = random.Random(5)
    texts = {random_grammar(rng) for _ in range(50)}
    assert len(texts) > 45
    assert any("|" in t for t in texts) and any("*" in t or "+" in t for t in texts)


# ---------------------------------------------------------------------------------------------
# (b) real vocabularies

FAMILIES = ["llama3", "qwen2.5", "llama2", "gemma2"]
PAD = 77  # padding ids past the tokenizer's length

JSON_DOC = '{"name": "Ünïcode 日本 ✓", "values": [1, -2.5e3, true, null], "nested": {"a": [], "b": "x\\"y"}}'

ARITH = r"""
root ::= expr
expr ::= expr "+" expr | expr "*" expr | "(" expr ")" | num
num ::= [0-9]+
"""
ARITH_DOC = "(12+3)*45+(6*(7+890))"

KV = r"""
root ::= line+
line ::= key "=" value "\n"
key ::= [a-z_]+
value ::= "\"" [^"\n]* "\"" | [0-9]+ ("." [0-9]+)? | "true" | "false"
"""
KV_DOC = 'name="grammask é"\ncount=42\nratio=0.5\nok=true\n'

GREETING = r"""
root ::= greeting " " name punct
greeting ::= "Hello" | "Hi" | "Good " ("morning" | "evening")
name ::= [A-Z] [a-zé]* (" " [A-Z] [a-z]*)?
punct ::= "!" | "." | "?"
"""
GREETING_DOC = "Good morning Renée Dupont!"

# An open object (strict_mode=False): every other key is allowed, through the key automaton
# that excludes the listed keys (the string-body slice and FOLLOW paths of the mask).
OPEN_OBJECT = xgr.testing._json_schema_to_ebnf(
    {"type": "object", "properties": {"name_of_the_user": {"type": "string"}, "nam": {"type": "integer"}}},
    strict_mode=False,
    spelling="any",  # the document below spells a key with \u escapes
)
# The same schema in the default canonical spelling (key automaton built from the regex printer).
OPEN_OBJECT_CANONICAL = xgr.testing._json_schema_to_ebnf(
    {"type": "object", "properties": {"name_of_the_user": {"type": "string"}, "nam": {"type": "integer"}}},
    strict_mode=False,
)
OPEN_OBJECT_DOC = '{"name_of_the_userid": "x", "another key \\" with quote\\n": 1, "nam": 2, "na\\u006d2": []}'

# Free text of one character class (the class-slice shortcut of kernel classification).
FREE_TEXT = r"""
root ::= line+
line ::= [0-9]+ " " message ("|" [a-z]+ "=" [^ \n|]+)? "\n"
message ::= [^\n|]+
"""
FREE_TEXT_DOC = "12 Ünïcode message, with punctuation; and \"quotes\" ✓|key=val\n7 second line\n"

GRAMMARS = {
    "json": (None, JSON_DOC),
    "free_text": (FREE_TEXT, FREE_TEXT_DOC),
    "open_object_keys": (OPEN_OBJECT, OPEN_OBJECT_DOC),
    "open_object_keys_canonical": (
        OPEN_OBJECT_CANONICAL,
        '{"name_of_the_userid": "x", "another key \\" with quote\\n": 1, "nam": 2, "na\\u00e9m2": []}',
    ),
    "arith_ambiguous_left_recursive": (ARITH, ARITH_DOC),
    "key_value": (KV, KV_DOC),
    "greeting": (GREETING, GREETING_DOC),
}


@pytest.mark.parametrize("grammar_name", list(GRAMMARS))
@pytest.mark.parametrize("family", FAMILIES)
def test_real_vocab_masks_match_brute_force(family, grammar_name):
    info = tokenizer_info(family, vocab_size=len(tokenizer_info(family).decoded_vocab) + PAD)
    comp = compiler(family, vocab_size=info.vocab_size)
    ebnf, doc = GRAMMARS[grammar_name]
    cg = comp.compile_builtin_json_grammar() if ebnf is None else comp.compile_grammar(ebnf)
    decoded = info.decoded_vocab
    n_text = len(decoded)
    vocab_size = info.vocab_size
    assert vocab_size == n_text + PAD
    stop_ids = set(info.stop_token_ids)
    special = set(info.special_token_ids)
    assert set(range(n_text, vocab_size)) <= special, "padding ids are special"
    hf = hf_tokenizer(family)
    # Added tokens the tokenizer marks special (<|eot_id|>, <|im_start|>, <bos>, ...) are never
    # text. Added tokens marked non-special (Qwen's <tool_call>, Gemma's <unused0>) decode to their
    # text like ordinary tokens (as in XGrammar), so the brute force decides them.
    added = {
        i
        for i, t in hf.added_tokens_decoder.items()
        if t.special and i < n_text and i not in stop_ids
    }
    assert added <= special, (
        f"added special tokens not special in TokenizerInfo: {sorted(added - special)[:10]}"
    )

    ids = tokenize(hf_tokenizer(family), info, doc)
    rng = random.Random(zlib.crc32(f"{family}/{grammar_name}".encode()))
    k = 6 if grammar_name in ("open_object_keys", "free_text") else 2  # shortcut paths: sample more
    sampled = {0, len(ids)} | set(rng.sample(range(1, len(ids)), min(k, len(ids) - 1)))
    m = xgr.GrammarMatcher(cg)
    for pos in range(len(ids) + 1):
        if pos in sampled:
            got = bool_mask(m, vocab_size)
            want = brute_force_large(m, decoded, vocab_size, stop_ids, special)
            diff = np.flatnonzero(got != want)
            assert diff.size == 0, (
                f"{family}/{grammar_name} after {pos} tokens: ids {diff[:10].tolist()} "
                f"{[decoded[i] if i < n_text else 'pad' for i in diff[:10]]} mask={got[diff[:10]].tolist()}"
            )
            assert not got[n_text:].any(), "padding ids allowed"
            assert not any(got[i] for i in special), "special ids allowed"
            assert not any(got[i] for i in added), "added tokens allowed"
            assert all(got[s] == m.is_completed() for s in stop_ids)
            if pos < len(ids):
                assert got[ids[pos]], f"the next real token {decoded[ids[pos]]!r} is not allowed"
        if pos < len(ids):
            assert m.accept_token(ids[pos]), (
                f"{family}/{grammar_name}: token {pos} {decoded[ids[pos]]!r} rejected"
            )
    assert m.is_completed()
    assert m.accept_token(next(iter(stop_ids))) and m.is_terminated()


def test_brute_force_shortcut_agrees_with_plain_brute_force():
    """The prefix-closure shortcut of ``brute_force_large`` decides like plain fork+accept."""
    rng = random.Random(3)
    toks = synthetic_vocab(rng)
    info = xgr.TokenizerInfo(toks, vocab_size=len(toks) + 5, stop_token_ids=[len(toks) - 1])
    cg = xgr.GrammarCompiler(info).compile_grammar('root ::= ("a" | "日" "b"* | "(" root ")")+')
    m = xgr.GrammarMatcher(cg)
    for s in ["", "a", "(日", "(日bb"]:
        m.reset()
        assert m.accept_string(s)
        fast = brute_force_large(
            m,
            info.decoded_vocab,
            info.vocab_size,
            set(info.stop_token_ids),
            set(info.special_token_ids),
        )
        assert (fast == brute_force_small(m, info.vocab_size)).all()

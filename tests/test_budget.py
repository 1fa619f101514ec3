"""Token budgets (``GrammarMatcher(..., max_tokens=N)``): random sampling from the masks ends,
valid, within N tokens; a budget below the shortest completion is refused."""

import json
import random

import numpy as np
import pytest

import grammask as xgr
from conftest import compiler, tokenizer_info

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 3},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "score": {"type": "number"},
        "n": {"type": "integer"},
    },
    "required": ["name", "tags", "n"],
}


def _sample(cg, info, budget, rng):
    m = xgr.GrammarMatcher(cg, max_tokens=budget)
    n = info.vocab_size
    bm = xgr.allocate_token_bitmask(1, n)
    ids = []
    for _ in range(budget):
        m.fill_next_token_bitmask(bm)
        allowed = np.flatnonzero(np.asarray(xgr.testing.bitmask_to_bool_mask(bm, n)).reshape(-1)[:n])
        assert allowed.size, "empty mask under a budget"
        t = int(allowed[rng.randrange(allowed.size)])
        assert m.accept_token(t)
        ids.append(t)
        if t in info.stop_token_ids:
            return b"".join(info.decoded_vocab[i] for i in ids[:-1]).decode()
    raise AssertionError(f"no stop token within {budget} tokens")


@pytest.mark.parametrize("family", ["llama3", "qwen2.5"])
@pytest.mark.parametrize("budget", [33, 48, 96])
def test_random_sampling_ends_valid_within_budget(family, budget) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    info = tokenizer_info(family)
    cg = compiler(family).compile_json_schema(SCHEMA, strict_mode=False)
    rng = random.Random(budget)
    for _ in range(4):
        text = _sample(cg, info, budget, rng)
        jsonschema.validate(json.loads(text), SCHEMA)


def test_small_budgets_are_refused_and_builtin_json_closes() -> None:
    info = tokenizer_info("llama3")
    comp = compiler("llama3")
    cg = comp.compile_json_schema(SCHEMA, strict_mode=False)
    # `{"name":"xxx","tags":[""],"n":0}` is 32 bytes: 33 tokens with the stop token, at most.
    xgr.GrammarMatcher(cg, max_tokens=33)
    with pytest.raises(ValueError, match="shortest completion"):
        xgr.GrammarMatcher(cg, max_tokens=5)
    with pytest.raises(ValueError):
        xgr.GrammarMatcher(cg, max_tokens=0)
    text = _sample(comp.compile_builtin_json_grammar(), info, 40, random.Random(0))
    json.loads(text)


def test_batch_fill_takes_each_matchers_budget() -> None:
    """``BatchGrammarMatcher`` fills each row under its own matcher's budget, as single fills do."""
    info = tokenizer_info("llama3")
    cg = compiler("llama3").compile_json_schema(SCHEMA, strict_mode=False)
    n = info.vocab_size
    prefix = '{"name":"abcd'
    budgets = [None, 33, 40, 200]
    ms = [xgr.GrammarMatcher(cg) if b is None else xgr.GrammarMatcher(cg, max_tokens=b) for b in budgets]
    for m in ms:
        for ch in prefix:  # one token per character, so the budgets bite
            assert m.accept_string(ch)
    batch = xgr.allocate_token_bitmask(len(ms), n)
    xgr.BatchGrammarMatcher(max_threads=4).batch_fill_next_token_bitmask(ms, batch)
    rows = []
    for i, m in enumerate(ms):
        one = xgr.allocate_token_bitmask(1, n)
        m.fill_next_token_bitmask(one)
        assert np.array_equal(np.asarray(batch[i]), np.asarray(one[0])), budgets[i]
        rows.append(int(np.asarray(xgr.testing.bitmask_to_bool_mask(one, n)).sum()))
    # Tighter budgets allow fewer tokens: at 33 (the shortest completion plus the stop token from
    # the start) only tokens that shorten the completion remain.
    assert rows[1] < rows[2] <= rows[3] <= rows[0]

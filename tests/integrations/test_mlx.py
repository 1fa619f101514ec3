"""MLX (mlx[cpu] on Linux): `apply_token_bitmask_inplace` on `mx.array` logits, and a constrained
generation through mlx-lm's own `generate_step(logits_processors=...)` with a tiny randomly
initialised mlx-lm Llama and the Llama 3 tokenizer."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core", reason="MLX is not installed here: run .ci/integrations")

import grammask as xgr  # noqa: E402
import jsonschema  # noqa: E402
from cases import hf_tokenizer  # noqa: E402
from grammask.integrations.mlx import LogitsProcessor  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "ok": {"type": "boolean"},
        "kind": {"enum": ["a", "b", None]},
    },
    "required": ["name", "ok", "kind"],
    "additionalProperties": False,
}


def test_apply_token_bitmask_inplace_on_mx_arrays():
    info = xgr.TokenizerInfo([bytes([b]) for b in range(97, 123)] + [b"</s>"], stop_token_ids=[26])
    matcher = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "ab" | "c"'))
    bitmask = xgr.allocate_token_bitmask(2, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask, 0)
    logits = mx.zeros((2, 64 + 5))  # wider than the bitmask's 32 ids: that tail is left alone
    xgr.apply_token_bitmask_inplace(logits, bitmask, indices=[0])
    row = np.array(logits[0])
    assert np.isfinite(row[[0, 2]]).all() and np.isinf(row[[1, 3, 25, 26]]).all()
    assert np.isfinite(row[32:]).all()
    assert np.isfinite(np.array(logits[1])).all(), "rows not in indices are untouched"
    one = mx.zeros((info.vocab_size,))
    xgr.apply_token_bitmask_inplace(one, bitmask[0])
    assert np.isinf(np.array(one)).sum() == info.vocab_size - 2


def tiny_model(vocab_size: int):
    from mlx_lm.models import llama

    mx.random.seed(0)
    args = llama.ModelArgs(
        model_type="llama",
        hidden_size=32,
        num_hidden_layers=1,
        intermediate_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        rms_norm_eps=1e-5,
        vocab_size=vocab_size,
        tie_word_embeddings=False,
    )
    model = llama.Model(args)
    mx.eval(model.parameters())
    return model


@pytest.mark.parametrize("greedy", [True, False])
def test_generate_step_with_the_processor(greedy):
    from mlx_lm.generate import generate_step

    tok = hf_tokenizer("llama3")
    vocab = 128256
    model = tiny_model(vocab)
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab)
    grammar = xgr.GrammarCompiler(info).compile_json_schema(SCHEMA, any_whitespace=False)
    proc = LogitsProcessor(grammar)
    prompt = mx.array(tok.encode("Give me JSON:"))
    if greedy:
        sampler = lambda logprobs: mx.argmax(logprobs, axis=-1)  # noqa: E731
    else:
        mx.random.seed(3)
        sampler = lambda logprobs: mx.random.categorical(logprobs)  # noqa: E731
    out = []
    stops = set(info.stop_token_ids)
    steps, t0 = 0, time.perf_counter()
    for token, _ in generate_step(
        prompt, model, max_tokens=64, sampler=sampler, logits_processors=[proc]
    ):
        token = int(token)
        steps += 1
        if token in stops:
            break
        out.append(token)
    else:
        raise AssertionError(f"no stop token in 64 steps: {tok.decode(out)!r}")
    elapsed = time.perf_counter() - t0
    text = tok.decode(out)
    jsonschema.validate(json.loads(text), SCHEMA)
    print(
        f"\nmlx-lm: {steps} steps, {1e3 * elapsed / steps:.2f} ms/step in all, grammask {proc.stats()}"
    )

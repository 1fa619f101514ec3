"""The transformers LogitsProcessor drives a decode loop exactly as generate() does: the first call
sees the prompt, each later call brings the previously sampled token."""

import json

import jsonschema
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

import grammask as xgr  # noqa: E402
from grammask.contrib.hf import LogitsProcessor  # noqa: E402


def byte_info():
    tokens = [bytes([b]) for b in range(256)] + [b"</s>"]
    return xgr.TokenizerInfo(tokens, stop_token_ids=[256], special_token_ids=[256])


def test_processor_constrains_a_sampled_loop():
    info = byte_info()
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 1000}}, "required": ["n"]}
    compiled = xgr.GrammarCompiler(info).compile_json_schema(schema, any_whitespace=False)
    proc = LogitsProcessor(compiled)
    rng = np.random.default_rng(0)
    batch = 2
    input_ids = torch.zeros((batch, 3), dtype=torch.long)  # a 3-token "prompt"
    outputs = [bytearray() for _ in range(batch)]
    done = [False] * batch
    for _ in range(64):
        scores = torch.from_numpy(rng.standard_normal((batch, info.vocab_size)).astype(np.float32))
        scores[:, 256] += 3.0  # lean toward stopping once allowed
        scores = proc(input_ids, scores)
        nxt = scores.argmax(dim=-1)
        for i in range(batch):
            if not done[i]:
                t = int(nxt[i])
                if t == 256:
                    done[i] = True
                else:
                    outputs[i] += bytes([t])
        input_ids = torch.cat([input_ids, nxt[:, None]], dim=1)
        if all(done):
            break
    assert all(done)
    for out in outputs:
        value = json.loads(out)
        # JSON Schema integers are integer-valued numbers, so 574.0 is one too.
        jsonschema.validate(value, schema)


def test_processor_rejects_a_wrong_number_of_grammars():
    info = byte_info()
    compiled = xgr.GrammarCompiler(info).compile_grammar('root ::= "a"')
    proc = LogitsProcessor([compiled, compiled, compiled])
    with pytest.raises(ValueError, match="3 compiled grammars for a batch of 2"):
        proc(torch.zeros((2, 1), dtype=torch.long), torch.zeros((2, info.vocab_size)))


# ---------------------------------------------------------------------------------------------
# Through a real model.generate(): a tiny randomly initialised Llama built from a config, with the
# Llama 3 tokenizer. Schemas bound the output length so random weights still finish (no numbers:
# 65.000... is a valid JSON integer of unbounded length).

from conftest import compiler, hf_tokenizer  # noqa: E402

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 6},
            "age": {"enum": ["young", "old", None]},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "age", "ok"],
        "additionalProperties": False,
    },
    {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3},
    {"type": "object", "properties": {"n": {"type": ["boolean", "null"]}, "tag": {"type": "string", "maxLength": 3}},
     "required": ["n", "tag"], "additionalProperties": False},
    {"enum": ["yes", "no", {"maybe": True}]},
]


def tiny_llama(vocab_size: int, seed: int = 0):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        bos_token_id=128000,
        eos_token_id=[128001, 128009],
        pad_token_id=128004,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    return model


def llama3():
    tok = hf_tokenizer("llama3")
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = "<|finetune_right_pad_id|>"
    return tok


def decode_rows(tok, out, prompt_len, stop_ids):
    texts = []
    for row in out[:, prompt_len:].tolist():
        ids = []
        for t in row:
            if t in stop_ids:
                break
            ids.append(t)
        else:
            raise AssertionError(f"row never stopped: {row}")
        texts.append(tok.decode(ids))
    return texts


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("do_sample", [False, True])
def test_generate_with_a_tiny_llama(batch, do_sample):
    tok = llama3()
    model = tiny_llama(len(tok))
    comp = compiler("llama3", model.config.vocab_size)
    info = comp.tokenizer_info
    schemas = SCHEMAS[:batch]
    grammars = [comp.compile_json_schema(s, any_whitespace=False) for s in schemas]
    prompts = ["Give me JSON:", "A list", "x", "Answer in JSON, please, with a long prompt"][:batch]
    inputs = tok(prompts, return_tensors="pt", padding=True)
    torch.manual_seed(1)
    out = model.generate(
        **inputs,
        logits_processor=[LogitsProcessor(grammars if batch > 1 else grammars[0])],
        max_new_tokens=64,
        do_sample=do_sample,
        eos_token_id=info.stop_token_ids,
        pad_token_id=tok.pad_token_id,
    )
    texts = decode_rows(tok, out, inputs["input_ids"].shape[1], set(info.stop_token_ids))
    for text, schema in zip(texts, schemas):
        jsonschema.validate(json.loads(text), schema)


def test_generate_with_num_return_sequences_shares_each_prompts_grammar():
    tok = llama3()
    model = tiny_llama(len(tok))
    comp = compiler("llama3", model.config.vocab_size)
    info = comp.tokenizer_info
    grammars = [comp.compile_json_schema(s, any_whitespace=False) for s in SCHEMAS[:2]]
    inputs = tok(["a", "bb"], return_tensors="pt", padding=True)
    out = model.generate(
        **inputs, logits_processor=[LogitsProcessor(grammars)], max_new_tokens=64, do_sample=True,
        num_return_sequences=3, eos_token_id=info.stop_token_ids, pad_token_id=tok.pad_token_id,
    )
    texts = decode_rows(tok, out, inputs["input_ids"].shape[1], set(info.stop_token_ids))
    for i, text in enumerate(texts):
        jsonschema.validate(json.loads(text), SCHEMAS[i // 3])


def test_generate_masks_logits_wider_than_the_tokenizer():
    """The model's output layer has 64 ids past the tokenizer, and the TokenizerInfo was built
    from the tokenizer alone: those ids must still be masked (here they dominate the logits)."""
    tok = llama3()
    wide = len(tok) + 64
    model = tiny_llama(wide)
    with torch.no_grad():
        model.lm_head.weight[len(tok):] *= 1000.0  # the padded ids win every unmasked argmax
    comp = compiler("llama3")  # the tokenizer alone: narrower than the logits
    info = comp.tokenizer_info
    assert info.vocab_size == len(tok) < wide
    grammar = comp.compile_json_schema(SCHEMAS[0], any_whitespace=False)
    inputs = tok(["p", "q"], return_tensors="pt", padding=True)
    out = model.generate(
        **inputs, logits_processor=[LogitsProcessor(grammar)], max_new_tokens=64, do_sample=False,
        eos_token_id=info.stop_token_ids, pad_token_id=tok.pad_token_id,
    )
    texts = decode_rows(tok, out, inputs["input_ids"].shape[1], set(info.stop_token_ids))
    for text in texts:
        jsonschema.validate(json.loads(text), SCHEMAS[0])


def test_beam_search_is_refused_up_front():
    tok = llama3()
    model = tiny_llama(len(tok))
    comp = compiler("llama3", model.config.vocab_size)
    info = comp.tokenizer_info
    grammar = comp.compile_json_schema(SCHEMAS[0], any_whitespace=False)
    inputs = tok(["p"], return_tensors="pt")
    with pytest.raises(ValueError, match="does not support beam search"):
        model.generate(
            **inputs, logits_processor=[LogitsProcessor(grammar)], max_new_tokens=8, num_beams=2,
            eos_token_id=info.stop_token_ids, pad_token_id=tok.pad_token_id,
        )


def test_reordered_rows_are_refused_with_a_clear_message():
    info = byte_info()
    compiled = xgr.GrammarCompiler(info).compile_grammar('root ::= "ab" | "ba"')
    proc = LogitsProcessor(compiled)
    ids = torch.tensor([[1, 2], [3, 4]])
    proc(ids, torch.zeros((2, info.vocab_size)))
    step = torch.tensor([[3, 4, ord("b")], [1, 2, ord("a")]])  # rows swapped, as beam search does
    with pytest.raises(ValueError, match="reordered"):
        proc(step, torch.zeros((2, info.vocab_size)))


def test_a_reused_processor_is_refused():
    info = byte_info()
    compiled = xgr.GrammarCompiler(info).compile_grammar('root ::= "a"')
    proc = LogitsProcessor(compiled)
    proc(torch.zeros((1, 3), dtype=torch.long), torch.zeros((1, info.vocab_size)))
    with pytest.raises(ValueError, match="single-use"):
        proc(torch.zeros((1, 3), dtype=torch.long), torch.zeros((1, info.vocab_size)))

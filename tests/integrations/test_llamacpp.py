"""llama.cpp: `TokenizerInfo.from_gguf` on GGUF files the test writes itself (with the `gguf`
package), and constrained generation with llama-cpp-python on a tiny random Llama GGUF.

The model is 1 layer, 32 wide, SentencePiece-style vocabulary (byte pieces plus a few words), so
llama.cpp loads and runs it in milliseconds; its output is random but must match the schema."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

gguf = pytest.importorskip(
    "gguf", reason="the gguf package is not installed here: run .ci/integrations"
)

import grammask as xgr  # noqa: E402
import jsonschema  # noqa: E402
from grammask.integrations.llamacpp import LogitsProcessor  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "k": {"enum": ["ab", "cd", None]},
        "s": {"type": "string", "maxLength": 4},
    },
    "required": ["ok", "k", "s"],
    "additionalProperties": False,
}

WORDS = [
    "▁",
    "▁true",
    "true",
    "false",
    "{",
    "}",
    '"',
    ":",
    ",",
    '":',
    '{"',
    "ok",
    "null",
    "ab",
    "cd",
]


def spm_vocab():
    tokens = (
        ["<unk>", "<s>", "</s>"]
        + [f"<0x{b:02X}>" for b in range(256)]
        + WORDS
        + ["<|im_end|>", "[PAD0]"]
    )
    types = [2, 3, 3] + [6] * 256 + [1] * len(WORDS) + [4, 5]
    return tokens, types


def write_tokenizer(writer, model: str, tokens, types, eos: int, extra_stop=None) -> None:
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_scores([-float(i) for i in range(len(tokens))])
    writer.add_bos_token_id(1 if model == "llama" else 0)
    writer.add_eos_token_id(eos)
    if extra_stop is not None:
        writer.add_eot_token_id(extra_stop)


def write_tiny_llama(path, tokens, types, *, n_embd=32, n_ff=64, n_head=2, n_head_kv=1, seed=0):
    """A loadable 1-layer Llama GGUF with random float32 weights."""
    rng = np.random.default_rng(seed)
    n_vocab = len(tokens)
    head_dim = n_embd // n_head
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("grammask-tiny")
    writer.add_context_length(256)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(1)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(head_dim)
    writer.add_file_type(0)  # all f32
    write_tokenizer(writer, "llama", tokens, types, eos=2)

    def t(name, *shape, scale=0.2):
        writer.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    t("token_embd.weight", n_vocab, n_embd)
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    t("output.weight", n_vocab, n_embd, scale=1.0)
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
    t("blk.0.attn_q.weight", n_embd, n_embd)
    t("blk.0.attn_k.weight", n_head_kv * head_dim, n_embd)
    t("blk.0.attn_v.weight", n_head_kv * head_dim, n_embd)
    t("blk.0.attn_output.weight", n_embd, n_embd)
    writer.add_tensor("blk.0.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
    t("blk.0.ffn_gate.weight", n_ff, n_embd)
    t("blk.0.ffn_up.weight", n_ff, n_embd)
    t("blk.0.ffn_down.weight", n_embd, n_ff)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_from_gguf_spm(tmp_path):
    tokens, types = spm_vocab()
    path = write_tiny_llama(tmp_path / "tiny.gguf", tokens, types)
    info = xgr.TokenizerInfo.from_gguf(path)
    assert info.vocab_type == xgr.VocabType.BYTE_FALLBACK and info.add_prefix_space
    assert info.vocab_size == len(tokens)
    assert info.stop_token_ids == [2]
    dv = info.decoded_vocab
    assert dv[3 + 0x41] == b"A" and dv[tokens.index("▁true")] == b" true"
    special = set(info.special_token_ids)
    assert {0, 1, tokens.index("<|im_end|>"), tokens.index("[PAD0]")} <= special
    assert tokens.index("true") not in special
    assert (
        xgr.TokenizerInfo.from_gguf(path, vocab_size=len(tokens) + 7).vocab_size == len(tokens) + 7
    )


def test_from_gguf_byte_level(tmp_path):
    from grammask.tokenizer_info import _byte_level_alphabet

    alphabet = _byte_level_alphabet()
    tokens = alphabet + ["Ġhello", "ĊĠĠ", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    types = [1] * len(alphabet) + [1, 1, 3, 3, 3]
    path = tmp_path / "bpe.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    write_tokenizer(writer, "gpt2", tokens, types, eos=len(tokens) - 2, extra_stop=len(tokens) - 1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    info = xgr.TokenizerInfo.from_gguf(path)
    assert info.vocab_type == xgr.VocabType.BYTE_LEVEL
    assert info.stop_token_ids == [len(tokens) - 2, len(tokens) - 1]
    assert info.decoded_vocab[256] == b" hello" and info.decoded_vocab[257] == b"\n  "
    assert len(tokens) - 3 in info.special_token_ids


def test_processor_in_a_stub_loop(tmp_path):
    """llama-cpp-python's contract, driven without llama.cpp: (input_ids, scores) -> scores."""
    tokens, types = spm_vocab()
    info = xgr.TokenizerInfo.from_gguf(write_tiny_llama(tmp_path / "m.gguf", tokens, types))
    proc = LogitsProcessor(
        xgr.GrammarCompiler(info).compile_json_schema(SCHEMA, any_whitespace=False)
    )
    rng = np.random.default_rng(0)
    ids = np.array([1, 50, 60], dtype=np.intc)
    out = []
    for _ in range(80):
        scores = rng.standard_normal(len(tokens)).astype(np.single)
        t = int(np.argmax(proc(ids, scores)))
        if t == 2:
            break
        out.append(t)
        ids = np.append(ids, np.intc(t))
    else:
        raise AssertionError("no stop token")
    text = b"".join(info.decoded_vocab[t] for t in out).decode()
    jsonschema.validate(json.loads(text), SCHEMA)


def test_llama_cpp_python_generation(tmp_path):
    llama_cpp = pytest.importorskip(
        "llama_cpp",
        reason="llama-cpp-python is not installed here (it builds llama.cpp from source on install)",
    )
    tokens, types = spm_vocab()
    path = write_tiny_llama(tmp_path / "tiny.gguf", tokens, types)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=2, verbose=False, seed=0)
    info = xgr.TokenizerInfo.from_gguf(llm)  # a Llama: its model_path is read
    assert llm.n_vocab() == info.vocab_size
    grammar = xgr.GrammarCompiler(info).compile_json_schema(SCHEMA, any_whitespace=False)
    for temperature in (0.0, 0.8):
        proc = LogitsProcessor(grammar)
        start = time.perf_counter()
        result = llm.create_completion(
            "JSON:",
            max_tokens=80,
            temperature=temperature,
            logits_processor=llama_cpp.LogitsProcessorList([proc]),
        )
        per_step = 1e3 * (time.perf_counter() - start) / max(1, proc._calls)
        choice = result["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        jsonschema.validate(json.loads(choice["text"]), SCHEMA)
        print(
            f"\nllama-cpp-python T={temperature}: {choice['text']!r}; {per_step:.2f} ms/step in all; grammask {proc.stats()}"
        )

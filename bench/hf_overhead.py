"""Per-token overhead of grammask's transformers LogitsProcessor beside the model's own step.

Runs ``model.generate()`` on a small randomly initialised Llama (built from a LlamaConfig, real
Llama 3 tokenizer) with and without the processor, greedy, and reports per generated token: the
time grammask spent inside the processor (accept + fill + apply) and the whole step time.

    GRAMMASK_SHARED=/work/shared .venv/bin/python bench/hf_overhead.py [--hidden 256 --layers 4]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import transformers

import grammask as xgr
from grammask.contrib.hf import LogitsProcessor

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 4},
    },
    "required": ["name", "ok", "tags"],
    "additionalProperties": False,
}


class Timed(LogitsProcessor):
    seconds = 0.0
    calls = 0

    def __call__(self, input_ids, scores):
        t = time.perf_counter()
        try:
            return super().__call__(input_ids, scores)
        finally:
            Timed.seconds += time.perf_counter() - t
            Timed.calls += 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=48)
    args = ap.parse_args()
    shared = Path(os.environ.get("GRAMMASK_SHARED", "../shared"))
    tok = transformers.AutoTokenizer.from_pretrained(str(shared / "tokenizers" / "llama3"))
    tok.padding_side = "left"
    tok.pad_token = "<|finetune_right_pad_id|>"
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128256,
        hidden_size=args.hidden,
        intermediate_size=4 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=config.vocab_size)
    grammar = xgr.GrammarCompiler(info).compile_json_schema(SCHEMA, any_whitespace=False)
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, Llama hidden={args.hidden} layers={args.layers} vocab=128256"
    )
    print(
        f"{'batch':>5} {'steps':>5} {'step ms (no grammar)':>21} {'step ms (grammask)':>19} {'grammask us/step':>17} {'us/row':>8}"
    )
    for batch in (1, 4):
        inputs = tok(["Give me JSON:"] * batch, return_tensors="pt", padding=True)
        common = dict(
            max_new_tokens=args.tokens,
            min_new_tokens=args.tokens,
            do_sample=False,
            pad_token_id=tok.pad_token_id,
        )
        with torch.no_grad():
            model.generate(**inputs, max_new_tokens=2, pad_token_id=tok.pad_token_id)  # warm up
            t = time.perf_counter()
            out = model.generate(**inputs, **common)
            plain = (time.perf_counter() - t) / (out.shape[1] - inputs["input_ids"].shape[1])
            Timed.seconds, Timed.calls = 0.0, 0
            t = time.perf_counter()
            out = model.generate(
                **inputs,
                logits_processor=[Timed(grammar)],
                max_new_tokens=args.tokens,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
                eos_token_id=info.stop_token_ids,
            )
            steps = out.shape[1] - inputs["input_ids"].shape[1]
            constrained = (time.perf_counter() - t) / steps
        per = 1e6 * Timed.seconds / max(1, Timed.calls)
        print(
            f"{batch:>5} {steps:>5} {1e3 * plain:>21.2f} {1e3 * constrained:>19.2f} {per:>17.0f} {per / batch:>8.0f}"
        )


if __name__ == "__main__":
    main()

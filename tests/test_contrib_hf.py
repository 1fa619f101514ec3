"""The transformers LogitsProcessor drives a decode loop exactly as generate() does: the first call
sees the prompt, each later call brings the previously sampled token."""

import json

import jsonschema
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")

import grammask as xgr
from grammask.contrib.hf import LogitsProcessor


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

"""The embedded tiny model: a real causal LM and tokenizer built offline, for ``grammask demo``
and ``grammask serve`` when no ``--model`` is given.

Takes nothing from the network. Produces a ``transformers`` ``LlamaForCausalLM`` built from a small
``LlamaConfig`` with fixed-seed random weights, and a byte-level BPE tokenizer trained in memory
with the ``tokenizers`` library on an embedded corpus (JSON fragments and English), wrapped as a
``PreTrainedTokenizerFast`` with a ChatML chat template (``<|im_start|>``/``<|im_end|>``, tools
announced Hermes/Qwen style). The model's outputs are noise, but every step is a real forward
pass with a KV cache, so the grammar's cost can be measured against the model's own.

Needs ``torch``, ``transformers`` and ``tokenizers`` (the ``serve`` extra); ``import grammask``
does not import this module.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

__all__ = ["build_tiny_tokenizer", "build_tiny_model", "load_model_and_tokenizer", "TINY_MODEL_ID"]

TINY_MODEL_ID = "grammask-tiny-llama"

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ChatML, with tools listed in the system turn the way Qwen2.5/Hermes templates do it.
CHAT_TEMPLATE = (
    "{% if tools %}{{ '<|im_start|>system\\n' }}"
    "{% if messages[0].role == 'system' %}{{ messages[0].content + '\\n\\n' }}{% endif %}"
    "{{ 'You may call functions. Signatures:\\n<tools>\\n' }}"
    "{% for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{% endfor %}"
    '{{ \'</tools>\\nTo call one, reply with <tool_call>\\n{\\"name\\": ..., \\"arguments\\": ...}\\n</tool_call><|im_end|>\\n\' }}'
    "{% elif messages[0].role == 'system' %}"
    "{{ '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{% endif %}"
    "{% for message in messages %}{% if not (message.role == 'system' and loop.first) %}"
    "{{ '<|im_start|>' + message.role + '\\n' + (message.content if message.content is string else '') + '<|im_end|>\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_CORPUS = [
    '{"name": "Ada Lovelace", "age": 36, "role": "admin", "tags": ["math", "poetry"], "active": true}',
    '{"city": "Paris", "country": "France", "population": 2148000, "capital": true}',
    '{"id": 12, "items": [1, 2, 3], "price": 9.99, "currency": "EUR", "in_stock": false, "note": null}',
    '{"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}',
    '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Berlin", "unit": "celsius"}}\n</tool_call>',
    "The quick brown fox jumps over the lazy dog. The weather in Berlin is sunny today.",
    "Grammar-constrained decoding masks the logits of tokens the grammar does not allow.",
    "Return the answer as JSON with the fields name, age, role and tags, please.",
    "user assistant system: You are a helpful assistant that answers in JSON.",
    "0123456789 -+.eE ,:;[]{}()<>=/\\\"' \n\t abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "SELECT name, age FROM users WHERE active = true ORDER BY age DESC LIMIT 10;",
    "def add(a, b):\n    return a + b\n\nprint(add(1, 2))",
]


def build_tiny_tokenizer(vocab_size: int = 640) -> Any:
    """A byte-level BPE tokenizer trained in memory on the embedded corpus (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.name_or_path = TINY_MODEL_ID
    return fast


def build_tiny_model(
    vocab_size: int, *, seed: int = 0, hidden_size: int = 64, layers: int = 2
) -> Any:
    """A ``LlamaForCausalLM`` with fixed-seed random weights (about 0.1M parameters)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    model.eval()
    return model


def load_model_and_tokenizer(
    model: Optional[str] = None,
    tokenizer: Optional[str] = None,
    *,
    seed: int = 0,
    device: str = "auto",
) -> Tuple[Any, Any, str]:
    """(model, tokenizer, model id). ``model=None`` builds the embedded tiny model (with the
    tokenizer at ``tokenizer`` if given, else the embedded one). ``device="auto"`` puts a loaded
    model on CUDA when there is one and keeps the tiny model on the CPU."""
    import torch
    from transformers import AutoTokenizer

    if device == "auto":
        device = "cuda" if model is not None and torch.cuda.is_available() else "cpu"

    tok = AutoTokenizer.from_pretrained(tokenizer) if tokenizer else None
    if model is None:
        if tok is None:
            tok = build_tiny_tokenizer()
        return build_tiny_model(len(tok), seed=seed).to(device), tok, TINY_MODEL_ID
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(model, torch_dtype="auto").to(device)
    lm.eval()
    if tok is None:
        tok = AutoTokenizer.from_pretrained(model)
    return lm, tok, model

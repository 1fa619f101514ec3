"""``grammask demo``: one real constrained decode, offline.

Takes an optional model (``--model``), tokenizer (``--tokenizer``) and grammar (``--grammar``);
by default builds the embedded tiny model (a random Llama over a byte-level BPE trained in memory,
:mod:`grammask.tiny_model`) and the sample Person schema. It compiles the grammar while the
prompt is prefilled, decodes under the masks with the shared loop (:mod:`grammask.serve.decode`,
whose token budget closes the structure in time), and prints the output, whether it is valid,
``grammar_init_s``, ``grammar_per_token_s`` and the model's own time per token.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Tuple

__all__ = ["SAMPLE_SCHEMA", "add_arguments", "demo"]

SAMPLE_SCHEMA = {
    "title": "Person",
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "role": {"enum": ["admin", "user", "guest"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "role"],
    "additionalProperties": False,
}

PROMPT = "Describe one user of our system as JSON with name, age, role, tags and active."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        help="a Hugging Face causal LM directory or hub id (default: the embedded tiny random Llama)",
    )
    p.add_argument(
        "--tokenizer",
        help="a Hugging Face tokenizer directory (default: the model's, or the embedded byte-level BPE)",
    )
    p.add_argument(
        "--grammar",
        help="a .json schema, .ebnf/.gbnf grammar, .lark grammar or .regex file (default: a sample Person schema)",
    )
    p.add_argument(
        "--prompt", default=PROMPT, help="the user message (default: asks for a person as JSON)"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="sampling seed and tiny-model weight seed (default: 0)"
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="token budget, stop token included (default: 256)",
    )
    p.add_argument(
        "--device",
        default="auto",
        help="torch device: auto (CUDA for --model when available, else CPU), cpu, cuda, ... (default: auto)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature; 0 is greedy (default: 1.0)",
    )


def _grammar_source(path: Optional[str]) -> Tuple[str, Any]:
    """(kind, source): kind is json (source: schema), regex, lark or ebnf (source: text)."""
    if path is None:
        return "json", SAMPLE_SCHEMA
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return "json", json.loads(text)
    if path.endswith(".regex"):
        return "regex", text.rstrip("\n")
    if path.endswith(".lark"):
        return "lark", text
    return "ebnf", text


def _compile(compiler: Any, kind: str, source: Any) -> Any:
    if kind == "json":
        return compiler.compile_json_schema(source, any_whitespace=False)
    if kind == "regex":
        return compiler.compile_regex(source)
    if kind == "lark":
        return compiler.compile_lark(source)
    return compiler.compile_grammar(source)


def _check(kind: str, text: str, source: Any, compiled: Any) -> str:
    if kind == "json":
        try:
            value = json.loads(text)
        except ValueError as e:
            return f"no: {e}"
        try:
            import jsonschema
        except ImportError:
            return "yes (valid JSON; install jsonschema to validate against the schema)"
        try:
            jsonschema.validate(value, source)
        except jsonschema.ValidationError as e:
            return f"no: {e.message}"
        return "yes (valid JSON, valid against the schema)"
    from .matcher import GrammarMatcher

    m = GrammarMatcher(compiled, terminate_without_stop_token=True)
    return "yes (accepted by the grammar)" if m.accept_string(text) and m.is_completed() else "no"


def demo(args: argparse.Namespace) -> int:
    if args.max_tokens < 1:
        raise ValueError("--max-tokens must be at least 1")
    kind, source = _grammar_source(args.grammar)  # a missing file fails before the slow imports
    t0 = time.perf_counter()
    try:
        import torch
    except ImportError:
        raise RuntimeError(
            "grammask demo needs the 'serve' extra (pip install 'grammask[serve]')"
        ) from None
    from .compiler import GrammarCompiler
    from .serve.decode import generate, matcher_has_token_budget
    from .serve.engine import TextDecoder
    from .tiny_model import load_model_and_tokenizer
    from .tokenizer_info import TokenizerInfo

    torch.manual_seed(args.seed)
    if args.model is None:  # the tiny model is fastest on one thread (no thread hand-offs per op)
        torch.set_num_threads(1)
    model, tok, model_id = load_model_and_tokenizer(
        args.model, args.tokenizer, seed=args.seed, device=args.device
    )
    info = TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
    load_s = time.perf_counter() - t0
    if getattr(tok, "chat_template", None):
        prompt = tok.apply_chat_template(
            [{"role": "user", "content": args.prompt}], add_generation_prompt=True, tokenize=False
        )
    else:
        prompt = args.prompt + "\n"
    prompt_ids = list(tok(prompt, add_special_tokens=False)["input_ids"])

    compiler = GrammarCompiler(info)
    holder = {}

    def compile_job() -> Any:
        start = time.perf_counter()
        holder["compiled"] = _compile(compiler, kind, source)
        return holder["compiled"], time.perf_counter() - start

    with ThreadPoolExecutor(1) as pool:  # the compile overlaps the prefill, as in the server
        future = pool.submit(compile_job)
        gen = generate(
            model,
            prompt_ids,
            info=info,
            compile_future=future,
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            seed=args.seed,
        )
    text = TextDecoder(info, skip=set(info.special_token_ids) | set(info.stop_token_ids)).decode(
        gen.token_ids
    )
    params = sum(p.numel() for p in model.parameters())
    ratio = (
        gen.grammar_per_token_s / gen.model_per_token_s if gen.model_per_token_s else float("nan")
    )
    budget = (
        "GrammarMatcher(max_tokens=...)"
        if matcher_has_token_budget()
        else "closing fallback (grammask.serve.decode.Closer)"
    )
    print(f"model:     {model_id} ({params / 1e6:.2f}M parameters, loaded in {load_s:.1f} s)")
    print(
        f"tokenizer: {args.tokenizer or ('embedded byte-level BPE' if args.model is None else args.model)} ({info.vocab_size} tokens)"
    )
    print(f"grammar:   {args.grammar or 'sample JSON Schema (Person)'}")
    print(f"output:    {text}")
    print(
        f"finish:    {gen.finish_reason} after {gen.completion_tokens} tokens (budget {args.max_tokens}, {budget}"
        f"{'; budget closing used' if gen.budget_closed else ''})"
    )
    print(
        f"valid:     {_check(kind, text, source, holder['compiled']) if gen.grammar_completed else 'no (the structure could not be closed)'}"
    )
    print(
        f"grammar_init_s:      {gen.grammar_init_s:.6f}  (compile overlapped with a {gen.prefill_s * 1e3:.1f} ms prefill; "
        f"waited {gen.grammar_wait_s * 1e3:.1f} ms after it)"
    )
    print(f"grammar_per_token_s: {gen.grammar_per_token_s:.7f}  (mask fill + mask apply + accept)")
    if not matcher_has_token_budget():
        print(
            f"budget_per_token_s:  {gen.budget_per_token_s:.7f}  (the closing fallback's look-ahead)"
        )
    print(f"model_per_token_s:   {gen.model_per_token_s:.7f}  (forward pass + sampling)")
    print(f"grammar / model:     {ratio:.2f}")
    return 0 if gen.grammar_completed else 1

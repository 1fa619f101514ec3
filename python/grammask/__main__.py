"""Command line: ``grammask demo`` (also ``python -m grammask demo``).

The demo runs offline: it builds a small byte-level tokenizer in memory (or loads a real one with
``--tokenizer DIR``), compiles a sample JSON Schema (or ``--grammar FILE``: ``.json`` schema,
``.ebnf``/``.gbnf`` grammar, ``.regex`` pattern), samples one constrained output from random
logits under the masks, and reports whether it parses, the compile time and the mask times.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List, Optional, Tuple

import numpy as np

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

# Pieces that make the offline vocabulary look like a real one: common JSON and English fragments.
_PIECES = [
    '{"', '"}', '":', '", "', '": "', "true", "false", "null", "name", "age", "role", "tags",
    "active", "admin", "user", "guest", " the", " and", "ing", "er", "on", "an", "is", "12", "00",
    "[]", "{}", ", ", ": ", "\n", "  ", "    ", "\\n", "\\\"", "é", "ü", "€", "日本",
]


def offline_tokenizer_info():
    """A byte-level vocabulary: every single byte, common fragments, and an end-of-text token."""
    from .tokenizer_info import TokenizerInfo, VocabType, _byte_level_alphabet

    alphabet = _byte_level_alphabet()
    tokens = [alphabet[b] for b in range(256)]
    for piece in _PIECES:
        tokens.append("".join(alphabet[b] for b in piece.encode("utf-8")))
    tokens.append("<|endoftext|>")
    eos = len(tokens) - 1
    info = TokenizerInfo(tokens, VocabType.BYTE_LEVEL, stop_token_ids=[eos], special_token_ids=[eos])
    return info, None


def load_tokenizer(path: str):
    start = time.perf_counter()
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise RuntimeError("--tokenizer needs the 'transformers' package (pip install 'grammask[hf]')") from None
    print(f"import transformers: {(time.perf_counter() - start) * 1e3:.0f} ms")
    from .tokenizer_info import TokenizerInfo

    start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(path)
    info = TokenizerInfo.from_huggingface(tok)
    print(f"tokenizer load: {(time.perf_counter() - start) * 1e3:.0f} ms (after importing transformers)")
    return info, tok


def compile_grammar(compiler, path: Optional[str]) -> Tuple[object, str, object]:
    """Returns (compiled grammar, kind, schema or None)."""
    if path is None:
        return compiler.compile_json_schema(SAMPLE_SCHEMA, any_whitespace=False), "json", SAMPLE_SCHEMA
    text = open(path, encoding="utf-8").read()
    if path.endswith(".json"):
        schema = json.loads(text)
        return compiler.compile_json_schema(schema, any_whitespace=False), "json", schema
    if path.endswith(".regex"):
        return compiler.compile_regex(text.rstrip("\n")), "regex", None
    return compiler.compile_grammar(text), "ebnf", None


def sample(compiled, info, rng: np.random.Generator, max_tokens: int) -> Tuple[bytes, List[float], bool]:
    """Samples one output under the masks with random logits. Returns (bytes, mask µs, ended)."""
    from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
    from .matcher import GrammarMatcher

    matcher = GrammarMatcher(compiled)
    bitmask = np.asarray(allocate_token_bitmask(1, info.vocab_size))
    stops = set(matcher.stop_token_ids)
    out = bytearray()
    times: List[float] = []
    decoded = info.decoded_vocab
    for _ in range(max_tokens):
        start = time.perf_counter_ns()
        matcher.fill_next_token_bitmask(bitmask)
        times.append((time.perf_counter_ns() - start) / 1e3)
        logits = rng.standard_normal(info.vocab_size).astype(np.float32)
        for s in stops:  # end when the grammar allows it, like a model that has said enough
            logits[s] += 4.0
        apply_token_bitmask_inplace(logits, bitmask)
        token = int(np.argmax(logits))
        if not matcher.accept_token(token):
            raise RuntimeError(f"the matcher rejected token {token}, which its mask allowed")
        if token in stops:
            return bytes(out), times, True
        out += decoded[token]
    return bytes(out), times, False


def check_output(kind: str, text: bytes, schema, compiled) -> str:
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
            jsonschema.validate(value, schema)
        except jsonschema.ValidationError as e:
            return f"no: {e.message}"
        return "yes (valid JSON, valid against the schema)"
    from .matcher import GrammarMatcher

    m = GrammarMatcher(compiled, terminate_without_stop_token=True)
    return "yes" if m.accept_string(text) and m.is_completed() else "no"


def demo(args: argparse.Namespace) -> int:
    from .compiler import GrammarCompiler

    start = time.perf_counter()
    info, _ = load_tokenizer(args.tokenizer) if args.tokenizer else offline_tokenizer_info()
    tok_s = time.perf_counter() - start
    compiler = GrammarCompiler(info)
    start = time.perf_counter()
    compiled, kind, schema = compile_grammar(compiler, args.grammar)
    compile_ms = (time.perf_counter() - start) * 1e3
    rng = np.random.default_rng(args.seed)
    text, times, ended = sample(compiled, info, rng, args.max_tokens)
    t = np.array(times)
    print(f"tokenizer: {'offline byte-level demo vocabulary' if not args.tokenizer else args.tokenizer} "
          f"({info.vocab_size} tokens, {tok_s * 1e3:.1f} ms)")
    print(f"grammar:   {args.grammar or 'sample JSON Schema (Person)'}")
    print(f"output:    {text.decode('utf-8', errors='replace')}")
    print(f"ended with a stop token: {'yes' if ended else 'no (token budget reached)'}")
    print(f"parses:    {check_output(kind, text, schema, compiled) if ended else 'n/a (not finished)'}")
    print(f"compile:   {compile_ms:.2f} ms")
    print(f"mask:      {len(t)} masks, mean {t.mean():.1f} us, p50 {np.percentile(t, 50):.1f} us, "
          f"p99 {np.percentile(t, 99):.1f} us, max {t.max():.1f} us")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="grammask", description=__doc__.split("\n\n")[0])
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    d = sub.add_parser("demo", help="sample a grammar-constrained output offline")
    d.add_argument("--tokenizer", metavar="DIR",
                   help="a Hugging Face tokenizer directory (default: offline demo vocabulary)")
    d.add_argument("--grammar", metavar="FILE",
                   help="a .json schema, .ebnf/.gbnf grammar or .regex file (default: sample schema)")
    d.add_argument("--seed", type=int, default=0, help="seed of the random logits (default: 0)")
    d.add_argument("--max-tokens", type=int, default=512, metavar="N",
                   help="stop after N tokens if the output has not ended (default: 512)")
    d.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the full traceback of an error")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            return demo(args)
        return 2
    except KeyboardInterrupt:
        print("grammask: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the CLI's one place that turns errors into a line
        if getattr(args, "debug", False):
            raise
        print(f"grammask {args.command}: error: {_one_line(e)} (--debug shows the traceback)", file=sys.stderr)
        return 1


def _one_line(e: BaseException) -> str:
    """An exception as one line: its type when that says something, then its first message line."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if isinstance(e, (FileNotFoundError, IsADirectoryError, PermissionError)) and e.filename:
        return f"{e.strerror}: {e.filename}"
    name = type(e).__name__
    return f"{name}: {msg}" if msg else name


if __name__ == "__main__":
    sys.exit(main())

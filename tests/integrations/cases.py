"""Shared cases of the engine integration tests (run by `.ci/integrations`, one environment per
engine). Each case is a request an engine can send -- its kind, its spec, a valid instance --
and the tests drive the engine's own structured-output classes with it, token by token."""

from __future__ import annotations

import codecs
import json
import re
import time
from dataclasses import dataclass
from functools import cache
from typing import Any, Optional

import grammask as xgr
from grammask.grammar import DEFAULT_MAX_WHITESPACE_CNT

# Real tokenizers, with the model's logits width (Qwen2.5 pads its output layer).
TOKENIZERS = {"llama3": 128256, "qwen2.5": 151936}

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # json, json_object, regex, ebnf, lark, choice, structural_tag
    spec: str
    instance: str
    feature: str = ""  # a grammask feature other branches add ("lark", "structural_tag")


CASES = [
    Case(
        "json",
        "json",
        json.dumps(
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "n": {"type": "integer"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["name", "n"],
            }
        ),
        '{"name": "Ada Lovelace", "n": 1815, "tags": ["math", "\\u00e9"]}',
    ),
    Case(
        "json_object",
        "json_object",
        '{"type": "object"}',
        '{"a": [1, 2.5, null], "b": {"c": true}}',
    ),
    Case("regex", "regex", r"\d{3}-[a-z]+(\.[a-z]{2,3})?", "123-abc.de"),
    Case("ebnf", "ebnf", 'root ::= "yes" | "no" | "maybe " [0-9]+', "maybe 42"),
    Case("choice", "choice", json.dumps(["positive", "negative", "neutral"]), "negative"),
    Case("lark", "lark", 'start: "hello " NAME\nNAME: /[a-z]+/', "hello bob", feature="lark"),
    Case(
        "structural_tag",
        "structural_tag",
        json.dumps(
            {
                "type": "structural_tag",
                "format": {
                    "type": "triggered_tags",
                    "triggers": ["<function="],
                    "tags": [
                        {
                            "type": "tag",
                            "begin": "<function=get_weather>",
                            "content": {"type": "json_schema", "json_schema": WEATHER},
                            "end": "</function>",
                        }
                    ],
                },
            }
        ),
        'Let me check. <function=get_weather>{"city": "Paris"}</function>',
        feature="structural_tag",
    ),
    Case(
        "structural_tag_legacy",
        "structural_tag",
        json.dumps(
            {
                "type": "structural_tag",
                "structures": [
                    {"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"}
                ],
                "triggers": ["<function="],
            }
        ),
        'Sure: <function=get_weather>{"city": "Rome"}</function>',
        feature="structural_tag",
    ),
]

CASE_IDS = [c.name for c in CASES]


@cache
def grammask_supports(feature: str) -> bool:
    """Whether this grammask build compiles ``feature`` (Lark and structural tags land from other
    branches; until then grammask raises UnsupportedFeatureError)."""
    info = xgr.TokenizerInfo([b"a", b"b", b"</s>"], stop_token_ids=[2])
    compiler = xgr.GrammarCompiler(info)
    try:
        if feature == "lark":
            compiler.compile_lark('start: "a"')
        elif feature == "structural_tag":
            compiler.compile_structural_tag(
                json.dumps(
                    {"type": "structural_tag", "format": {"type": "const_string", "value": "a"}}
                )
            )
        else:
            return True
    except (xgr.UnsupportedFeatureError, AttributeError, NotImplementedError):
        return False
    return True


def xfail_unless_supported(case: Case) -> None:
    """Lark and structural tags are part of grammask: a case whose feature is refused fails."""
    if case.feature:
        assert grammask_supports(case.feature), f"grammask refuses the {case.feature} case {case.name!r}"


@cache
def hf_tokenizer(family: str) -> Any:
    import transformers

    from conftest import tokenizer_dir  # the repository's tests/conftest.py

    return transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir(family)))


def tokens_for(tok: Any, info: xgr.TokenizerInfo, text: str) -> list:
    """Real token ids spelling ``text`` exactly (the tokenizer's own when they do)."""
    from conftest import tokenize

    return tokenize(tok, info, text)


def bit(mask_row: Any, token: int) -> bool:
    return bool((int(mask_row[token // 32]) >> (token % 32)) & 1)


def first_disallowed(mask_row: Any, vocab_size: int, avoid: set) -> int:
    for t in range(vocab_size):
        if t not in avoid and not bit(mask_row, t):
            return t
    raise AssertionError("every token is allowed")


class Timer:
    """Accumulates seconds spent in a block; ``per(n)`` in microseconds."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def __enter__(self) -> "Timer":
        self._t = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.total += time.perf_counter() - self._t
        self.count += 1

    def per_us(self) -> float:
        return 1e6 * self.total / max(1, self.count)


WS_RUN = re.compile(rb"[ \t\n\r]+")
SHORT_ESCAPED = {0x08, 0x09, 0x0A, 0x0C, 0x0D}  # \\b \\t \\n \\f \\r
ESCAPE = re.compile(rb"\\(u[0-9a-fA-F]{0,4}|.|$)", re.S)


def canonical_refuses(text: bytes) -> Optional[str]:
    """Why canonical spelling refuses ``text`` (a prefix of a JSON text) where XGrammar's
    any-spelling JSON allows it, or None: a whitespace run over the default bound, the escape
    ``\\/``, a ``\\u`` escape that can only spell printable ASCII or a character with a short
    escape (``\\b \\t \\n \\f \\r``), or a lone surrogate."""
    if any(len(m.group()) > DEFAULT_MAX_WHITESPACE_CNT for m in WS_RUN.finditer(text)):
        return "whitespace run over the bound"
    prev_high = False
    for m in ESCAPE.finditer(text):
        e = m.group(1)
        if e == b"/":
            return "escape \\/"
        if e.startswith(b"u"):
            digits = e[1:].decode()
            lo, hi = int(digits.ljust(4, "0"), 16), int(digits.ljust(4, "f"), 16)
            if all(0x20 <= c <= 0x7E or c in SHORT_ESCAPED for c in range(lo, hi + 1)):
                return "\\u escape of printable ASCII or of a character with a short escape"
            if 0xDC00 <= lo and hi <= 0xDFFF and not prev_high:
                return "lone low surrogate"
            prev_high = len(digits) == 4 and 0xD800 <= lo <= 0xDBFF
            rest = text[m.end() : m.end() + 2]
            if prev_high and rest and not b"\\u".startswith(rest):
                return "lone high surrogate"
        else:
            prev_high = False
    return None


def json_difference(prefix: bytes, token: bytes, ours: bool, their_compiled: Any) -> str:
    """Classify one token on which grammask's and XGrammar's JSON masks differ after ``prefix``:
    ``ours`` says grammask allows it; ``their_compiled`` is XGrammar's compiled grammar."""
    if ours:  # only grammask allows it: whitespace around the root value or a tagged region
        if not token.strip():
            return "whitespace at a root or region boundary"
        import xgrammar

        text = prefix + token
        # without the whitespace before a root value (nothing but whitespace before it) and after
        # a value or region (at the token's end), XGrammar accepts the same text
        trimmed = (text.lstrip() if not prefix.strip() else text).rstrip()
        if trimmed != text and xgrammar.GrammarMatcher(their_compiled).accept_string(trimmed):
            return "whitespace at a root or region boundary"
        return "unexplained"
    text = prefix + token
    try:  # grammask's JSON text is valid UTF-8 (XGrammar's strings take bytes such as b"\xc0")
        codecs.getincrementaldecoder("utf-8")().decode(text, final=False)
    except UnicodeDecodeError:
        return "not valid UTF-8"
    return canonical_refuses(text) or "unexplained"


def unexplained_mask_differences(
    kind: str, ours: Any, theirs: Any, n: int, decoded: list, prefix: bytes, ignore: set,
    special: set, their_compiled: Any, reasons: dict,
) -> list:
    """Token ids on which grammask's mask row ``ours`` and XGrammar's ``theirs`` differ after the
    text ``prefix`` and that no documented difference explains; explained JSON differences are
    counted into ``reasons`` (reason -> tokens). ``ignore``: ids compared apart (stop tokens).

    Explained: special and added tokens, never grammar text in grammask (README); in structural
    tags, tokens that are not UTF-8, which grammask's free text refuses (docs/structural_tags.md);
    in JSON, each case of :func:`json_difference`, checked on the text."""
    import torch

    words = torch.nonzero(ours != theirs).flatten().tolist()
    differing = [
        i for w in words for i in range(w * 32, min(n, w * 32 + 32)) if bit(ours, i) != bit(theirs, i)
    ]
    left = [i for i in differing if i not in ignore and (bit(ours, i) or i not in special)]
    if kind.startswith("structural_tag"):
        left = [i for i in left if bit(ours, i) or _is_utf8(decoded[i])]
    if left and (kind in ("json", "json_object") or kind.startswith("structural_tag")):
        why = {i: json_difference(prefix, decoded[i], bit(ours, i), their_compiled) for i in left}
        for r in why.values():
            reasons[r] = reasons.get(r, 0) + 1
        left = [i for i, r in why.items() if r == "unexplained"]
    return left


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False

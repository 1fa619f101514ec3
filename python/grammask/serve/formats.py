"""OpenAI ``response_format`` to a grammar: validation, a canonical cache key, and the compile call.

Takes the request's ``response_format`` object; produces a :class:`GrammarSpec` (or None for plain
text) whose ``key`` identifies the compiled grammar in the engine's cache and whose ``compile``
runs on a ``GrammarCompiler`` in a worker thread. Malformed formats raise
:class:`~grammask.serve.tools.RequestError` (HTTP 400) here; schemas and grammars the compiler
rejects raise grammask errors at compile time, which the engine turns into 400 as well.

Accepted: ``text``; ``json_object`` (any JSON object, or ``schema`` as an object or a JSON string,
as web-llm and llama.cpp send it); ``json_schema`` (OpenAI: ``json_schema.{name, schema, strict}``;
``strict`` is accepted and ignored, as in vLLM: output always follows the schema); ``grammar``
(EBNF; Lark when ``syntax`` is ``"lark"`` or the text starts with a ``%llguidance``/``%lark``
marker or has no ``::=`` but a Lark ``start:`` rule); ``regex`` (``pattern``); ``structural_tag``
(XGrammar's ``format`` tree, the legacy ``structures``/``triggers``, or web-llm's
``structural_tag`` field).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..exception import UnsupportedFeatureError
from .tools import RequestError, compile_structural_tag

__all__ = ["GrammarSpec", "grammar_spec", "is_lark"]

_LARK_START = re.compile(r"^\s*[?!]?start\s*:", re.M)


@dataclass(frozen=True)
class GrammarSpec:
    key: str  # canonical: equal formats give equal keys
    kind: str  # json | ebnf | lark | regex | structural_tag | tools
    compile: Callable[[Any], Any]  # GrammarCompiler -> CompiledGrammar
    schema: Any = None  # the JSON Schema, for callers that validate output


def _key(kind: str, source: Any) -> str:
    return (
        kind + ":" + json.dumps(source, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    )


def is_lark(text: str, syntax: Optional[str] = None) -> bool:
    if syntax is not None:
        return syntax.lower() == "lark"
    head = text.lstrip()
    if head.startswith(("%llguidance", "%lark")):
        return True
    return "::=" not in text and bool(_LARK_START.search(text))


def _schema_from(value: Any, param: str) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise RequestError(f"{param} is not valid JSON: {e}", param) from None
    if not isinstance(value, (dict, bool)):
        raise RequestError(f"{param} must be a JSON Schema (an object or a boolean)", param)
    return value


def _json_spec(schema: Any) -> GrammarSpec:
    return GrammarSpec(
        _key("json", schema),
        "json",
        lambda compiler: compiler.compile_json_schema(schema, any_whitespace=False),
        schema,
    )


def _compile_lark(compiler: Any, text: str) -> Any:
    try:
        return compiler.compile_lark(text)
    except UnsupportedFeatureError:
        raise RequestError(
            "Lark grammars are not supported by this build; send EBNF", "response_format.grammar"
        ) from None


def grammar_spec(response_format: Any) -> Optional[GrammarSpec]:
    """The grammar a ``response_format`` asks for; None for plain text."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise RequestError("response_format must be an object with a 'type'", "response_format")
    kind = response_format.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        if response_format.get("schema") is None:
            return _json_spec({"type": "object"})
        return _json_spec(_schema_from(response_format["schema"], "response_format.schema"))
    if kind == "json_schema":
        js = response_format.get("json_schema")
        if not isinstance(js, dict):
            raise RequestError(
                "response_format.json_schema must be an object with 'name' and 'schema'",
                "response_format.json_schema",
            )
        name = js.get("name")
        if name is not None and not (
            isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name)
        ):
            raise RequestError(
                "response_format.json_schema.name must match [a-zA-Z0-9_-]{1,64}",
                "response_format.json_schema.name",
            )
        schema = js.get("schema", js.get("json_schema"))
        if schema is None:
            raise RequestError(
                "response_format.json_schema.schema is required",
                "response_format.json_schema.schema",
            )
        return _json_spec(_schema_from(schema, "response_format.json_schema.schema"))
    if kind == "grammar":
        text = response_format.get("grammar")
        if not isinstance(text, str) or not text.strip():
            raise RequestError(
                "response_format.grammar must be a non-empty grammar string",
                "response_format.grammar",
            )
        syntax = response_format.get("syntax")
        if syntax is not None and syntax not in ("ebnf", "lark", "gbnf"):
            raise RequestError(
                f"response_format.syntax must be 'ebnf' or 'lark', got {syntax!r}",
                "response_format.syntax",
            )
        if is_lark(text, syntax if syntax != "gbnf" else "ebnf"):
            return GrammarSpec(_key("lark", text), "lark", lambda c: _compile_lark(c, text))
        return GrammarSpec(_key("ebnf", text), "ebnf", lambda c: c.compile_grammar(text))
    if kind == "regex":
        pattern = response_format.get("pattern", response_format.get("regex"))
        if not isinstance(pattern, str):
            raise RequestError(
                "response_format.pattern must be a regex string", "response_format.pattern"
            )
        return GrammarSpec(_key("regex", pattern), "regex", lambda c: c.compile_regex(pattern))
    if kind == "structural_tag":
        payload = {k: v for k, v in response_format.items() if k != "type"}
        if not payload:
            raise RequestError("response_format.structural_tag needs a 'format'", "response_format")
        return GrammarSpec(
            _key("structural_tag", payload),
            "structural_tag",
            lambda c: compile_structural_tag(c, response_format),
        )
    raise RequestError(
        f"response_format.type {kind!r} is not one of text, json_object, json_schema, grammar, regex, structural_tag",
        "response_format.type",
    )

"""The adapter between the server and structural tags: OpenAI ``tools``/``tool_choice`` to a
grammar, the model's output back to OpenAI ``tool_calls``, and ``response_format`` structural tags.

When ``grammask.structural_tag.get_model_structural_tag`` and a working
``GrammarCompiler.compile_structural_tag`` exist (XGrammar 0.2.8's names), they are used: the
model family's built-in tag constrains the output. Until then this module builds the grammar itself
for one generic format, Hermes/Qwen style::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

(an ``anyOf`` of one schema per tool, free text before the first call for ``"auto"``). Both
paths parse the output with :func:`parse_tool_calls`. ``structural_tag`` response formats compile
with the library's ``compile_structural_tag`` (:func:`compile_structural_tag`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ..grammar import Grammar

__all__ = [
    "TOOL_FORMATS",
    "RequestError",
    "compile_structural_tag",
    "normalize_tool_choice",
    "parse_tool_calls",
    "tool_grammar",
]

#: ``--tool-format`` values; "auto" takes the family from the chat template / model name.
TOOL_FORMATS = ("auto", "hermes", "qwen", "llama")
_CALL_BEGIN, _CALL_END = "<tool_call>\n", "\n</tool_call>"


class RequestError(ValueError):
    """A client error: becomes HTTP 400 with an OpenAI-style error body."""

    def __init__(
        self, message: str, param: Optional[str] = None, code: str = "invalid_request_error"
    ):
        super().__init__(message)
        self.message, self.param, self.code = message, param, code


def _library_structural_tags() -> Any:
    """``grammask.structural_tag`` when it provides ``get_model_structural_tag``, else None."""
    try:
        from .. import structural_tag  # type: ignore[attr-defined]
    except ImportError:
        return None
    return structural_tag if hasattr(structural_tag, "get_model_structural_tag") else None


def normalize_tool_choice(
    tools: Optional[List[Dict[str, Any]]], tool_choice: Any
) -> Tuple[str, List[Dict[str, Any]]]:
    """("none"|"auto"|"required", the function definitions to allow). Raises RequestError."""
    functions = []
    for i, tool in enumerate(tools or []):
        if (
            not isinstance(tool, dict)
            or tool.get("type", "function") != "function"
            or not isinstance(tool.get("function"), dict)
        ):
            raise RequestError(
                f"tools[{i}] must be {{'type': 'function', 'function': {{...}}}}", f"tools[{i}]"
            )
        fn = tool["function"]
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RequestError(
                f"tools[{i}].function.name must be a non-empty string", f"tools[{i}].function.name"
            )
        params = fn.get("parameters", {"type": "object"})
        if not isinstance(params, (dict, bool)):
            raise RequestError(
                f"tools[{i}].function.parameters must be a JSON Schema object",
                f"tools[{i}].function.parameters",
            )
        functions.append(fn)
    if tool_choice is None:
        tool_choice = "auto" if functions else "none"
    if isinstance(tool_choice, str):
        if tool_choice not in ("none", "auto", "required"):
            raise RequestError(
                f"tool_choice must be 'none', 'auto', 'required' or a named function, got {tool_choice!r}",
                "tool_choice",
            )
        if tool_choice != "none" and not functions:
            raise RequestError(
                f"tool_choice {tool_choice!r} needs a non-empty 'tools' list", "tool_choice"
            )
        return tool_choice, functions
    if isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
        name = tool_choice["function"].get("name")
        chosen = [fn for fn in functions if fn["name"] == name]
        if not chosen:
            raise RequestError(
                f"tool_choice names function {name!r}, which is not in 'tools'", "tool_choice"
            )
        return "required", chosen[:1]
    raise RequestError(
        "tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}",
        "tool_choice",
    )


def _call_schema(functions: List[Dict[str, Any]]) -> Dict[str, Any]:
    variants = []
    for fn in functions:
        params = fn.get("parameters", {"type": "object"})
        if fn.get("strict") is False:
            params = {"type": "object"}
        variants.append(
            {
                "type": "object",
                "properties": {"name": {"const": fn["name"]}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def tool_grammar(
    functions: List[Dict[str, Any]], mode: str, *, model_family: str, parallel: bool = True
) -> Tuple[str, Any]:
    """(cache key, a function of a GrammarCompiler that compiles the tool-call grammar) for
    ``mode`` "auto" or "required" (a named choice is "required" over one function)."""
    lib = _library_structural_tags()
    key = json.dumps(
        {"tools": functions, "mode": mode, "family": model_family, "parallel": parallel},
        sort_keys=True,
    )
    if lib is not None and model_family not in ("hermes", "qwen"):

        def compile_lib(compiler: Any) -> Any:
            tag = lib.get_model_structural_tag(
                model_family,
                tools=[{"type": "function", "function": fn} for fn in functions],
                tool_choice=mode,
                parallel_tool_calls=parallel,
            )
            return compiler.compile_structural_tag(tag)

        return "lib:" + key, compile_lib

    schema = _call_schema(functions)

    def compile_generic(compiler: Any) -> Any:
        json_ebnf = Grammar.from_json_schema(schema, any_whitespace=False).to_string()
        calls = 'gmtool_call ("\\n" gmtool_call)*' if parallel else "gmtool_call"
        begin, end = json.dumps(_CALL_BEGIN), json.dumps(_CALL_END)
        rules = [f"gmtool_call ::= {begin} root {end}"]
        if mode == "auto":
            rules.append(f"gmtool_root ::= gmtool_text ({calls})?")
            rules.append("gmtool_text ::= [^<]*")
        else:
            rules.append(f"gmtool_root ::= {calls}")
        return compiler.compile_grammar(
            json_ebnf + "\n" + "\n".join(rules) + "\n", root_rule_name="gmtool_root"
        )

    return "generic:" + key, compile_generic


def parse_tool_calls(text: str) -> Tuple[Optional[str], List[Dict[str, Any]]]:
    """Split generated text into (content before the calls or None, OpenAI ``tool_calls``)."""
    decoder = json.JSONDecoder()
    calls: List[Dict[str, Any]] = []
    start = text.find("<tool_call>")
    content = text if start < 0 else text[:start]
    pos = start
    while pos >= 0:
        body = pos + len("<tool_call>")
        while body < len(text) and text[body].isspace():
            body += 1
        try:
            value, end = decoder.raw_decode(text, body)
        except ValueError:
            break
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            args = value.get("arguments", value.get("parameters", {}))
            calls.append(
                {
                    "id": "call_" + uuid.uuid4().hex[:24],
                    "type": "function",
                    "function": {
                        "name": value["name"],
                        "arguments": json.dumps(args, ensure_ascii=False),
                    },
                }
            )
        pos = text.find("<tool_call>", end)
    content = content.strip()
    return (content or None), calls


# ----------------------------------------------------------------------------- structural tags


def compile_structural_tag(compiler: Any, response_format: Dict[str, Any]) -> Any:
    """Compile a ``{"type": "structural_tag", ...}`` response format with the library's
    ``compile_structural_tag``: XGrammar's ``format`` tree, the legacy
    ``{"structures": [{"begin", "schema", "end"}], "triggers": [...]}`` form, or web-llm's
    ``structural_tag`` field (a tree as an object or JSON text)."""
    payload = {k: v for k, v in response_format.items() if k != "structural_tag"}
    if isinstance(response_format.get("structural_tag"), (dict, str)):  # web-llm's shape
        inner = response_format["structural_tag"]
        payload = json.loads(inner) if isinstance(inner, str) else dict(inner)
    if "structures" in payload and "format" not in payload:
        from ..structural_tag import StructuralTagItem

        try:
            items = [StructuralTagItem(begin=s["begin"], schema=s["schema"], end=s["end"]) for s in payload["structures"]]
            triggers = list(payload.get("triggers", []))
        except (KeyError, TypeError) as e:
            raise RequestError(f"response_format.structures: each item needs begin, schema and end ({e})", "response_format") from None
        return compiler.compile_structural_tag(items, triggers)
    return compiler.compile_structural_tag(payload)



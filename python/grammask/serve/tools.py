"""The adapter between the server and structural tags: OpenAI ``tools``/``tool_choice`` to a
grammar, the model's output back to OpenAI ``tool_calls``, and ``response_format`` structural tags.

When ``grammask.structural_tag.get_model_structural_tag`` and a working
``GrammarCompiler.compile_structural_tag`` exist (XGrammar 0.2.8's names), they are used: the
model family's built-in tag constrains the output. Until then this module builds the grammar itself
for one generic format, Hermes/Qwen style::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

(an ``anyOf`` of one schema per tool, free text before the first call for ``"auto"``), and turns a
``structural_tag`` response format into EBNF for the common node types (see
:func:`structural_tag_to_ebnf`). Both paths parse the output with :func:`parse_tool_calls`.
Switching to the library's structural tags is a change to :func:`tool_grammar` and
:func:`compile_structural_tag` only.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ..exception import UnsupportedFeatureError
from ..grammar import Grammar

__all__ = [
    "TOOL_FORMATS",
    "RequestError",
    "compile_structural_tag",
    "normalize_tool_choice",
    "parse_tool_calls",
    "structural_tag_to_ebnf",
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
    """Compile a ``{"type": "structural_tag", ...}`` response format: the library's
    ``compile_structural_tag`` when this build has it, else :func:`structural_tag_to_ebnf`."""
    payload = {k: v for k, v in response_format.items() if k != "structural_tag"}
    if isinstance(response_format.get("structural_tag"), (dict, str)):  # web-llm's shape
        inner = response_format["structural_tag"]
        payload = json.loads(inner) if isinstance(inner, str) else dict(inner)
    try:
        return compiler.compile_structural_tag(payload)
    except UnsupportedFeatureError:
        pass
    return compiler.compile_grammar(structural_tag_to_ebnf(payload), root_rule_name="gmst_root")


class _StructuralTagEbnf:
    """Converts a structural tag tree to EBNF rules. Subset: const_string, json_schema (style
    "json"), grammar, regex, any_text, sequence, or, optional, plus, star, tag, triggered_tags,
    tags_with_separator, and the legacy ``structures``/``triggers`` form. ``any_text`` and the free
    text of ``triggered_tags`` exclude the first character of what ends them (an approximation
    of the library's exact exclusion until ``grammask.structural_tag`` lands)."""

    def __init__(self) -> None:
        self.rules: List[str] = []
        self.n = 0

    def _fresh(self, body: str) -> str:
        self.n += 1
        name = f"gmst_{self.n}"
        self.rules.append(f"{name} ::= {body}")
        return name

    def _embed(self, ebnf: str, root: str = "root") -> str:
        """Embed a whole grammar, renaming its rules with a fresh prefix."""
        import re

        grammar = Grammar.from_ebnf(ebnf, root_rule_name=root).to_string()
        self.n += 1
        prefix = f"gmst{self.n}_"
        names = re.findall(r"^([A-Za-z_][A-Za-z0-9_.\-]*)\s*(?:\(|::=)", grammar, flags=re.M)
        out_lines = []
        for line in grammar.splitlines():
            out_lines.append(_rename_outside_strings(line, set(names), prefix))
        self.rules.extend(out_lines)
        return prefix + root

    def node(self, fmt: Any, end_hint: str = "") -> str:
        if not isinstance(fmt, dict) or "type" not in fmt:
            raise RequestError(
                "structural tag: each format must be an object with a 'type'", "response_format"
            )
        t = fmt["type"]
        if t == "const_string":
            return self._fresh(json.dumps(str(fmt["value"])))
        if t == "json_schema":
            if fmt.get("style", "json") != "json":
                raise RequestError(
                    f"structural tag: json_schema style {fmt['style']!r} is not supported by this build",
                    "response_format",
                )
            schema = fmt.get("json_schema", True)
            return self._embed(Grammar.from_json_schema(schema, any_whitespace=False).to_string())
        if t == "grammar":
            return self._embed(fmt["grammar"])
        if t == "regex":
            return self._embed(Grammar.from_regex(fmt["pattern"]).to_string())
        if t == "any_text":
            stop = end_hint[:1]
            return self._fresh(f"[^{_char_class_escape(stop)}]*" if stop else "[^\\x00]*")
        if t in ("sequence", "or"):
            parts = [
                self.node(e, end_hint if i == len(fmt["elements"]) - 1 else "")
                for i, e in enumerate(fmt["elements"])
            ]
            if not parts:
                raise RequestError(
                    f"structural tag: {t} needs at least one element", "response_format"
                )
            return self._fresh((" " if t == "sequence" else " | ").join(parts))
        if t in ("optional", "plus", "star"):
            inner = self.node(fmt["content"], end_hint)
            return self._fresh(inner + {"optional": "?", "plus": "+", "star": "*"}[t])
        if t == "tag":
            end = fmt["end"]
            ends = end if isinstance(end, list) else [end]
            if not all(isinstance(e, str) for e in ends) or not isinstance(fmt.get("begin"), str):
                raise RequestError(
                    "structural tag: token begin/end are not supported by this build",
                    "response_format",
                )
            content = self.node(fmt["content"], ends[0])
            end_alt = " | ".join(json.dumps(e) for e in ends) or '""'
            return self._fresh(f"{json.dumps(fmt['begin'])} {content} ({end_alt})")
        if t == "triggered_tags":
            tags = [self.node(tag) for tag in fmt["tags"]]
            firsts = "".join(sorted({tr[:1] for tr in fmt.get("triggers", []) if tr}))
            text = self._fresh(f"[^{_char_class_escape(firsts)}]*" if firsts else '""')
            one = self._fresh(" | ".join(tags))
            if fmt.get("stop_after_first"):
                body = f"{text} {one}" if fmt.get("at_least_one") else f"{text} {one}?"
            elif fmt.get("at_least_one"):
                body = f"{text} ({one} {text})+"
            else:
                body = f"{text} ({one} {text})*"
            return self._fresh(body)
        if t == "tags_with_separator":
            one = self._fresh(" | ".join(self.node(tag) for tag in fmt["tags"]))
            sep = json.dumps(fmt.get("separator", ""))
            if fmt.get("stop_after_first"):
                return self._fresh(one if fmt.get("at_least_one") else f"{one}?")
            many = f"{one} ({sep} {one})*"
            return self._fresh(many if fmt.get("at_least_one") else f"({many})?")
        raise RequestError(
            f"structural tag: format type {t!r} is not supported by this build", "response_format"
        )


def _char_class_escape(chars: str) -> str:
    return "".join("\\" + c if c in "\\]^-[" else c for c in chars)


def _rename_outside_strings(line: str, names: "set[str]", prefix: str) -> str:
    """Prefix every rule name in an EBNF line, leaving string literals and classes alone."""
    import re

    out, i = [], 0
    while i < len(line):
        c = line[i]
        if c in '"[':
            close = '"' if c == '"' else "]"
            j = i + 1
            while j < len(line) and line[j] != close:
                j += 2 if line[j] == "\\" else 1
            out.append(line[i : j + 1])
            i = j + 1
            continue
        m = re.match(r"[A-Za-z_][A-Za-z0-9_.\-]*", line[i:])
        if m:
            word = m.group(0)
            out.append(prefix + word if word in names else word)
            i += len(word)
            continue
        out.append(c)
        i += 1
    return "".join(out)


def structural_tag_to_ebnf(payload: Dict[str, Any]) -> str:
    """EBNF (root rule ``gmst_root``) for a structural tag: ``{"format": {...}}`` or the legacy
    ``{"structures": [{"begin", "schema", "end"}], "triggers": [...]}``."""
    conv = _StructuralTagEbnf()
    try:
        if "format" in payload:
            root = conv.node(payload["format"])
        elif "structures" in payload:
            tags = [
                {
                    "type": "tag",
                    "begin": s["begin"],
                    "end": s["end"],
                    "content": {
                        "type": "json_schema",
                        "json_schema": s.get("schema", s.get("schema_", True)),
                    },
                }
                for s in payload["structures"]
            ]
            root = conv.node(
                {
                    "type": "triggered_tags",
                    "triggers": payload.get("triggers", []),
                    "tags": tags,
                    "at_least_one": bool(payload.get("at_least_one", False)),
                }
            )
        else:
            raise RequestError(
                "structural_tag needs 'format' (or legacy 'structures' and 'triggers')",
                "response_format",
            )
    except (KeyError, TypeError) as e:
        raise RequestError(
            f"malformed structural tag: missing or wrong field {e}", "response_format"
        ) from None
    return "\n".join([f"gmst_root ::= {root}"] + conv.rules) + "\n"

"""XML parameter layouts of ``JSONSchemaFormat`` (tool arguments written as tagged parameters).

Takes a JSON Schema and a style, produces EBNF text (root ``root``) for
:mod:`grammask._structural_tag_lower`. Implemented: ``qwen_xml``
(``<parameter=key>value</parameter>``: Qwen3-Coder, Qwen3.5, MiMo), ``minimax_xml``
(``<parameter name="key">value</parameter>``), ``glm_xml``
(``<arg_key>key</arg_key><arg_value>value</arg_value>``) and ``deepseek_xml``
(``<｜DSML｜parameter name="key" string="true|false">value</｜DSML｜parameter>``). A string-typed
property is raw text that cannot contain the closing marker; any other value is JSON. Whitespace between parameters is
bounded by ``max_whitespace_cnt`` (the built-in model tags set a bound by default), so an object with
no properties cannot loop on whitespace. The other styles raise :class:`UnsupportedFeatureError`.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Union

from . import _core
from .exception import InvalidStructuralTagError, UnsupportedFeatureError
from .grammar import schema_options

__all__ = ["QWEN_PARAM_END", "XML_STYLES", "xml_style_ebnf"]

QWEN_PARAM_END = "</parameter>"
_DSML = "｜DSML｜"

# style -> (opening text before the key, opening text after the key given whether the value is a
# raw string, closing marker). The key itself sits between the two opening parts.
XML_STYLES = {
    "qwen_xml": ("<parameter=", lambda raw: ">", "</parameter>"),
    "minimax_xml": ('<parameter name="', lambda raw: '">', "</parameter>"),
    "glm_xml": ("<arg_key>", lambda raw: "</arg_key>\x00<arg_value>", "</arg_value>"),
    "deepseek_xml": (
        f'<{_DSML}parameter name="',
        lambda raw: f'" string="{"true" if raw else "false"}">',
        f"</{_DSML}parameter>",
    ),
    "deepseek_v4_1_xml": (
        f'<{_DSML} parameter name="',
        lambda raw: f'" string="{"true" if raw else "false"}">',
        f"</{_DSML} parameter>",
    ),
}


def _ws(max_ws: Optional[int]) -> str:
    return "[ \\n\\r\\t]*" if max_ws is None else f"[ \\n\\r\\t]{{0,{max_ws}}}"


def _is_plain_string(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    t = schema.get("type")
    return t == "string" and not any(k in schema for k in ("enum", "const", "pattern", "format"))


def _is_string_enum(schema: Any) -> bool:
    return (
        isinstance(schema, dict)
        and schema.get("type") == "string"
        and ("enum" in schema or "const" in schema)
    )


def xml_style_ebnf(
    schema: Union[bool, Dict[str, Any]], style: str, any_order: bool, max_ws: Optional[int]
) -> str:
    if style not in XML_STYLES:
        raise UnsupportedFeatureError(
            f"json_schema style {style!r} is not supported yet (supported: 'json', {', '.join(map(repr, XML_STYLES))})"
        )
    open_pre, open_post, close = XML_STYLES[style]
    from ._structural_tag_lower import _Lowerer, _rename_rules, ebnf_literal

    lw = _Lowerer()
    ws = _ws(max_ws)
    raw_text = lw.text([close])
    defs = {
        k: schema[k] for k in ("$defs", "definitions") if isinstance(schema, dict) and k in schema
    }

    def value(sub: Any) -> str:
        if _is_plain_string(sub):
            return raw_text
        if (
            isinstance(sub, dict)
            and sub.get("type") == "string"
            and ("enum" in sub or "const" in sub)
        ):
            vals = sub.get("enum", [sub.get("const")])
            strs = [v for v in vals if isinstance(v, str)]
            if strs:
                return "(" + " | ".join(ebnf_literal(v) for v in strs) + ")"
        full = dict(sub) if isinstance(sub, dict) else sub
        if isinstance(full, dict):
            for k, v in defs.items():
                full.setdefault(k, v)
        opts = schema_options(True, None, None, True, max_ws, any_order)
        ebnf = _core.Grammar.json_schema_to_ebnf(json.dumps(full), opts)
        return f"{ws} {lw.add_ebnf(ebnf, 'xv')} {ws}"

    def param(key_expr: str, val: str, raw: bool) -> str:
        # glm_xml allows whitespace between </arg_key> and <arg_value> (the \x00 mark).
        post = " ".join(ebnf_literal(part) for part in open_post(raw).split("\x00"))
        post = post.replace('" "', f'" {ws} "', 1) if "\x00" in open_post(raw) else post
        return f"{ws} {ebnf_literal(open_pre)} {key_expr} {post} {val} {ebnf_literal(close)}"

    if schema is True or (isinstance(schema, dict) and "properties" not in schema):
        if isinstance(schema, dict) and schema.get("type") not in (None, "object"):
            raise InvalidStructuralTagError(
                f"{style} arguments must be described by an object schema"
            )
        name = "[a-zA-Z_] [a-zA-Z0-9_]*"
        body = f"({param(name, raw_text, True)})* {ws}"
    elif isinstance(schema, dict):
        props: Dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        parts: List[str] = []
        for key, sub in props.items():
            p = param(ebnf_literal(key), value(sub), _is_plain_string(sub) or _is_string_enum(sub))
            parts.append(p if key in required else f"({p})?")
        body = " ".join(parts + [ws]) if parts else ws
    else:
        raise InvalidStructuralTagError(
            f"the json_schema of a {style} format must be an object schema or true"
        )
    lines = [f"root ::= {body}"]
    for rule_name, rule_body in lw.rules:
        lines.append(rule_body if not rule_name else f"{rule_name} ::= {rule_body}")
    _ = _rename_rules  # the caller renames this text as a whole
    return "\n".join(lines) + "\n"

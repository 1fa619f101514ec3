"""XML parameter layouts of ``JSONSchemaFormat`` (tool arguments written as tagged parameters).

Takes a JSON Schema and a style, produces EBNF text (root ``root``) for
:mod:`grammask._structural_tag_lower`. Implemented: ``qwen_xml``
(``<parameter=key>value</parameter>``: Qwen3-Coder, Qwen3.5, MiMo), ``minimax_xml``
(``<parameter name="key">value</parameter>``), ``glm_xml``
(``<arg_key>key</arg_key><arg_value>value</arg_value>``) and ``deepseek_xml``
(``<｜DSML｜parameter name="key" string="true|false">value</｜DSML｜parameter>``) and ``kimi_k3_xml``
(``<|open|>argument key="key" type="type"<|sep|>value<|close|>argument<|sep|>``). A string-typed
property is raw text that cannot contain the closing marker; any other value is JSON. Whitespace between parameters is
bounded by ``max_whitespace_cnt`` (the built-in model tags set a bound by default), so an object with
no properties cannot loop on whitespace. ``minimax_m3_xml`` (``]<]minimax[>[<key>value]<]minimax[>[</key>``)
and ``cohere_xml`` (``<cofl:value name="key" type="raw|json|dict|list">value</cofl:value>``) nest
objects and arrays as XML too (:func:`_nested_xml_ebnf`). ``any_order`` lets the flat styles take
properties in any order; ``excludes`` filter raw string values and string enum alternatives.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Union

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
    # Kimi-K3: the type name of the value follows the key (see _kimi_type).
    "kimi_k3_xml": (
        '<|open|>argument key="',
        lambda raw: '" type="\x01"<|sep|>',
        "<|close|>argument<|sep|>",
    ),
    "deepseek_v4_1_xml": (
        f'<{_DSML} parameter name="',
        lambda raw: f'" string="{"true" if raw else "false"}">',
        f"</{_DSML} parameter>",
    ),
}


def _ws(max_ws: Optional[int]) -> str:
    return "[ \\n\\r\\t]*" if max_ws is None else f"[ \\n\\r\\t]{{0,{max_ws}}}"


_KIMI_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")


def _kimi_type(schema: Any) -> str:
    """The ``type="..."`` attribute of a Kimi-K3 argument: the schema's type (integers are
    written as "number"), or any type name when the schema names no single type."""
    t = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(t, str) and t in _KIMI_TYPES:
        return '"number"' if t == "integer" else f'"{t}"'
    return "(" + " | ".join(f'"{n}"' for n in _KIMI_TYPES) + ")"


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


_MM3 = "]<]minimax[>["
_COHERE_CLOSE = "</cofl:value>"
#: Styles whose nested objects and arrays are written as XML too (not as JSON).
NESTED_STYLES = ("minimax_m3_xml", "cohere_xml")


def _schema_type(sub: Any) -> Optional[str]:
    if not isinstance(sub, dict):
        return None
    t = sub.get("type")
    if isinstance(t, str):
        return t
    if "properties" in sub:
        return "object"
    if "items" in sub:
        return "array"
    return None


def _nested_xml_ebnf(schema: Union[bool, Dict[str, Any]], style: str, max_ws: Optional[int]) -> str:
    """``minimax_m3_xml`` (``NS<key>value NS</key>``, array items as ``NS<item>``) and
    ``cohere_xml`` (``<cofl:value name="key" type="raw|json|dict|list">value</cofl:value>``, array
    items without a name): objects with properties and arrays with items nest as XML, strings are
    raw text, other values are JSON."""
    from ._structural_tag_lower import _Lowerer, ebnf_literal

    lw = _Lowerer()
    ws = _ws(max_ws)
    m3 = style == "minimax_m3_xml"
    raw_text = lw.text([_MM3 if m3 else _COHERE_CLOSE])
    defs = {
        k: schema[k] for k in ("$defs", "definitions") if isinstance(schema, dict) and k in schema
    }

    def json_value(sub: Any) -> str:
        full = dict(sub) if isinstance(sub, dict) else sub
        if isinstance(full, dict):
            for k, v in defs.items():
                full.setdefault(k, v)
        opts = schema_options(True, None, None, True, max_ws, False)
        return lw.add_ebnf(_core.Grammar.json_schema_to_ebnf(json.dumps(full), opts), "xv")

    def obj(sub: Dict[str, Any]) -> str:
        props: Dict[str, Any] = sub.get("properties") or {}
        required = set(sub.get("required") or [])
        parts = []
        for key, p in props.items():
            e = f"{ws} {element(p, key)}"
            parts.append(e if key in required else f"({e})?")
        return " ".join(parts + [ws])

    def arr(sub: Dict[str, Any]) -> str:
        item = sub.get("items", True)
        e = element(item, None)
        return f"({ws} {e})* {ws}" if m3 else f"({e})*"

    def kind_and_body(sub: Any) -> tuple:
        t = _schema_type(sub)
        if _is_plain_string(sub):
            return "raw", raw_text
        if _is_string_enum(sub):
            vals = [v for v in sub.get("enum", [sub.get("const")]) if isinstance(v, str)]
            lit = "(" + " | ".join(ebnf_literal(v) for v in vals) + ")" if vals else raw_text
            return "raw", lit if m3 else f"{ws} {lit} {ws}"
        if t == "object" and isinstance(sub, dict) and sub.get("properties"):
            body = obj(sub)
            return "dict", body if m3 else f"{ws} {lw.add('xo', body)} {ws}"
        if t == "array" and isinstance(sub, dict) and "items" in sub:
            body = arr(sub)
            return "list", body if m3 else f"{ws} {lw.add('xa', body)} {ws}"
        v = json_value(sub)
        return "json", v if m3 else f"{ws} {v} {ws}"

    def element(sub: Any, key: Optional[str]) -> str:
        kind, body = kind_and_body(sub)
        if m3:
            tag = key if key is not None else "item"
            return f"{ebnf_literal(f'{_MM3}<{tag}>')} {body} {ebnf_literal(f'{_MM3}</{tag}>')}"
        name = "" if key is None else f' name="{key}"'
        head = ebnf_literal(f'<cofl:value{name} type="{kind}">')
        return f"{head} {body} {ebnf_literal(_COHERE_CLOSE)}"

    if schema is True or (isinstance(schema, dict) and "properties" not in schema):
        if isinstance(schema, dict) and schema.get("type") not in (None, "object"):
            raise InvalidStructuralTagError(
                f"{style} arguments must be described by an object schema"
            )
        if m3:
            open_tag = f'{ebnf_literal(_MM3 + "<")} [a-zA-Z_] [a-zA-Z0-9_]* ">"'
            close_tag = f'{ebnf_literal(_MM3 + "</")} [a-zA-Z_] [a-zA-Z0-9_]* ">"'
        else:
            name = "[a-zA-Z_] [a-zA-Z0-9_]*"
            head, tail = ebnf_literal('<cofl:value name="'), ebnf_literal('" type="raw">')
            open_tag = f"{head} {name} {tail}"
            close_tag = ebnf_literal(_COHERE_CLOSE)
        body = f"({ws} {open_tag} {raw_text} {close_tag})* {ws}"
    elif isinstance(schema, dict):
        body = obj(schema)
    else:
        raise InvalidStructuralTagError(
            f"the json_schema of a {style} format must be an object schema or true"
        )
    lines = [f"root ::= {body}"]
    for rule_name, rule_body in lw.rules:
        lines.append(rule_body if not rule_name else f"{rule_name} ::= {rule_body}")
    return "\n".join(lines) + "\n"


def xml_style_ebnf(
    schema: Union[bool, Dict[str, Any]],
    style: str,
    any_order: bool,
    max_ws: Optional[int],
    excludes: Sequence[str] = (),
) -> str:
    """EBNF (root ``root``) of the arguments ``schema`` in ``style``. ``excludes``: substrings
    that raw string values and string enum alternatives may not contain (strings written as JSON
    inside a value are not filtered)."""
    if style in NESTED_STYLES:
        return _nested_xml_ebnf(schema, style, max_ws)
    if style not in XML_STYLES:
        raise UnsupportedFeatureError(
            f"json_schema style {style!r} is not supported yet (supported: 'json', {', '.join(map(repr, XML_STYLES))})"
        )
    open_pre, open_post, close = XML_STYLES[style]
    from ._structural_tag_lower import _Lowerer, _rename_rules, ebnf_literal

    lw = _Lowerer()
    ws = _ws(max_ws)
    raw_text = lw.text([close] + list(excludes))
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
            strs = [
                v for v in vals if isinstance(v, str) and not any(e in v for e in excludes)
            ]
            if strs:
                return "(" + " | ".join(ebnf_literal(v) for v in strs) + ")"
        full = dict(sub) if isinstance(sub, dict) else sub
        if isinstance(full, dict):
            for k, v in defs.items():
                full.setdefault(k, v)
        opts = schema_options(True, None, None, True, max_ws, any_order)
        ebnf = _core.Grammar.json_schema_to_ebnf(json.dumps(full), opts)
        return f"{ws} {lw.add_ebnf(ebnf, 'xv')} {ws}"

    def param(key_expr: str, val: str, raw: bool, sub: Any = None) -> str:
        # glm_xml allows whitespace between </arg_key> and <arg_value> (the \x00 mark); kimi_k3_xml
        # names the value's type (the \x01 mark).
        post = " ".join(
            _kimi_type(sub) if part == "\x01" else ebnf_literal(part)
            for part in open_post(raw).replace("\x01", "\x00\x01\x00").split("\x00")
            if part
        )
        if "\x01" in open_post(raw):
            return f"{ws} {ebnf_literal(open_pre)} {key_expr} {post} {val} {ebnf_literal(close)}"
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
            p = param(
                ebnf_literal(key), value(sub), _is_plain_string(sub) or _is_string_enum(sub), sub
            )
            parts.append(p if (key in required or any_order) else f"({p})?")
        if any_order and parts:
            # Any order: each entry is any property; only the count is checked (XGrammar).
            lo = max(int(schema.get("minProperties", 0)), len(required & set(props)))
            hi = schema.get("maxProperties")
            rep = f"{{{lo},{int(hi)}}}" if hi is not None else (f"{{{lo},}}" if lo else "*")
            body = f"({' | '.join(parts)}){rep} {ws}"
        else:
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

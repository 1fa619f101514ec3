"""JSON Schema keywords through the Python API: instances accepted/rejected with accept_string +
is_completed, agreement with ``jsonschema`` on instances in several key orders and spellings, and
typed errors for unsupported keywords (the message names the keyword and its JSON pointer)."""

from __future__ import annotations

import itertools
import json
from typing import Any, Dict, List

import pytest

import grammask as xgr

jsonschema = pytest.importorskip("jsonschema")

_INFO = xgr.TokenizerInfo([])
_COMPILER = xgr.GrammarCompiler(_INFO, cache_enabled=False)


def accepts(schema: Any, text: str, **opts: Any) -> bool:
    """Whether the grammar accepts ``text``; exact value semantics (``spelling="any"``) unless the
    caller passes ``spelling``."""
    opts.setdefault("strict_mode", False)
    opts.setdefault("spelling", "any")
    cg = _COMPILER.compile_json_schema(schema, **opts)
    m = xgr.GrammarMatcher(cg, terminate_without_stop_token=True)
    return bool(m.accept_string(text)) and m.is_completed()


def valid(schema: Any, inst: Any) -> bool:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(inst)


# (schema, instances): each instance is checked in every key order (objects) against jsonschema.
CASES: List[Any] = [
    # contains / minContains / maxContains
    ({"type": "array", "contains": {"minimum": 5}}, [[], [1], [5], [1, 6, 2], ["a", 7], 3]),
    ({"type": "array", "items": {"multipleOf": 2}, "contains": {"multipleOf": 3}}, [[2], [6], [2, 4, 6], [3], []]),
    ({"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
     [[1], [1, 2], [1, "a", 2, "b", 3], [1, 2, 3, 4], ["a", "b"]]),
    ({"type": "array", "contains": {"type": "integer"}, "minContains": 0, "maxContains": 1}, [[], ["a"], [1], [1, 2]]),
    ({"type": "array", "contains": {"type": "string"}, "minContains": 2}, [["a"], ["a", 1, "b"], [1, 2]]),
    # dependentSchemas and schema-valued dependencies
    ({"dependentSchemas": {"a": {"required": ["b"]}, "c": {"properties": {"d": {"type": "integer"}}}}},
     [{}, {"a": 1}, {"a": 1, "b": 2}, {"c": 1, "d": "x"}, {"c": 1, "d": 2}, {"d": "x"}, 5, "a"]),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": ["b"], "c": False}},
     [{"a": 1}, {"a": 1, "b": 1}, {"c": 1}, {"b": 2}]),
    # unevaluatedProperties / unevaluatedItems beside in-place applicators
    ({"properties": {"foo": {"type": "string"}}, "allOf": [{"properties": {"bar": {"type": "string"}}}],
      "unevaluatedProperties": False}, [{"foo": "a", "bar": "b"}, {"foo": "a", "baz": 1}, {}, 3]),
    ({"allOf": [{"properties": {"foo": True}}, {"unevaluatedProperties": False}]}, [{}, {"foo": 1}]),
    ({"if": {"properties": {"foo": {"const": "then"}}, "required": ["foo"]},
      "then": {"properties": {"bar": {"type": "string"}}, "required": ["bar"]},
      "else": {"properties": {"baz": {"type": "string"}}, "required": ["baz"]},
      "unevaluatedProperties": False},
     [{"foo": "then", "bar": "x"}, {"foo": "then", "bar": "x", "baz": "y"}, {"baz": "y"}, {"foo": "else", "baz": "y"},
      {"baz": "y", "bar": "x"}]),
    ({"$defs": {"bar": {"prefixItems": [True, {"type": "string"}]}}, "$ref": "#/$defs/bar",
      "prefixItems": [{"type": "string"}], "unevaluatedItems": False}, [["a", "b"], ["a", "b", "c"], ["a"], []]),
    ({"prefixItems": [{"type": "string"}], "allOf": [{"prefixItems": [True, {"type": "number"}]}],
      "unevaluatedItems": False}, [["a", 1], ["a", 1, True], ["a"], [1]]),
    # not of properties: a listed key present with a failing value
    ({"not": {"properties": {"a": {"type": "integer"}}}}, [{}, {"a": 1}, {"a": "x"}, 3]),
    ({"oneOf": [{"properties": {"a": {"const": 1}}, "required": ["a"]}, {"properties": {"b": {"const": 2}}, "required": ["b"]}]},
     [{"a": 1}, {"b": 2}, {"a": 1, "b": 2}, {"a": 2, "b": 2}, {}]),
    # not / if of numeric bounds and string constraints
    ({"not": {"minimum": 5}}, [4, 5, 4.5, 5.5, "x", None]),
    ({"not": {"exclusiveMaximum": 5, "minimum": 1}}, [0, 1, 4.9, 5, 6, "a"]),
    ({"type": "integer", "not": {"maximum": 3}}, [2, 3, 4, 3.5]),
    ({"not": {"minLength": 2}}, ["", "a", "ab", 1]),
    ({"not": {"type": "string", "maxLength": 2}}, ["ab", "abc", 1]),
    ({"not": {"pattern": "^a"}}, ["a", "ba", "ab", 1]),
    ({"type": "string", "not": {"format": "ipv4"}}, ["1.2.3.4", "1.2.3", "x"]),
    ({"if": {"pattern": "x"}, "then": {"maxLength": 3}}, ["x", "xyzw", "abcde", 1]),
    ({"if": {"minimum": 3}, "then": {"type": "integer"}, "else": {"type": "string"}}, [2, 3, 3.5, "a", None]),
    # numbers other than given values (plain spellings)
    ({"not": {"const": 1}}, [1, 1.0, 2, 0, "a"]),
    ({"type": "integer", "not": {"enum": [0, 2]}}, [0, -0, 2, 1, 3]),
    ({"type": "number", "not": {"enum": [1.5, -2]}}, [1.5, -2, -2.0, 2.5, 1]),
    ({"type": "array", "contains": {"const": 1}, "maxContains": 1}, [[1], [1, 1], [1, 2], [2, 1.0], []]),
    # non-integer numbers, several multipleOf
    ({"type": "number", "not": {"type": "integer"}}, [1, 1.5, -0.25, 3.0, "a"]),
    ({"allOf": [{"multipleOf": 0.5}, {"multipleOf": 0.3}]}, [0, 1.5, 3, 0.5, 0.3, 4.5]),
    ({"type": "integer", "multipleOf": 4, "allOf": [{"multipleOf": 6}]}, [12, 24, 6, 8, 36]),
    ({"type": "integer", "minimum": -3, "exclusiveMaximum": 12}, [-4, -3, 0, 11, 12, 1.5, "1"]),
    ({"type": "number", "minimum": 0.5, "maximum": 2.25}, [0.4, 0.5, 1, 2.25, 2.26, 2]),
    ({"type": "integer", "multipleOf": 7}, [0, 7, -14, 8, 70]),
    ({"type": "number", "multipleOf": 0.01, "minimum": 0}, [0, -0.0, 0.05, 1.5, 12.34, 0.001, -0.01, -1, 3]),
    ({"type": "integer", "multipleOf": 5, "minimum": 0}, [0, -0, 5, 10.0, -5, 7]),
    ({"type": "string", "minLength": 2, "maxLength": 4}, ["a", "ab", "abcd", "abcde", "é€"]),
    ({"type": "string", "pattern": "^[a-c]+x?$"}, ["abc", "abx", "abd", "", "x"]),
    ({"type": "string", "pattern": "b"}, ["abc", "ac", "b"]),
    ({"type": "string", "format": "date"}, ["2024-02-29", "2023-02-29", "2024-13-01", "2024-1-01"]),
    ({"type": "string", "format": "uuid"}, ["123e4567-e89b-12d3-a456-426614174000", "123e4567"]),
    ({"type": "string", "format": "ipv4"}, ["192.168.0.1", "256.1.1.1", "1.2.3"]),
    ({"enum": ["a", 1, None, [1, 2], {"k": True}]}, ["a", 1, 1.0, None, [1, 2], [2, 1], {"k": True}, "b"]),
    ({"const": {"x": 1, "y": [True]}}, [{"x": 1, "y": [True]}, {"y": [True], "x": 1}, {"x": 2, "y": [True]}]),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}, [[], [1], [1, 2, 3], [1, 2, 3, 4], [1, "a"]]),
    ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": False},
     [["a", True], ["a"], ["a", True, 1], [True, "a"]]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "null"}},
      "required": ["a", "b"]},
     [{"a": 1, "b": "x"}, {"b": "x", "a": 1}, {"c": None, "b": "x", "a": 1}, {"a": 1}, {"a": 1, "b": 2},
      {"a": 1, "b": "x", "z": 5}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
     [{"a": 1}, {"a": 1, "b": 2}, {}]),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 2},
     [{}, {"a": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, {"a": "x"}]),
    ({"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False},
     [{"x-a": "s"}, {"x-a": 1}, {"y": "s"}, {}]),
    ({"type": "object", "propertyNames": {"maxLength": 2}}, [{"ab": 1}, {"abc": 1}, {}]),
    ({"type": "object", "dependentRequired": {"a": ["b"]}}, [{"a": 1}, {"a": 1, "b": 2}, {"b": 2, "a": 1}, {"b": 2}, {}]),
    ({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]}, ["s", 5, 4, None]),
    ({"oneOf": [{"type": "string"}, {"enum": ["a", None, True]}]}, ["a", "b", None, True, False, 1]),
    ({"oneOf": [{"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": False},
                {"type": "object", "properties": {"b": {}}, "required": ["b"], "additionalProperties": False}]},
     [{"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {}]),
    ({"not": {"type": "string"}}, ["s", 1, None, [], {}]),
    ({"if": {"type": "integer"}, "then": {"minimum": 3}, "else": {"type": "string"}}, [2, 3, "s", None]),
    ({"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/pos"}},
     [[1, 2], [0], []]),
    ({"type": "object", "properties": {"next": {"$ref": "#"}, "v": {"type": "integer"}}, "required": ["v"]},
     [{"v": 1}, {"v": 1, "next": {"v": 2}}, {"next": {"v": 2}, "v": 1}, {"v": 1, "next": {}}]),
    ({"type": "string", "minLength": 1, "not": {"enum": ["a", "b"]}}, ["a", "c", "", "ab"]),
    # finite enums decided value by value, whatever the applicators and negations beside them
    ({"allOf": [{"enum": [[1, 2], [3], [2, 5], "x"]}, {"not": {"not": {"items": {"type": "integer", "minimum": 2}}}}]},
     [[1, 2], [3], [2, 5], "x", [4]]),
    ({"enum": ["a", "b", "c", 1], "not": {"anyOf": [{"const": "a"}, {"pattern": "^b"}]}}, ["a", "b", "c", 1, "d"]),
    ({"const": {"k": 1}, "oneOf": [{"required": ["k"]}, {"properties": {"k": {"type": "string"}}}]}, [{"k": 1}, {"k": "1"}]),
    # uniqueItems over finite item languages (equal values in other spellings count as equal)
    ({"type": "array", "items": {"enum": ["a", "b", 1, [1], {"k": 1}]}, "uniqueItems": True},
     [[], ["a"], ["a", "b"], ["a", "a"], ["b", 1, "a"], [1, 1.0], [[1], [1]], [{"k": 1}, "a", {"k": 1}], ["c"]]),
    ({"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 2},
     [[True, False], [False, True], [True, True], [True], [True, False, True]]),
    ({"type": "array", "items": {"enum": [1, 2, 3, 4]}, "uniqueItems": True, "maxItems": 2, "allOf": [{"items": {"minimum": 2}}]},
     [[2, 3], [3, 2], [1], [2, 2], [2, 3, 4], []]),
    ({"type": "array", "items": {"type": ["boolean", "null"]}, "uniqueItems": True},
     [[None, True, False], [None, None], [False, None]]),
]


def _orders(inst: Any) -> List[Any]:
    """The instance with its top-level keys in every order (at most 24)."""
    if isinstance(inst, dict) and 1 < len(inst) <= 4:
        return [dict(p) for p in itertools.permutations(inst.items())]
    return [inst]


@pytest.mark.parametrize("schema,instances", CASES, ids=[json.dumps(c[0])[:50] for c in CASES])
def test_keyword_agrees_with_jsonschema(schema: Dict[str, Any], instances: List[Any]) -> None:
    cg = _COMPILER.compile_json_schema(schema, strict_mode=False, spelling="any")
    for inst in instances:
        for variant in _orders(inst):
            for text in (json.dumps(variant), json.dumps(variant, separators=(",", ":")),
                         json.dumps(variant, indent=2), json.dumps(variant, ensure_ascii=False)):
                m = xgr.GrammarMatcher(cg, terminate_without_stop_token=True)
                got = bool(m.accept_string(text)) and m.is_completed()
                assert got == valid(schema, variant), (schema, text)


def test_escaped_keys_and_strings() -> None:
    schema = {"type": "object", "properties": {"a": {"const": "é"}}, "required": ["a"]}
    assert accepts(schema, '{"\\u0061": "\\u00e9"}')
    assert accepts(schema, '{"a": "é"}')
    assert not accepts(schema, '{"a": "e"}')


@pytest.mark.parametrize(
    "fmt,good,bad",
    [
        ("uri", ["http://example.com/a?b=c#d", "urn:isbn:0451450523", "http://[2001:db8::1]:80/"],
         ["//example.com", "abc", "http://exa mple.com", "http://[1::2::3]/"]),
        ("uri-reference", ["../a/b?c", "#frag", "", "http://x.y/z"], ["\\\\WINDOWS\\share", "a b"]),
        ("ipv6", ["::1", "2001:db8::ff00:42:8329", "::ffff:192.168.0.1"], ["12345::", "1:2:3:4:5:6:7:8:9", "::1%eth0"]),
        ("duration", ["P4DT12H30M5S", "PT1S", "P2W", "P1Y2M"], ["P", "PT", "P1D2H", "P2W1D"]),
        ("json-pointer", ["", "/a/b", "/a~0b/~1"], ["a", "/a~2"]),
        ("relative-json-pointer", ["0", "1/a", "2#"], ["-1", "01", "/a"]),
    ],
)
def test_formats(fmt: str, good: List[str], bad: List[str]) -> None:
    schema = {"type": "string", "format": fmt}
    for x in good:
        assert accepts(schema, json.dumps(x)), x
    for x in bad:
        assert not accepts(schema, json.dumps(x)), x


def test_integer_spellings() -> None:
    assert accepts({"type": "integer"}, "1.0")
    assert accepts({"type": "integer"}, "1e5")
    assert not accepts({"type": "integer"}, "1.5")


def test_format_is_asserted_in_every_draft_unless_annotation() -> None:
    fmt = {"type": "string", "format": "ipv4"}
    for schema in [
        fmt,
        {"$schema": "http://json-schema.org/draft-07/schema#", **fmt},
        {"$schema": "https://json-schema.org/draft/2020-12/schema", **fmt},
        {"$schema": "https://json-schema.org/draft/2019-09/schema", **fmt},
    ]:
        assert not accepts(schema, '"x"')
        assert accepts(schema, '"10.0.0.1"')
        assert accepts(schema, '"x"', format_assertion=False)


@pytest.mark.parametrize(
    "extra",
    [{}, {"minimum": 0, "maximum": 99999}, {"multipleOf": 5}, {"multipleOf": 0.5}],
)
def test_draft4_integers_have_no_fraction_or_exponent(extra: Dict[str, Any]) -> None:
    # Draft 4 validators treat 1.0 and 1e5 as numbers, not integers.
    d4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", **extra}
    d7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "integer", **extra}
    for text in ["10", "0", "12345.0", "10.0", "1e3", "-5"]:
        inst = json.loads(text)
        assert accepts(d4, text) == valid(d4, inst), (extra, text)
        if "e" not in text:
            assert accepts(d7, text) == valid(d7, inst), (extra, text)


def test_strict_mode_closes_objects_and_key_order() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    assert accepts(schema, '{"a": 1, "z": 2}', strict_mode=False)
    assert not accepts(schema, '{"a": 1, "z": 2}', strict_mode=True)
    # strict_mode=True keeps schema order (XGrammar's layout); any_order frees it.
    assert not accepts(schema, '{"b": 1, "a": 2}', strict_mode=True)
    assert accepts(schema, '{"b": 1, "a": 2}', strict_mode=True, any_order=True)
    assert accepts(schema, '{"b": 1, "a": 2}', strict_mode=False)
    # Each key at most once.
    assert not accepts(schema, '{"a": 1, "a": 2}', strict_mode=False)


def test_whitespace_options() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}, "required": ["a"]}
    assert accepts(schema, '{"a":[1,2]}', any_whitespace=False, separators=(",", ":"))
    assert not accepts(schema, '{"a": [1, 2]}', any_whitespace=False, separators=(",", ":"))
    assert accepts(schema, '{\n  "a": [\n    1,\n    2\n  ]\n}', any_whitespace=False, indent=2)


@pytest.mark.parametrize(
    "schema,keyword,pointer",
    [
        ({"type": "array", "contains": {"type": "integer"}, "maxItems": 3}, "contains", "/contains"),
        ({"type": "array", "uniqueItems": True}, "uniqueItems", "/uniqueItems"),
        ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems", "/uniqueItems"),
        ({"type": "array", "items": {"enum": list(range(9))}, "uniqueItems": True}, "uniqueItems", "/uniqueItems"),
        ({"type": "array", "prefixItems": [{"const": 1}], "items": {"const": 2}, "uniqueItems": True}, "prefixItems", "/uniqueItems"),
        ({"type": "string", "format": "iri"}, "iri", "/format"),
        ({"anyOf": [{"required": ["a"]}, {"required": ["b"]}], "unevaluatedProperties": False},
         "unevaluatedProperties", "/unevaluatedProperties"),
        ({"properties": {"x": {"not": {"multipleOf": 3}}}}, "not", "/properties/x"),
        ({"$recursiveRef": "#"}, "$recursiveRef", "/$recursiveRef"),
    ],
)
def test_unsupported_is_a_typed_error(schema: Dict[str, Any], keyword: str, pointer: str) -> None:
    with pytest.raises(xgr.UnsupportedFeatureError) as ei:
        _COMPILER.compile_json_schema(schema, strict_mode=False)
    msg = str(ei.value)
    assert keyword in msg and pointer in msg, msg


def test_invalid_schema_errors() -> None:
    with pytest.raises(xgr.InvalidSchemaError):
        _COMPILER.compile_json_schema({"type": "nonsense"})
    with pytest.raises(xgr.InvalidJSONError):
        _COMPILER.compile_json_schema("{not json")
    # Unsatisfiable only once the automata are built: every object has all three keys, so no
    # oneOf branch holds alone.
    unsat = {"type": "object", "required": ["a", "b", "c"],
             "oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["c"]}]}
    with pytest.raises(xgr.InvalidSchemaError, match="accepts no value"):
        _COMPILER.compile_json_schema(unsat, strict_mode=False)


# ---------------------------------------------------------------- canonical spelling (default)


def canon(schema: Any, text: str, **opts: Any) -> bool:
    return accepts(schema, text, spelling="canonical", **opts)


def test_canonical_strings_keep_every_value_one_serializer_spelling() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    assert canon(schema, '{"name": "x"}')
    assert not canon(schema, '{"\\u006Eame": "x"}')  # printable ASCII never \u-escaped
    assert not canon(schema, '{"name": "\\u0078"}')
    assert not canon(schema, '{"name": "a\\/b"}')
    assert canon(schema, '{"name": "a/b"}')
    for value in ["q\"b\\s", "tab\tnl\n\x01\x1f\x7f", "é日本😀", ""]:
        for ensure_ascii in (True, False):
            text = json.dumps({"name": value}, ensure_ascii=ensure_ascii)
            assert canon(schema, text), text
    assert not canon(schema, '{"name": "\\u000a"}')  # \n has a short escape
    assert canon(schema, '{"name": "\\u00E9"}')  # either hex case for non-ASCII


def test_canonical_enum_and_keys_with_non_ascii() -> None:
    schema = {"enum": ["é", "a\"b"]}
    for text in ['"é"', '"\\u00e9"', '"\\u00E9"', '"a\\"b"']:
        assert canon(schema, text), text
    assert not canon(schema, '"\\u0061\\"b"')


def test_canonical_numbers() -> None:
    integer = {"type": "integer"}
    for text in ["0", "-5", "66", "9" * 308]:
        assert canon(integer, text), text
    for text in ["66.00", "-0", "-0.00", "1e5", "23e6283876370", "9" * 309, "01"]:
        assert not canon(integer, text), text
    bounded = {"type": "integer", "minimum": -3}
    assert canon(bounded, "0") and canon(bounded, "-3") and not canon(bounded, "-0") and not canon(bounded, "1.0")
    number = {"type": "number"}
    for text in ["0", "0.0", "1.5", "-0.25", "1e+16", "1.5e-07", "1e21", "1.7976931348623e307", "100.0"]:
        assert canon(number, text), text
    for text in ["-0", "-0.0", "1.50", "1e308", "23e6283876370", "1" * 309, "0e5"]:
        assert not canon(number, text), text
    assert canon({"type": "number", "minimum": 0}, "12.5") and not canon({"type": "number", "maximum": 0}, "-0")
    assert canon({"const": 5}, "5") and canon({"const": 5}, "5.0") and not canon({"const": 5}, "5.00")
    assert not canon({"const": 0}, "-0") and not canon({"enum": [2.5]}, "2.50")


def test_canonical_whitespace_is_bounded_but_admits_indented_layouts() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array"}}}
    deep = {"a": [[[[[[[[[[[1]]]]]]]]]]]}
    assert canon(schema, json.dumps(deep, indent=4))
    assert canon(schema, '{"a": []}' + " " * 64)
    assert not canon(schema, '{"a": []}' + " " * 65)
    assert canon(schema, '{"a": []}' + " " * 65, max_whitespace_cnt=100)
    assert accepts(schema, '{"a": []}' + " " * 500)  # spelling="any": unbounded


def test_builtin_json_spellings() -> None:
    def ok(text: str, **kw: Any) -> bool:
        m = xgr.GrammarMatcher(_COMPILER.compile_builtin_json_grammar(**kw), terminate_without_stop_token=True)
        return bool(m.accept_string(text)) and m.is_completed()

    assert ok('{"a": [1, 2.5, -3, "\\u00e9"]}')
    assert not ok('{"\\u0061": 1}') and ok('{"\\u0061": 1}', spelling="any")
    assert not ok('{"a": 1e999}') and ok('{"a": 1e999}', spelling="any")
    assert not ok("[" + " " * 65 + "]") and ok("[" + " " * 65 + "]", max_whitespace_cnt=65)
    with pytest.raises(ValueError):
        _COMPILER.compile_builtin_json_grammar(spelling="nonsense")

"""JSON Schema coverage work: long string bounds built from shared blocks, open objects whose key
exclusions share their continuations, and the further keywords compiled since; each case agrees
with ``jsonschema`` under both spellings."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import pytest

import grammask as xgr

jsonschema = pytest.importorskip("jsonschema")

_INFO = xgr.TokenizerInfo([])
_COMPILER = xgr.GrammarCompiler(_INFO, cache_enabled=False)


def valid(schema: Any, inst: Any, registry: Optional[Dict[str, Any]] = None) -> bool:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    kw: Dict[str, Any] = {}
    if registry:
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012

        kw["registry"] = Registry().with_resources(
            (uri, Resource.from_contents(doc, default_specification=DRAFT202012)) for uri, doc in registry.items()
        )
    return cls(schema, format_checker=cls.FORMAT_CHECKER, **kw).is_valid(inst)


def agree(
    schema: Any, instances: List[Any], spellings=("canonical", "any"), registry: Optional[Dict[str, Any]] = None
) -> None:
    """Every instance (``json.dumps``, both ``ensure_ascii``) is accepted iff ``jsonschema`` says valid."""
    for spelling in spellings:
        cg = _COMPILER.compile_json_schema(schema, strict_mode=False, spelling=spelling, schema_registry=registry)
        for inst in instances:
            for ensure_ascii in (True, False):
                text = json.dumps(inst, ensure_ascii=ensure_ascii)
                m = xgr.GrammarMatcher(cg, terminate_without_stop_token=True)
                got = bool(m.accept_string(text)) and m.is_completed()
                want = valid(schema, inst, registry)
                assert got == want, (spelling, schema, text[:80], len(inst) if isinstance(inst, str) else "")


@pytest.mark.parametrize("lo,hi", [(0, 5000), (5000, 65535), (4097, None), (1, 8192), (3000, 4100), (2048, 9216)])
def test_long_length_bounds(lo: int, hi: Any) -> None:
    schema: Any = {"type": "string", "minLength": lo}
    if hi is not None:
        schema["maxLength"] = hi
    lens = {lo - 1, lo, lo + 1, 1023, 1024, 1025, 4095, 4096, 4097}
    lens |= {hi - 1, hi, hi + 1} if hi is not None else {70000}
    # Characters of several spellings: raw ASCII, non-ASCII (escaped with ensure_ascii), astral.
    insts = ["a" * (n // 2) + "é😀" * ((n - n // 2) // 2) + "x" * ((n - n // 2) % 2) for n in sorted(lens) if n >= 0]
    assert all(len(s) == n for s, n in zip(insts, sorted(x for x in lens if x >= 0)))
    agree(schema, insts)


def test_many_long_strings_compile() -> None:
    # Distinct long bounds in one schema: each used to be a chain of maxLength character automata
    # (65,535 of them for one property), past the automaton-size limit together.
    props = {f"p{i}": {"type": "string", "maxLength": 30000 + 1000 * i} for i in range(6)}
    schema = {"type": "object", "properties": props}
    agree(schema, [{"p0": "x" * 30000}, {"p0": "x" * 30001}, {"p5": "é" * 35000, "p1": ""}, {"p5": "é" * 35001}])


def test_open_object_many_keys_canonical() -> None:
    # Open objects whose listed keys share prefixes: the exclusion trie's continuations are shared.
    keys = [f"key{i}_{w}" for i in range(40) for w in ("alpha", "beta")]
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}}
    insts = [{"key1_alpha": 1}, {"key1_alpha": "x"}, {"key1_alph": "x"}, {"key1_alphaa": "x"}, {"key": "x"},
             {"": 1, "k\"ey": 2, "k\\": [1]}, {"key2_beta": 3, "key1_gamma": None}, {"key\u00e9": 1}]
    agree(schema, insts)
    cg = _COMPILER.compile_json_schema(schema, strict_mode=False)
    m = xgr.GrammarMatcher(cg, terminate_without_stop_token=True)
    # A listed key escaped is still the listed key, and canonical spelling refuses the escape.
    assert not (m.accept_string('{"key1_\\u0061lpha": "x"}') and m.is_completed())


def test_oneof_closed_objects_disjoint_by_key_patterns() -> None:
    # Closed objects whose key patterns cannot meet, or whose required key the other branch
    # forbids (by its patterns or by `not: {required}`), are disjoint: no negation is needed.
    scale = {"type": "object", "patternProperties": {"^([0-9]\\.?[0-9]*)x$": {"type": "string"}},
             "additionalProperties": False, "minProperties": 1}
    locale = {"type": "object", "patternProperties": {"^[a-zA-Z][a-zA-Z][a-zA-Z]?(-[\\-a-zA-Z0-9]+)?$": {"type": "string"}},
              "additionalProperties": False, "minProperties": 1, "not": {"required": ["ios"]}}
    platform = {"type": "object", "properties": {"ios": {"type": "string"}, "android": {"type": "string"}},
                "required": ["ios", "android"], "additionalProperties": False}
    schema = {"oneOf": [platform, scale, locale]}
    agree(schema, [{"ios": "a", "android": "b"}, {"2x": "a"}, {"2.5x": "a", "1x": "b"}, {"en": "a"}, {"en-US": "x"},
                   {"ios": "a"}, {"en": "a", "2x": "b"}, {}, {"2x": 1}, {"ios": "a", "android": "b", "en": "c"}, "x"])
    # Overlapping branches still need a negation of a closed object: refused, naming the keyword.
    with pytest.raises(xgr.UnsupportedFeatureError, match="oneOf"):
        ref = {"properties": {"ref": {"type": "string"}}, "required": ["ref"], "additionalProperties": False}
        _COMPILER.compile_json_schema({"oneOf": [ref, locale]}, strict_mode=False)


@pytest.mark.parametrize("schema", [
    {"type": "integer", "minimum": 16, "maximum": 100, "multipleOf": 4},
    {"type": "integer", "minimum": -2032, "maximum": 2031, "multipleOf": 16},
    {"type": "number", "minimum": 1, "maximum": 5, "multipleOf": 1.0},
    {"type": "integer", "minimum": 2, "multipleOf": 1.0},
    {"type": "number", "multipleOf": 0.25, "minimum": 0.25, "maximum": 3},
    {"type": "number", "exclusiveMaximum": 100, "multipleOf": 10, "exclusiveMinimum": -20},
    {"type": "number", "minimum": 0, "maximum": 100000, "multipleOf": 1},
    {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "minimum": -3, "maximum": 3, "multipleOf": 1},
    {"type": "number", "minimum": -1.5, "maximum": 1.5, "multipleOf": 0.5},
])
def test_multiple_of_with_bounds(schema: Any) -> None:
    # A divisor of 1 (the integers of the range), or few multiples in a closed range (listed).
    ints = [-2048, -2032, -2031, -2016, -20, -10, -3, -1, 0, 1, 2, 3, 4, 5, 6, 12, 16, 17, 20, 90, 96, 99, 100,
            2016, 2031, 2032, 99999, 100000, 100001]
    floats = [-1.5, -0.5, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 3.0, 5.0, 100.0]
    agree(schema, ints + (floats if schema["type"] == "number" else []))


def test_multiple_of_with_wide_bounds_is_refused() -> None:
    with pytest.raises(xgr.UnsupportedFeatureError, match="multipleOf"):
        _COMPILER.compile_json_schema({"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 1e9})


def test_open_object_twelve_keys_any_order() -> None:
    # 12 listed keys (4,096 key-set states): past the always-free bound of 8, still any order
    # within the schema's budget; each key at most once, required ones present.
    props = {f"key{i}": {"type": "integer" if i % 2 else "string"} for i in range(12)}
    schema = {"type": "object", "properties": props, "required": ["key3", "key10"]}
    full = {f"key{i}": (i if i % 2 else str(i)) for i in range(12)}
    rev = dict(reversed(list(full.items())))
    insts = [full, rev, {"key10": "a", "key3": 3}, {"key10": "a", "zz": None, "key3": 3, "key0": "x"},
             {"key3": 3}, {"key10": 1, "key3": 3}, {"key11": "x", "key10": "a", "key3": 3}, {}]
    agree(schema, insts)
    cg = _COMPILER.compile_json_schema(schema, strict_mode=False)
    m = xgr.GrammarMatcher(cg, terminate_without_stop_token=True)
    # A repeated key is refused even when both values are valid.
    assert not (m.accept_string('{"key3": 3, "key10": "a", "key3": 5}') and m.is_completed())
    # any_order=True takes it too; 13 keys (8,192 states) stay refused.
    xgr.Grammar.from_json_schema(json.dumps(schema), any_order=True)
    props13 = dict(props, key12={})
    with pytest.raises(xgr.UnsupportedFeatureError, match="any_order"):
        xgr.Grammar.from_json_schema(json.dumps({"type": "object", "properties": props13}), any_order=True)


def test_dependent_required_past_any_order_bound() -> None:
    # 13 keys (past the larger any-order key-set bound): schema order, dependency keys tracked exactly.
    props = {f"k{i}": {"type": "integer"} for i in range(13)}
    schema = {"type": "object", "properties": props, "dependentRequired": {"k7": ["k1", "k3"]}}
    agree(schema, [{}, {"k0": 1, "k8": 2}, {"k1": 1, "k3": 2, "k7": 3}, {"k1": 1, "k3": 2},
                   {"k1": 1, "k7": 3}, {"k7": 3}, {"k3": 1, "k7": 3, "k8": 1}, {"k7": "x", "k1": 1, "k3": 1}])
    # Draft 7 `dependencies` (array form) on an open object, as in MaskBench's calculate_area.
    dims = {"type": "object", "properties": {k: {"type": "number"} for k in ("base", "height", "length", "radius", "width")},
            "required": ["radius", "length", "width", "base", "height"], "dependencies": {"shape": ["circle", "rectangle"]}}
    base = {"base": 1, "height": 2, "length": 3, "radius": 4, "width": 5}
    agree({"$schema": "http://json-schema.org/draft-07/schema#", **dims},
          [base, {**base, "shape": 1}, {**base, "shape": 1, "circle": 2, "rectangle": 3}, {**base, "other": 1}])


def test_dependent_required_more_than_64_properties() -> None:
    # Docker-compose-like: 70 properties, one dependency; instances in schema order.
    props = {f"k{i:02d}": {"type": "integer"} for i in range(70)}
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": props,
              "additionalProperties": False, "dependencies": {"k66": ["k65"]}}
    agree(schema, [{}, {"k00": 1, "k65": 2, "k66": 3, "k69": 4}, {"k65": 2}, {"k00": 1, "k66": 3, "k69": 4},
                   {"k66": 3}, {"k00": 1, "k70": 2}])


def test_all_of_properties_merge_in_schema_order() -> None:
    # 20 listed keys (past the any-order bound) from two allOf parts, as in MaskBench's
    # npmpackagejsonlintrc: the fallback's schema order is the first part's keys, then the second's
    # (the parts were merged last to first, so instances in schema order were rejected).
    first = {f"a{i}": {"type": "string"} for i in range(10)}
    second = {f"b{i}": {"type": "integer"} for i in range(10)}
    schema = {"type": "object", "allOf": [{"properties": first}, {"properties": second}]}
    agree(schema, [{"a1": "x", "b2": 1}, {"a0": "x", "a9": "y", "b0": 1, "b9": 2}, {"b5": 1}, {"a1": 1, "b2": 1},
                   {"a1": "x", "b2": "y"}, {"a3": "x", "zz": [1], "b4": 2, "b5": "no"}])


def test_additional_entries_before_listed_keys_past_bound() -> None:
    # 20 listed keys (past the any-order bound, schema order): additional keys may come before,
    # between and after the listed ones, as in MaskBench's o78474 and vss-extension instances
    # that start with "$schema"; listed keys stay in schema order, each at most once.
    props = {f"p{i:02d}": {"type": "integer"} for i in range(20)}
    schema = {"type": "object", "properties": props, "required": ["p03"]}
    agree(schema, [{"$schema": "x", "title": "t", "p03": 1}, {"x": 1, "p00": 1, "y": 2, "p03": 3, "z": 3},
                   {"x": 1, "p03": 1, "p19": 2, "y": None}, {"x": 1}, {"x": 1, "p03": "no"}, {"p03": 1, "x": 1},
                   {"x": 1, "p02": 1, "y": 2, "p04": 3}])
    typed = dict(schema, additionalProperties={"type": "string"}, patternProperties={"^q": {"type": "boolean"}})
    agree(typed, [{"s": "a", "q1": True, "p03": 1}, {"s": 1, "p03": 1}, {"q1": 1, "p03": 1},
                  {"p01": 1, "qq": False, "s": "b", "p03": 1, "t": "c"}])
    cg = _COMPILER.compile_json_schema(schema, strict_mode=False)
    m = xgr.GrammarMatcher(cg, terminate_without_stop_token=True)
    # A listed key is not an additional one: it cannot repeat through the additional entries.
    assert not (m.accept_string('{"p03": 1, "x": 2, "p03": 3}') and m.is_completed())


def test_several_item_existence_conditions() -> None:
    # Two `contains` (at least once each) and negated `items` ("some item fails x") on one array:
    # the grammar tracks which conditions some item met; one item may meet several.
    two = {"type": "array", "contains": {"type": "string"}, "allOf": [{"contains": {"type": "integer"}}]}
    arrays = [[], ["a"], [1], ["a", 1], [1, "a"], [1.5, "a", 2], [True, None], [[1], "b", {"a": 1}, 3]]
    agree(two, arrays)
    negated = {"type": "array", "not": {"items": {"type": "string"}}, "contains": {"type": "integer", "minimum": 3}}
    agree(negated, arrays + [[3], ["a", 5], [1], ["a", "b"], ["a", 1, 7]])
    typed = {"type": "array", "items": {"type": "number"}, "contains": {"minimum": 5},
             "allOf": [{"contains": {"maximum": 0}}, {"contains": {"const": 2}}]}
    agree(typed, [[5, -1, 2], [2, 5, -1, 1], [5], [5, -1], [-1, "a", 6, 2], [2, 2, 7, 0], [], [9, 9, 2]])
    two_nots = {"type": "array", "not": {"items": {"type": "string"}}, "allOf": [{"not": {"items": {"maximum": 3}}}]}
    agree(two_nots, arrays + [[4], ["a", 4], [None, "b"], [2, 5]])
    five = {"type": "array", "allOf": [{"contains": {"const": i}} for i in range(5)]}
    with pytest.raises(xgr.UnsupportedFeatureError, match="more than 4 item conditions"):
        xgr.Grammar.from_json_schema(json.dumps(five), strict_mode=False)
    # MaskBench's oneofitemscontains shape, with items schemas the conversion can negate.
    x, y = {"type": ["integer", "string"]}, {"type": ["string", "boolean"], "maxLength": 2}
    swap = {"type": "array", "oneOf": [{"allOf": [{"items": x}, {"contains": y}]},
                                       {"allOf": [{"items": y}, {"contains": x}]}]}
    agree(swap, [[], [1], ["a"], [1, "a"], [True, "a"], [True, "abc"], [1, True], ["abc", 1, "b"], [True, 2, "a"],
                 [False, "xyz", "q"], ["abc"]])


# --------------------------------------------------------------------- schema registry, $dynamicRef

_REGISTRY = {
    "http://example.com/schemas/common.json": {
        "$defs": {
            "name": {"type": "string", "minLength": 1, "maxLength": 8},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/name"}, "maxItems": 2},
        }
    },
    "http://example.com/schemas/point.json": {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
    },
}


def test_schema_registry_resolves_remote_refs() -> None:
    schema = {
        "$id": "http://example.com/schemas/shape.json",
        "type": "object",
        "properties": {
            "name": {"$ref": "common.json#/$defs/name"},
            "tags": {"$ref": "http://example.com/schemas/common.json#/$defs/tags"},
            "at": {"$ref": "point.json"},
        },
        "required": ["name"],
    }
    insts = [
        {"name": "a"},
        {"name": ""},
        {"name": "abcdefghi"},
        {"name": "a", "tags": ["x", "y"]},
        {"name": "a", "tags": ["x", "y", "z"]},
        {"name": "a", "tags": [""]},
        {"name": "a", "at": {"x": 1, "y": 2}},
        {"name": "a", "at": {"x": 1}},
        {"name": "a", "at": {"x": 1, "y": "2"}},
    ]
    agree(schema, insts, registry=_REGISTRY)


def test_schema_registry_missing_document_is_refused() -> None:
    schema = {"$ref": "http://example.com/schemas/absent.json"}
    with pytest.raises(xgr.UnsupportedFeatureError, match="absent.json"):
        _COMPILER.compile_json_schema(schema, schema_registry=_REGISTRY)
    with pytest.raises(xgr.UnsupportedFeatureError, match="remote reference"):
        _COMPILER.compile_json_schema({"$ref": "http://example.com/schemas/point.json"})
    with pytest.raises(xgr.InvalidJSONError):
        _COMPILER.compile_json_schema(schema, schema_registry={"http://example.com/x.json": "{"})


def test_dynamic_ref_to_the_root_resource_anchor() -> None:
    # A generic list whose items are the root's `$dynamicAnchor: item` (strings here): the root
    # resource opens every dynamic scope, so its anchor wins over the list's own default.
    list_doc = {
        "$id": "http://example.com/schemas/list.json",
        "$defs": {"item": {"$dynamicAnchor": "item"}},
        "type": "array",
        "items": {"$dynamicRef": "#item"},
    }
    schema = {
        "$id": "http://example.com/schemas/strings.json",
        "$ref": "list.json",
        "$defs": {"item": {"$dynamicAnchor": "item", "type": "string"}},
    }
    agree(schema, [[], ["a"], ["a", 1], [None]], registry={list_doc["$id"]: list_doc})


# --------------------------------------------------------------------- negation of applicators


@pytest.mark.parametrize(
    "schema,insts",
    [
        ({"not": {"anyOf": [{"type": "string"}, {"minimum": 3}]}}, ["a", 1, 3, 4.5, None, [1], {}]),
        ({"not": {"not": {"type": "integer", "minimum": 2}}}, [1, 2, 3, "x", 2.5]),
        (
            {"not": {"oneOf": [{"type": "integer"}, {"type": "string"}, {"type": "string", "maxLength": 1}]}},
            [1, 2, 2.5, 7, "z", "yy", None, 0.5],
        ),
        ({"not": {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}}}, [-1, 1, "s", None]),
        ({"not": {"if": {"type": "integer"}, "then": {"minimum": 0}}}, [-1, 1, "s", None]),
        (
            {"not": {"dependentSchemas": {"a": {"required": ["b"]}}}},
            [{}, {"a": 1}, {"a": 1, "b": 2}, {"b": 1}, 3],
        ),
        (
            {"type": "object", "not": {"required": ["all"], "unevaluatedProperties": True, "patternProperties": {"x": {}}}},
            [{}, {"all": 1}, {"allx": 1}, {"b": 1}],
        ),
        (
            # The suite's "dynamic evaluation inside nested refs": exactly-one over nested oneOfs,
            # whose negations are themselves oneOfs, beside unevaluatedProperties.
            {
                "$defs": {
                    "one": {
                        "oneOf": [
                            {"$ref": "#/$defs/two"},
                            {"required": ["b"], "properties": {"b": True}},
                            {"required": ["xx"], "patternProperties": {"x": True}},
                            {"required": ["all"], "unevaluatedProperties": True},
                        ]
                    },
                    "two": {
                        "oneOf": [
                            {"required": ["c"], "properties": {"c": True}},
                            {"required": ["d"], "properties": {"d": True}},
                        ]
                    },
                },
                "oneOf": [{"$ref": "#/$defs/one"}, {"required": ["a"], "properties": {"a": True}}],
                "unevaluatedProperties": False,
            },
            [{}, {"a": 1}, {"b": 1}, {"c": 1}, {"a": 1, "b": 1}, {"c": 1, "d": 1}, {"xx": 1, "foox": 1},
             {"xx": 1, "foo": 1}, {"all": 1, "foo": 1}, {"all": 1, "a": 1}],
        ),
    ],
)
def test_negation_of_applicators(schema: Any, insts: List[Any]) -> None:
    agree(schema, insts)


def test_negation_of_wide_oneof_is_refused() -> None:
    schema = {"not": {"oneOf": [{"const": i} for i in range(9)] + [{"type": "string"}]}}
    with pytest.raises(xgr.UnsupportedFeatureError, match="oneOf with more than 8 branches"):
        _COMPILER.compile_json_schema(schema, strict_mode=False)


@pytest.mark.parametrize(
    "schema,insts",
    [
        (
            # oneOf of closed objects that overlap: "X and not Y" needs "a key Y does not allow".
            {
                "oneOf": [
                    {"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": False},
                    {"type": "object", "properties": {"a": {}, "c": {}}, "additionalProperties": False},
                ]
            },
            [{}, {"a": 1}, {"b": 1}, {"c": 1}, {"a": 1, "b": 2}, {"a": 1, "c": 2}, {"b": 1, "c": 1}, {"d": 1}],
        ),
        (
            {
                "type": "object",
                "properties": {"x1": {}, "y": {"type": "integer"}, "z": {}},
                "additionalProperties": False,
                "not": {"properties": {"y": {"minimum": 0}}, "patternProperties": {"^x": {}}, "additionalProperties": False},
            },
            [{}, {"x1": 1}, {"y": 1}, {"y": -1}, {"z": 0}, {"x1": 0, "z": 0}, {"y": 2, "z": 0}],
        ),
    ],
)
def test_negation_of_closed_objects(schema: Any, insts: List[Any]) -> None:
    agree(schema, insts)


def test_negation_of_key_constraints_with_listed_keys() -> None:
    # The goal allows the keys a, b, x1 only: "some key fails patternProperties /
    # additionalProperties / propertyNames" has one witness per listed key.
    base = {"type": "object", "properties": {"a": {}, "b": {}, "x1": {}}, "additionalProperties": False}
    negated = {
        "patternProperties": {"^x": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
        "propertyNames": {"maxLength": 1},
    }
    schema = {**base, "not": negated}
    insts = [{}, {"a": "s"}, {"a": 1}, {"x1": 1}, {"x1": "s"}, {"a": "s", "b": "t"}, {"b": None}, {"x1": 2, "a": "s"}]
    agree(schema, insts)


def test_negation_of_closed_object_beside_open_one_is_refused() -> None:
    schema = {"type": "object", "not": {"properties": {"a": {}}, "additionalProperties": False}}
    with pytest.raises(xgr.UnsupportedFeatureError, match="not a listed set"):
        _COMPILER.compile_json_schema(schema, strict_mode=False)


@pytest.mark.parametrize(
    "schema,insts",
    [
        ({"not": {"type": "array", "items": {"type": "integer"}}}, [[], [1, 2], [1, "a"], ["a"], 3, "s", {}]),
        ({"not": {"minItems": 2, "maxItems": 3}}, [[], [1], [1, 2], [1, 2, 3], [1, 2, 3, 4], None]),
        ({"not": {"items": False}}, [[], [1], "x"]),
        ({"not": {"contains": {"type": "string"}}}, [[], [1], ["a"], [1, "a"], [None, 2], 5]),
        (
            {"type": "array", "items": {"enum": [1, 2, "a"]}, "uniqueItems": True, "not": {"contains": {"const": 2}}},
            [[], [1], [2], [1, "a"], ["a", 2], [1, 1]],
        ),
        (
            {"oneOf": [{"contains": {"type": "integer"}}, {"contains": {"type": "string", "maxLength": 1}}]},
            [[], [1], ["a"], ["ab"], [1, "a"], [1, "ab"], [None], "s"],
        ),
        (
            # Overlapping oneOf branches on arrays: "X and not Y" needs "an item failing Y's items".
            {
                "oneOf": [
                    {"type": "array", "items": {"type": "integer"}},
                    {"type": "array", "items": {"enum": [1, 2, "a"]}, "minItems": 1},
                ]
            },
            [[], [1], [3], [1, 2], [1, 3], ["a"], [1, "a"], ["b"], [0.5]],
        ),
        (
            {"type": "object", "properties": {"l": {"type": "array"}}, "not": {"properties": {"l": {"items": {"enum": [1, 2]}}}}},
            [{}, {"l": []}, {"l": [1]}, {"l": [1, 3]}, {"l": [[1]]}],
        ),
    ],
)
def test_negation_of_array_constraints(schema: Any, insts: List[Any]) -> None:
    agree(schema, insts)


def test_negation_skips_constraints_of_excluded_types() -> None:
    # The goal is a string: the closed object and the multipleOf inside the negation cannot be
    # what fails, so they need no (refused) negation.
    closed = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    schema = {"type": "string", "not": {"oneOf": [closed, {"multipleOf": 3}, {"maxLength": 2}]}}
    agree(schema, ["", "ab", "abc", 3, {"a": 1}])


def test_negation_of_prefix_items_is_refused() -> None:
    with pytest.raises(xgr.UnsupportedFeatureError, match="array constraints"):
        _COMPILER.compile_json_schema({"not": {"prefixItems": [{"type": "integer"}]}}, strict_mode=False)

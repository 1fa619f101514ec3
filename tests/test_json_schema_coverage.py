"""JSON Schema coverage work: long string bounds built from shared blocks, open objects whose key
exclusions share their continuations, and the further keywords compiled since; each case agrees
with ``jsonschema`` under both spellings."""

from __future__ import annotations

import json
from typing import Any, List

import pytest

import grammask as xgr

jsonschema = pytest.importorskip("jsonschema")

_INFO = xgr.TokenizerInfo([])
_COMPILER = xgr.GrammarCompiler(_INFO, cache_enabled=False)


def valid(schema: Any, inst: Any) -> bool:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(inst)


def agree(schema: Any, instances: List[Any], spellings=("canonical", "any")) -> None:
    """Every instance (``json.dumps``, both ``ensure_ascii``) is accepted iff ``jsonschema`` says valid."""
    for spelling in spellings:
        cg = _COMPILER.compile_json_schema(schema, strict_mode=False, spelling=spelling)
        for inst in instances:
            for ensure_ascii in (True, False):
                text = json.dumps(inst, ensure_ascii=ensure_ascii)
                m = xgr.GrammarMatcher(cg, terminate_without_stop_token=True)
                got = bool(m.accept_string(text)) and m.is_completed()
                assert got == valid(schema, inst), (spelling, schema, text[:80], len(inst) if isinstance(inst, str) else "")


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


def test_dependent_required_past_any_order_bound() -> None:
    # Nine keys (past the any-order key-set bound): schema order, dependency keys tracked exactly.
    props = {f"k{i}": {"type": "integer"} for i in range(9)}
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

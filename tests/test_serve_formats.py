"""``grammask.serve.formats`` and ``grammask.serve.tools`` without a server or a model: cache keys,
Lark detection, request errors, tool grammars, structural-tag conversion, tool-call parsing."""

from __future__ import annotations

import json

import pytest
from grammask import GrammarCompiler, GrammarMatcher, TokenizerInfo, VocabType
from grammask.serve.formats import grammar_spec, is_lark
from grammask.serve.tools import (
    compile_structural_tag,
    RequestError,
    normalize_tool_choice,
    parse_tool_calls,
    tool_grammar,
)


@pytest.fixture(scope="module")
def compiler():
    tokens = [bytes([b]).decode("latin-1") for b in range(256)] + ["<eos>"]
    info = TokenizerInfo(tokens, VocabType.RAW, stop_token_ids=[256], special_token_ids=[256])
    return GrammarCompiler(info)


def _accepts(compiled, text):
    m = GrammarMatcher(compiled, terminate_without_stop_token=True)
    return m.accept_string(text) and m.is_completed()


def test_keys_are_canonical():
    a = grammar_spec(
        {
            "type": "json_schema",
            "json_schema": {
                "name": "x",
                "schema": {"type": "object", "required": ["a"], "properties": {"a": {}}},
            },
        }
    )
    b = grammar_spec(
        {
            "type": "json_object",
            "schema": json.dumps({"properties": {"a": {}}, "required": ["a"], "type": "object"}),
        }
    )
    assert a.key == b.key
    assert (
        grammar_spec({"type": "regex", "pattern": "a"}).key
        != grammar_spec({"type": "grammar", "grammar": 'root ::= "a"'}).key
    )
    assert grammar_spec(None) is None and grammar_spec({"type": "text"}) is None


def test_lark_detection():
    assert is_lark('start: "a"')
    assert is_lark('%llguidance {}\nstart: "a"')
    assert not is_lark('root ::= "a"')
    assert is_lark('root ::= "a"', "lark") and not is_lark('start: "a"', "ebnf")


@pytest.mark.parametrize(
    "rf",
    [
        "json",
        {"type": "nope"},
        {"type": "json_schema"},
        {"type": "json_schema", "json_schema": {"name": "bad name!", "schema": {}}},
        {"type": "grammar", "grammar": ""},
        {"type": "regex"},
        {"type": "json_object", "schema": "{"},
        {"type": "structural_tag"},
    ],
)
def test_malformed_formats_are_request_errors(rf):
    with pytest.raises(RequestError):
        grammar_spec(rf)


def test_tool_choice_normalization():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert normalize_tool_choice(tools, None) == ("auto", [tools[0]["function"]])
    assert normalize_tool_choice(None, None)[0] == "none"
    assert (
        normalize_tool_choice(tools, {"type": "function", "function": {"name": "f"}})[0]
        == "required"
    )
    for bad in ("sometimes", {"type": "function", "function": {"name": "g"}}):
        with pytest.raises(RequestError):
            normalize_tool_choice(tools, bad)
    with pytest.raises(RequestError):
        normalize_tool_choice([{"type": "function"}], "auto")


def test_generic_tool_grammar(compiler):
    fns = [
        {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"x": {"type": "integer"}},
                "required": ["x"],
            },
        },
        {"name": "g", "parameters": {"type": "object"}},
    ]
    _, build = tool_grammar(fns, "required", model_family="hermes")
    required = build(compiler)
    call = '<tool_call>\n{"name": "f", "arguments": {"x": 3}}\n</tool_call>'
    assert _accepts(required, call)
    assert _accepts(
        required, call + "\n" + call.replace('"f", "arguments": {"x": 3}', '"g", "arguments": {}')
    )
    assert not _accepts(required, "hello")
    assert not _accepts(required, call.replace('"x": 3', '"x": "3"'))
    auto = tool_grammar(fns, "auto", model_family="hermes")[1](compiler)
    assert _accepts(auto, "hello") and _accepts(auto, "hi " + call)
    single = tool_grammar(fns, "required", model_family="hermes", parallel=False)[1](compiler)
    assert not _accepts(single, call + "\n" + call)


def test_parse_tool_calls():
    text = 'Sure. <tool_call>\n{"name": "f", "arguments": {"x": 3}}\n</tool_call>\n<tool_call>\n{"n\\u0061me": "g", "arguments": {}}\n</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "Sure."
    assert [c["function"]["name"] for c in calls] == ["f", "g"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"x": 3}
    assert parse_tool_calls("plain") == ("plain", [])


def test_structural_tag_conversion(compiler):
    schema = {"type": "object", "properties": {"c": {"type": "string"}}, "required": ["c"]}
    fmt = {
        "format": {
            "type": "triggered_tags",
            "triggers": ["<f="],
            "tags": [
                {
                    "type": "tag",
                    "begin": "<f=a>",
                    "content": {"type": "json_schema", "json_schema": schema},
                    "end": "</f>",
                },
                {
                    "type": "tag",
                    "begin": "<f=b>",
                    "content": {
                        "type": "sequence",
                        "elements": [
                            {"type": "const_string", "value": "x"},
                            {"type": "regex", "pattern": "[0-9]+"},
                        ],
                    },
                    "end": "</f>",
                },
            ],
        }
    }
    compiled = compile_structural_tag(compiler, {"type": "structural_tag", **fmt})
    assert _accepts(compiled, 'text <f=a>{"c": "v"}</f> more <f=b>x12</f>')
    assert _accepts(compiled, "no tags at all")
    assert not _accepts(compiled, "<f=a>{}</f>")
    legacy = {"structures": [{"begin": "<w>", "schema": schema, "end": "</w>"}], "triggers": ["<w"]}
    compiled = compile_structural_tag(compiler, {"type": "structural_tag", **legacy})
    assert _accepts(compiled, 'a <w>{"c": ""}</w>')
    # any_text.max_tokens is a token budget (tests/test_max_tokens.py); strings ignore it.
    budgeted = {"type": "structural_tag", "format": {"type": "any_text", "max_tokens": 3}}
    assert _accepts(compile_structural_tag(compiler, budgeted), "any text, however long")
    # Token-level formats are supported (docs/structural_tags.md).
    compile_structural_tag(compiler, {"type": "structural_tag", "format": {"type": "token", "token": 1}})

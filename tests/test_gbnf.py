"""GBNF as llama.cpp writes it: every grammar of testdata/gbnf (llama.cpp's grammars/ folder,
see its README for source and license) compiles unchanged and accepts sample documents; the
current upstream JSON grammar's empty first alternative (`ws ::= | " " | ...`) is accepted."""

from __future__ import annotations

from pathlib import Path

import grammask as xgr
import pytest

GBNF = Path(__file__).resolve().parent.parent / "testdata" / "gbnf"

SAMPLES = {
    "json.gbnf": (['{"a": [1, -2, {"b": true}], "c": "x\\n\\u00e9"}', "{}"], ["[1]", '{"a": 1.5}']),
    "json_arr.gbnf": (['[\n{"a": 1.5e3, "b": null},\n"x"]', "[\n]"], ["[]", '{"a": 1}']),
    "chess.gbnf": (["1. e4 e5\n2. Nf3 Nc6\n", "1. O-O Qxd8+\n2. exd8=Q# a6\n"], ["1. e4\n", "1. e9 e5\n2. a3 a4\n"]),
    "list.gbnf": (["- milk\n- eggs\n"], ["- \n", "milk\n"]),
    "english.gbnf": (["Hello, world! 42\tok"], ["Hello  world", ""]),
    "japanese.gbnf": (["こんにちは 世界"], ["hello"]),
    "c.gbnf": (["int main(){return 0;}", "float f(int x){x = x+1;while(x<3){x = x*2;}}", ""], ["int main() {}", "intmain(){}"]),
    "arithmetic.gbnf": (["a+1=b\n", "(x *2) = 10\n"], ["a+1=b", "", "A=1\n"]),
}

CURRENT_JSON = r'''
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
'''


def accepts(grammar: xgr.Grammar, s: str) -> bool:
    return xgr.testing._is_grammar_accept_string(grammar, s)


def test_every_file_has_samples():
    assert sorted(p.name for p in GBNF.glob("*.gbnf")) == sorted(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_llama_cpp_grammars_compile_and_accept_samples(name):
    g = xgr.Grammar.from_ebnf((GBNF / name).read_text(encoding="utf-8"))
    good, bad = SAMPLES[name]
    for s in good:
        assert accepts(g, s), (name, s)
    for s in bad:
        assert not accepts(g, s), (name, s)


def test_empty_first_alternative_as_in_current_json_gbnf():
    g = xgr.Grammar.from_ebnf(CURRENT_JSON)
    assert accepts(g, '{"a": [1, 2.5e3],\n  "b": "x"} ')
    assert accepts(g, "{}")
    assert not accepts(g, '{"a": 01}')
    assert not accepts(g, '{"a":  1}')  # at most one space
    g2 = xgr.Grammar.from_ebnf('root ::= "a" x "b"\nx ::= "c" | | "d"')
    assert [accepts(g2, s) for s in ["ab", "acb", "adb", "aeb"]] == [True, True, True, False]

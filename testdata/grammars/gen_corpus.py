#!/usr/bin/env python3
"""Writes the grammar corpus (one JSON file per case) and checks every xgrammar-dialect
expectation against XGrammar 0.2.8, the oracle. Run: python3 testdata/grammars/gen_corpus.py
(--check-only verifies the files already on disk without rewriting them)."""
import json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))

JSON_EBNF = r'''root ::= object | array
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws (member (ws "," ws member)* ws)? "}"
member ::= string ws ":" ws value
array ::= "[" ws (value (ws "," ws value)* ws)? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1f] | "\\" escape
escape ::= ["\\/bfnrt] | "u" [0-9A-Fa-f]{4}
number ::= "-"? integer fraction? exponent?
integer ::= "0" | [1-9] [0-9]*
fraction ::= "." [0-9]+
exponent ::= [eE] [+\-]? [0-9]+
ws ::= [ \n\r\t]*
'''

OLLAMA_JSON = r'''json = value .

value = object | array | string | number | "true" | "false" | "null" .

object = "{" ws "}" | "{" members "}" .
members = member { "," member } .
member = ws string ws ":" element .

array = "[" ws "]" | "[" elements "]" .
elements = element { "," element } .
element = ws value ws .

string = "\"" { character } "\"" .
character = unescaped | escaped .
unescaped = " " | "!" | "#" … "[" | "]" … "~" .
escaped = "\\" ( "\"" | "\\" | "/" | "b" | "f" | "n" | "r" | "t" ) .

number = [ "-" ] integer [ fraction ] [ exponent ] .
integer = "0" | onenine { digit } .
fraction = "." digit { digit } .
exponent = ( "e" | "E" ) [ "+" | "-" ] digit { digit } .
digit = "0" … "9" .
onenine = "1" … "9" .

ws = { " " | "\t" | "\n" | "\r" } .
'''

OLLAMA_SCHEMA = r'''root = "{" ws name_field "," ws age_field ws "}" .

name_field = "\"name\"" ws ":" ws string .
age_field = "\"age\"" ws ":" ws number .

string = "\"" { char } "\"" .
char = " " | "!" | "#" … "~" .

number = [ "-" ] digit { digit } .
digit = "0" … "9" .

ws = { " " | "\n" } .
'''

CASES = [
    # ---- literals and escapes ----
    dict(name="literal_simple", grammar='root ::= "hello"', accept=["hello"], reject=["", "hell", "hello!", "Hello"]),
    dict(name="empty_string", grammar='root ::= ""', accept=[""], reject=["a", " "]),
    dict(name="empty_group", grammar='root ::= "a" () "b"', accept=["ab"], reject=["a", "a b"]),
    dict(name="string_escapes", grammar=r'root ::= "\"\\\/\'\?\n\r\t\b\f\a\v\e"',
         accept=["\"\\/'?\n\r\t\b\f\a\v\x1b"], reject=["\"\\/'?", "\\n"]),
    dict(name="string_nul_escape", grammar=r'root ::= "a\0b"', accept=["a\x00b"], reject=["ab", "a0b"]),
    dict(name="hex_unicode_escapes", grammar=r'root ::= "\x41\xe9\x1F600-\u00fc\U0001F680"',
         accept=["Aé😀-ü🚀"], reject=["A", "Ae😀-ü🚀"]),
    dict(name="utf8_literal", grammar='root ::= "héllo, 世界 😀"', accept=["héllo, 世界 😀"], reject=["hello, 世界 😀", "héllo, 世界"]),
    # ---- character classes ----
    dict(name="class_ranges", grammar="root ::= [a-zA-Z0-9_]+", accept=["a", "Z9_", "abc_XYZ_019"], reject=["", "-", "a-b", "é"]),
    dict(name="class_negated", grammar="root ::= [^a-c\\n]*", accept=["", "xyz", "é😀", "d\t"], reject=["a", "xb", "\n"]),
    dict(name="class_any", grammar="root ::= [^]{3}", accept=["abc", "\n\x00😀", "世界!"], reject=["ab", "abcd"]),
    dict(name="class_empty_matches_nothing", grammar='root ::= "a" | []', accept=["a"], reject=["", "b", "]"]),
    dict(name="class_escapes", grammar=r"root ::= [\^\$\\\.\*\+\?\(\)\[\]\{\}\|\/\-]+",
         accept=["^$\\.*+?()[]{}|/-"], reject=["a", ""]),
    dict(name="class_dash_edges", grammar="root ::= [-a]+ [b-]+", accept=["-b", "a-a--b"], reject=["a", "c", "-"]),
    dict(name="class_unicode", grammar=r"root ::= [α-ω\u4e00-\u9fff\U0001F600-\U0001F64F]+",
         accept=["αβω", "世界", "😀🙏", "λ中😎"], reject=["a", "🚀", "Ω"]),
    dict(name="class_hex_controls", grammar=r'root ::= [\x00-\x1f]+ "|" [^\x00-\x1f"\\]+',
         accept=["\x00\x1f|abc", "\t|é"], reject=["|abc", "\t|a\tb", "\t|a\"b"]),
    # ---- repetition ----
    dict(name="repeat_star_plus_opt", grammar='root ::= "a"* "b"+ "c"?',
         accept=["b", "aab", "abbbc", "bc"], reject=["", "a", "ac", "abcc"]),
    dict(name="repeat_exact", grammar='root ::= [0-9]{3}', accept=["123", "000"], reject=["12", "1234", ""]),
    dict(name="repeat_zero", grammar='root ::= "a"{0} "b"', accept=["b"], reject=["ab"]),
    dict(name="repeat_min", grammar='root ::= "ab"{2,}', accept=["abab", "ababab"], reject=["", "ab", "aba"]),
    dict(name="repeat_range", grammar='root ::= ("x" | "yz"){2,4}', accept=["xx", "xyz", "yzyzyzyz", "xyzxx"], reject=["x", "xxxxx", "yzy"]),
    dict(name="repeat_unbounded_printed_form", grammar='root ::= "a"{0, -1} "b"', accept=["b", "aaab"], reject=["a"]),
    dict(name="repeat_large_bound", grammar='root ::= "a"{0,1000} "b"', accept=["b", "a" * 1000 + "b"], reject=["a" * 1001 + "b"]),
    dict(name="repeat_nullable_body", grammar='root ::= ("a"?)* "b"', accept=["b", "aab"], reject=["", "ba"]),
    # ---- structure ----
    dict(name="nullable_rules", grammar='root ::= a b c\na ::= "x"?\nb ::= ("y" | "")\nc ::= a*',
         accept=["", "x", "y", "xy", "xyxxx", "xx"], reject=["z", "yy"]),
    dict(name="left_recursion", grammar='root ::= root "a" | "b"', accept=["b", "ba", "baaa"], reject=["", "a", "ab"]),
    dict(name="right_recursion", grammar='root ::= "a" root | "b"', accept=["b", "ab", "aaab"], reject=["", "a", "ba"]),
    dict(name="ambiguous_expression", grammar='root ::= root "+" root | "a"',
         accept=["a", "a+a", "a+a+a+a"], reject=["", "+", "a+", "aa"]),
    dict(name="ambiguous_nullable", grammar='root ::= x x x\nx ::= "a"?', accept=["", "a", "aa", "aaa"], reject=["aaaa"]),
    dict(name="nullable_cycle", grammar='root ::= x "b"\nx ::= x* | "a"', accept=["b", "ab", "aaab"], reject=["", "ba", "abb"],
         skip_oracle=True,
         note="x derives the empty string, \"a\" and any sequence of x, so the language is a* b. "
              "XGrammar 0.2.8 crashes (segmentation fault) on rules like x ::= x*, so this case is not checked against it."),
    dict(name="mutual_recursion", grammar='root ::= even\neven ::= "" | "a" odd\nodd ::= "a" even',
         accept=["", "aa", "aaaa"], reject=["a", "aaa"]),
    dict(name="balanced_parens", grammar='root ::= ("(" root ")")*', accept=["", "()", "(())()", "((()))"], reject=["(", ")(", "(()"]),
    dict(name="palindromes", grammar='root ::= "" | "a" | "b" | "a" root "a" | "b" root "b"',
         accept=["", "aba", "abba", "babbab"], reject=["ab", "abab"]),
    dict(name="arithmetic", grammar='''root ::= expr
expr ::= expr ("+" | "-") term | term
term ::= term ("*" | "/") factor | factor
factor ::= number | "(" expr ")" | "-" factor
number ::= [0-9]+ ("." [0-9]+)?''',
         accept=["1", "1+2*3", "(1+2)*3", "-4.5/(2-1)", "--1"], reject=["", "1+", "(1", "1..2", "1 + 2"]),
    dict(name="forward_references_and_names", grammar='root ::= a.b c-d _e\na.b ::= "1"\nc-d ::= "2"\n_e ::= "3"',
         accept=["123"], reject=["12", "1234"]),
    dict(name="comments_and_layout", grammar='# header comment\nroot ::= "a" # after a\n    | "b"  # another\n\n  other ::= "c"\n',
         accept=["a", "b"], reject=["c", ""]),
    dict(name="multiline_alternatives", grammar='root ::= (\n  "x"\n  | "y"\n)\n  "z"', accept=["xz", "yz"], reject=["z", "x"]),
    dict(name="nested_groups", grammar='root ::= ((("a" | "b") ("c" | ("d" "e")))+)?',
         accept=["", "ac", "bde", "acbdeac"], reject=["a", "ad", "ce"]),
    dict(name="lookahead_assertion", grammar='root ::= item ("," item)* ";"\nitem ::= [a-z]+ (= [,;])',
         accept=["a;", "ab,cd;", "x,y,z;"], reject=["", "a", "a,;", ",a;"],
         note="Lookahead (= ...) must match what follows the rule; here it always holds in valid strings. "
              "XGrammar 0.2.8 rejects choices inside a lookahead and does not enforce lookaheads in accept_string."),
    dict(name="xml_like_nesting", grammar='root ::= elem\nelem ::= "<" name ">" (elem | [a-z ])* "</" name ">"\nname ::= "a" | "b"',
         accept=["<a></a>", "<a>hi <b>x</b></b>", "<b><a></a></a>"], reject=["<a>", "<c></c>", "<a>X</a>"],
         note="Context-free, so open and close names are not required to match."),
    dict(name="csv_lines", grammar='root ::= line ("\\n" line)* "\\n"?\nline ::= field ("," field)*\nfield ::= [^,\\n"]* | "\\"" ([^"] | "\\"\\"")* "\\""',
         accept=["a,b\n1,2", "\"x,\"\"y\"\"\",z\n", "", "a\n\n"], reject=["\"a", "a\"b", "a,\"b"]),
    dict(name="builtin_json_text", grammar=JSON_EBNF,
         accept=["{}", "[]", '{"a": [1, -2.5e+3, true, false, null, "\\u00e9\\n"]}', '[{"k":{}} ,[ ]]', '["é😀"]', "[-0]"],
         reject=["", " {}", "{} ", "1", '"x"', "[01]", "[1.]", '["\x01"]', "{'a': 1}", '{"a" 1}', "[1,]"]),
    dict(name="regex_macro", grammar='root ::= "id=" Regex("[a-z_][a-z0-9_]*") ("," Regex("-?(0|[1-9][0-9]*)(\\\\.[0-9]+)?"))*',
         accept=["id=x", "id=_a1,0,-12.5,3"], reject=["id=", "id=1x", "id=a,01", "id=a,1."],
         xgrammar_deviates=["id=a,01"],
         note="Regex(...) macro: the pattern's full-match language; '.' matches every character, as in XGrammar. "
              "XGrammar 0.2.8 wrongly accepts 'id=a,01': it matches Regex(\"(0|[1-9][0-9]*)(\\\\.[0-9]+)?\") against \"01\"."),
    dict(name="regex_macro_json_string", grammar='root ::= "\\"" Regex("[^a]+|x.y", json_string=true) "\\""',
         accept=['"b"', '"é 😀"', '"x\x7fy"', '"xay"'], reject=['""', '"a"', '"\\n"', '"\n"', '"\x01"', '"b\\"', '"x\\"y"'],
         note="json_string=true keeps the strings of the pattern without '\"', '\\\\' and U+0000..U+001F (no escapes)."),
    dict(name="unicode_rule_mix", grammar='root ::= greet " " who\ngreet ::= "héllo" | "你好"\nwho ::= [^ ]+',
         accept=["héllo 世界", "你好 😀x"], reject=["hello world", "你好 "]),
    # ---- ISO dialect ----
    dict(name="iso_ollama_json", dialect="iso", root="json", grammar=OLLAMA_JSON,
         accept=['{"a": 1}', "[1, 2.5, -3e10]", "true", '"x\\n"', '{ }', "[]"],
         reject=["", "{", "[1,]", "01", '"\x01"', "tru", " {}", "{} "]),
    dict(name="iso_ollama_schema", dialect="iso", grammar=OLLAMA_SCHEMA,
         accept=['{"name": "Bob", "age": 42}', '{ "name":"x",\n"age":-1 }'],
         reject=['{"age": 42, "name": "Bob"}', '{"name": "Bob"}', '{"name": "Bob", "age": 4.2}']),
    dict(name="iso_constructs", dialect="iso", grammar='root = "a" [ "b" ] { "c" | "d" } ( "e" | "f" ) .',
         accept=["ae", "abf", "acdce", "abdddf"], reject=["a", "abbe", "ag"]),
    dict(name="iso_ranges_and_comments", dialect="iso",
         grammar='// Go-style comment\nroot = letter { letter | digit } . /* block */\nletter = "a" … "z" | "A" … "Z" | `_` .\ndigit = "0" … "9" . # hash comment\n',
         accept=["a", "x1_Y2", "_"], reject=["", "1a", "a-b"]),
    dict(name="iso_empty_production", dialect="iso", grammar='root = "x" opt "y" .\nopt = .', accept=["xy"], reject=["x", "xoy"]),
    # ---- parse errors ----
    dict(name="error_unclosed_group", grammar='root ::= ("a" | "b"', error="expected ')' to close the group opened at line 1, column 10"),
    dict(name="error_undefined_rule", grammar='root ::= a', error="rule 'a' is referenced but not defined"),
    dict(name="error_duplicate_rule", grammar='root ::= "a"\nroot ::= "b"', error="rule 'root' is defined more than once"),
    dict(name="error_missing_root", grammar='start ::= "a"', error="the root rule 'root' is not defined"),
    dict(name="error_stacked_quantifiers", grammar='root ::= "a"+*', error="quantifiers cannot be stacked"),
    dict(name="error_open_lower_bound", grammar='root ::= "a"{,3}', error="expected a non-negative integer"),
    dict(name="error_reversed_bounds", grammar='root ::= "a"{3,2}', error="upper bound below its lower bound"),
    dict(name="error_class_escape_d", grammar='root ::= [\\d]+', error="'\\d' is not supported"),
    dict(name="error_reversed_class_range", grammar='root ::= [z-a]', error="is above its upper bound"),
    dict(name="error_unterminated_string", grammar='root ::= "abc\n"', error="expected '\"' to close the string literal"),
    dict(name="error_bad_escape", grammar='root ::= "\\q"', error="unknown escape sequence"),
    dict(name="error_lone_surrogate", grammar='root ::= "\\uD800"', error="lone UTF-16 surrogate",
         note="XGrammar 0.2.8 accepts \\uD800; grammask rejects it because a surrogate is not a character and has no UTF-8 encoding."),
    dict(name="error_code_point_too_large", grammar='root ::= "\\x110000"', error="beyond the largest code point",
         note="XGrammar 0.2.8 accepts this; grammask rejects code points above U+10FFFF."),
    dict(name="error_huge_repeat_bound", grammar='root ::= "a"{4294967296}', error="exceeds the limit",
         note="XGrammar 0.2.8 silently wraps this bound to 0; grammask reports it."),
    dict(name="error_rule_not_at_line_start", grammar='root ::= "a" b ::= "c"', error="must be the first token on its line"),
    dict(name="gbnf_empty_alternative", grammar='root ::= "a" | | "b"\nws ::= | " " | "\\n" [ \\t]{0,2}\nx ::= "c" |',
         accept=["a", "", "b"], reject=["ab", " "], skip_oracle=True,
         note="Empty alternatives are the empty string, as llama.cpp's GBNF writes them (ws ::= | \" \" | ...); "
              "XGrammar 0.2.8 rejects them."),
    dict(name="error_empty_body", grammar='root ::=\n', error="expected an element"),
    dict(name="error_lookahead_not_at_end", grammar='root ::= "a" (= "b") "c"', error="expected the end of the rule after its lookahead assertion"),
    dict(name="tag_dispatch_macro", grammar='root ::= TagDispatch(("<a>", x))\nx ::= "b"',
         accept=["", "hi", "<a>b", "hi <a>b there <a>b", "x<ab", "<a>b<a", "a<a>bc"], reject=["<a>", "<a>c", "<a>b<a>"],
         note="TagDispatch(...): free text until a trigger, then its rule, looping."),
    dict(name="tag_dispatch_excludes_only", grammar='root ::= TagDispatch(loop_after_dispatch=false, excludes=("</t>", "c"))',
         accept=["", "hello", "x</t", "a b", "</ t>"], reject=["x</t>", "</t>", "abc", "c"],
         note="TagDispatch without tuples (XGrammar prints an any_text with an end so): free text without the excludes."),
    dict(name="tag_dispatch_empty", grammar='root ::= TagDispatch() "!"',
         accept=["!", "hello!", "x</t>!", "!!"], reject=["", "hello"],
         note="TagDispatch() with no tuples and no excludes: any text."),
    dict(name="regex_macro_flags", grammar='root ::= Regex("[a-z]+", flags="i") " " Regex("a.b", flags="u") " " Regex("a.b", flags="s")',
         accept=["AbC a\rb a\nb", "x axb ayb"], reject=["a1 axb ayb", "a a\nb a\nb"],
         note="Regex flags as XGrammar reads them: i folds case; with a flags argument '.' excludes \\n unless s."),
    dict(name="substring_macro", grammar='root ::= "<" Substring("abc", "de", "f") ">"',
         accept=["<>", "<abc>", "<abcde>", "<def>", "<abcdef>"], reject=["<cde>", "<abcf>", "<ab>"],
         note="Substring(...): any run of whole consecutive chunks, the empty one included."),
    dict(name="rule_options", grammar='root ::= x y\nx[max_chars=3, capture="n"] ::= [a-z]+\ny[lazy, temperature=0.5] ::= [0-9]* "."',
         accept=["ab1.", "abc.", "a.", "abc123."], reject=["abcd1.", "a1..", "."],
         note="max_chars=3: x ends at its third letter; lazy: y ends at its first '.'."),
    dict(name="error_unsupported_internal_rule_option", grammar='root ::= x\nx[capture_hidden_body_rule_id=1] ::= "b"', error="internal rule option",
         note="XGrammar's printer-only option; refused."),
    dict(name="error_nesting_too_deep", grammar="root ::= " + "(" * 1001 + '"a"' + ")" * 1001, error="nesting of groups exceeds the limit of 1000",
         note="XGrammar's limit differs; grammask allows at most 1000 nested groups."),
    dict(name="error_iso_missing_period", dialect="iso", grammar='root = "a"', error="expected '.' to end the rule"),
    dict(name="error_iso_mismatched_bracket", dialect="iso", grammar='root = ( "a" ] .', error="expected ')' to close the group"),
]

# Errors that XGrammar reports too (verified below); others carry a note explaining the difference.
XGRAMMAR_ACCEPTS = {"error_lone_surrogate", "error_code_point_too_large", "error_huge_repeat_bound",
                    "error_unsupported_internal_rule_option", "error_nesting_too_deep"}


SKIP_ORACLE = {c["name"] for c in CASES if c.get("skip_oracle")}
# Strings on which XGrammar 0.2.8 is known to be wrong (each explained in the case's note); the
# check requires XGrammar to still disagree on them, so the notes stay true.
DEVIATES = {c["name"]: c["xgrammar_deviates"] for c in CASES if c.get("xgrammar_deviates")}


def file_name(case):
    return os.path.join(HERE, case["name"] + ".json")


def normalized(case):
    out = {"name": case["name"], "dialect": case.get("dialect", "xgrammar"), "grammar": case["grammar"],
           "root": case.get("root", "root")}
    if "error" in case:
        out["error"] = case["error"]
    else:
        out["accept"] = case["accept"]
        out["reject"] = case["reject"]
    if "note" in case:
        out["note"] = case["note"]
    return out


def check_with_xgrammar(case):
    """Returns a list of problems: expectations XGrammar disagrees with."""
    import xgrammar as xg
    from xgrammar.testing import _is_grammar_accept_string as accepts
    problems = []
    if case["dialect"] != "xgrammar" or case["name"] in SKIP_ORACLE:
        return problems
    if "error" in case:
        if case["name"] in XGRAMMAR_ACCEPTS:
            return problems
        try:
            xg.Grammar.from_ebnf(case["grammar"], root_rule_name=case["root"])
            problems.append("XGrammar accepts a grammar we expect to fail")
        except Exception:
            pass
        return problems
    try:
        g = xg.Grammar.from_ebnf(case["grammar"], root_rule_name=case["root"])
    except Exception as e:
        return [f"XGrammar cannot parse it: {str(e).strip().splitlines()[-1]}"]
    deviates = DEVIATES.get(case["name"], ())
    for s in case["accept"]:
        if accepts(g, s) == (s in deviates):
            problems.append(f"XGrammar {'accepts' if s in deviates else 'rejects'} accept-string {s!r}")
    for s in case["reject"]:
        if accepts(g, s) != (s in deviates):
            problems.append(f"XGrammar {'rejects' if s in deviates else 'accepts'} reject-string {s!r}")
    return problems


def main():
    check_only = "--check-only" in sys.argv
    names = set()
    failed = False
    for case in CASES:
        c = normalized(case)
        assert c["name"] not in names, c["name"]
        names.add(c["name"])
        if check_only:
            with open(file_name(case), encoding="utf-8") as f:
                c = json.load(f)
        for p in check_with_xgrammar(c):
            failed = True
            print(f"{c['name']}: {p}")
        if not check_only:
            with open(file_name(case), "w", encoding="utf-8") as f:
                json.dump(c, f, ensure_ascii=False, indent=2)
                f.write("\n")
    print(f"{len(CASES)} cases {'checked' if check_only else 'written and checked'}; "
          f"{'PROBLEMS' if failed else 'all xgrammar-dialect expectations agree with XGrammar'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

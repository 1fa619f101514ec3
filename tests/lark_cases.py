"""Lark grammar/string cases run by tests/test_lark.py and bench/lark_bench.py.

``CASES`` maps a case id to ``(lark_text, [strings])``; every string is checked with grammask,
XGrammar 0.2.8 and llguidance in the same run. ``XGRAMMAR_DIFF`` and ``LLGUIDANCE_DIFF`` list the
(case id, string) pairs where grammask's answer differs from that engine, each with the reason
(docs/lark.md has the same list). ``GRAMMASK_ONLY`` lists grammars that a peer refuses to compile.
"""

from __future__ import annotations

JSON_OBJ = '{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}'

CASES: dict[str, tuple[str, list[str]]] = {
    # literals, alternatives, rules
    "lit": ('start: "ab"', ["ab", "a", "abb", ""]),
    "alt": ('start: "a" | "b"', ["a", "b", "ab", "c"]),
    "rules": ('start: greet " " NAME\ngreet: "hi" | "hello"\nNAME: /[A-Z][a-z]+/', ["hi Bob", "hello Al", "hi bob", "hey Bob"]),
    "recursive": ('start: x\nx: "(" x ")" | "z"', ["z", "((z))", "((z)", "()"]),
    "left_rec": ('start: e\ne: e "+" t | t\nt: /[0-9]+/', ["1", "1+22+3", "1++2", "+1"]),
    "empty_alt": ('start: "a" | ', ["", "a", "aa"]),
    "empty_str": ('start: ""', ["", "a"]),
    "comments": ('start: "a" // one\n# two\n  | "b" // three', ["a", "b", "//"]),
    "multiline_alt": ('start: "a"\n     | "b"\n     | "c"', ["c", "d"]),
    "alias": ('start: "a" -> x\n | "b" -> y', ["a", "b", "ab"]),
    "prefix": ('?start: item+\n!item: "x" | "y"', ["xyx", "", "xz"]),
    "dash_name": ('start: my-rule\nmy-rule: "x"+', ["xx", "x-"]),
    # quantifiers
    "opt": ('start: "a"? "b"', ["b", "ab", "aab"]),
    "star": ('start: "a"* "b"', ["b", "aaab", "ba"]),
    "plus": ('start: "a"+', ["a", "aaaa", ""]),
    "brackets": ('start: ["a"] "b"', ["b", "ab", "a"]),
    "tilde": ('start: "a"~3', ["aaa", "aa", "aaaa"]),
    "tilde_range": ('start: "a"~2..3', ["aa", "aaa", "a", "aaaa"]),
    "brace_n": ('start: "ab"{2}', ["abab", "ab"]),
    "brace_range": ('start: "a"{1,2} "b"', ["ab", "aab", "aaab", "b"]),
    "brace_open": ('start: "a"{2,}', ["aa", "aaaaa", "a"]),
    "brace_upto": ('start: "a"{,2}', ["", "aa", "aaa"]),
    "group": ('start: ("a" | "b")+ "c"', ["abac", "c", "abc"]),
    # strings, escapes, ranges, case
    "escapes": ('start: "\\n\\t\\"\\\\"', ['\n\t"\\', "n"]),
    "unicode_esc": ('start: "\\u00e9x"', ["éx", "ex"]),
    "utf8": ('start: "héllo" | "日本"', ["héllo", "日本", "hello"]),
    "ci_string": ('start: "select"i', ["select", "SeLeCt", "selec"]),
    "range": ('start: "a".."f"+', ["abcf", "g", ""]),
    "range_term": ('start: HEX\nHEX: ("0".."9" | "a".."f")+', ["0af9", "0ag"]),
    # regexes
    "regex": ("start: /[a-z]+[0-9]?/", ["abc", "abc1", "1", "abc12"]),
    "regex_dot": ("start: /a.c/", ["abc", "a\nc", "a\rc", "ac"]),
    "regex_dot_s": ("start: /a.c/s", ["a\nc", "abc"]),
    "regex_i": ("start: /hello/i", ["HeLLo", "hallo"]),
    "regex_alt_group": ("start: /(ab|cd)*e/", ["abcde", "e", "abce"]),
    "regex_class_neg": ("start: /[^0-9]+/", ["ab\n", "a1"]),
    "regex_digit": ("start: /\\d+/", ["123", "١٢"]),
    "regex_word": ("start: /\\w+/", ["ab_1", "é"]),
    "regex_ws": ("start: /a\\s+b/", ["a \t\nb", "ab"]),
    "regex_bounded": ("start: /x{2,4}/", ["xx", "xxxx", "x", "xxxxx"]),
    "regex_slash": ("start: /a\\/b/", ["a/b", "ab"]),
    # terminals vs rules, %ignore
    "terminal_ref": ('start: NUM ("," NUM)*\nNUM: DIGIT+\nDIGIT: /[0-9]/', ["1,22,333", "1,,2", ""]),
    "terminal_chain": ('start: A\nA: B "x"\nB: C "y"\nC: "z"', ["zyx", "zy"]),
    "ignore_ws": ('start: WORD+\nWORD: /[a-z]+/\n%ignore " "', ["ab cd", "ab  cd", "abcd"]),
    "ignore_lead": ('start: "a" "b"\n%ignore " "', ["a b", " a b", "a b ", "ab"]),
    "ignore_initial": (
        '%grammar_options {"allow_initial_skip": true}\nstart: "a" "b"\n%ignore " "',
        [" a b", "a b"],
    ),
    "ignore_regex": ('start: "x" "=" NUMBER\n%import common.NUMBER\n%ignore /[ \\t]+/', ["x = 1.5", "x=2", "x =\t3e2", "x = "]),
    "ignore_terminal_no_ws": ('start: KEY\nKEY: "a" "b"\n%ignore " "', ["ab", "a b"]),
    "ignore_rule_ws": ('start: pair\npair: "a" "b"\n%ignore " "', ["a b", "ab"]),
    "ignore_comment": (
        'start: stmt+\nstmt: NAME ";"\n%import common.CNAME -> NAME\n%import common.WS\n'
        "%import common.CPP_COMMENT\n%ignore WS\n%ignore CPP_COMMENT",
        ["a; b;", "a; // c\nb;", "a b;"],
    ),
    "greedy_split": ("start: A A\nA: /a+/", ["aa", "aaa", "a"]),
    "greedy_split_ws": ('start: WORD WORD\nWORD: /[a-z]+/\n%ignore " "', ["ab cd", "abcd"]),
    # %import common
    "common_number": ("start: SIGNED_NUMBER\n%import common.SIGNED_NUMBER", ["-1.5e3", "+2", ".5", "1.", "e3", "-"]),
    "common_int": ("start: INT\n%import common.INT", ["007", "1a", ""]),
    "common_string": (
        "start: ESCAPED_STRING\n%import common.ESCAPED_STRING",
        ['"a\\"b"', '"x"', '"a', '"a\\qb"', '"a\nb"'],
    ),
    "common_cname": ("start: CNAME\n%import common.CNAME", ["_a1", "1a", "a-b"]),
    "common_list": ("start: WORD (WS WORD)*\n%import common (WORD, WS)", ["ab cd\tef", "ab1"]),
    "common_newline": ("start: LETTER+ NEWLINE\n%import common.LETTER\n%import common.NEWLINE", ["ab\n", "ab\r\n\n", "ab"]),
    "common_hex": ("start: HEXDIGIT+\n%import common.HEXDIGIT", ["fF09", "g"]),
    # %json
    "json": (f"start: %json {JSON_OBJ}", ['{"a": 1}', '{"a":1}', '{ "a" : -2 }', '{"a": 1, "b": 2}', '{"a": "x"}', "{}"]),
    "json_in_rule": (
        f'start: "call " obj\nobj: %json {JSON_OBJ}',
        ['call {"a": 3}', 'call {"b": 3}', "call "],
    ),
    "json_text_or_call": (
        'start: TEXT | fun\nTEXT: /[^{](.|\\n)*/\nfun: %json {"type":"object","properties":{"n":{"const":"f"}},"required":["n"]}',
        ["hello\nworld", '{"n": "f"}', '{"n": "g"}'],
    ),
    # %regex substrings
    "substring_chars": ('start: %regex {"substring_chars": "hello"}', ["ell", "", "hello", "hlo"]),
    "substring_chunks": ('start: %regex {"substring_chunks": ["abc", "de", "f"]}', ["abcde", "def", "cde", "abcf"]),
    "substring_in_seq": ('start: "<" %regex {"substring_chars": "xyz"} ">"', ["<yz>", "<>", "<xz>"]),
    "substring_words": ('start: %regex {"substring_words": "foo bar. baz"}', ["bar. ", "ar", ""]),
    # nested %lark
    "nested_lark": ('start: "a" %lark {\nstart: "b"+\n}', ["abb", "a", "ab"]),
    "nested_lark_ignore": (
        'start: "[" inner "]"\ninner: %lark {\nstart: X ("," X)*\nX: /[0-9]+/\n%ignore " "\n}',
        ["[1, 2]", "[1,2]", "[1 2]"],
    ),
    # rule options stop= / suffix= (lazy: the first place body·stop ends)
    "stop_str": ('start: x "!"\nx[stop="END"]: /[a-zA-Z]*/', ["abEND!", "abENDcEND!", "END!", "ab!"]),
    "stop_ci": ('start: x "!"\nx[stop="end"i]: /[a-zA-Z ]*/', ["a EnD!", "a end b END!", "a!"]),
    "stop_regex": (
        'start: x "!"\nx[stop=/\\n\\n|END/]: /(.|\\n)*/',
        ["a\n\n!", "aEND!", "a\n\nbEND!", "aENDbEND!", "a\nb\n\n!", "\n\n!", "a!"],
    ),
    "stop_regex_last": ('start: x\nx[stop=/\\n\\n|END/]: /(.|\\n)*/', ["a\n\n", "aEND", "a\n\nb", "a"]),
    "stop_regex_lazy": ('start: x "!"\nx[stop=/E[0-9]*D/, lazy]: /[a-z]*/', ["aED!", "aE12D!", "aE1D2!", "aE1!"]),
    "stop_regex_split": ('start: x "!"\nx[stop=/b|ab/]: /[a-z]*/', ["xab!", "xb!", "ab!", "b!", "xbb!"]),
    "suffix_regex": ('start: x "!"\nx[suffix=/[0-9]+/]: /[a-z]*/', ["ab1!", "ab12!", "1!", "!"]),
    "stop_terminal": (
        'start: x "!"\nx[stop=STOP, capture, stop_capture="s"]: /[a-z]*/\nSTOP: "E" /[0-9]/',
        ["aE1!", "aE!", "aE12!"],
    ),
    "stop_regex_in_seq": (
        'start: (x ";")+\nx[stop=/\\.|!/]: /[a-z ]*/',
        ["a b.;c!;", "a.b.;", "a;"],
    ),
    # a realistic grammar
    "arith": (
        "start: expr\n?expr: expr \"+\" term | expr \"-\" term | term\n?term: term \"*\" atom | atom\n"
        '?atom: NUMBER | "(" expr ")"\n%import common.NUMBER\n%import common.WS_INLINE\n%ignore WS_INLINE',
        ["1 + 2*3", "(1+2) * 3", "1 +", "((1)", " 1+2"],
    ),
}

# grammask vs XGrammar 0.2.8: the only differences, with the reason.
XGRAMMAR_DIFF: dict[tuple[str, str], str] = {
    ("substring_words", "bar. "): "XGrammar 0.2.8 refuses substring_words; grammask implements llguidance's meaning",
    ("substring_words", ""): "as above",
    ("substring_words", "ar"): "as above (grammask rejects, XGrammar has no grammar)",
}

# grammask vs llguidance: the only differences, with the reason.
_GREEDY = (
    "llguidance lexes greedily (a lexeme extends as far as it can), so two terminals never split "
    "one run of lexeme characters; grammask, like XGrammar, parses scannerless and accepts every "
    "split (no valid string rejected)"
)
LLGUIDANCE_DIFF: dict[tuple[str, str], str] = {
    ("comments", "a"): "llguidance refuses a whole-line comment between a rule and its '|' continuation",
    ("comments", "b"): "as above",
    ("comments", "//"): "as above (grammask rejects the string, llguidance has no grammar)",
    ("regex_digit", "١٢"): "\\d is ASCII [0-9] in grammask and XGrammar, Unicode in llguidance (Rust regex)",
    ("regex_word", "é"): "\\w is ASCII in grammask and XGrammar, Unicode in llguidance (Rust regex)",
    ("ignore_lead", "a b "): "ignored text after the last lexeme: XGrammar and grammask accept it, llguidance does not",
    ("ignore_initial", " a b"): "this llguidance version refuses the allow_initial_skip option",
    ("ignore_initial", "a b"): "as above",
    ("greedy_split", "aa"): _GREEDY,
    ("greedy_split", "aaa"): _GREEDY,
    ("greedy_split_ws", "abcd"): _GREEDY,
    ("json", '{"a": 1, "b": 2}'): "%json follows XGrammar's strict_mode=True (no extra properties); llguidance allows them",
}

# Grammars a peer refuses to compile (reported as "ERR" by the peer).
GRAMMASK_ONLY: dict[str, str] = {}

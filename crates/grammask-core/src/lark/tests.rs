//! Lark front end: parse errors with line and column, lowering, and the accepted language.

use super::lark_to_grammar;
use crate::error::{ErrorKind, Location};

fn err(text: &str) -> (ErrorKind, u32, u32, String) {
    let e = lark_to_grammar(text).expect_err(text);
    match e.location() {
        Some(&Location::Text { line, column }) => (e.kind(), line, column, e.message().to_owned()),
        _ => panic!("no line/column in {e} for {text:?}"),
    }
}

#[test]
fn parse_errors_have_line_and_column() {
    let cases: &[(&str, ErrorKind, u32, u32, &str)] = &[
        ("start: \"a\n", ErrorKind::EbnfSyntax, 1, 8, "unterminated string"),
        ("start: A\nA: /ab", ErrorKind::EbnfSyntax, 2, 4, "unterminated regular"),
        ("start: a\n", ErrorKind::InvalidGrammar, 1, 8, "'a' is not defined"),
        ("start: \"a\"\nstart: \"b\"", ErrorKind::InvalidGrammar, 2, 1, "more than once"),
        ("a: \"x\"", ErrorKind::InvalidGrammar, 1, 7, "no 'start'"),
        ("start: B\nA: B\nB: A", ErrorKind::InvalidGrammar, 2, 4, "refers to itself"),
        ("start: A\nA: b\nb: \"x\"", ErrorKind::InvalidGrammar, 2, 4, "may not refer to the rule"),
        ("start: (\"a\" | \"b\"\n", ErrorKind::EbnfSyntax, 2, 1, "expected ')'"),
        ("start: \"a\"**", ErrorKind::EbnfSyntax, 1, 12, "stacked"),
        ("start: \"a\"~3..1", ErrorKind::EbnfSyntax, 1, 11, "below the lower bound"),
        ("start: \"a\" $", ErrorKind::EbnfSyntax, 1, 12, "unexpected character"),
        ("start: x\n  x: \"a\" )", ErrorKind::EbnfSyntax, 2, 10, "expected a rule"),
        ("%import common.FOO\nstart: FOO", ErrorKind::InvalidGrammar, 1, 16, "not a known terminal"),
        ("%import other.X\nstart: X", ErrorKind::Unsupported, 1, 9, "only '%import common"),
        ("start: <|eot|>", ErrorKind::InvalidGrammar, 1, 8, "needs the tokenizer"),
        ("start: <[3-1]>", ErrorKind::InvalidGrammar, 1, 8, "bad token id range"),
        ("start: <[a]>", ErrorKind::InvalidGrammar, 1, 8, "bad token id"),
        ("start: A\nA: <[1]>", ErrorKind::InvalidGrammar, 2, 4, "inside a terminal"),
        ("start: X\nX[lazy]: /a+/", ErrorKind::InvalidGrammar, 2, 3, "only supported on rules"),
        ("x[stop=y]: /b+/\nstart: x\ny: \"a\"", ErrorKind::InvalidGrammar, 1, 3, "needs a terminal"),
        ("x[nope]: /b+/\nstart: x", ErrorKind::InvalidGrammar, 1, 3, "unknown rule option 'nope'"),
        ("x[temperature=hot]: /b+/\nstart: x", ErrorKind::InvalidGrammar, 1, 3, "needs a number"),
        ("start: \"a\"\n%ignore", ErrorKind::EbnfSyntax, 2, 8, "expected"),
        ("start: /a(/", ErrorKind::RegexSyntax, 1, 8, "regular expression"),
        ("start: /a/x", ErrorKind::Unsupported, 1, 8, "flag 'x'"),
        ("start: %json {\"type\": 1}", ErrorKind::InvalidSchema, 1, 8, "%json"),
        ("start: %json {\"type\": \"x\"", ErrorKind::EbnfSyntax, 1, 14, "unbalanced"),
        ("start: %regex {\"foo\": 1}", ErrorKind::InvalidGrammar, 1, 8, "substring"),
        ("start: \"ab\"..\"z\"", ErrorKind::EbnfSyntax, 1, 8, "one-character"),
        ("start: %lark {\nstart: q\n}", ErrorKind::InvalidGrammar, 1, 8, "line 2, column 8 of the block"),
        ("%grammar_options {\"x\": true}\nstart: \"a\"", ErrorKind::Unsupported, 1, 18, "unknown grammar option"),
        ("start: @sub", ErrorKind::Unsupported, 1, 8, "named grammars"),
    ];
    for &(text, kind, line, col, msg) in cases {
        let (k, l, c, m) = err(text);
        assert_eq!((k, l, c), (kind, line, col), "{text:?}: {m}");
        assert!(m.contains(msg), "{text:?}: {m}");
        assert!(m.starts_with("Lark: "), "{m}");
    }
}

#[test]
fn deep_nesting_is_a_limit_error_not_a_crash() {
    let text = format!("start: {}\"a\"{}", "(".repeat(100_000), ")".repeat(100_000));
    let (k, ..) = err(&text);
    assert_eq!(k, ErrorKind::LimitExceeded);
    let mut t = String::from("start: A0\n");
    for i in 0..1000 {
        use std::fmt::Write as _;
        let _ = writeln!(t, "A{i}: A{}", i + 1);
    }
    t.push_str("A1000: \"x\"\n");
    assert_eq!(err(&t).0, ErrorKind::LimitExceeded);
}

#[test]
fn lowering_builds_rules_for_terminals_and_skip() {
    let g = lark_to_grammar("start: WORD (\",\" WORD)*\n%import common.WORD\n%ignore \" \"").unwrap();
    let names: Vec<&str> = g.rules().iter().map(|r| r.name.as_str()).collect();
    assert!(names.contains(&"start") && names.contains(&"WORD") && names.contains(&"skip"), "{names:?}");
    assert_eq!(g.rule(g.root()).name, "start");
}

#[test]
fn dot_excludes_newline_only_outside_classes() {
    assert_eq!(super::lower::dot_without_newline("a.[.]\\.b"), "a[^\\n][.]\\.b");
}

#[test]
fn a_question_mark_rule_on_the_next_line_is_not_a_quantifier() {
    let g = lark_to_grammar("start: expr\n?expr: \"a\"").unwrap();
    assert_eq!(g.to_string().lines().next(), Some("start ::= expr"));
}

#[test]
fn priorities_and_empty_alternatives() {
    assert_eq!(err("start: A\nA.2: \"a\"").0, ErrorKind::Unsupported);
    assert!(lark_to_grammar("start: \"a\" | ").is_ok());
}

/// Random edits of valid grammars give a grammar or a located error, never a panic or a hang.
#[test]
fn mutated_grammars_never_panic() {
    let seeds = [
        "start: item (\",\" item)*\nitem: NAME \"=\" (NUMBER | ESCAPED_STRING)\n%import common.CNAME -> NAME\n%import common (NUMBER, ESCAPED_STRING)\n%ignore /[ \\t]+/",
        "?start: expr\n?expr: expr \"+\" term | term\nterm: /[0-9]+/i | \"(\" expr \")\" | \"a\"..\"z\"~2..3\n%ignore \" \"",
        "start: \"<\" %regex {\"substring_words\": \"a b. c\"} \">\" %json {\"type\": \"object\"}\nX: (\"x\"{2,} | [\"y\"]) ",
        "start: a %lark {\nstart: B+\nB: /b/\n}\na[lazy]: /.*/ <|eot|> @g\n%grammar_options {\"allow_initial_skip\": true}",
    ];
    let alphabet: Vec<char> = "\"/\\()[]{}|*+?~.:,=-<>%@#\n abAZ_19".chars().collect();
    let mut rng = crate::test_rng::XorShift(0x9E37_79B9_7F4A_7C15);
    let mut next = move |n: usize| rng.index(n);
    for round in 0..6000 {
        let mut text: Vec<char> = seeds[round % seeds.len()].chars().collect();
        for _ in 0..=next(4) {
            let at = next(text.len() + 1);
            match next(3) {
                0 if at < text.len() => {
                    text.remove(at);
                }
                1 => text.insert(at, alphabet[next(alphabet.len())]),
                _ if at < text.len() => text[at] = alphabet[next(alphabet.len())],
                _ => {}
            }
        }
        let text: String = text.into_iter().collect();
        if let Err(e) = lark_to_grammar(&text) {
            assert!(e.location().is_some() || e.message().contains("Lark") || !e.message().is_empty(), "{text:?}");
        }
    }
}

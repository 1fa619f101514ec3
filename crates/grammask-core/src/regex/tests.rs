//! Tests of the regex front end: syntax errors, each construct, automaton operations, printing,
//! and a differential test against the `regex` crate on random patterns.
use super::*;
use crate::error::Location;

fn full(p: &str) -> CharDfa {
    CharDfa::from_regex(&Regex::parse(p, RegexFlags::default()).unwrap(), Anchoring::FullMatch).unwrap()
}

fn search(p: &str) -> CharDfa {
    CharDfa::from_regex(&Regex::parse(p, RegexFlags::default()).unwrap(), Anchoring::Search).unwrap()
}

fn err(p: &str) -> Error {
    Regex::parse(p, RegexFlags::default()).unwrap_err()
}

fn column(e: &Error) -> u32 {
    match e.location() {
        Some(Location::Text { line: 1, column }) => *column,
        other => panic!("no text location: {other:?} for {e}"),
    }
}

fn check(d: &CharDfa, yes: &[&str], no: &[&str]) {
    for s in yes {
        assert!(d.accepts(s), "should accept {s:?}");
    }
    for s in no {
        assert!(!d.accepts(s), "should reject {s:?}");
    }
}

#[test]
fn syntax_errors_have_positions() {
    for (p, col) in [
        ("ab)", 3),
        ("a(b", 2),
        ("a**", 3),
        ("*a", 1),
        ("[z-a]", 2),
        ("a\\q", 2),
        ("[ab", 1),
        ("\\x4", 1),
        ("a{3,2}", 2),
        ("(?Q)", 1),
        ("\\", 1),
    ] {
        let e = err(p);
        assert_eq!(e.kind(), ErrorKind::RegexSyntax, "{p}: {e}");
        assert_eq!(column(&e), col, "{p}: {e}");
    }
}

#[test]
fn unsupported_constructs_are_named() {
    for (p, col, word) in [
        ("a(?=b)", 2, "lookahead"),
        ("(?!b)", 1, "lookahead"),
        ("x(?<=b)", 2, "lookbehind"),
        ("(?<!b)", 1, "lookbehind"),
        ("(a)\\1", 4, "backreference"),
        ("(?<n>a)\\k<n>", 8, "backreference"),
        ("(?P<n>a)(?P=n)", 9, "backreference"),
        ("(?i)a", 1, "inline flags"),
        ("a*+", 3, "possessive"),
        ("a{,3}", 2, "{,n}"),
    ] {
        let e = err(p);
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{p}: {e}");
        assert_eq!(column(&e), col, "{p}: {e}");
        assert!(e.message().contains(word), "{p}: {e}");
    }
}

#[test]
fn limits() {
    let big = crate::limits::MAX_REPEAT_BOUND + 1;
    assert_eq!(err(&format!("a{{{big}}}")).kind(), ErrorKind::LimitExceeded);
    assert_eq!(err(&format!("a{{1,{big}}}")).kind(), ErrorKind::LimitExceeded);
    let deep = crate::limits::MAX_NESTING;
    let ok = format!("{}a{}", "(".repeat(deep - 1), ")".repeat(deep - 1));
    assert!(Regex::parse(&ok, RegexFlags::default()).is_ok());
    let too_deep = format!("{}a{}", "(".repeat(deep + 1), ")".repeat(deep + 1));
    assert_eq!(err(&too_deep).kind(), ErrorKind::LimitExceeded);
    // Exponential determinization is refused, not run.
    let re = Regex::parse("(a|b)*a(a|b){20}", RegexFlags::default()).unwrap();
    assert_eq!(CharDfa::from_regex(&re, Anchoring::FullMatch).unwrap_err().kind(), ErrorKind::LimitExceeded);
    // Expanded repetitions are bounded before they are built.
    let re = Regex::parse("(a{1000}){1000}", RegexFlags::default()).unwrap();
    assert_eq!(CharDfa::from_regex(&re, Anchoring::FullMatch).unwrap_err().kind(), ErrorKind::LimitExceeded);
    assert_eq!(CharDfa::length_between(0, Some(MAX_DFA_STATES as u64)).unwrap_err().kind(), ErrorKind::LimitExceeded);
}

#[test]
fn deep_nesting_does_not_overflow() {
    let deep = crate::limits::MAX_NESTING - 1;
    let b_then_a = format!("{}a", "b".repeat(deep));
    let c_then_a = format!("{}a", "c".repeat(deep / 2));
    for (p, yes) in [
        (format!("{}a{}", "(".repeat(deep), ")*".repeat(deep)), "aaa"),
        (format!("{}a{}", "(b".repeat(deep), ")".repeat(deep)), b_then_a.as_str()),
        (format!("{}a{}", "(b|".repeat(deep), ")".repeat(deep)), "a"),
        (format!("{}a{}", "(b|c".repeat(deep), ")".repeat(deep)), "ccb"),
        (format!("{}a{}", "(b|c(".repeat(deep / 2), "))+".repeat(deep / 2)), c_then_a.as_str()),
    ] {
        let re = Regex::parse(&p, RegexFlags::default()).unwrap();
        let text = re.to_ebnf("r").unwrap();
        assert!(text.starts_with("r ::= "));
        match CharDfa::from_regex(&re, Anchoring::FullMatch) {
            Ok(d) => assert!(d.accepts(yes), "{yes}"),
            Err(e) => assert_eq!(e.kind(), ErrorKind::LimitExceeded),
        }
        drop(re);
    }
}

#[test]
fn literals_and_escapes() {
    check(&full(r"a\.b\*\(\)"), &["a.b*()"], &["axb*()"]);
    check(&full(r"\n\t\r\f\v\0"), &["\n\t\r\u{c}\u{b}\0"], &[""]);
    check(&full(r"\x41\u0042\u{1F600}\cJ"), &["AB😀\n"], &["AB"]);
    check(&full(r"\uD83D\uDE00"), &["😀"], &[""]);
    check(&full(r"\uD800"), &[], &["", "\u{FFFD}"]);
    check(&full(r"a{b}c{"), &["a{b}c{"], &["abc"]);
    check(&full(r"\U0001F600"), &["😀"], &[]);
}

#[test]
fn classes() {
    check(&full(r"[a-c\d_]+"), &["abc_09"], &["abd", ""]);
    check(&full(r"[^a-c]"), &["d", "\n", "é"], &["a", ""]);
    check(&full(r"[]"), &[], &["", "a", "]"]);
    check(&full(r"[^]"), &["\n", "a"], &["", "ab"]);
    check(&full(r"[-a]"), &["-", "a"], &["b"]);
    check(&full(r"[a-]"), &["-", "a"], &["b"]);
    check(&full(r"[\b]"), &["\u{8}"], &["b"]);
    check(&full(r"[\]\\]"), &["]", "\\"], &["["]);
    check(&full(r"\s"), &[" ", "\u{a0}", "\u{feff}", "\u{2028}", "\u{b}"], &["a", "\u{200b}"]);
    check(&full(r"\S\W\D"), &["a-x"], &[" -x", "a_x", "a-1"]);
    check(&full(r"[\s\S]"), &["\n", "a"], &[""]);
    check(&full(r"\w"), &["a", "Z", "0", "_"], &["é", "-"]);
    check(&full(r"\p{Lu}\P{Lu}"), &["Aa", "Éb"], &["AA", "aa"]);
    check(&full(r"[\p{Script=Greek}\d]"), &["α", "1"], &["a"]);
    assert_eq!(err(r"\p{Nope}").kind(), ErrorKind::RegexSyntax);
    assert_eq!(err(r"[\d-z]").kind(), ErrorKind::RegexSyntax);
}

#[test]
fn dot_and_flags() {
    check(&full("."), &["a", "é", "😀"], &["\n", "\r", "\u{2028}", "\u{2029}", ""]);
    let dotall = RegexFlags { dot_all: true, ..Default::default() };
    let d = CharDfa::from_regex(&Regex::parse(".", dotall).unwrap(), Anchoring::FullMatch).unwrap();
    check(&d, &["\n", "\r"], &[""]);
    let ic = RegexFlags { ignore_case: true, ..Default::default() };
    let d = CharDfa::from_regex(&Regex::parse("ab[c-d]é[^x]", ic).unwrap(), Anchoring::FullMatch).unwrap();
    check(&d, &["ABcÉy", "abDéY"], &["abcéx", "abcéX"]);
}

#[test]
fn groups_alternation_and_quantifiers() {
    check(&full("(?:ab|c)+"), &["ab", "cab", "abab"], &["", "a"]);
    check(&full("(?<x>a)(?P<y>b)(c)"), &["abc"], &["ab"]);
    check(&full("a||b"), &["a", "", "b"], &["ab"]);
    check(&full("(|a)b"), &["b", "ab"], &["a"]);
    check(&full("a{2}b{1,2}c{2,}d?"), &["aabcc", "aabbcccd"], &["abcc", "aabbbcc", "aabc"]);
    check(&full("a*?b+?c??d{1,2}?"), &["bd", "aabbcdd"], &["ad"]);
    check(&full("a{0}"), &[""], &["a"]);
}

#[test]
fn anchors_are_exact() {
    check(&full("a^b"), &[], &["ab", "a^b", ""]);
    check(&full("^ab$"), &["ab"], &[""]);
    check(&full("(^|x)a"), &["a", "xa"], &["ya"]);
    check(&full("a($|b)"), &["a", "ab"], &["ac"]);
    check(&full("a$b"), &[], &["ab"]);
    check(&search("^a|b$"), &["a", "axx", "xxb", "b"], &["xa", "bx", ""]);
    check(&search("ab"), &["ab", "xaby", "\nab\n"], &["a", "ba"]);
    check(&search("^$"), &[""], &["a"]);
    check(&search(""), &["", "anything"], &[]);
}

#[test]
fn word_boundaries_are_exact() {
    check(&full(r"\bab\b"), &["ab"], &[]);
    check(&full(r"a\bb"), &[], &["ab"]);
    check(&full(r"a\b-"), &["a-"], &[]);
    check(&full(r"a\B-"), &[], &["a-"]);
    check(&full(r"\B"), &[""], &[]);
    check(&full(r"\b"), &[], &[""]);
    check(&search(r"\bfoo\b"), &["foo", "a foo.", "foo-bar"], &["foobar", "afoo", ""]);
    check(&search(r"\Boo"), &["foo"], &["oo", " oo"]);
}

#[test]
fn dfa_operations() {
    let digits = full(r"\d+");
    let len2to3 = CharDfa::length_between(2, Some(3)).unwrap();
    let both = digits.intersect(&len2to3).unwrap();
    check(&both, &["12", "123"], &["1", "1234", "ab"]);
    let either = full("a").union(&full("b+")).unwrap();
    check(&either, &["a", "bbb"], &["ab", ""]);
    let not_digits = digits.complement();
    check(&not_digits, &["", "a", "1a"], &["1", "99"]);
    assert!(digits.intersect(&not_digits).unwrap().is_empty());
    assert!(digits.union(&not_digits).unwrap().complement().is_empty());
    let diff = full("[a-c]").difference(&full("b")).unwrap();
    check(&diff, &["a", "c"], &["b"]);
    assert!(full("a+").is_subset_of(&full("a*")).unwrap());
    assert!(!full("a*").is_subset_of(&full("a+")).unwrap());
    assert!(CharDfa::empty().is_subset_of(&full("x")).unwrap());
    assert_eq!(full("a|bc|d?").finite_strings(10), Some(vec![String::new(), "a".into(), "bc".into(), "d".into()]));
    assert_eq!(full("[a-c]{2}").finite_strings(9).map(|v| v.len()), Some(9));
    assert_eq!(full("[a-c]{2}").finite_strings(8), None);
    assert_eq!(full("a*").finite_strings(100), None);
    assert_eq!(CharDfa::empty().finite_strings(1), Some(vec![]));
    assert_eq!(CharDfa::literal("héllo").finite_strings(5), Some(vec!["héllo".into()]));
    check(&CharDfa::length_between(1, None).unwrap(), &["a", "abc"], &[""]);
    assert!(CharDfa::length_between(3, Some(2)).unwrap().is_empty());
    assert!(CharDfa::any_string().complement().is_empty());
    // Minimization: equivalent patterns give the same automaton.
    assert_eq!(full("(a|b)*"), full("(a*b*)*"));
    assert_eq!(full("a|a"), CharDfa::literal("a"));
    assert_eq!(full("x*").num_states(), 1);
}

#[test]
fn literals_is_the_union_of_each_literal() {
    let sets: [&[&str]; 5] =
        [&[], &[""], &["a", "ab", "abc", "b", "ab"], &["héllo", "hello", "ho", "", "zé"], &["key", "keys", "ey", "y"]];
    for words in sets {
        let mut union = CharDfa::empty();
        for w in words {
            union = union.union(&CharDfa::literal(w)).unwrap();
        }
        // Both are minimal and in BFS order, so equal languages give equal automata.
        assert_eq!(CharDfa::literals(words.iter().copied()).unwrap(), union, "{words:?}");
    }
}

#[test]
fn direct_ebnf_is_structured() {
    assert_eq!(regex_to_ebnf("abc", "r").unwrap(), "r ::= \"abc\"\n");
    assert_eq!(regex_to_ebnf("^(a|bc)+$", "r").unwrap(), "r ::= (\"a\" | \"bc\")+\n");
    assert_eq!(regex_to_ebnf("[a-z]{2,100000}x?", "r").unwrap(), "r ::= [a-z]{2,100000} \"x\"?\n");
    assert_eq!(regex_to_ebnf(".", "r").unwrap(), "r ::= [^]\n");
    assert_eq!(regex_to_ebnf("[^\"\\\\]", "r").unwrap(), "r ::= [^\\\"\\\\]\n");
    assert_eq!(regex_to_ebnf("é\n", "r").unwrap(), "r ::= \"\\u00E9\\n\"\n");
    assert_eq!(regex_to_ebnf("[]", "r").unwrap(), format!("r ::= {}\n", emit::NOTHING));
    // Inner anchors go through the automaton.
    assert_eq!(regex_to_ebnf("a^b", "r").unwrap(), format!("r ::= {}\n", emit::NOTHING));
    assert!(regex_to_ebnf("(^a|b)c", "r").unwrap().starts_with("r ::= "));
}

#[test]
fn dfa_ebnf_shapes() {
    assert_eq!(full("[a-z]*").to_ebnf("p", TextMode::Raw), "p ::= [a-z]*\n");
    assert_eq!(full("ab|ac").to_ebnf("p", TextMode::Raw), "p ::= \"a\" [bc]\n");
    assert_eq!(full("a(b|c)d?").to_ebnf("p", TextMode::Raw), "p ::= \"a\" [bc] \"d\"?\n");
    assert_eq!(CharDfa::empty().to_ebnf("p", TextMode::Raw), format!("p ::= {}\n", emit::NOTHING));
    // Length bounds print as bounded repetition, not as nested optionals.
    let bounded = full("[a-z]*").intersect(&CharDfa::length_between(3, Some(900)).unwrap()).unwrap();
    assert_eq!(bounded.to_ebnf("p", TextMode::Raw), "p ::= [a-z]{3,900}\n");
    assert_eq!(CharDfa::length_between(0, Some(2)).unwrap().to_ebnf("p", TextMode::Raw), "p ::= [^]{0,2}\n");
    assert_eq!(full("ab?c?").to_ebnf("p", TextMode::Raw), "p ::= \"a\" (\"b\" \"c\"? | \"c\")?\n");
    let json = CharDfa::literal("a\"").to_ebnf("p", TextMode::JsonStringBody);
    assert_eq!(json, "p ::= (\"a\" | \"\\\\u\" \"0061\") (\"\\\\\\\"\" | \"\\\\u\" \"0022\")\n");
    // Rule names all derive from the prefix.
    let text = search("(ab|cd)*x").to_ebnf("q", TextMode::JsonStringBody);
    for line in text.lines() {
        let name = line.split(" ::= ").next().unwrap();
        assert!(name == "q" || name.strip_prefix("q_").is_some_and(|n| n.parse::<u32>().is_ok()), "{line}");
    }
}

#[test]
fn hex_split_covers_exactly() {
    // Every 4-digit value is spelled by exactly the rectangles covering [lo, hi].
    for &(lo, hi) in &[(0u32, 0xFFFF), (0x20, 0x7E), (0x0D80, 0x1234), (0xFFFF, 0xFFFF), (0x10, 0x1F), (0x0fff, 0x1000)]
    {
        let mut rects = Vec::new();
        emit::hex_split_for_tests(lo, hi, &mut rects);
        let mut covered = 0u64;
        for r in &rects {
            covered += r.iter().map(|&(a, b)| u64::from(b - a + 1)).product::<u64>();
            for v in [0u32, 0x1234, lo, hi, lo.saturating_sub(1), (hi + 1).min(0xFFFF)] {
                let digits = [(v >> 12) & 15, (v >> 8) & 15, (v >> 4) & 15, v & 15];
                let inside = r.iter().zip(digits).all(|(&(a, b), d)| a <= d && d <= b);
                assert!(!inside || (lo..=hi).contains(&v), "{v:x} wrongly in {r:?}");
            }
        }
        assert_eq!(covered, u64::from(hi - lo + 1));
    }
}

/// A tiny deterministic generator (no external randomness).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }
}

fn random_pattern(rng: &mut Lcg, depth: u32) -> String {
    const ATOMS: [&str; 10] = ["a", "b", "[ab]", ".", "\\d", "[^a]", "\\w", "\\s", "x", "(?:)"];
    let k = if depth > 3 { rng.next(2) } else { rng.next(9) };
    match k {
        0 | 1 => ATOMS[rng.next(ATOMS.len())].to_string(),
        2 | 3 => format!("{}{}", random_pattern(rng, depth + 1), random_pattern(rng, depth + 1)),
        4 => format!("(?:{}|{})", random_pattern(rng, depth + 1), random_pattern(rng, depth + 1)),
        5 => {
            let q = ["*", "+", "?", "{2}", "{0,2}", "{1,}", "*?"][rng.next(7)];
            format!("(?:{}){q}", random_pattern(rng, depth + 1))
        }
        6 => ["^", "$", "\\b", "\\B"][rng.next(4)].to_string(),
        7 => format!("({})", random_pattern(rng, depth + 1)),
        _ => format!("{}|{}", random_pattern(rng, depth + 1), random_pattern(rng, depth + 1)),
    }
}

#[test]
fn differential_against_regex_crate() {
    let mut rng = Lcg(0x5eed);
    let alphabet = ['a', 'b', 'x', '1', ' ', '-', '\n'];
    for _ in 0..400 {
        let p = random_pattern(&mut rng, 0);
        let re = Regex::parse(&p, RegexFlags::default()).unwrap_or_else(|e| panic!("{p}: {e}"));
        let f = CharDfa::from_regex(&re, Anchoring::FullMatch).unwrap();
        let s = CharDfa::from_regex(&re, Anchoring::Search).unwrap();
        // The regex crate's \b, \d, \w, \s agree with ECMA-262 on this ASCII alphabet.
        let rf = ::regex::Regex::new(&format!("^(?:{p})$")).unwrap();
        let rs = ::regex::Regex::new(&p).unwrap();
        for _ in 0..60 {
            let len = rng.next(6);
            let text: String = (0..len).map(|_| alphabet[rng.next(alphabet.len())]).collect();
            assert_eq!(f.accepts(&text), rf.is_match(&text), "full {p:?} on {text:?}");
            assert_eq!(s.accepts(&text), rs.is_match(&text), "search {p:?} on {text:?}");
        }
    }
}

//! Lookahead assertions `rule ::= body (= expr)`: the rule may only end where the input that
//! follows starts with a string of `expr`.
use grammask_core::ebnf::parse_ebnf;
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

fn matcher(ebnf: &str) -> Matcher {
    let toks: Vec<Vec<u8>> = (0u8..128).map(|b| vec![b]).chain([b"xy".to_vec(), b"yy".to_vec()]).collect();
    let opts = VocabularyOptions { stop_token_ids: Some(vec![0]), ..Default::default() };
    let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let g = parse_ebnf(ebnf, "root").unwrap();
    Matcher::new(Arc::new(CompiledGrammar::new(&g, &vocab).unwrap()), MatcherOptions::default()).unwrap()
}

fn accepts(ebnf: &str, s: &str) -> bool {
    let mut m = matcher(ebnf);
    m.accept_bytes(s.as_bytes()).unwrap() && m.is_completed()
}

fn prefix_ok(ebnf: &str, s: &str) -> bool {
    matcher(ebnf).accept_bytes(s.as_bytes()).unwrap()
}

#[test]
fn lookahead_restricts_what_follows() {
    let g = r#"root ::= a "b" | a "c"
a ::= "x" (= "b")"#;
    assert!(accepts(g, "xb"));
    assert!(!accepts(g, "xc"));
    assert!(prefix_ok(g, "x"));
    assert!(!prefix_ok(g, "xc"));
}

#[test]
fn lookahead_longer_than_the_next_rule() {
    let g = r#"root ::= a b
a ::= "x" (= "yy")
b ::= "y" "y"?"#;
    assert!(accepts(g, "xyy"));
    assert!(!accepts(g, "xy"), "the lookahead needs two y's");
}

#[test]
fn lookahead_at_end_of_input_fails() {
    let g = r#"root ::= a
a ::= "x" (= "y")"#;
    assert!(!accepts(g, "x"));
}

#[test]
fn lookahead_with_classes_and_repetition() {
    let g = r#"root ::= (item ",")* item
item ::= [a-z]+ (= [ ]* [,])"#;
    // The last item is not followed by a comma, so it can never end: nothing is complete.
    assert!(!accepts(g, "ab,cd"));
    let g2 = r#"root ::= (item ",")+
item ::= [a-z]+ (= [ ]* [,])"#;
    assert!(accepts(g2, "ab,cd,"));
}

#[test]
fn recursive_rule_in_lookahead_is_refused() {
    let toks: Vec<Vec<u8>> = vec![b"a".to_vec()];
    let vocab = Arc::new(Vocabulary::new(toks, VocabType::Raw, VocabularyOptions::default()).unwrap());
    let g = parse_ebnf("root ::= a \"b\"\na ::= \"x\" (= r)\nr ::= \"b\" r | \"b\"", "root").unwrap();
    let err = CompiledGrammar::new(&g, &vocab).unwrap_err();
    assert!(err.message().contains("lookaheads must be regular"), "{err}");
}

#[test]
fn masks_respect_lookahead() {
    let g = r#"root ::= a "b" | a "c"
a ::= "x" (= "b")"#;
    let mut m = matcher(g);
    assert!(m.accept_bytes(b"x").unwrap());
    let mask = m.compute_mask().unwrap().clone();
    let allowed: Vec<usize> = mask.iter_ones().collect();
    assert_eq!(allowed, vec![usize::from(b'b')]);
}

/// Beside a recursive budget (items' fields index budget and obligation triples), two rows that
/// differ only in their pending obligations ("xa" owes another "a", "xb" another "b", while the
/// grammar reads either) keep apart masks: row signatures hash the obligations.
#[test]
fn masks_beside_recursive_budgets_tell_obligations_apart() {
    let g = r#"root ::= e "!"
e[max_tokens=5] ::= "(" e ")" | w [ab]*
w ::= "x" (= "aa" | "bb")"#;
    let mut m = matcher(g);
    for (text, want) in [("xa", b'a'), ("xb", b'b'), ("(xa", b'a'), ("(xb", b'b')] {
        m.reset();
        for &b in text.as_bytes() {
            assert!(m.accept_token(u32::from(b)).unwrap(), "{text}");
        }
        let allowed: Vec<usize> = m.compute_mask().unwrap().iter_ones().collect();
        assert_eq!(allowed, vec![usize::from(want)], "{text}");
    }
}

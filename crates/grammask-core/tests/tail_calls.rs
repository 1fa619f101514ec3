//! Tail references merged into one automaton (`compiler/tail.rs`) keep the language: every rule
//! of a random grammar gets a rule option (which keeps its identity: no inlining, no merging),
//! and both grammars must agree on every string up to length 5, as prefixes and as sentences.
//! Right-linear grammars must also leave no rule edge and keep chart rows small.

use grammask_core::grammar::{Grammar, RuleId};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::rule_options::RuleOptions;
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

mod common;
use common::{random_grammar, Rng, ALPHABET};

fn vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = ALPHABET.iter().map(|&c| vec![c]).collect();
    toks.push(b"</s>".to_vec());
    let opts = VocabularyOptions { stop_token_ids: Some(vec![toks.len() as u32 - 1]), ..Default::default() };
    Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap())
}

/// `g` with a temperature on every rule: each rule keeps its own automaton and rule edges.
fn with_identities(g: &Grammar) -> Grammar {
    let mut b = g.to_builder();
    for r in 0..g.rules().len() {
        let mut o = RuleOptions::default();
        o.set_temperature(1.0);
        b.set_rule_options(RuleId(r as u32), o);
    }
    b.build(&g.rule(g.root()).name).unwrap()
}

/// (accepted as a prefix, completed) for `s`.
fn verdict(cg: &Arc<CompiledGrammar>, s: &[u8]) -> (bool, bool) {
    let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let ok = m.accept_bytes(s).unwrap();
    (ok, ok && m.is_completed())
}

fn all_strings(max_len: usize) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut frontier = vec![Vec::new()];
    for _ in 0..max_len {
        let mut next = Vec::new();
        for s in &frontier {
            for &c in ALPHABET {
                let mut t: Vec<u8> = s.clone();
                t.push(c);
                next.push(t);
            }
        }
        out.extend(next.iter().cloned());
        frontier = next;
    }
    out
}

#[test]
fn merged_tail_references_keep_the_language() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let v = vocab();
    let strings = all_strings(5);
    let mut compared = 0;
    for case in 0..300 {
        let g = random_grammar(&mut rng);
        let (Ok(a), Ok(b)) = (CompiledGrammar::new(&g, &v), CompiledGrammar::new(&with_identities(&g), &v)) else {
            continue;
        };
        let (a, b) = (Arc::new(a), Arc::new(b));
        for s in &strings {
            assert_eq!(verdict(&a, s), verdict(&b, s), "case {case} string {:?}\n{g:?}", String::from_utf8_lossy(s));
        }
        compared += 1;
    }
    assert!(compared > 150, "only {compared} grammars compared");
}

#[test]
fn right_linear_rules_become_one_automaton() {
    // A dotted name as a regex DFA prints it: one rule per state with several entries.
    let src = "root ::= \"\\\"\" id \"\\\"\"\n\
               id ::= [a-z] more\n\
               more ::= [a-z0-9]* (\".\" id)?\n";
    let g = grammask_core::ebnf::parse_ebnf(src, "root").unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, &vocab()).unwrap());
    let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
    assert!(m.accept_bytes(b"\"a").unwrap());
    let items = |m: &Matcher| m.chart().row(m.chart().last_row_index()).len();
    let first = items(&m);
    for _ in 0..200 {
        assert!(m.accept_bytes(b".b").unwrap());
    }
    // Without merging each `.` nests one more `id` item under the last row's completions.
    assert_eq!(items(&m), first, "chart rows grow with the number of dots");
    assert!(m.accept_bytes(b"\"").unwrap() && m.is_completed());
}

#[test]
fn email_domain_labels_are_one_automaton() {
    // The email format's domain: labels of up to 63 characters, one rule per position, a tail
    // group of ~5,200 estimated NFA states (over the old 4,096 bound). Without merging each
    // character nests one more item in the chart row, and a token budget's walks read every
    // token of such a row on the chart.
    use grammask_core::grammar_compiler::GrammarCompiler;
    use grammask_core::json_schema::JsonSchemaOptions;
    let toks: Vec<Vec<u8>> = (0x20u8..0x7f).map(|c| vec![c]).chain([b"</s>".to_vec()]).collect();
    let opts = VocabularyOptions { stop_token_ids: Some(vec![toks.len() as u32 - 1]), ..Default::default() };
    let v = Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap());
    let schema = r#"{"type": "string", "format": "email"}"#;
    let cg = GrammarCompiler::new(&v, false, -1).compile_json_schema(schema, &JsonSchemaOptions::default()).unwrap();
    let mut m = Matcher::new(cg, MatcherOptions::default()).unwrap();
    assert!(m.accept_bytes(b"\"me@a").unwrap());
    let items = |m: &Matcher| m.chart().row(m.chart().last_row_index()).len();
    let first = items(&m);
    assert!(m.accept_bytes(&[b'b'; 40]).unwrap());
    assert_eq!(items(&m), first, "chart rows grow with a domain label's length");
    assert!(m.accept_bytes(b".org\"").unwrap() && m.is_completed());
}

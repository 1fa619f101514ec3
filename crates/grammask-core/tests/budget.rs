//! Token budgets (`MatcherOptions::max_tokens`, `crate::budget`): sampling uniformly from the
//! budgeted masks always ends, valid, within the budget, for every budget at least the shortest
//! completion; a smaller budget is refused; masks with a budget are subsets of masks without.

use grammask_core::builtin::builtin_json_grammar;
use grammask_core::ebnf::parse_ebnf;
use grammask_core::grammar::Grammar;
use grammask_core::json_schema::{json_schema_to_ebnf, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::{VocabType, Vocabulary, VocabularyOptions};
use std::sync::Arc;

mod common;
use common::Rng;

/// Every byte as a token, multi-byte tokens that open and close structures (so single tokens
/// raise the shortest completion by several bytes), and a stop token.
fn vocab() -> (Arc<Vocabulary>, u32) {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for t in [
        "{\"",
        "\": ",
        "\", \"",
        "[[",
        "[[[[",
        "]]",
        "}}",
        "[{\"",
        "\"}",
        "\"]",
        ", ",
        "true",
        "null",
        "false",
        "1234",
        "    ",
        "\n    ",
        "abc",
        "name",
        "\"name\": \"",
        "-0",
        "1e5",
        "0.",
        "\\u00",
        "\\n",
        "          ",
    ] {
        toks.push(t.as_bytes().to_vec());
    }
    toks.push(b"<stop>".to_vec());
    let stop = (toks.len() - 1) as u32;
    let opts = VocabularyOptions { stop_token_ids: Some(vec![stop]), ..Default::default() };
    (Arc::new(Vocabulary::new(toks, VocabType::Raw, opts).unwrap()), stop)
}

fn schema(s: &str) -> Grammar {
    let text = json_schema_to_ebnf(s, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap();
    parse_ebnf(&text, "root").unwrap()
}

fn grammars() -> Vec<(&'static str, Grammar)> {
    vec![
        ("builtin_json", builtin_json_grammar()),
        (
            "object",
            schema(
                r#"{"type":"object","properties":{"name":{"type":"string","minLength":5},"tags":{"type":"array","items":{"type":"string"},"minItems":2},"n":{"type":"integer"}},"required":["name","tags"]}"#,
            ),
        ),
        (
            "nested",
            schema(
                r##"{"type":"array","items":{"anyOf":[{"$ref":"#"},{"type":"integer"}]},"minItems":1,"maxItems":3}"##,
            ),
        ),
        ("expr", parse_ebnf("root ::= e\ne ::= t (\"+\" t)*\nt ::= \"(\" e \")\" | [a-z]+", "root").unwrap()),
    ]
}

#[test]
fn random_sampling_ends_valid_within_the_budget() {
    let (vocab, stop) = vocab();
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for (name, g) in grammars() {
        let cg = Arc::new(CompiledGrammar::new(&g, &vocab).unwrap());
        // The smallest budget the matcher takes.
        let mut min = 1;
        while Matcher::new(cg.clone(), MatcherOptions { max_tokens: Some(min), ..Default::default() }).is_err() {
            min += 1;
            assert!(min < 200, "{name}: no budget accepted");
        }
        for n in [min, min + 1, min + 3, min + 10, min + 40] {
            for _ in 0..30 {
                let mut m =
                    Matcher::new(cg.clone(), MatcherOptions { max_tokens: Some(n), ..Default::default() }).unwrap();
                let mut out = Vec::new();
                let mut steps = 0;
                loop {
                    let allowed: Vec<usize> = m.compute_mask().unwrap().iter_ones().collect();
                    assert!(
                        !allowed.is_empty(),
                        "{name}/{n}: empty mask after {steps} tokens: {:?}",
                        String::from_utf8_lossy(&out)
                    );
                    let t = allowed[rng.below(allowed.len() as u64) as usize] as u32;
                    assert!(m.accept_token(t).unwrap(), "{name}/{n}: masked token {t} rejected");
                    steps += 1;
                    if t == stop {
                        break;
                    }
                    out.extend_from_slice(vocab.token_bytes(t));
                    assert!(
                        steps < n,
                        "{name}/{n}: budget reached without the stop token: {:?}",
                        String::from_utf8_lossy(&out)
                    );
                }
                assert!(steps <= n, "{name}/{n}");
                // The output is a complete sentence (checked by a fresh matcher).
                let mut check = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
                assert!(
                    check.accept_bytes(&out).unwrap() && check.is_completed(),
                    "{name}/{n}: {:?}",
                    String::from_utf8_lossy(&out)
                );
            }
        }
    }
}

#[test]
fn budgeted_masks_are_subsets_and_small_budgets_are_refused() {
    let (vocab, _) = vocab();
    let cg = Arc::new(CompiledGrammar::new(&grammars()[1].1, &vocab).unwrap());
    // `{"name":"xxxxx","tags":["",""]}` is 31 bytes: 32 tokens with the stop token.
    assert!(Matcher::new(cg.clone(), MatcherOptions { max_tokens: Some(31), ..Default::default() }).is_err());
    assert!(Matcher::new(cg.clone(), MatcherOptions { max_tokens: Some(32), ..Default::default() }).is_ok());
    let mut free = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
    let mut tight = Matcher::new(cg.clone(), MatcherOptions { max_tokens: Some(32), ..Default::default() }).unwrap();
    let mut smaller = 0;
    for chunk in [&b"{"[..], b"\"name\":", b"\"ab", b"cde"] {
        let a: Vec<usize> = free.compute_mask().unwrap().iter_ones().collect();
        let b: Vec<usize> = tight.compute_mask().unwrap().iter_ones().collect();
        assert!(b.iter().all(|t| a.contains(t)) && !b.is_empty());
        smaller += usize::from(b.len() < a.len());
        assert!(free.accept_bytes(chunk).unwrap() && tight.accept_bytes(chunk).unwrap());
    }
    assert!(smaller > 0);
}

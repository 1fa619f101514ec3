//! Kernel states that call an open object's excluded-key rule beside known keys (the first key
//! position of an object with many properties, MaskBench `JsonSchemaStore---eslintrc`) are
//! composed from the excluded-key rule's kernel (`CompiledGrammar::composed_kernel`) instead of
//! walked, and the composition equals the plain walk; masks along documents through those
//! positions equal a brute-force reference.

use grammask_core::compiler::StateId;
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

mod common;
use common::raw_vocab_with_stop;

/// Keys sharing long prefixes, some prefixes of others, past the object rule's inlining (the
/// properties come in chains of rules, each calling the excluded-key rule at its key position).
fn keys() -> Vec<String> {
    let mut keys: Vec<String> =
        ["no-await", "no-await-in-loop", "no-await-x", "no-compare", "no-cond-assign", "comma-dangle", "camelcase"]
            .map(String::from)
            .to_vec();
    // More keys than `COMPOSE_EXCLUDED_WORDS`: beside fewer the caller walks.
    keys.extend((0..64).map(|i| format!("rule-number-{i:02}")));
    keys
}

fn grammar() -> grammask_core::grammar::Grammar {
    let props: Vec<String> = keys().iter().map(|k| format!("\"{k}\": {{\"type\": \"integer\"}}")).collect();
    let schema = format!("{{\"type\": \"object\", \"properties\": {{{}}}}}", props.join(", "));
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    json_schema_to_grammar(&schema, &opts).unwrap()
}

/// Printable ASCII and tokens that read keys, key prefixes and rests, across the closing quote
/// and the colon (`loop":`, `"no-`), so that the callee's uncertain tokens resume in the caller.
fn small_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    let more = [
        "\"",
        "\":",
        "\": ",
        "\"no-",
        "no-",
        "no-await",
        "-in-loop\"",
        "loop\":",
        "await\"",
        "-x\":",
        "x\"",
        "\"c",
        "camel",
        "case\"",
        "comma-",
        "dangle\":",
        "rule-",
        "number-",
        "0\"",
        "1\": 1",
        "2\",",
        ", \"",
        "\"no-await\"",
    ];
    toks.extend(more.iter().map(|t| t.as_bytes().to_vec()));
    raw_vocab_with_stop(toks)
}

/// The states of `cg` that call an excluded-words rule (an open object's extra key).
fn excluded_callers(cg: &CompiledGrammar) -> Vec<StateId> {
    let excluded = cg.grammar().excluded_words().expect("an open object records its excluded keys");
    let a = cg.automata();
    (0..a.states().len() as u32)
        .map(StateId)
        .filter(|&s| a.rule_edges(s).iter().any(|(r, _)| excluded.rules.iter().any(|e| e.0 == *r)))
        .collect()
}

/// Fails with the excluded-key callee skipped again (`skip` in `composed_kernel_in`): nothing is
/// composed there (each such kernel was a walk of the whole vocabulary through the excluded-key
/// trie, ~5 ms on Llama 3, once per chained rule: 165-200 ms at eslintrc's `"rules": {"`).
#[test]
fn excluded_key_callers_compose_like_plain_walks() {
    let vocab = small_vocab();
    let cg = CompiledGrammar::new(&grammar(), &vocab).unwrap();
    let mut composed = 0;
    for s in excluded_callers(&cg) {
        if let Some(km) = cg.composed_kernel(s).unwrap() {
            assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {}", s.0);
            composed += 1;
        }
    }
    assert!(composed >= 1, "only {composed} excluded-key callers composed");
}

/// Masks at every byte of documents through the first key position and extra keys equal the
/// brute force (every token accepted by a copy of the matcher).
#[test]
fn excluded_key_caller_masks_match_brute_force() {
    let vocab = small_vocab();
    let cg = Arc::new(CompiledGrammar::new(&grammar(), &vocab).unwrap());
    let docs: [&[u8]; 4] = [
        br#"{"no-await-in-loop": 1, "camelcase": 2}"#,
        br#"{"no-awai": 1,"no-await-x": 2, "zzz": 3}"#,
        br#"{"comma-dangle": 1, "rule-number-29": 2, "no-await-y": 3}"#,
        br#"{"": 1, "rule-number-3": 2,"c": 4}"#,
    ];
    let mut checked = 0;
    for doc in docs {
        let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
        for (i, &b) in doc.iter().enumerate() {
            let mask = m.compute_mask().unwrap().clone();
            for t in 0..vocab.vocab_size() as u32 {
                let want = m.clone().accept_token(t).unwrap();
                let at = String::from_utf8_lossy(&doc[..i]);
                assert_eq!(mask.get(t as usize), want, "after {at:?}: token {:?}", vocab.token_bytes(t));
            }
            assert!(m.accept_bytes(&[b]).unwrap());
            checked += 1;
        }
        assert!(m.is_completed());
    }
    assert!(cg.kernel_stats().composed >= 4, "{:?}", cg.kernel_stats());
    assert_eq!(checked, docs.iter().map(|d| d.len()).sum::<usize>());
}

//! A string with a `minLength` under the longest token and a long `maxLength` (`json_char{50}`
//! then calls of `json_char{1024}` blocks; MaskBench `Github_easy---o9871`'s PEM keys): the
//! positions of the first 50 characters take the counted body slice of the calling state their
//! chain leads into (`CompiledGrammar::counted_body`) instead of a walk of the whole vocabulary,
//! and masks along documents through them equal a brute-force reference.

use grammask_core::compiler::StateId;
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

mod common;
use common::{llama3_vocab, raw_vocab_with_stop};

fn grammar() -> grammask_core::grammar::Grammar {
    let schema = r#"{"type": "object", "properties": {"key": {"type": "string", "minLength": 50, "maxLength": 32767},
        "name": {"type": "string", "minLength": 3, "maxLength": 1024}}, "additionalProperties": false}"#;
    json_schema_to_grammar(schema, &JsonSchemaOptions { strict_mode: false, ..Default::default() }).unwrap()
}

/// Printable ASCII and tokens longer than the chain (so it ends before the longest token), across
/// the chain's end and the closing quote, with escapes and a two-byte character.
fn small_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    toks.extend(
        ["-----BEGIN", " RSA", "-----\\n", "\\n", "\\u0001", "\\\"", "\"}", "A\"", "AA\", \"", "é", "éA"]
            .map(|t| t.as_bytes().to_vec()),
    );
    for n in [3, 7, 20, 45, 49, 50, 51, 70] {
        toks.push(vec![b'A'; n]);
        let mut t = vec![b'B'; n];
        t.push(b'"');
        toks.push(t);
    }
    raw_vocab_with_stop(toks)
}

/// Fails with `chain_to_calls` undone: no state that reads bytes takes a calling body's slice.
#[test]
fn chain_positions_take_the_calling_body_slice() {
    let vocab = small_vocab();
    let cg = CompiledGrammar::new(&grammar(), &vocab).unwrap();
    let a = cg.automata();
    let chained = (0..a.states().len() as u32)
        .map(StateId)
        .filter(|&s| !a.byte_edges(s).is_empty() && cg.counted_body(s).is_some_and(|c| c.calls))
        .count();
    assert!(chained >= 40, "only {chained} chain positions take the calling body's slice");
}

/// Masks at every byte of documents through the chain, its end and past it equal the brute force
/// (every token accepted by a copy of the matcher), on the small vocabulary and on Llama 3.
#[test]
fn counted_chain_masks_match_brute_force() {
    let pem = format!("-----BEGIN RSA-----\\n{}\\u0001é{}", "A".repeat(40), "B".repeat(30));
    let docs = [
        format!("{{\"key\": \"{pem}\", \"name\": \"abc\"}}"),
        format!("{{\"key\": \"{}\", \"name\": \"xyz\"}}", "A".repeat(50)),
        format!("{{\"key\": \"{}\\\"{}\"}}", "A".repeat(48), "A".repeat(20)),
    ];
    // Llama 3 through the first document only (the brute force tries every token at every byte).
    let mut vocabs = vec![(small_vocab(), &docs[..])];
    vocabs.extend(llama3_vocab().map(|v| (v, &docs[..1])));
    for (vocab, docs) in vocabs {
        let cg = Arc::new(CompiledGrammar::new(&grammar(), &vocab).unwrap());
        for doc in docs {
            let mut m = Matcher::new(cg.clone(), MatcherOptions::default()).unwrap();
            for (i, &b) in doc.as_bytes().iter().enumerate() {
                let mask = m.compute_mask().unwrap().clone();
                for t in 0..vocab.vocab_size() as u32 {
                    let want = m.clone().accept_token(t).unwrap();
                    let at = String::from_utf8_lossy(&doc.as_bytes()[..i]);
                    assert_eq!(mask.get(t as usize), want, "after {at:?}: token {:?}", vocab.token_bytes(t));
                }
                assert!(m.accept_bytes(&[b]).unwrap(), "byte {i} of {doc}");
            }
            assert!(m.is_completed(), "{doc}");
        }
    }
}

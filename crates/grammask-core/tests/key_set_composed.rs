//! An any-order object's key-set states that read no byte themselves (the choice of the next
//! entry, `e0 n0 | e1 n1 | ...`, after `{` or after the separator) are composed from their
//! entries' kernels (`CompiledGrammar::composed_kernel`) instead of walked; the composition
//! equals the plain walk, and masks along documents through those states equal a brute-force
//! check of every token.

use grammask_core::compiler::StateId;
use grammask_core::json_schema::{json_schema_to_grammar, JsonSchemaOptions};
use grammask_core::matcher::{CompiledGrammar, Matcher, MatcherOptions};
use grammask_core::vocab::Vocabulary;
use std::sync::Arc;

mod common;
use common::raw_vocab_with_stop;

/// An open object (extra keys allowed: the extra-key entry in every key-set state) and a closed
/// one nested in it, their keys prefixes of one another.
fn grammar() -> grammask_core::grammar::Grammar {
    let schema = r#"{"type": "object", "properties": {
        "a": {"type": "integer"},
        "ab": {"type": "string"},
        "abc": {"type": "boolean"},
        "in": {"type": "object", "additionalProperties": false, "properties": {
            "x": {"type": "integer"}, "xy": {"type": "integer"}, "z": {"type": "string"}}}
    }, "required": ["a"]}"#;
    let opts = JsonSchemaOptions { strict_mode: false, ..Default::default() };
    json_schema_to_grammar(schema, &opts).unwrap()
}

/// Printable ASCII and tokens that cross entry boundaries (a value's end, the separator and the
/// next key: `1, "ab`), so that the entries' uncertain tokens resume in the key-set rules.
fn small_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0x20u8..0x7F).map(|b| vec![b]).collect();
    let more = [
        "\"a",
        "\"ab",
        "\"abc\"",
        "\"a\":",
        "\"a\": 1",
        "\": ",
        "1, \"",
        "1, \"ab",
        "1,\"x",
        "\"x\": 2,",
        "2, \"z\"",
        "\"xy\": 3}",
        "1}",
        "\"}",
        "\", \"",
        "\", \"in\": {\"",
        "true, \"",
        "true}",
        "\"q\": 1, \"",
        "\"in\"",
        "{\"",
        "{\"a\": ",
        ", ",
        ",\n  \"",
    ];
    toks.extend(more.iter().map(|t| t.as_bytes().to_vec()));
    raw_vocab_with_stop(toks)
}

/// The key-set states of `cg` that read no byte and call rules: an entry's choice.
fn key_set_choices(cg: &CompiledGrammar) -> Vec<StateId> {
    let own = cg.grammar().own_class();
    let a = cg.automata();
    (0..a.states().len() as u32)
        .map(StateId)
        .filter(|&s| {
            own.binary_search(&a.state(s).rule).is_ok() && a.byte_edges(s).is_empty() && !a.rule_edges(s).is_empty()
        })
        .collect()
}

/// Fails with the entries of a key-set state skipped again as byte-only callees (`key_set` in
/// `composed_kernel_in`): then none of these states is composed, and each is a walk of the trie
/// below `"` with one item per entry in every row.
#[test]
fn key_set_entries_compose_like_plain_walks() {
    let vocab = small_vocab();
    let cg = CompiledGrammar::new(&grammar(), &vocab).unwrap();
    let states = key_set_choices(&cg);
    assert!(states.len() >= 8, "only {} key-set choices", states.len());
    for &s in &states {
        let km = cg.composed_kernel(s).unwrap();
        let km = km.unwrap_or_else(|| panic!("key-set state {} not composed", s.0));
        assert_eq!(km, cg.classify_uninterned(s).unwrap(), "state {}", s.0);
    }
}

/// Masks at every byte of documents through the key-set states (first entries, later entries,
/// extra keys, the nested closed object) equal the brute force (every token accepted by a copy of
/// the matcher); the key-set states on the way are composed.
#[test]
fn key_set_entries_composed_match_brute_force() {
    let vocab = small_vocab();
    let cg = Arc::new(CompiledGrammar::new(&grammar(), &vocab).unwrap());
    // The masks below read these states' composed kernels (classified before any walk).
    let states = key_set_choices(&cg);
    assert!(states.iter().all(|&s| cg.composed_kernel(s).unwrap().is_some()), "a key-set state is not composed");
    let docs: [&[u8]; 4] = [
        br#"{"a": 1, "ab": "x", "abc": true}"#,
        br#"{"abc": true,"q": 1, "a": 2, "in": {"xy": 3, "x": 1,"z": ""}}"#,
        br#"{"in": {"z": "}", "x": 2}, "a": 1, "abcd": "ab"}"#,
        br#"{"a" : 1 ,"": 2,	"ab": "", "in": {}}"#,
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
            assert!(m.accept_bytes(&[b]).unwrap(), "byte {i} of {:?}", String::from_utf8_lossy(doc));
            checked += 1;
        }
        assert!(m.is_completed());
    }
    assert_eq!(checked, docs.iter().map(|d| d.len()).sum::<usize>());
}
